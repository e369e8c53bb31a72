"""gpulesson.memory.measure and .gpt2: a measured step, and the estimate against it."""

from __future__ import annotations

import sys
from dataclasses import replace

import pytest
import torch

from gpulesson.course.memory import accuracy_to_markdown, measured_to_markdown
from gpulesson.memory import torch_tools
from gpulesson.memory.gpt2 import GPT2, GPT2Config, parameter_count
from gpulesson.memory.measure import (
    LESSON_BATCH,
    LESSON_CONFIG,
    AccuracyCase,
    accuracy_summary,
    build_cases,
    chunked_loss_cases,
    measure_gpt2,
    run_accuracy,
)
from gpulesson.results import entries_memory
from gpulesson.results.suite import Context, Device
from tests.conftest import keep_calls, quick_cpu_bundle

SMALL = GPT2Config(vocab_size=512, seq_len=64, hidden=64, heads=4, layers=2, attention="eager")


def test_gpt2_counts_tied_weights_once_and_trains():
    model = GPT2(SMALL)
    assert model.lm_head.weight is model.wte.weight
    assert model.num_parameters() == parameter_count(SMALL)
    idx = torch.randint(0, 512, (2, 16))
    loss = model(idx, idx)
    loss.backward()
    assert loss.ndim == 0 and model.wte.weight.grad is not None


def test_eager_and_sdpa_compute_the_same_function():
    torch.manual_seed(0)
    eager = GPT2(SMALL)
    sdpa = GPT2(GPT2Config(512, 64, 64, 4, 2, "sdpa"))
    sdpa.load_state_dict(eager.state_dict())
    idx = torch.randint(0, 512, (2, 32))
    assert torch.allclose(eager(idx), sdpa(idx), atol=1e-5)


def test_bad_configs_raise():
    with pytest.raises(ValueError, match="divisible"):
        GPT2Config(hidden=10, heads=4)
    with pytest.raises(ValueError, match="attention"):
        GPT2Config(attention="flash")


def test_fake_measurement_counts_parameters_and_adam_state():
    m = measure_gpt2(SMALL, batch=4, mode="fake")
    p_bytes = parameter_count(SMALL) * 4
    assert m.peak_bytes == max(m.phase_peaks_bytes.values())
    assert set(m.phase_peaks_bytes) == {"forward", "backward", "optimizer step"}
    assert m.at_peak_bytes["parameters"] == p_bytes
    assert m.at_peak_bytes["optimizer state"] >= 2 * p_bytes  # two fp32 moments
    assert m.reserved_bytes is None
    assert "MiB" in measured_to_markdown(m)


def test_bf16_halves_the_measured_peak_and_sgd_has_no_state():
    fp32 = measure_gpt2(SMALL, batch=4, mode="fake", optimizer="sgd")
    bf16 = measure_gpt2(SMALL, batch=4, mode="fake", optimizer="sgd", dtype="bf16")
    assert fp32.at_peak_bytes["optimizer state"] == 0
    assert bf16.peak_bytes == pytest.approx(fp32.peak_bytes / 2, rel=0.02)


def test_measure_rejects_bad_input():
    with pytest.raises(ValueError, match="batch"):
        measure_gpt2(SMALL, batch=0, mode="fake")
    with pytest.raises(ValueError, match="optimizer"):
        measure_gpt2(SMALL, batch=1, optimizer="lion", mode="fake")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA"):
            measure_gpt2(SMALL, batch=1, mode="cuda")


def test_fake_tensors_measure_what_real_cpu_tensors_measure():
    config = GPT2Config(vocab_size=128, seq_len=32, hidden=32, heads=2, layers=2)
    fake = measure_gpt2(config, batch=2, mode="fake", optimizer="sgd")
    real = measure_gpt2(config, batch=2, mode="cpu", optimizer="sgd")
    assert (fake.device, real.device) == ("cpu (fake tensors)", "cpu")
    assert fake.phase_peaks_bytes == real.phase_peaks_bytes


def test_the_optimizer_step_holds_two_copies_of_the_largest_parameter():
    # the MLP's 4 hidden^2 matrices, not the 64 x 256 embedding, are the largest here
    config = GPT2Config(vocab_size=64, seq_len=32, hidden=256, heads=4, layers=1)
    case = AccuracyCase(config=config, batch=1, dtype="fp32", optimizer="adamw")
    (row,) = run_accuracy([case], mode="fake")
    assert row.estimate_phase == row.measured.peak_phase == "optimizer step"
    assert abs(row.error) < 0.01


def test_build_grid_meets_the_accuracy_target():
    rows = run_accuracy(build_cases(), mode="fake")
    summary = accuracy_summary(rows)
    assert summary["max_abs_error"] <= 0.10
    assert summary["median_abs_error"] <= 0.05
    assert "target" in accuracy_to_markdown(rows)


def test_chunked_loss_computes_the_same_loss_and_gradients():
    torch.manual_seed(0)
    standard = GPT2(SMALL)
    chunked = GPT2(GPT2Config(512, 64, 64, 4, 2, "eager", loss="chunked", loss_chunks=3))
    chunked.load_state_dict(standard.state_dict())
    idx = torch.randint(0, 512, (2, 32))
    a, b = standard(idx, idx), chunked(idx, idx)
    a.backward()
    b.backward()
    assert torch.allclose(a, b, atol=1e-5)
    assert torch.allclose(standard.wte.weight.grad, chunked.wte.weight.grad, atol=1e-5)


def test_chunked_loss_estimate_meets_the_accuracy_target():
    # a small and the GPT-2 vocabulary (where the loss, or the tied head's gradient, sets the
    # peak); the accuracy benchmark measures all of chunked_loss_cases()
    cases = chunked_loss_cases()
    rows = run_accuracy([cases[0], cases[2]], mode="fake")
    summary = accuracy_summary(rows)
    assert summary["max_abs_error"] <= 0.10
    assert summary["median_abs_error"] <= 0.05
    assert all("chunked-loss" in r.case.label() for r in rows)
    # the chunked runs hold far less than the same runs with the standard loss
    for row in rows:
        c = row.case.config
        standard = GPT2Config(c.vocab_size, c.seq_len, c.hidden, c.heads, c.layers, c.attention)
        full = measure_gpt2(standard, batch=row.case.batch, dtype=row.case.dtype, mode="fake")
        assert row.measured.peak_bytes < full.peak_bytes


def test_a_missing_private_torch_module_fails_loudly_naming_the_version(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.distributed._tools.mem_tracker", None)
    with pytest.raises(torch_tools.PrivateTorchAPIError) as err:
        measure_gpt2(SMALL, batch=1, mode="fake")
    message = str(err.value)
    assert f"torch {torch.__version__}" in message
    assert "torch.distributed._tools.mem_tracker.MemTracker" in message
    assert "gpulesson/memory/torch_tools.py" in message


def test_a_moved_fake_tensor_mode_fails_loudly(monkeypatch):
    import torch._subclasses.fake_tensor as fake_tensor

    monkeypatch.delattr(fake_tensor, "FakeTensorMode")
    with pytest.raises(torch_tools.PrivateTorchAPIError, match="FakeTensorMode"):
        torch_tools.fake_tensor_mode()


def test_a_tracker_without_its_peak_fields_fails_loudly(monkeypatch):
    import torch.distributed._tools.mem_tracker as mem_tracker

    class Tracker(mem_tracker.MemTracker):
        def __init__(self) -> None:
            super().__init__()
            del self._peak_mem_snap

    monkeypatch.setattr(mem_tracker, "MemTracker", Tracker)
    with pytest.raises(torch_tools.PrivateTorchAPIError, match="no attribute _peak_mem_snap"):
        torch_tools.mem_tracker()


def test_an_unknown_tracker_category_is_not_filed_under_other():
    class Tracker:
        def get_tracker_snapshot(self, kind: str) -> dict:
            return {"cpu": {"Total": 10, "Parameter": 4, "Workspace": 6}}

    with pytest.raises(torch_tools.PrivateTorchAPIError, match="unknown category 'Workspace'"):
        torch_tools.peak_by_category(Tracker())
    known = {"cpu": {"Total": 10, "Parameter": 4, "Temp": 6}}
    Tracker.get_tracker_snapshot = lambda self, kind: known  # type: ignore[method-assign]
    total, lines = torch_tools.peak_by_category(Tracker())
    assert (total, lines["parameters"], lines["temporaries"]) == (10, 4, 6)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_measurement_reports_allocator_numbers():  # pragma: no cover
    m = measure_gpt2(SMALL, batch=4, mode="cuda")
    assert m.reserved_bytes >= m.peak_bytes > 0
    assert m.device_total_bytes >= m.free_bytes


# --- the memory lesson's suite entries (measure once: the page reads them back) ----------

TINY_STEP = GPT2Config(vocab_size=64, seq_len=16, hidden=32, heads=2, layers=1, attention="eager")


def _cpu(quick: bool) -> Context:
    return Context(device=Device.this("cpu"), quick=quick)


def test_the_gpt_memory_entry_gives_the_accuracy_table_its_rows_back(monkeypatch):
    cases = [
        AccuracyCase(config=TINY_STEP, batch=2, dtype="fp32", optimizer="adamw"),
        AccuracyCase(
            config=replace(TINY_STEP, attention="sdpa", checkpointing=True),
            batch=3,
            dtype="bf16",
            optimizer="sgd",
        ),
    ]
    monkeypatch.setattr(entries_memory, "build_cases", lambda: cases)
    direct = keep_calls(monkeypatch, entries_memory, "run_accuracy")  # the entry's own call
    out = entries_memory.run_gpt_memory(_cpu(quick=False))
    assert [m.params["case"] for m in out] == [0, 1]
    for m in out:  # a peak: its samples are the phase peaks, in step order
        assert m.unit == m.samples_unit == "bytes" and m.value == max(m.samples)
        assert len(m.samples) == 3 and m.limit is None
    ((called_with, kwargs, direct),) = direct
    assert list(called_with[0]) == cases and kwargs == {"mode": "fake"}
    rows = entries_memory.accuracy_from_measurements(list(reversed(out)))  # order from params
    assert rows == direct
    assert accuracy_to_markdown(rows) == accuracy_to_markdown(direct)
    assert entries_memory.accuracy_from_measurements([]) == ()


def test_the_gpt_memory_step_entry_gives_the_measured_table_its_step_back(monkeypatch):
    monkeypatch.setattr(entries_memory, "LESSON_CONFIG", TINY_STEP)
    monkeypatch.setattr(entries_memory, "LESSON_BATCH", 2)
    kept = keep_calls(monkeypatch, entries_memory, "measure_gpt2")
    (m,) = entries_memory.run_gpt_memory_step(_cpu(quick=False))
    assert m.name == "gpt_memory_step.peak" and m.params["model_hidden"] == 32
    step = entries_memory.step_from_measurements([m])
    ((args, kwargs, direct),) = kept  # the entry measured the lesson's step once
    assert args == (TINY_STEP,) and kwargs == {"batch": 2, "mode": "fake"}
    assert step == direct
    assert measured_to_markdown(step) == measured_to_markdown(direct)
    assert list(m.samples) == list(direct.phase_peaks_bytes.values())
    assert entries_memory.step_from_measurements([]) is None


def test_the_lesson_plan_is_the_pages_model():
    # memory.md's prose and charts describe this model: two layers, hidden 64, batch 4
    assert LESSON_CONFIG == SMALL and LESSON_BATCH == 4


def test_the_memory_entries_write_a_bundle_that_validates(tmp_path, monkeypatch):
    from gpulesson.memory import impl_accuracy, saved

    tiny_hf = AccuracyCase(
        config=TINY_STEP, batch=2, dtype="fp32", optimizer="adamw", impl="transformers"
    )
    monkeypatch.setattr(entries_memory, "build_cases", lambda: [replace(tiny_hf, impl="gpulesson")])
    monkeypatch.setattr(entries_memory, "LESSON_CONFIG", TINY_STEP)
    monkeypatch.setattr(entries_memory, "LESSON_BATCH", 2)
    monkeypatch.setattr(impl_accuracy, "build_cases", lambda: [tiny_hf])
    monkeypatch.setattr(saved, "SAVED_CONFIG", replace(TINY_STEP, attention="sdpa"))
    entries = ("gpt_memory", "gpt_memory_step", "gpt_memory_timeline", "hf_memory")
    only = ",".join((*entries, "gpt_block_saved"))
    bundle = quick_cpu_bundle(tmp_path / "bundle.json", only)
    assert set(bundle.provenance.suite.entries) == {*entries, "gpt_block_saved"}
    ms = bundle.measurements
    assert len(entries_memory.accuracy_from_measurements(ms)) == 1
    assert entries_memory.step_from_measurements(ms) is not None
    trace = entries_memory.timeline_from_measurements(ms)  # --quick: the plain step only
    assert trace is not None and entries_memory.timeline_from_measurements(ms, "ckpt") is None
    assert trace.peak_bytes == entries_memory.step_from_measurements(ms).peak_bytes
    assert len(entries_memory.impl_rows_from_measurements(ms)) == 1
    found = entries_memory.saved_from_measurements(ms)
    assert found is not None and set(found.saved) == {"gpulesson", "transformers"}
