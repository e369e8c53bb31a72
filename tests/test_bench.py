"""gpulesson.timing: result arithmetic, barriers, the sweep, input and memory checks, CLI, snippet.

CLI tests run ``gpulesson bench`` in-process (the ``run_cli`` fixture); the subprocess
tests are the ones where a fresh interpreter matters: torch's import-time chatter, the
console script, and the snippet readers copy.
"""

from __future__ import annotations

import importlib.util
import io
import itertools
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from gpulesson.cli import bench as cli_bench
from gpulesson.course.timing import illusion_markdown, launch_markdown
from gpulesson.course.why_gpus import NO_CUDA_TEXT, comparison_markdown, sweep_chart
from gpulesson.timing import bench, inputs, launch, results
from gpulesson.timing.results import MatmulResult, OpResult
from gpulesson.units import GIB
from tests.conftest import REPO

HAS_CUDA = torch.cuda.is_available()


def _result(device: str, n: int, *samples_s: float) -> MatmulResult:
    return MatmulResult(device=device, dtype="fp32", n=n, threads=2, samples_s=samples_s)


def _op(name: str, *samples_s: float, flops: int, bytes_moved: int) -> OpResult:
    return OpResult(
        name=name,
        device="cpu",
        dtype="fp32",
        threads=2,
        samples_s=samples_s,
        flops=flops,
        bytes_moved=bytes_moved,
    )


# --- result arithmetic ---------------------------------------------------------------


def test_matmul_result_summarises_given_samples():
    r = _result("cpu", 100, 0.004, 0.001, 0.003, 0.002, 0.010)
    assert r.repeats == 5
    assert r.median_s == pytest.approx(0.003)
    assert r.min_s == 0.001 and r.max_s == 0.010
    assert r.p25_s == pytest.approx(0.002) and r.p75_s == pytest.approx(0.004)
    assert r.iqr_s == pytest.approx(0.002)
    assert r.flops == 2 * 100**3 == 2_000_000
    assert r.flop_per_s == pytest.approx(2_000_000 / 0.003)


@pytest.mark.parametrize("q", [0.0, 0.25, 0.5, 0.75, 1.0])
def test_quantile_matches_numpy(q):
    samples = [0.3, 0.1, 0.7, 0.2, 0.9, 0.4]
    assert results.quantile(samples, q) == pytest.approx(np.percentile(samples, q * 100))


def test_quantile_of_nothing_names_the_fix():
    with pytest.raises(ValueError, match="no samples"):
        results.quantile([], 0.5)


def test_spread_warning_uses_the_named_threshold():
    share = results.SPREAD_WARNING_IQR_SHARE
    tight = _result("cpu", 8, 1.0, 1.0 + share / 2 * 0.9, 1.0 + share * 0.9)
    loose = _result("cpu", 8, 1.0, 1.5, 2.0, 3.0)
    assert tight.spread_warning is None
    assert loose.spread_warning is not None and f"{share:.0%}" in loose.spread_warning


def test_op_result_rates_and_intensity():
    op = _op("add", 0.002, 0.001, 0.003, flops=1000, bytes_moved=12000)
    assert op.median_s == 0.002
    assert op.flop_per_s == pytest.approx(500_000)
    assert op.bytes_per_s == pytest.approx(6_000_000)
    assert op.intensity_flop_per_byte == pytest.approx(1 / 12)


def test_comparison_speedup_crossover_and_transfer_bound():
    cpu = tuple(_result("cpu", n, s) for n, s in [(64, 1e-5), (128, 8e-5), (256, 6e-4)])
    gpu = tuple(_result("cuda", n, s) for n, s in [(64, 2e-5), (128, 4e-5), (256, 1e-4)])
    copies = tuple(_op("h2d", 5e-5, flops=0, bytes_moved=8 * n * n) for n in (64, 128, 256))
    comparison = results.SweepComparison(
        cpu=cpu, gpu=gpu, gpu_device="cuda", pageable=copies, pinned=copies
    )
    assert comparison.speedup(64) == pytest.approx(0.5)
    assert comparison.speedup(256) == pytest.approx(6.0)
    assert comparison.crossover_n == 128
    assert comparison.transfer_bound_up_to_n == 128
    page = comparison_markdown(comparison)
    assert "cuda/CPU speedup" in page and "6.00x" in page
    assert "from n = 128 on" in page and "Up to n = 128" in page
    assert comparison.best_cpu is cpu[2]  # 2 x 256^3 / 6e-4 s = 5.6e10 beats 5.2e10 and 5.2e10


def test_comparison_without_gpu_says_so_and_invents_nothing():
    cpu = (_result("cpu", 64, 1e-5),)
    alone = results.SweepComparison(cpu=cpu, gpu=(), gpu_device=None)
    page = comparison_markdown(alone)
    assert NO_CUDA_TEXT in page
    assert "speedup" in page and "x |" not in page
    assert "CPU" in sweep_chart(alone)


# --- barriers per backend -------------------------------------------------------------


@pytest.fixture
def sync_log(monkeypatch):
    """Replace both synchronize calls with recorders."""
    log: list[str] = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: log.append("cuda"))
    monkeypatch.setattr(torch.mps, "synchronize", lambda *a, **k: log.append("mps"))
    return log


@pytest.mark.parametrize(
    ("device", "expected"), [("cuda", ["cuda"]), ("mps", ["mps"]), ("cpu", [])]
)
def test_barrier_calls_the_backends_own_synchronize(sync_log, device, expected):
    bench.barrier(device)
    assert sync_log == expected


@pytest.mark.parametrize("device", ["cuda", "mps", "cpu"])
def test_barrier_name_matches_the_call(device):
    name = inputs.barrier_name(device)
    assert (f"torch.{device}.synchronize()" in name) is (device != "cpu")


def _recorded_events(monkeypatch, device: str) -> tuple[list[str], object]:
    events: list[str] = []
    monkeypatch.setattr(bench, "barrier", lambda d: events.append(f"barrier:{d}"))
    real = bench.time.perf_counter

    def clock() -> float:
        events.append("clock")
        return real()

    monkeypatch.setattr(bench.time, "perf_counter", clock)
    return events, lambda: events.append("op")


@pytest.mark.parametrize("device", ["cuda", "mps"])
def test_honest_timing_puts_a_barrier_before_every_clock_reading(monkeypatch, device):
    events, op = _recorded_events(monkeypatch, device)
    samples, calls = bench.time_samples(op, device, threads=1, min_run_time_s=0.001, warmup=2)
    assert events[:2] == ["op", "op"]  # warm-up, untimed
    readings = [i for i, e in enumerate(events) if e == "clock"]
    assert len(readings) >= 2
    for i in readings:
        assert events[i - 1] == f"barrier:{device}"
    assert samples and calls >= 1


def test_naive_timing_stops_the_clock_before_the_barrier(monkeypatch):
    events, op = _recorded_events(monkeypatch, "cuda")
    bench.naive_samples(op, "cuda", repeats=2, warmup=1)
    one_run = ["barrier:cuda", "clock", "op", "clock", "barrier:cuda"]
    assert events == ["op", *one_run, *one_run]


# --- measurements on this machine (small and quick) ---------------------------------


def test_measure_matmul_reports_threads_and_samples():
    r = bench.measure_matmul(48, "cpu", "fp32", threads=1, min_run_time_s=0.01)
    assert r.threads == 1 and r.device == "cpu" and r.closing_barrier
    assert r.repeats >= 1 and all(s > 0 for s in r.samples_s)
    assert torch.get_num_threads() >= 1


def test_sweep_with_given_sizes_measures_exactly_those():
    results = bench.sweep("cpu", sizes=[8, 24], min_run_time_s=0.005)
    assert [r.n for r in results] == [8, 24]


def test_cpu_illusion_ratio_is_computed_from_its_parts():
    r = bench.async_illusion(32, "cpu", min_run_time_s=0.005)
    assert r.inflation == pytest.approx(r.honest.median_s / r.naive.median_s)
    assert r.kernel_s == pytest.approx(max(r.honest.median_s - r.naive.median_s, 0))
    assert not r.naive.closing_barrier
    assert "about 1" in illusion_markdown(r)


def test_launch_overhead_on_a_cpu_is_a_tiny_ops_cost_per_call(monkeypatch):
    r = launch.measure_launch_overhead("cpu", threads=1, min_run_time_s=0.01)
    assert (r.device, r.eager.mode, r.eager.threads, r.graph) == ("cpu", "eager", 1, None)
    assert r.eager.repeats >= bench.MIN_SAMPLES and r.eager.calls_per_sample > 1
    assert r.median_s == r.eager.median_s and 0 < r.median_s < 1e-3
    page = launch_markdown(r)
    assert "not a kernel launch" in page and "on this CPU" in page
    with pytest.raises(ValueError, match="CUDA graphs need a CUDA device"):
        launch.measure_launch_overhead("cpu", graph=True)
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        launch.measure_launch_overhead("tpu")


def test_launch_samples_are_each_blocks_time_per_call(monkeypatch):
    monkeypatch.setattr(launch, "time_samples", lambda *a, **k: ((2e-6, 3e-6, 4e-6), 500))
    r = launch.measure_launch_overhead("cpu", threads=1)
    assert r.eager.samples_s == (2e-6, 3e-6, 4e-6) and r.eager.calls_per_sample == 500
    assert r.median_s == 3e-6


def test_transfer_needs_a_gpu():
    with pytest.raises(ValueError, match="needs a GPU"):
        bench.measure_transfer(64, "cpu")


# --- input checks ---------------------------------------------------------------------


def test_resolve_device_without_cuda_names_the_fix(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="gpulesson probe"):
        bench.resolve_device("cuda")


def test_auto_device_follows_the_dispatch_order(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert bench.resolve_device("auto") == "mps"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert bench.resolve_device("auto") == "cuda"


@pytest.mark.parametrize("bad", [[0], [-4], [inputs.MAX_N + 1], []])
def test_bad_sizes_raise(bad):
    with pytest.raises(ValueError, match="size"):
        inputs.check_sizes(bad)


def test_tf32_only_on_cuda():
    with pytest.raises(ValueError, match="tf32"):
        inputs.check_dtype("tf32", "cpu")
    assert inputs.check_dtype("tf32", "cuda") == "tf32"


@pytest.mark.parametrize("threads", [0, -1, 5, 10**20])
def test_thread_counts_outside_the_cpus_are_refused_with_the_range(threads):
    with pytest.raises(ValueError, match=f"thread count {threads} .* from 1 to 4"):
        inputs.check_threads(threads, cpus=4)
    assert inputs.check_threads(4, cpus=4) == 4


def test_operands_that_do_not_fit_are_refused_with_the_numbers_and_a_size_that_fits():
    assert inputs.operand_bytes(32768, "fp32") == 12 * GIB
    assert inputs.check_fits(16384, "fp32", 8 * GIB, "host memory") == 16384  # 3 GiB of 7.2
    with pytest.raises(ValueError) as caught:
        inputs.check_fits(32768, "fp32", 8 * GIB, "host memory")
    message = str(caught.value)
    assert "12.0 GiB" in message and "7.2 GiB of host memory" in message
    assert "--sizes 16384" in message
    assert inputs.operand_bytes(16384, "fp32") <= 8 * GIB * inputs.USABLE_MEMORY_SHARE
    assert inputs.largest_fitting_n(8, "fp32") == 0
    with pytest.raises(ValueError, match="free some memory"):
        inputs.check_fits(1, "fp32", 8, "host memory")


@pytest.fixture
def small_host(monkeypatch):
    """Pretend the host has 8 GiB available."""
    monkeypatch.setattr(bench, "host_available_bytes", lambda: 8 * GIB)


def test_measure_matmul_checks_memory_before_allocating(small_host, monkeypatch):
    monkeypatch.setattr(bench, "_operands", lambda *a: pytest.fail("allocated before the check"))
    with pytest.raises(ValueError, match="needs 12.0 GiB"):
        bench.measure_matmul(32768, "cpu")


def test_given_sizes_are_all_checked_before_the_first_is_timed(small_host, monkeypatch):
    monkeypatch.setattr(bench, "measure_matmul", lambda *a, **k: pytest.fail("timed a size"))
    with pytest.raises(ValueError, match="matrix size 32768"):
        bench.sweep("cpu", sizes=[64, 32768])


def test_the_default_sweep_stops_at_the_largest_size_that_fits(monkeypatch):
    fits_32 = inputs.operand_bytes(32, "fp32") / inputs.USABLE_MEMORY_SHARE + 1
    monkeypatch.setattr(bench, "host_available_bytes", lambda: int(fits_32))
    done = bench.sweep("cpu", budget_s=5.0, start_n=8, max_n=128, min_run_time_s=0.005)
    assert [r.n for r in done] == [8, 16, 32]


def test_cuda_sizes_are_checked_against_the_devices_free_memory(monkeypatch):
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda *a: (8 * GIB, 80 * GIB))
    assert bench.available_bytes("cuda") == (8 * GIB, "memory on the CUDA device")
    with pytest.raises(ValueError, match="of memory on the CUDA device is usable"):
        bench.check_memory([32768], "fp32", "cuda")
    assert bench.check_memory([1024], "bf16", "cuda") == (1024,)


def test_precision_is_restored_after_a_tf32_block():
    before = torch.get_float32_matmul_precision()
    with bench.matmul_precision("tf32"):
        assert torch.get_float32_matmul_precision() == "high"
    assert torch.get_float32_matmul_precision() == before


# --- CLI ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--sizes", "0"], "matrix size 0"),
        (["--sizes", "abc"], "cannot read sizes 'abc'"),
        (["--dtype", "fp8"], "fp8"),
        (["--budget", "-1"], "seconds"),
        (["--device", "tpu"], "tpu"),
        (["--threads", "99999999999999999999"], "thread count 99999999999999999999"),
        (["--threads", "0"], "thread count 0"),
        (["--threads", "two"], "'two' is not a whole number of threads"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(run_cli, args, needle):
    result = run_cli("bench", *args)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert needle in result.stderr
    assert result.stdout == ""


def test_cli_refuses_sizes_that_do_not_fit_before_allocating(run_cli, small_host, monkeypatch):
    monkeypatch.setattr(bench, "_operands", lambda *a: pytest.fail("allocated before the check"))
    result = run_cli("bench", "--device", "cpu", "--sizes", "64,32768")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1, result.stderr
    assert "matrix size 32768 needs 12.0 GiB" in result.stderr
    assert "8.0 GiB available" in result.stderr and "--sizes 16384" in result.stderr


def test_cli_refuses_sizes_that_do_not_fit_on_the_gpu(run_cli, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda *a: (2 * GIB, 16 * GIB))
    monkeypatch.setattr(bench, "_operands", lambda *a: pytest.fail("allocated before the check"))
    result = run_cli("bench", "--device", "cuda", "--sizes", "16384")
    assert result.returncode == 2, result.stderr
    assert "memory on the CUDA device" in result.stderr and "--sizes 16384" not in result.stderr
    assert result.stderr.count("\n") == 1


def test_cli_cuda_without_cuda_exits_2_naming_the_fix(run_cli, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    result = run_cli("bench", "--device", "cuda", "--sizes", "8")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "gpulesson probe" in result.stderr and "--device cpu" in result.stderr


def test_cli_prints_a_table_and_how_to_compare(run_cli):
    result = run_cli("bench", "--device", "cpu", "--sizes", "16,32")
    assert result.returncode == 0, result.stderr
    assert "GFLOP/s" in result.stdout and "published GPU figures" in result.stdout
    rows = [line.split() for line in result.stdout.splitlines() if line.strip()[:2] in ("16", "32")]
    assert [row[0] for row in rows] == ["16", "32"]
    assert result.stderr == ""  # not a terminal: no progress line


def test_cli_json_is_one_object_with_every_field(run_cli):
    result = run_cli("bench", "--device", "cpu", "--sizes", "16", "--json", "--threads", "1")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    (m,) = data["measurements"]
    assert m["device"] == "cpu" and m["n"] == 16 and m["threads"] == 1
    assert m["flops"] == 2 * 16**3
    assert m["flop_per_s"] == pytest.approx(m["flops"] / m["median_s"])


def test_the_console_script_times_into_a_closed_pipe_without_a_traceback():
    script = shutil.which("gpulesson", path=str(Path(sys.executable).parent))
    if not script:
        pytest.skip("the gpulesson console script is not installed (pip install -e .)")
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the table is printed
    result = subprocess.run(
        [script, "bench", "--device", "cpu", "--sizes", "16", "--threads", "1"],
        stdout=write_end,
        stderr=subprocess.PIPE,
        text=True,
        timeout=300,
    )
    os.close(write_end)
    assert result.returncode == 0 and result.stderr == "", result.stderr


_NO_TORCH_PARSE = """
import argparse, sys
from gpulesson.cli import bench
parser = argparse.ArgumentParser(prog="gpulesson")
bench.register(parser.add_subparsers())
for argv in (["bench", "--threads", "99999999999999999999"], ["bench", "--sizes", "abc"]):
    try:
        parser.parse_args(argv)
    except SystemExit:
        pass
print(sorted(m for m in sys.modules if m.split(".")[0] == "torch"))
"""


def test_parsing_bench_arguments_never_imports_torch():
    result = subprocess.run(
        [sys.executable, "-c", _NO_TORCH_PARSE], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
    assert "thread count 99999999999999999999" in result.stderr


# A CUDA build of torch on a machine without a GPU logs "No CUDA runtime is found, using
# CUDA_HOME=..." from torch.utils.cpp_extension when torch.utils.benchmark is imported.
# A CPU build never reaches that line, so the script makes this one look like a CUDA build
# without a GPU (compiled for CUDA, CUDA_HOME set, no device) before gpulesson loads it.
# It runs a refused command (one error line), then a good one (which imports the timer:
# nothing on stderr), then re-imports cpp_extension unquieted: the chatter must appear only
# there, which shows the simulation does produce it.
_CUDA_WHEEL_WITHOUT_GPU = """
import importlib, sys
import torch
torch.cuda._is_compiled = lambda: True
torch.cuda.is_available = lambda: False
torch.version.cuda = "12.4"
from gpulesson.cli import main
refused = main(["bench", "--device", "cuda", "--sizes", "8"])
print("MARKER", file=sys.stderr, flush=True)
timed = main(["bench", "--device", "cpu", "--sizes", "8", "--threads", "1"])
print("MARKER", file=sys.stderr, flush=True)
importlib.reload(sys.modules["torch.utils.cpp_extension"])
sys.exit(10 * refused + timed)
"""


def test_torch_import_chatter_stays_off_stderr(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "CUDA_HOME": str(tmp_path), "HOME": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-c", _CUDA_WHEEL_WITHOUT_GPU],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env=env,
    )
    assert result.returncode == 20, result.stderr  # refused: 2, timed: 0
    refused, timed, control = result.stderr.split("MARKER\n")
    assert refused.count("\n") == 1, refused
    assert refused.startswith("gpulesson bench: error: --device cuda, but torch.cuda")
    assert timed == "" and "GFLOP/s" in result.stdout
    assert "No CUDA runtime is found" in control  # the simulated build does chatter


class _Tty(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_progress_only_on_a_terminal_and_only_for_long_runs():
    result = _result("cpu", 512, 0.01)
    quiet = _Tty(False)
    progress = cli_bench.Progress(3, 5.0, quiet)
    progress.update(result, 10.0)
    assert quiet.getvalue() == ""
    tty = _Tty(True)
    progress = cli_bench.Progress(3, 5.0, tty)
    progress.update(result, 0.5)
    assert tty.getvalue() == ""  # under PROGRESS_AFTER_S
    progress.update(result, cli_bench.PROGRESS_AFTER_S + 1)
    assert "2/3 sizes" in tty.getvalue() and "n=512" in tty.getvalue()
    progress.close()
    assert tty.getvalue().endswith("\r")


# --- the snippet readers copy ------------------------------------------------------------


SNIPPET = REPO / "snippets" / "sync_benchmark.py"


def test_sync_benchmark_snippet_prints_times_and_the_ratio(run_snippet):
    result = run_snippet("sync_benchmark.py", "--size", "64", "--repeats", "3")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "matrix size 64, 5.24e+05 FLOPs per matmul, median of 3 runs" in out
    assert "CPU (" in out and "GFLOP/s" in out
    assert "Honest / naive:" in out
    if not HAS_CUDA and not torch.backends.mps.is_available():
        assert "No GPU found" in out


@pytest.fixture
def snippet_module():
    spec = importlib.util.spec_from_file_location("sync_benchmark", SNIPPET)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--size", "0"], "--size and --repeats must be at least 1"),
        (["--repeats", "0"], "--size and --repeats must be at least 1"),
        (["--size", "abc"], "invalid int value: 'abc'"),
        (["--size", "10000000"], "--size 10000000 needs"),  # 1.2 PB: fits nowhere
    ],
)
def test_sync_benchmark_snippet_bad_input_is_one_line_and_exit_2(
    snippet_module, monkeypatch, capsys, args, needle
):
    monkeypatch.setattr(snippet_module.torch, "randn", lambda *a: pytest.fail("allocated"))
    monkeypatch.setattr(sys, "argv", ["sync_benchmark.py", *args])
    with pytest.raises(SystemExit) as exit_:
        snippet_module.main()
    out, err = capsys.readouterr()
    assert exit_.value.code == 2
    assert err.count("\n") == 1, err
    assert needle in err and out == ""


def test_sync_benchmark_snippet_refuses_size_40000_before_allocating(
    snippet_module, monkeypatch, capsys
):
    monkeypatch.setattr(snippet_module, "host_available_bytes", lambda: 8 * GIB)
    monkeypatch.setattr(snippet_module.torch, "randn", lambda *a: pytest.fail("allocated"))
    monkeypatch.setattr(sys, "argv", ["sync_benchmark.py", "--size", "40000"])
    with pytest.raises(SystemExit) as exit_:
        snippet_module.main()
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1, err
    assert "--size 40000 needs 17.9 GiB for 3 40000 x 40000 fp32 matrices" in err
    assert "7.2 GiB of host memory is usable" in err and "e.g. --size 16384" in err


def test_sync_benchmark_snippet_checks_gpu_memory_on_cuda(snippet_module, monkeypatch):
    monkeypatch.setattr(snippet_module, "host_available_bytes", lambda: 64 * GIB)
    monkeypatch.setattr(snippet_module.torch.cuda, "mem_get_info", lambda *a: (4 * GIB, 16 * GIB))
    problem = snippet_module.memory_problem(40000, torch.device("cuda"))
    assert problem is not None and "of GPU memory is usable" in problem
    assert snippet_module.memory_problem(4096, torch.device("cuda")) is None
    mps = snippet_module.memory_problem(20000, torch.device("mps"))  # 5 x 1.5 GiB in 57.6 GiB
    assert mps is None


def test_sync_benchmark_snippet_reads_host_memory_without_psutil(snippet_module):
    available = snippet_module.host_available_bytes()
    assert available is None or available > 0
    assert "psutil" not in SNIPPET.read_text()


# --- GPU self-check (skipped without CUDA) ------------------------------------------------

gpu = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device; this machine has none")


@pytest.mark.gpu
@gpu
def test_gpu_naive_time_is_far_below_the_honest_time():
    r = bench.async_illusion(4096, "cuda", min_run_time_s=0.2)
    assert r.naive.median_s < r.honest.median_s / 5, illusion_markdown(r)


@pytest.mark.gpu
@gpu
def test_gpu_rates_are_plausible_against_the_measured_peak():
    peak = bench.measure_matmul(8192, "cuda", min_run_time_s=0.3).flop_per_s
    mid = bench.measure_matmul(2048, "cuda", min_run_time_s=0.2).flop_per_s
    assert 1e11 < peak < 5e15  # from a slow laptop GPU to beyond any current card
    assert 0.01 * peak < mid < 1.2 * peak


@pytest.mark.gpu
@gpu
def test_gpu_events_agree_with_synchronize_timing():
    a = torch.randn(4096, 4096, device="cuda")
    b = torch.randn(4096, 4096, device="cuda")
    out = torch.empty_like(a)
    events = bench.cuda_event_samples(lambda: torch.matmul(a, b, out=out), repeats=10)
    synced = bench.measure_matmul(4096, "cuda", min_run_time_s=0.2)
    event_median = results.quantile(events, 0.5)
    assert 0.5 < event_median / synced.median_s < 2.0


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("dtype", ["fp32", "tf32", "bf16", "fp16"])
def test_gpu_matmul_has_no_nan(dtype):
    a, b, out = bench._operands(1024, dtype, "cuda")
    with bench.matmul_precision(dtype):
        torch.matmul(a, b, out=out)
    torch.cuda.synchronize()
    assert not torch.isnan(out).any().item()
    assert math.isfinite(bench.measure_matmul(1024, "cuda", dtype, min_run_time_s=0.05).flop_per_s)


@pytest.mark.gpu
@gpu
def test_gpu_launch_costs_microseconds_and_a_graph_replay_costs_less():
    r = launch.measure_launch_overhead("cuda", min_run_time_s=0.2)
    assert r.graph is not None and r.graph.mode == "cuda-graph"
    assert 1e-7 < r.median_s < 1e-4, launch_markdown(r)  # microseconds, not ms
    assert r.graph.median_s < r.median_s, launch_markdown(r)
    assert r.graph.calls_per_sample % launch.GRAPH_OPS == 0


def test_time_samples_keeps_at_least_min_samples_on_a_busy_machine():
    # A run time far below one block's duration: blocked_autorange alone may return one block.
    samples, calls = bench.time_samples(lambda: torch.ones(256, 256).sum(), "cpu", 1, 1e-9, 0)
    assert len(samples) >= bench.MIN_SAMPLES
    assert calls >= 1
    assert all(s > 0 for s in samples)


def test_time_in_turns_times_each_function_in_alternating_blocks():
    """A burst of other work must land on both functions alike: after each one's warm-up and
    block-size pick, their timed blocks alternate (timed one after the other, they would not)."""
    order: list[str] = []
    (a_s, a_n), (b_s, b_n) = bench.time_in_turns(
        [lambda: order.append("a"), lambda: order.append("b")], "cpu", 1, min_run_time_s=0.005
    )
    runs = [name for name, _ in itertools.groupby(order)]
    assert runs[:2] == ["a", "b"]  # each one's warm-up and block-size pick
    turns = runs[2:]
    assert len(turns) >= 2 and turns == ["a", "b"] * (len(turns) // 2)
    assert len(a_s) == len(b_s) == 1 + len(turns) // 2  # the pick's block, then one a turn
    assert len(a_s) >= bench.MIN_SAMPLES
    assert a_n >= 1 and b_n >= 1 and all(t > 0 for t in a_s + b_s)
