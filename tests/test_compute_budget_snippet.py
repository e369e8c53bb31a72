"""snippets/flops_and_mfu.py counts a step as the package does, times it, and prints MFU."""

from __future__ import annotations

import re

import pytest
import torch

from gpulesson.memory.compute_step import count_gpt_step
from gpulesson.memory.gpt2 import GPT2Config, parameter_count

TINY = ("--layers", "1", "--hidden", "32", "--heads", "2", "--seq", "16", "--batch", "2")
TINY_CONFIG = GPT2Config(vocab_size=64, seq_len=16, hidden=32, heads=2, layers=1, attention="eager")


def test_the_snippet_counts_what_the_package_counts_and_prints_mfu(run_snippet):
    result = run_snippet(
        "flops_and_mfu.py", *TINY, "--vocab", "64", "--steps", "2", "--peak-tflops", "1"
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    step = count_gpt_step(TINY_CONFIG, 2)
    assert f"FLOPs per step (counted): {step.counted_flops:.3g}" in out
    assert f"6ND = {6 * parameter_count(TINY_CONFIG) * 32:.3g}" in out
    assert f"{parameter_count(TINY_CONFIG) / 1e6:.2f}M parameters" in out
    assert "dtype fp32" in out and "32 tokens a step" in out
    achieved = re.search(r"achieved: ([\d.,]+) GFLOP/s", out)
    mfu = re.search(r"MFU: ([\d.]+)% of the given peak, 1.0 TFLOP/s", out)
    assert achieved and mfu, out
    assert float(mfu.group(1)) == pytest.approx(float(achieved.group(1)) / 10, abs=0.01)


def test_without_a_peak_it_measures_the_best_matmul_and_says_it_is_not_mfu(run_snippet):
    result = run_snippet("flops_and_mfu.py", *TINY, "--vocab", "64", "--steps", "1")
    assert result.returncode == 0, result.stderr
    assert "share of the best fp32 matmul measured here" in result.stdout
    assert "give --peak-tflops for MFU against the datasheet" in result.stdout


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("--layers", "0"), "argument --layers: invalid positive value: '0'"),
        (("--hidden", "100", "--heads", "3"), "--hidden 100 is not divisible by --heads 3"),
        (("--peak-tflops", "nan"), "--peak-tflops nan must be a positive number"),
        (("--peak-tflops", "-5"), "--peak-tflops -5.0 must be a positive number"),
    ],
)
def test_bad_input_exits_2_with_one_line(run_snippet, args, fragment):
    result = run_snippet("flops_and_mfu.py", *args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], result.stderr


@pytest.mark.skipif(
    torch.cuda.is_available() or torch.backends.mps.is_available(), reason="fp16 runs on GPUs"
)
def test_fp16_on_a_cpu_is_refused_in_one_line(run_snippet):
    result = run_snippet("flops_and_mfu.py", "--dtype", "fp16")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "flops_and_mfu.py: error: --dtype fp16 needs a GPU: on a CPU use fp32 or bf16"
    )
