"""gpulesson.memory.measure and .gpt2: a measured step, and the estimate against it."""

from __future__ import annotations

import pytest
import torch

from gpulesson.memory.gpt2 import GPT2, GPT2Config, parameter_count
from gpulesson.memory.measure import (
    accuracy_summary,
    accuracy_to_markdown,
    build_cases,
    measure_gpt2,
    measured_to_markdown,
    run_accuracy,
)

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


def test_build_grid_meets_the_accuracy_target():
    rows = run_accuracy(build_cases(), mode="fake")
    summary = accuracy_summary(rows)
    assert summary["max_abs_error"] <= 0.10
    assert summary["median_abs_error"] <= 0.05
    assert "target" in accuracy_to_markdown(rows)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_measurement_reports_allocator_numbers():  # pragma: no cover
    m = measure_gpt2(SMALL, batch=4, mode="cuda")
    assert m.reserved_bytes >= m.peak_bytes > 0
    assert m.device_total_bytes >= m.free_bytes
