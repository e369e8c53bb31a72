"""Per-device sizes of the timed measurements: one table, gpulesson/timing/plans.json, for all."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from gpulesson.inside.cache_sweep import sweep_sizes
from gpulesson.memory import compute_step
from gpulesson.memory.gpt2 import GPT2Config
from gpulesson.precision import step
from gpulesson.results import (
    entries_compute,
    entries_device,
    entries_inside,
    entries_matmul,
    entries_precision,
    entries_roofline,
)
from gpulesson.results.suite import Context, Device
from gpulesson.timing import alignment, bench, decode, plans
from tests.conftest import REPO


def test_every_module_builds_its_plans_from_the_one_table():
    for device in plans.DEVICE_KINDS:
        assert bench.plan_for(device) == bench.DevicePlan(**plans.sizes(device, "bench"))
        assert alignment.plan_for(device) == alignment.AlignmentPlan(
            **plans.sizes(device, "alignment")
        )
        for quick, row in ((False, "decode"), (True, "decode_quick")):
            sizes = plans.sizes(device, row)
            plan = decode.plan_for(device, quick=quick)
            assert plan.config == decode.GPT2Config(**sizes.pop("config"))
            assert {k: getattr(plan, k) for k in sizes} == sizes
    assert set(bench.PLANS) == set(alignment.PLANS) == set(plans.DEVICE_KINDS)
    assert set(decode.PLANS) == {(d, q) for d in plans.DEVICE_KINDS for q in (False, True)}


def test_an_edit_to_the_table_reaches_no_plan_already_built():
    copy = plans.sizes("cpu", "bench")
    copy["illusion_n"] = 1
    assert plans.sizes("cpu", "bench")["illusion_n"] == bench.plan_for("cpu").illusion_n != 1


def test_the_quick_decode_sweep_is_smaller_than_the_full_one():
    for device in plans.DEVICE_KINDS:
        full, quick = decode.plan_for(device), decode.plan_for(device, quick=True)
        assert len(quick.batches) < len(full.batches) and quick.matmul_n <= full.matmul_n


def test_the_suite_s_entries_build_their_plans_from_the_one_table():
    for (device, quick), sizes in plans.by_run("matmul").items():
        assert entries_matmul.PLANS[(device, quick)] == entries_matmul.MatmulPlan(**sizes)
    for (device, quick), sizes in plans.by_run("device").items():
        plan = entries_device.PLANS[(device, quick)]
        assert {k: getattr(plan, k) for k in sizes} == sizes
        if not quick:  # a full run's illusion is the lesson's
            assert plan.illusion_n == bench.plan_for(device).illusion_n
    for (device, quick), sizes in plans.by_run("step").items():
        plan = step.STEP_PLANS[(device, quick)]
        assert plan.config == step.GPT2Config(**sizes.pop("config"))
        assert {k: getattr(plan, k) for k in sizes} == sizes
    for device in plans.DEVICE_KINDS:
        sweep = plans.sizes(device, "matmul_sweep_quick")
        assert entries_matmul.SWEEP_QUICK[device] == tuple(sweep.values())
        roof = plans.sizes(device, "roofline_quick")
        assert entries_roofline.QUICK[device] == tuple(roof.values())
        assert compute_step.MATMUL_N[device] == plans.sizes(device, "train_step")["matmul_n"]
    assert entries_precision.TF32_SIZES == {
        key: sizes["matmul_n"] for key, sizes in plans.by_run("tf32").items()
    }
    assert {d for d, _ in entries_precision.TF32_SIZES} == {"cpu", "cuda"}  # no mps row


def test_the_compute_and_inside_entries_take_their_sizes_from_the_one_table():
    for (device, quick), sizes in plans.by_run("train_step").items():
        plan = entries_compute.plan_for(
            Context(Device(device, device, 2**40, 2**40, 1, (9, 0)), quick)
        )
        assert plan.config == GPT2Config(**sizes.pop("config"))
        assert (plan.batch, plan.min_run_time_s, plan.threads) == (
            sizes["batch"],
            sizes["min_run_time_s"],
            sizes.get("threads"),
        )
        if device == "cpu":  # the model the lesson counts is the one the entry times
            assert (compute_step.PAGE_CONFIG, compute_step.PAGE_BATCH) == (plan.config, plan.batch)
        if device == "cuda" and not quick:
            assert (compute_step.GPU_CONFIG, compute_step.GPU_BATCH) == (plan.config, plan.batch)


def test_the_inside_entries_measure_at_their_rows_sizes(monkeypatch):
    """Each entry hands the measuring function its row of the table (``_quick`` with
    ``--quick``): the stubs record what they were asked to measure."""
    asked: list[object] = []
    monkeypatch.setattr(entries_inside, "measure_sweep", lambda *a, **k: asked.append(k))
    monkeypatch.setattr(entries_inside, "sweep_measurements", lambda sweep: [])
    monkeypatch.setattr(entries_inside, "measure_strided", lambda *a, **k: asked.append(k))
    monkeypatch.setattr(entries_inside, "strided_measurements", lambda sweep: [])
    monkeypatch.setattr(entries_inside, "measure_peaks", lambda lengths: ())
    monkeypatch.setattr(entries_inside, "time_attention", lambda d, lengths: asked.append(lengths))
    monkeypatch.setattr(entries_inside, "attention_measurements", lambda *a: [])
    for device in plans.DEVICE_KINDS:
        for quick, end in ((False, ""), (True, "_quick")):
            context = Context(Device(device, device, 2**40, 2**40, 1, None), quick)
            asked.clear()
            entries_inside.run_cache_sweep(context)
            entries_inside.run_strided(context)
            entries_inside.run_attention(context)
            sweep, strided, attention = (
                plans.sizes(device, m + end) for m in ("cache_sweep", "strided", "attention")
            )
            assert asked == [
                {
                    "sizes": sweep_sizes(sweep["smallest_bytes"], sweep["largest_bytes"]),
                    "rounds": sweep["rounds"],
                    "bytes_per_sample": sweep["sample_bytes"],
                },
                {"tensor_bytes": strided["tensor_bytes"], "rounds": strided["rounds"]},
                attention["time_lengths"],
            ]


DEVICE_WORDS = (*plans.DEVICE_KINDS, "gpu")  # "gpu": a table's row for both GPU kinds


def _number(node: ast.AST) -> bool:
    """A number written in code: a constant, arithmetic on numbers, a choice between numbers
    or a tuple of them."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int | float) and not isinstance(node.value, bool)
    if isinstance(node, ast.BinOp):
        return _number(node.left) and _number(node.right)
    if isinstance(node, ast.IfExp):
        return _number(node.body) and _number(node.orelse)
    return isinstance(node, ast.Tuple) and bool(node.elts) and all(map(_number, node.elts))


def _sizes_by_device_kind(node: ast.AST) -> bool:
    """A dict literal whose keys are device kinds (or start with one) and whose values are sizes
    or plans (numbers, tuples or calls), or a choice between numbers by device kind
    (``64 * 2**20 if device == "cpu" else 2**30``)."""
    if isinstance(node, ast.IfExp):
        words = [n.value for n in ast.walk(node.test) if isinstance(n, ast.Constant)]
        return any(w in DEVICE_WORDS for w in words) and _number(node.body) and _number(node.orelse)
    if not isinstance(node, ast.Dict):
        return False
    kinds = 0
    for key, value in zip(node.keys, node.values, strict=True):
        first = key.elts[0] if isinstance(key, ast.Tuple) and key.elts else key
        if isinstance(first, ast.Constant) and first.value in DEVICE_WORDS:
            kinds += 1
            if not (_number(value) or isinstance(value, ast.Tuple | ast.Call | ast.BinOp)):
                return False
    return kinds >= 2


def per_device_tables(root: Path) -> list[str]:
    """``file:line`` of each per-device table of sizes, or size chosen by device kind, written in
    the package's code."""
    found = []
    for path in sorted((root / "gpulesson").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found += [
            f"{path.relative_to(root)}:{node.lineno}"
            for node in ast.walk(tree)
            if _sizes_by_device_kind(node)
        ]
    return found


def test_no_module_keeps_its_own_per_device_sizes():
    assert per_device_tables(REPO) == []


def test_the_per_device_check_finds_a_table_in_code(tmp_path):
    package = tmp_path / "gpulesson"
    package.mkdir()
    (package / "a.py").write_text(
        "PLANS = {('cpu', True): Plan(1), ('cuda', True): Plan(2)}\n"
        "N = {'cpu': 512, 'mps': 1024 * 2}\n"
        "SYNC = {'cuda': 'torch.cuda.synchronize()', 'mps': 'torch.mps.synchronize()'}\n"
        "DTYPES = {'cuda': torch.float16, 'cpu': torch.bfloat16}\n"
        "LENGTHS = {'cpu': (256, 512), 'gpu': (1024, 4096)}\n"
        "size = (16 if quick else 64) * 2**20 if device == 'cpu' else 2**30\n"
        "budget = s / (2 if dtype == 'fp32' and device.type == 'cuda' else 1)\n"
        "sync = torch.cuda.synchronize if device == 'cuda' else None\n"
        "rounds = 3 if quick else 5\n"
    )
    found = ["gpulesson/a.py:1", "gpulesson/a.py:2", "gpulesson/a.py:5", "gpulesson/a.py:6"]
    assert per_device_tables(tmp_path) == [*found, "gpulesson/a.py:7"]


def _table_with(tmp_path: Path, edit) -> Path:
    data = json.loads(plans.TABLE.read_text(encoding="utf-8"))
    edit(data["plans"])
    path = tmp_path / "plans.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda p: p["cpu"]["bench"].pop("illusion_n"),
            "plans.json: plans: cpu: bench: illusion_n: missing; add it",
        ),
        (
            lambda p: p["mps"]["decode"].update(bandwidth_bytes="64 megabytes"),
            "plans.json: plans: mps: decode: bandwidth_bytes: '64 megabytes' is not a size: "
            "write a size like 64MiB or 1GiB, or 0 for none",
        ),
        (
            lambda p: p["cuda"]["step"]["config"].update(layers=0),
            "plans.json: plans: cuda: step: config: layers: 0 is not a whole number from 1",
        ),
        (
            lambda p: p["cuda"]["matmul"].update(search_budget_s=-1),
            "plans.json: plans: cuda: matmul: search_budget_s: -1 is not a time in seconds",
        ),
        (
            lambda p: p["cpu"].update(sweep={"n": 1}),
            "plans.json: plans: cpu: sweep: unknown field; the fields are bench, alignment",
        ),
        (
            lambda p: p.pop("mps"),
            "plans.json: plans: mps: missing; add it",
        ),
    ],
)
def test_a_malformed_plan_table_names_the_device_the_measurement_and_the_field(
    tmp_path, edit, message
):
    with pytest.raises(ValueError) as raised:
        plans.load(_table_with(tmp_path, edit))
    assert str(raised.value).startswith(message), str(raised.value)


def test_a_size_too_large_for_a_byte_count_is_named_with_its_place(tmp_path):
    path = _table_with(tmp_path, lambda p: p["cuda"]["bench"].update(stream_bytes="99999999999GiB"))
    with pytest.raises(ValueError, match="^plans.json: plans: cuda: bench: stream_bytes: size "):
        plans.load(path)


@pytest.mark.parametrize(
    ("device", "measurement", "message"),
    [
        ("tpu", "bench", "device='tpu' must be cpu, mps or cuda"),
        ("cpu", "sweep", "measurement='sweep' must be one of bench, alignment, decode"),
        ("mps", "tf32", "plans.json has no tf32 plan for mps: add one there"),
    ],
)
def test_an_unknown_device_or_measurement_is_named(device, measurement, message):
    with pytest.raises(ValueError, match=message):
        plans.sizes(device, measurement)
