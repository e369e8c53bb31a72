"""gpulesson.timing.bench: result arithmetic, barriers per backend, the sweep, CLI, snippet."""

from __future__ import annotations

import io
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from gpulesson import cli
from gpulesson.cli import bench as cli_bench
from gpulesson.timing import bench
from gpulesson.timing import render as bench_render
from gpulesson.timing.bench import MatmulResult, OpResult

REPO = Path(__file__).resolve().parent.parent
HAS_CUDA = torch.cuda.is_available()


# --- result arithmetic ---------------------------------------------------------------


def test_matmul_result_summarises_given_samples():
    samples = (0.004, 0.001, 0.003, 0.002, 0.010)
    r = MatmulResult("cpu", "fp32", 100, 2, samples)
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
    assert bench.quantile(samples, q) == pytest.approx(np.percentile(samples, q * 100))


def test_quantile_of_nothing_names_the_fix():
    with pytest.raises(ValueError, match="no samples"):
        bench.quantile([], 0.5)


def test_spread_warning_uses_the_named_threshold():
    share = bench.SPREAD_WARNING_IQR_SHARE
    tight = MatmulResult("cpu", "fp32", 8, 1, (1.0, 1.0 + share / 2 * 0.9, 1.0 + share * 0.9))
    loose = MatmulResult("cpu", "fp32", 8, 1, (1.0, 1.5, 2.0, 3.0))
    assert tight.spread_warning is None
    assert loose.spread_warning is not None and f"{share:.0%}" in loose.spread_warning


def test_op_result_rates_and_intensity():
    op = OpResult("add", "cpu", "fp32", 2, (0.002, 0.001, 0.003), 1000, 12000)
    assert op.median_s == 0.002
    assert op.flop_per_s == pytest.approx(500_000)
    assert op.bytes_per_s == pytest.approx(6_000_000)
    assert op.intensity_flop_per_byte == pytest.approx(1 / 12)


def _sweep_result(device: str, n: int, seconds: float) -> MatmulResult:
    return MatmulResult(device, "fp32", n, 2, (seconds,))


def test_comparison_speedup_crossover_and_transfer_bound():
    cpu = tuple(_sweep_result("cpu", n, s) for n, s in [(64, 1e-5), (128, 8e-5), (256, 6e-4)])
    gpu = tuple(_sweep_result("cuda", n, s) for n, s in [(64, 2e-5), (128, 4e-5), (256, 1e-4)])
    copies = tuple(
        OpResult("h2d", "cuda", "fp32", 2, (s,), 0, 8 * n * n)
        for n, s in [(64, 5e-5), (128, 5e-5), (256, 5e-5)]
    )
    comparison = bench.SweepComparison(cpu, gpu, "cuda", copies, copies)
    assert comparison.speedup(64) == pytest.approx(0.5)
    assert comparison.speedup(256) == pytest.approx(6.0)
    assert comparison.crossover_n == 128
    assert comparison.transfer_bound_up_to_n == 128
    page = bench_render.comparison_markdown(comparison)
    assert "cuda/CPU speedup" in page and "6.00x" in page
    assert "from n = 128 on" in page and "Up to n = 128" in page


def test_comparison_without_gpu_says_so_and_invents_nothing():
    cpu = (_sweep_result("cpu", 64, 1e-5),)
    page = bench_render.comparison_markdown(bench.SweepComparison(cpu, (), None))
    assert bench.NO_CUDA_TEXT in page
    assert "speedup" in page and "x |" not in page
    assert "CPU" in bench_render.sweep_chart(bench.SweepComparison(cpu, (), None))


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
    name = bench.barrier_name(device)
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
    assert not r.naive.closing_barrier
    assert "about 1" in bench_render.illusion_markdown(r)


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


@pytest.mark.parametrize("bad", [[0], [-4], [bench.MAX_N + 1], []])
def test_bad_sizes_raise(bad):
    with pytest.raises(ValueError, match="size"):
        bench.check_sizes(bad)


def test_tf32_only_on_cuda():
    with pytest.raises(ValueError, match="tf32"):
        bench.check_dtype("tf32", "cpu")
    assert bench.check_dtype("tf32", "cuda") == "tf32"


def test_precision_is_restored_after_a_tf32_block():
    before = torch.get_float32_matmul_precision()
    with bench.matmul_precision("tf32"):
        assert torch.get_float32_matmul_precision() == "high"
    assert torch.get_float32_matmul_precision() == before


# --- CLI ------------------------------------------------------------------------------


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpulesson", "bench", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--sizes", "0"], "matrix size 0"),
        (["--sizes", "abc"], "cannot read sizes 'abc'"),
        (["--dtype", "fp8"], "fp8"),
        (["--budget", "-1"], "seconds"),
        (["--device", "tpu"], "tpu"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(args, needle):
    result = run_cli(*args)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert needle in result.stderr
    assert result.stdout == ""


def test_cli_cuda_without_cuda_exits_2_naming_the_fix(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert cli.main(["bench", "--device", "cuda", "--sizes", "8"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "gpulesson probe" in err and "--device cpu" in err


def test_cli_prints_a_table_and_how_to_compare():
    result = run_cli("--device", "cpu", "--sizes", "16,32")
    assert result.returncode == 0, result.stderr
    assert "GFLOP/s" in result.stdout and "published GPU figures" in result.stdout
    rows = [line.split() for line in result.stdout.splitlines() if line.strip()[:2] in ("16", "32")]
    assert [row[0] for row in rows] == ["16", "32"]
    assert result.stderr == ""  # not a terminal: no progress line


def test_cli_json_is_one_object_with_every_field():
    result = run_cli("--device", "cpu", "--sizes", "16", "--json", "--threads", "1")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    (m,) = data["measurements"]
    assert m["device"] == "cpu" and m["n"] == 16 and m["threads"] == 1
    assert m["flops"] == 2 * 16**3
    assert m["flop_per_s"] == pytest.approx(m["flops"] / m["median_s"])


class _Tty(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_progress_only_on_a_terminal_and_only_for_long_runs():
    result = _sweep_result("cpu", 512, 0.01)
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


def test_sync_benchmark_snippet_prints_times_and_the_ratio():
    result = subprocess.run(
        [
            sys.executable,
            str(REPO / "snippets" / "sync_benchmark.py"),
            "--size",
            "64",
            "--repeats",
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "matrix size 64, 5.24e+05 FLOPs per matmul, median of 3 runs" in out
    assert "CPU (" in out and "GFLOP/s" in out
    assert "Honest / naive:" in out
    if not HAS_CUDA and not torch.backends.mps.is_available():
        assert "No GPU found" in out


def test_sync_benchmark_snippet_rejects_size_zero():
    result = subprocess.run(
        [sys.executable, str(REPO / "snippets" / "sync_benchmark.py"), "--size", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "--size" in result.stderr


# --- GPU self-check (skipped without CUDA) ------------------------------------------------

gpu = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device; this machine has none")


@pytest.mark.gpu
@gpu
def test_gpu_naive_time_is_far_below_the_honest_time():
    r = bench.async_illusion(4096, "cuda", min_run_time_s=0.2)
    assert r.naive.median_s < r.honest.median_s / 5, bench_render.illusion_markdown(r)


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
    event_median = bench.quantile(events, 0.5)
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


def test_time_samples_keeps_at_least_min_samples_on_a_busy_machine():
    # A run time far below one block's duration: blocked_autorange alone may return one block.
    samples, calls = bench.time_samples(lambda: torch.ones(256, 256).sum(), "cpu", 1, 1e-9, 0)
    assert len(samples) >= bench.MIN_SAMPLES
    assert calls >= 1
    assert all(s > 0 for s in samples)
