"""The one GPU-rows renderer: predicted with arithmetic, published with links, measured and
measured / predicted from a bundle of ours under results/reference/."""

from __future__ import annotations

import shutil
from pathlib import Path

from gpulesson.results import predict
from gpulesson.site import gpu_rows

FIXTURE = Path(__file__).parent / "fixtures" / "bundles" / "fixture_h100.json"


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
