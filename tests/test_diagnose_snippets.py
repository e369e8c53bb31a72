"""The OOM lab snippets: safe and useful without a GPU, real on CUDA."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.conftest import CliResult, _run_snippet

SNIPPETS = Path(__file__).resolve().parent.parent / "snippets"
HAS_CUDA = torch.cuda.is_available()


def run(name: str, *args: str) -> CliResult:
    """The snippet in this process (fast; see conftest's run_snippet)."""
    return _run_snippet(name, *args)


def run_in_a_new_interpreter(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The snippet as a reader runs it: ``python snippets/NAME ARGS``."""
    return subprocess.run(
        [sys.executable, str(SNIPPETS / name), *args], capture_output=True, text=True, timeout=300
    )


def load(name: str):
    spec = importlib.util.spec_from_file_location(name.removesuffix(".py"), SNIPPETS / name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(HAS_CUDA, reason="checks the refusal on a machine without CUDA")
def test_provoke_oom_refuses_without_cuda():
    result = run_in_a_new_interpreter("provoke_oom.py")
    assert result.returncode == 2
    assert "Refusing to provoke an out-of-memory error" in result.stderr
    assert result.stdout == ""


def test_provoke_oom_reads_a_capped_message():
    module = load("provoke_oom.py")
    message = (
        "CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of "
        "79.11 GiB of which 70.20 GiB is free. Including non-PyTorch memory, this process has "
        "2.50 GiB memory in use. 2.00 GiB allowed; Of the allocated memory 2.00 GiB is "
        "allocated by PyTorch, and 0 bytes is reserved by PyTorch but unallocated."
    )
    numbers = module.read_numbers(message)
    assert numbers == {
        "requested": 1.0,
        "total": 79.11,
        "free": 70.2,
        "cap": 2.0,
        "allocated": 2.0,
        "cache": 0.0,
    }
    assert "cap is exhausted" in " ".join(module.reading(numbers))
    fragmented = module.read_numbers(message.replace("and 0 bytes", "and 1.50 GiB"))
    assert "fragmentation" in " ".join(module.reading(fragmented))


def test_provoke_oom_does_not_call_free_memory_fragmentation():
    module = load("provoke_oom.py")
    message = (
        "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
        "15.77 GiB of which 4.10 GiB is free. Including non-PyTorch memory, this process has "
        "11.20 GiB memory in use. Of the allocated memory 10.60 GiB is allocated by PyTorch, "
        "and 150.00 MiB is reserved by PyTorch but unallocated."
    )
    text = " ".join(module.reading(module.read_numbers(message)))
    assert "outside PyTorch's allocator" in text and "not fragmentation" in text
    cached = message.replace("and 150.00 MiB", "and 2.50 GiB")
    assert "fragmentation." in " ".join(module.reading(module.read_numbers(cached)))


@pytest.mark.parametrize("limit", [0, 1, 2, 3, 7, 8, 9, 100, 1000])
def test_largest_batch_search_finds_the_boundary(limit: int):
    module = load("largest_batch.py")
    tried: list[int] = []

    def fits(batch: int) -> bool:
        tried.append(batch)
        return batch <= limit

    assert module.largest_batch(fits, max_batch=512) == min(limit, 512)
    assert len(tried) <= 2 * 10 + 2  # doubling then bisection: logarithmic


def test_largest_batch_estimate_on_cpu_matches_the_arithmetic():
    width, depth, budget_gib = 64, 2, 0.001
    result = run(
        "largest_batch.py",
        "--estimate",
        "--width",
        str(width),
        "--depth",
        str(depth),
        "--budget-gib",
        str(budget_gib),
    )
    assert result.returncode == 0, result.stderr
    budget = int(budget_gib * 2**30)
    fixed = depth * (width * width + width) * 16  # weights, grads, two AdamW moments, fp32
    per_sample = depth * 2 * width * 4  # input and output of each layer, fp32
    expected = (budget - fixed) // per_sample
    assert f"(estimate, not a measurement): {expected}" in result.stdout
    assert "nothing is allocated" in result.stdout


def test_largest_batch_says_when_nothing_fits():
    result = run("largest_batch.py", "--estimate", "--budget-gib", "0.001")
    assert "(estimate, not a measurement): 0" in result.stdout
    assert "Even batch 1 is over budget" in result.stdout


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--budget-gib", "inf"], "--budget-gib inf must be a finite number of GiB"),
        (["--budget-gib", "nan"], "--budget-gib nan must be a finite number of GiB"),
        (["--budget-gib", "1e300"], "--budget-gib 1e+300 must be a finite number of GiB"),
        (["--budget-gib", "0"], "--budget-gib 0 must be"),
        (["--limit-gib", "nan"], "--limit-gib nan must be"),
        (["--width", "1" + "0" * 400], "--width 100000000000...(401 digits) must be"),
        (["--depth", "0"], "--depth 0 must be a whole number from 1"),
        (["--width", "wide"], "invalid int value: 'wide'"),
    ],
)
def test_largest_batch_refuses_bad_input_in_one_line(args, fragment):
    result = run("largest_batch.py", "--estimate", *args)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.skipif(HAS_CUDA or torch.backends.mps.is_available(), reason="CPU-only behaviour")
def test_allocated_vs_reserved_explains_on_cpu():
    result = run("allocated_vs_reserved.py")
    assert result.returncode == 0, result.stderr
    assert "no caching allocator to show" in result.stdout
    assert "torch.cuda.memory_reserved()" in result.stdout


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")
def test_cuda_lab_runs_for_real():
    oom = run("provoke_oom.py", "--limit-gib", "2")
    assert oom.returncode == 0, oom.stderr
    assert "Out of memory after" in oom.stdout and "cap lifted" in oom.stdout
    batch = run("largest_batch.py", "--limit-gib", "1", "--width", "512", "--max-batch", "4096")
    assert batch.returncode == 0, batch.stderr
    assert "(measured)" in batch.stdout
    cache = run("allocated_vs_reserved.py", "--size-mib", "64")
    assert cache.returncode == 0, cache.stderr
    lines = {
        line.split()[1]: line for line in cache.stdout.splitlines() if line.startswith("after")
    }
    assert "del" in lines and "empty_cache()" in lines
