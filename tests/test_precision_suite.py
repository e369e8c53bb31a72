"""The mixed-precision suite entries: where they apply, and their rows on this CPU at tiny sizes."""

from __future__ import annotations

import pytest
import torch

from gpulesson.course.mixed_precision import errors_markdown, trace_markdown
from gpulesson.memory.gpt2 import GPT2Config
from gpulesson.precision import step, tf32, trace
from gpulesson.results import entries_precision, suite
from gpulesson.results.bundle import Measurement, Skipped, consistency_problems, measurement_to_dict
from gpulesson.results.suite import Context, Device

CPU = Device(
    type="cpu", name="cpu", total_bytes=8 * 2**30, free_bytes=4 * 2**30, count=0, capability=None
)
T4 = Device("cuda", "T4", 16 * 2**30, 15 * 2**30, 1, (7, 5))
A100 = Device("cuda", "A100", 80 * 2**30, 79 * 2**30, 1, (8, 0))
MPS = Device("mps", "M4", 32 * 2**30, 16 * 2**30, 1, None)
TINY = step.StepPlan(GPT2Config(vocab_size=64, seq_len=16, hidden=32, heads=2, layers=1), 2, 0.01)


def _valid(measured: list[Measurement]) -> None:
    data = {"measurements": [measurement_to_dict(m) for m in measured]}
    assert consistency_problems(data) == []


def test_the_entries_are_registered_in_the_suite():
    assert "gpulesson.results.entries_precision" in suite.ENTRY_MODULES
    names = [e.name for e in suite.entries()]
    assert {"amp_step", "tf32_accuracy", "autocast_trace"} <= set(names)


def test_tf32_accuracy_applies_on_a_cpu_and_where_tf32_tensor_cores_are():
    """A CPU runs the lesson's emulated table; a GPU only where TF32 tensor cores are."""
    entry = next(e for e in entries_precision.ENTRIES if e.name == "tf32_accuracy")
    assert (entry.applies(CPU), entry.applies(T4), entry.applies(A100)) == (True, False, True)
    assert not entry.applies(MPS)
    assert "8.0" in entry.needs and "CPU" in entry.needs


def test_every_plan_exists_for_every_device_and_mode():
    for device in ("cpu", "mps", "cuda"):
        for quick in (True, False):
            assert (device, quick) in step.STEP_PLANS


def test_the_batch_shrinks_until_the_step_fits_the_memory_budget():
    small = Device("cuda", "small", 2**30, 2**30, 1, (8, 0))
    plan = step.STEP_PLANS[("cuda", False)]
    assert entries_precision.fitting_batch(Context(device=A100, quick=False), plan) == plan.batch
    assert entries_precision.fitting_batch(Context(device=small, quick=False), plan) < plan.batch


def test_amp_step_rows_on_this_cpu(monkeypatch):
    monkeypatch.setitem(step.STEP_PLANS, ("cpu", True), TINY)
    rows = entries_precision.run_amp_step(Context(device=Device.this("cpu"), quick=True))
    measured = [r for r in rows if isinstance(r, Measurement)]
    assert [m.name for m in measured] == ["amp_step.fp32", "amp_step.bf16"]
    for m in measured:
        assert m.unit == "s" and m.value > 0 and m.params["tokens"] == 2 * 16
        assert m.params["skipped_steps"] == 0
    _valid(measured)


def test_a_precision_the_device_refuses_becomes_a_skipped_line(monkeypatch):
    monkeypatch.setitem(step.STEP_PLANS, ("cpu", True), TINY)

    def refuse(*args, **kwargs):
        raise RuntimeError("bf16 is not supported here")

    real = entries_precision.time_step
    monkeypatch.setattr(
        entries_precision,
        "time_step",
        lambda config, batch, device, precision, *a: (
            refuse() if precision == "bf16" else real(config, batch, device, precision, *a)
        ),
    )
    rows = entries_precision.run_amp_step(Context(device=Device.this("cpu"), quick=True))
    skipped = [r for r in rows if isinstance(r, Skipped)]
    assert [s.entry for s in skipped] == ["amp_step.bf16"]
    assert "bf16 is not supported here" in skipped[0].reason


def test_accuracy_rows_are_ratios_that_order_fp32_below_tf32():
    measured = entries_precision.accuracy_rows("cpu", 64)
    by = {m.name: m.value for m in measured}
    assert by["tf32_accuracy.fp32"] < by["tf32_accuracy.tf32_emulated"] < by["tf32_accuracy.bf16"]
    assert all(m.unit == "ratio" and m.params["n"] == 64 for m in measured)
    _valid(measured)


def test_tf32_accuracy_on_a_cpu_measures_the_lessons_512_matmul():
    assert entries_precision.TF32_SIZES[("cpu", False)] == 512  # the lesson's table
    assert entries_precision.TF32_SIZES[("cuda", False)] == 8192  # the GPU plan, unchanged


def test_the_tf32_accuracy_entry_round_trips_through_bundle_measurements(monkeypatch):
    monkeypatch.setitem(entries_precision.TF32_SIZES, ("cpu", True), 64)
    measured = entries_precision.run_tf32_accuracy(Context(device=CPU, quick=True))
    _valid(measured)
    errors = entries_precision.errors_from_measurements(measured)
    direct = tf32.matmul_errors(64, "cpu")
    assert (errors.n, errors.device, errors.seed) == (direct.n, direct.device, direct.seed)
    assert [r.method for r in errors.rows] == [r.method for r in direct.rows]
    assert [r.label for r in errors.rows] == [r.label for r in direct.rows]
    for row, m in zip(errors.rows, measured, strict=True):
        assert row.relative_error == m.value  # the figure the page shows is the measurement
    for row, again in zip(errors.rows, direct.rows, strict=True):
        assert row.max_abs_error == pytest.approx(again.max_abs_error, rel=1e-5)
    assert errors_markdown(errors) == errors_markdown(direct)  # the same table
    assert errors.ratio("tf32_emulated", "fp32") > 1
    assert entries_precision.errors_from_measurements([]) is None


def test_the_autocast_trace_entry_round_trips_through_bundle_measurements():
    measured = entries_precision.run_autocast_trace(Context(device=CPU, quick=True))
    _valid(measured)
    assert all(m.unit == "bytes" and m.value in (2.0, 4.0) for m in measured if m.dtype)
    rows = entries_precision.trace_from_measurements(measured)
    direct = trace.trace_gpt2("cpu", torch.bfloat16)
    assert rows == direct  # every op, module and dtype, in order
    assert trace_markdown(rows) == trace_markdown(direct)
    by = {m.params["op"]: m for m in measured}
    assert by["cross_entropy"].value == 4.0 and by["cross_entropy"].dtype == "fp32"
    assert by["linear"].value == 2.0 and by["linear"].dtype == "bf16"
    shuffled = list(reversed(measured))  # the index, not the order given, orders the rows
    assert entries_precision.trace_from_measurements(shuffled) == direct


def test_autocast_trace_applies_where_the_lesson_traces():
    entry = next(e for e in entries_precision.ENTRIES if e.name == "autocast_trace")
    assert (entry.applies(CPU), entry.applies(T4), entry.applies(MPS)) == (True, True, False)


def test_a_measured_bundle_of_the_cpu_entries_validates(run_cli, tmp_path, monkeypatch):
    from gpulesson.results.bundle import load, to_dict, validate

    monkeypatch.setitem(entries_precision.TF32_SIZES, ("cpu", True), 64)
    out = tmp_path / "bundle.json"
    result = run_cli(
        "measure",
        "--quick",
        "--device",
        "cpu",
        "--only",
        "tf32_accuracy,autocast_trace",
        "--out",
        str(out),
    )
    assert result.returncode == 0, result.stderr
    bundle = load(out)
    validate(to_dict(bundle))
    assert set(bundle.provenance.suite.entries) == {"tf32_accuracy", "autocast_trace"}
    errors = entries_precision.errors_from_measurements(bundle.measurements)
    assert errors is not None and errors.n == 64
    rows = entries_precision.trace_from_measurements(bundle.measurements)
    assert rows == trace.trace_gpt2("cpu", torch.bfloat16)


@pytest.mark.gpu
def test_the_entries_run_on_a_gpu():
    context = Context(device=Device.this("cuda"), quick=True)
    rows = entries_precision.run_amp_step(context)
    assert all(isinstance(r, Measurement) for r in rows)
    if torch.cuda.get_device_capability() >= (8, 0):
        names = {m.name for m in entries_precision.run_tf32_accuracy(context)}
        assert "tf32_accuracy.tf32" in names
