"""The one GPU-rows renderer: predicted with arithmetic, published with links, measured and
measured / predicted from a bundle of ours under results/reference/; figures whose model
takes a lesson's params (decode, all-reduce, training step) and the page facts they give."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gpulesson.results import predict
from gpulesson.site import facts, gpu_rows

FIXTURE = Path(__file__).parent / "fixtures" / "bundles" / "fixture_h100.json"
SHEETS = {
    d["id"]: d
    for d in json.loads(
        (Path(predict.__file__).parent / "datasheets.json").read_text(encoding="utf-8")
    )["devices"]
}


def test_without_a_bundle_rows_show_predicted_and_published_for_four_reference_gpus():
    md = gpu_rows.rows_markdown("matmul_peak.bf16")
    rows = [line for line in md.splitlines() if line.startswith("| NVIDIA") or "AMD" in line]
    assert len([r for r in rows if "TFLOP/s (bound)" in r]) >= 4
    assert "[794.5 TFLOP/s](https://github.com/stas00/ml-engineering" in md
    assert "dense bf16 peak = 9.895e+14 FLOP/s" in md  # the arithmetic
    assert "none measured on this build" in md and "–" not in md


def test_a_reference_bundle_adds_measured_and_the_ratio(tmp_path):
    (tmp_path / "reference").mkdir()
    shutil.copy(FIXTURE, tmp_path / "reference" / FIXTURE.name)
    bundles = gpu_rows.reference_bundles(tmp_path)
    assert bundles
    row = next(r for r in predict.table_rows("matmul_peak.bf16", bundles) if r.ratio is not None)
    md = gpu_rows.rows_markdown("matmul_peak.bf16", bundles)
    assert f"| {row.ratio:.2f} |" in md
    assert "GPU figures in this table: predicted, published, measured." in md


def test_a_figure_without_a_model_says_so_instead_of_predicting():
    md = gpu_rows.rows_markdown("profile_step.busy_share")
    assert md.startswith("No GPU figure in this table")
    assert "no model: a profiler table" in md and "TFLOP/s" not in md


def _measured_row(name: str, value: float, unit: str, **params) -> dict:
    spread = dict.fromkeys(("median", "p25", "p75", "min", "max"), value)
    return {
        "name": name,
        "entry": name.split(".")[0],
        "label": f"fixture {name}",
        "unit": unit,
        "value": value,
        "samples": [value],
        "samples_unit": unit,
        "spread": {**spread, "count": 1},
        "dtype": None,
        "limit": None,
        "headline": False,
        "params": {**params, "fixture": True},
        "warning": None,
    }


def fixture_with_parameterised_rows(root: Path) -> Path:
    """A copy of the H100 fixture under ``root/reference`` with the three figures measured."""
    (root / "reference").mkdir()
    for name, rows in (
        (
            "fixture_h100_params.json",
            [
                _measured_row("decode.b1", 150.0, "tokens/s", bytes_per_token=16e9),
                _measured_row("all_reduce.time", 0.15, "s", message_bytes=28e9, gpus=8),
                _measured_row("train_step.time", 0.03, "s", flops=6 * 124e6 * 8192),
            ],
        ),
        (  # a second H100 bundle: the same figure at another size, which must not count
            "fixture_h100_1gb.json",
            [_measured_row("all_reduce.time", 0.01, "s", message_bytes=1e9, gpus=8)],
        ),
    ):
        data = json.loads(FIXTURE.read_text(encoding="utf-8"))
        data["measurements"] += rows
        (root / "reference" / name).write_text(json.dumps(data), "utf-8")
    return root


DECODE = ("decode.b1", "Batch-1 decode, 8B in fp16", {"bytes_per_token": 16e9})
RING = ("all_reduce.time", "All-reduce of 28 GB on 8 GPUs", {"message_bytes": 28e9, "gpus": 8})
STEP = gpu_rows.RowSpec(
    figure="train_step.time",
    title="Training step",
    params={"flops": 6 * 124e6 * 8192, "mfu": 0.4},
    key="gpt2_step",
)


def _section(*specs, root: Path) -> tuple[str, dict[str, facts.Fact]]:
    facts.reset()
    facts.begin_page("lessons/x.md")
    facts.begin_block("x-rows")
    md = gpu_rows.section(list(specs), [], root=root)
    return md, {f.name: f for f in facts.end_block()}


def _by_hand(figure: str, device: str) -> float | None:
    d = SHEETS[device]
    if figure == "decode.b1":  # tokens/s <= bandwidth / bytes per token
        return d["memory_bandwidth_stated_gb_per_s"] * 1e9 / 16e9
    if figure == "all_reduce.time":  # ms = 2(N-1)/N x bytes / one direction of the link
        link = d.get("interconnect")
        pcie_card = "PCIe" in d["name"] and "SXM" not in d["name"]  # NVLink bridges pairs only
        nvlink = None if pcie_card else link and link.get("nvlink_stated_gb_per_s")
        one_way = link and (nvlink or link["pcie_stated_gb_per_s"])
        return 2 * 7 / 8 * 28e9 / (one_way * 1e9 / 2) * 1e3 if one_way else None
    peaks = d.get("peaks", {})  # ms = 6ND / (dense 16-bit peak x MFU)
    peak = peaks.get("bf16") or peaks.get("fp16")
    if peak is None:
        return None
    dense = peak["stated_tflops"] * 1e12 / (2 if peak["with_sparsity"] else 1)
    return 6 * 124e6 * 8192 / (dense * 0.4) * 1e3


def test_parameterised_tables_publish_their_predictions_as_page_facts(tmp_path):
    md, published = _section(DECODE, RING, STEP, root=tmp_path)  # no bundle of ours
    for key, figure, unit in (
        ("decode_b1", "decode.b1", "tokens/s"),
        ("all_reduce_time", "all_reduce.time", "ms"),
        ("gpt2_step", "train_step.time", "ms"),
    ):
        shown = {n.split(".")[-1]: f for n, f in published.items() if n.startswith(f"pred.{key}.")}
        checked = 0
        for gpu, fact in shown.items():
            device = next(d for d in SHEETS if gpu_rows.gpu_key(d) == gpu)
            assert (fact.kind, fact.unit) == ("predicted", unit)
            assert fact.value == pytest.approx(_by_hand(figure, device), rel=1e-12), fact.name
            checked += 1
        assert checked >= 4, key
        left_out = [d for d in ("t4", "apple-m4-max") if gpu_rows.gpu_key(d) not in shown]
        assert all(_by_hand(figure, d) is None for d in left_out)
    assert not any(n.startswith("ours.") for n in published)
    assert "| NVIDIA H100 SXM5 80GB | 209.4 tokens/s (bound) | none found | not measured |" in md
    assert "| NVIDIA T4 | no NVLink or PCIe figure | none found | not measured |" in md
    assert "| Apple M4 Max | no bf16 or fp16 peak |" in md
    assert "2 x (8-1)/8 x 2.8e+10 B = 4.9e+10 B / 4.5e+11 B/s (NVLink 900 GB/s / 2)" in md
    assert "6ND = 6.095e+12 FLOP / (dense bf16 peak 9.895e+14 FLOP/s x MFU 0.4)" in md


def test_a_bundle_with_the_same_params_adds_measured_and_the_ratio(tmp_path):
    md, published = _section(DECODE, RING, STEP, root=fixture_with_parameterised_rows(tmp_path))
    for key, measured, predicted in (
        ("decode_b1", 150.0, 3350e9 / 16e9),
        ("all_reduce_time", 150.0, _by_hand("all_reduce.time", "h100-sxm")),
        ("gpt2_step", 30.0, _by_hand("train_step.time", "h100-sxm")),
    ):
        ours = published[f"ours.{key}.h100_sxm"]
        assert (ours.value, ours.kind) == (pytest.approx(measured), "measured")
        ratio = measured / predicted
        assert f"| {ratio:.2f} |" in md, key
    assert "| NVIDIA H100 SXM5 80GB | 108.9 ms | none found | 150 ms | 1.38 |" in md
    assert md.count("GPU figures in this table: predicted, measured.") == 3
    # other params (the 1 GB all-reduce) or another GPU: not measured
    assert "| NVIDIA H200 SXM 141GB | 108.9 ms | none found | not measured |" in md
    one_gb = ("all_reduce.time", "1 GB", {"message_bytes": 1e9, "gpus": 8})
    md, published = _section(one_gb, root=tmp_path)
    assert published["ours.all_reduce_time.h100_sxm"].value == pytest.approx(10.0)  # ms
    other = ("all_reduce.time", "2 GB", {"message_bytes": 2e9, "gpus": 8})
    md, published = _section(other, root=tmp_path)
    assert "ours.all_reduce_time.h100_sxm" not in published and "| not measured |" in md


def test_the_two_element_form_still_works_and_publishes_predicted_facts(tmp_path):
    md, published = _section(("memory_bandwidth", "Memory bandwidth"), root=tmp_path)
    assert "**Memory bandwidth** · GPU figures in this table: predicted, published" in md
    assert published["pred.memory_bandwidth.h100_sxm"].value == pytest.approx(3350.0)
    assert published["pred.memory_bandwidth.h100_sxm"].unit == "GB/s"
    with pytest.raises(ValueError, match="unknown params bytes"):
        _section(("decode.b1", "x", {"bytes": 1e9}), root=tmp_path)
    with pytest.raises(ValueError, match=r"give \(figure, title\)"):
        _section(("decode.b1",), root=tmp_path)
