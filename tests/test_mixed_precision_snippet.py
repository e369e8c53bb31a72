"""snippets/amp_step.py: autocast steps, a GradScaler for fp16, the dtypes and skips reported."""

from __future__ import annotations

import re

import pytest
import torch

SNIPPET = "amp_step.py"


def losses(stdout: str) -> list[float]:
    return [float(x) for x in re.findall(r"^step \d+: loss ([\d.]+)", stdout, re.M)]


def test_the_default_on_a_cpu_is_bf16_without_a_scaler(run_snippet):
    if torch.cuda.is_available():
        pytest.skip("the default on CUDA is fp16")
    result = run_snippet(SNIPPET, "--steps", "5", "--batch", "32")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "autocast: bfloat16, GradScaler: not needed" in out
    assert "0 Linear: bfloat16" in out and "3 Linear: bfloat16" in out
    assert "loss: float32; parameters: float32; gradients: float32" in out
    assert "skipped 0 of 5 steps" in out
    values = losses(out)
    assert len(values) == 5 and values[-1] < values[0]  # it trains


def test_fp16_turns_the_scaler_on_and_reports_the_scale(run_snippet):
    result = run_snippet(SNIPPET, "--steps", "3", "--dtype", "fp16")
    assert result.returncode == 0, result.stderr
    assert "autocast: float16, GradScaler: fp16: gradients are scaled" in result.stdout
    assert "step 1: loss" in result.stdout and ", scale 65,536" in result.stdout


def test_fp32_runs_without_autocast(run_snippet):
    result = run_snippet(SNIPPET, "--steps", "2", "--dtype", "fp32")
    assert result.returncode == 0, result.stderr
    assert "autocast: off" in result.stdout and "0 Linear: float32" in result.stdout


def test_a_skipped_step_is_counted(run_snippet, monkeypatch):
    # Scale the loss up so the scaled logits' gradients pass fp16's 65,504: the scaler
    # must skip and halve until they fit, and the snippet must say so.
    import torch.nn.functional as F

    real = F.cross_entropy
    monkeypatch.setattr(F, "cross_entropy", lambda *a, **k: real(*a, **k) * 1e4)
    result = run_snippet(SNIPPET, "--steps", "12", "--dtype", "fp16")
    assert result.returncode == 0, result.stderr
    skipped = int(re.search(r"skipped (\d+) of 12 steps", result.stdout).group(1))
    assert 0 < skipped < 12
    assert "SKIPPED" in result.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (("--steps", "0"), "--steps and --batch must be at least 1"),
        (("--batch", "-3"), "--steps and --batch must be at least 1"),
        (("--dtype", "fp8"), "invalid choice: 'fp8'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(run_snippet, args, message):
    result = run_snippet(SNIPPET, *args)
    assert result.returncode == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_help_names_the_dtypes(run_snippet):
    result = run_snippet(SNIPPET, "--help")
    assert result.returncode == 0 and "--dtype" in result.stdout and "bf16" in result.stdout
