"""The mixed-precision suite entries: where they apply, and their rows on this CPU at tiny sizes."""

from __future__ import annotations

import pytest
import torch

from gpulesson.memory.gpt2 import GPT2Config
from gpulesson.precision import step
from gpulesson.results import entries_precision, suite
from gpulesson.results.bundle import Measurement, Skipped, consistency_problems, measurement_to_dict
from gpulesson.results.suite import Context, Device

CPU = Device(
    type="cpu", name="cpu", total_bytes=8 * 2**30, free_bytes=4 * 2**30, count=0, capability=None
)
T4 = Device("cuda", "T4", 16 * 2**30, 15 * 2**30, 1, (7, 5))
A100 = Device("cuda", "A100", 80 * 2**30, 79 * 2**30, 1, (8, 0))
TINY = step.StepPlan(GPT2Config(vocab_size=64, seq_len=16, hidden=32, heads=2, layers=1), 2, 0.01)


def _valid(measured: list[Measurement]) -> None:
    data = {"measurements": [measurement_to_dict(m) for m in measured]}
    assert consistency_problems(data) == []


def test_the_entries_are_registered_in_the_suite():
    assert "gpulesson.results.entries_precision" in suite.ENTRY_MODULES
    names = [e.name for e in suite.entries()]
    assert {"amp_step", "tf32_accuracy"} <= set(names)


def test_tf32_accuracy_applies_only_where_tf32_tensor_cores_are():
    entry = next(e for e in entries_precision.ENTRIES if e.name == "tf32_accuracy")
    assert (entry.applies(CPU), entry.applies(T4), entry.applies(A100)) == (False, False, True)
    assert "8.0" in entry.needs


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


@pytest.mark.gpu
def test_the_entries_run_on_a_gpu():
    context = Context(device=Device.this("cuda"), quick=True)
    rows = entries_precision.run_amp_step(context)
    assert all(isinstance(r, Measurement) for r in rows)
    if torch.cuda.get_device_capability() >= (8, 0):
        names = {m.name for m in entries_precision.run_tf32_accuracy(context)}
        assert "tf32_accuracy.tf32" in names
