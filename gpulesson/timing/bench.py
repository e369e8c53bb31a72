"""Honest timing of matmuls on CUDA, MPS and CPU: the timing core of the course.

Timing discipline, in the order the code applies it:

1. warm-up calls, so library initialisation and kernel selection are not timed;
2. a barrier (``torch.cuda.synchronize()`` on NVIDIA, ``torch.mps.synchronize()``
   on Apple, nothing on a CPU, whose operations finish before they return) right
   before the clock starts and right before it stops;
3. nothing in the timed region but the operation (operands and outputs are
   allocated beforehand);
4. many samples from ``torch.utils.benchmark.Timer.blocked_autorange``, at a set
   thread count, summarised by median and spread (IQR, min, max).

The one hand-made loop is ``measure_matmul_naive``: it leaves out the closing
barrier on purpose, to measure the "async illusion" (a single call, then the
queue is drained outside the timed region; a library timer would hide the bug).

Results are frozen dataclasses that keep their raw samples; ``gpulesson.timing.render``
turns them into Markdown, text, JSON and SVG charts, and ``gpulesson.timing.roofline``
builds its memory-traffic measurements on this module's timer. Used by the lessons
``why-gpus.md`` (the CPU-vs-GPU sweep) and ``timing.md`` (the async illusion) and by
``gpulesson bench``.

>>> result = MatmulResult("cpu", "fp32", 1000, 2, (0.010, 0.012, 0.011))
>>> result.flops, result.median_s, round(result.flop_per_s / 1e9)
(2000000000, 0.011, 182)
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils import benchmark

from gpulesson.units import MIB

# A timing whose IQR is more than this share of its median is flagged: the
# machine was busy or the operation is too short to time well. Same threshold
# as torch.utils.benchmark's Measurement uses for its own warning.
SPREAD_WARNING_IQR_SHARE = 0.10
MIN_SAMPLES = 5  # fewest timed blocks behind a median and its spread

DEVICES = ("cuda", "mps", "cpu")
DTYPES = ("fp32", "tf32", "bf16", "fp16")
MAX_N = 32768  # an fp32 operand at this size is already 4 GiB
NO_CUDA_TEXT = "no CUDA device in this build"

_TORCH_DTYPES = {
    "fp32": torch.float32,
    "tf32": torch.float32,  # fp32 storage, TF32 tensor-core arithmetic (CUDA only)
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
}


# --- results -------------------------------------------------------------------


def quantile(samples: Sequence[float], q: float) -> float:
    """The q-quantile with linear interpolation (numpy's and torch's default).

    >>> quantile([1.0, 2.0, 3.0, 4.0], 0.25)
    1.75
    >>> quantile([5.0], 0.5)
    5.0
    """
    if not samples:
        raise ValueError("no samples to summarise: time at least one run")
    ordered = sorted(samples)
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


class _Spread:
    """Median and spread of ``samples_s``, shared by every timing result."""

    samples_s: tuple[float, ...]

    @property
    def repeats(self) -> int:
        """How many samples were kept."""
        return len(self.samples_s)

    @property
    def median_s(self) -> float:
        return quantile(self.samples_s, 0.5)

    @property
    def p25_s(self) -> float:
        return quantile(self.samples_s, 0.25)

    @property
    def p75_s(self) -> float:
        return quantile(self.samples_s, 0.75)

    @property
    def iqr_s(self) -> float:
        """Interquartile range: the middle half of the samples spans this much."""
        return self.p75_s - self.p25_s

    @property
    def min_s(self) -> float:
        return min(self.samples_s)

    @property
    def max_s(self) -> float:
        return max(self.samples_s)

    @property
    def spread_warning(self) -> str | None:
        """A sentence when the IQR exceeds ``SPREAD_WARNING_IQR_SHARE`` of the median."""
        share = self.iqr_s / self.median_s
        if share <= SPREAD_WARNING_IQR_SHARE:
            return None
        return (
            f"IQR is {share:.0%} of the median (threshold {SPREAD_WARNING_IQR_SHARE:.0%}): "
            "the machine was busy or the run is too short; rerun before trusting it"
        )


@dataclass(frozen=True)
class MatmulResult(_Spread):
    """Timing of one n x n by n x n matmul; each sample is seconds per call.

    ``calls_per_sample`` is how many back-to-back calls one clock reading
    covered (the sample is that reading divided by it). ``closing_barrier`` is
    False only for the deliberately naive measurement.

    >>> r = MatmulResult("cpu", "fp32", 64, 1, (3.0, 1.0, 2.0, 4.0))
    >>> r.median_s, r.iqr_s, r.min_s, r.max_s, r.repeats
    (2.5, 1.5, 1.0, 4.0, 4)
    """

    device: str
    dtype: str
    n: int
    threads: int
    samples_s: tuple[float, ...]
    calls_per_sample: int = 1
    closing_barrier: bool = True

    @property
    def flops(self) -> int:
        """2 n^3: n^2 outputs, each n multiplies and n adds."""
        return matmul_flops(self.n)

    @property
    def flop_per_s(self) -> float:
        return self.flops / self.median_s


@dataclass(frozen=True)
class OpResult(_Spread):
    """Timing of an operation with known work and traffic (for the roofline).

    ``bytes_moved`` is the least traffic the operation needs (each operand read
    once, each output written once); caches can only make real traffic smaller
    for small operands, which is why small ops can sit above the memory roof.

    >>> op = OpResult("add", "cpu", "fp32", 2, (0.01,), flops=10**6, bytes_moved=12 * 10**6)
    >>> round(op.intensity_flop_per_byte, 3), op.bytes_per_s
    (0.083, 1200000000.0)
    """

    name: str
    device: str
    dtype: str
    threads: int
    samples_s: tuple[float, ...]
    flops: int
    bytes_moved: int
    calls_per_sample: int = 1

    @property
    def flop_per_s(self) -> float:
        return self.flops / self.median_s

    @property
    def bytes_per_s(self) -> float:
        return self.bytes_moved / self.median_s

    @property
    def intensity_flop_per_byte(self) -> float:
        return self.flops / self.bytes_moved


def matmul_flops(n: int) -> int:
    """FLOPs of an n x n matmul, counting a multiply and an add separately.

    >>> matmul_flops(5000)
    250000000000
    >>> matmul_flops(4000) / matmul_flops(5000)
    0.512
    """
    return 2 * n**3


# --- devices, barriers, clocks ----------------------------------------------------


def cuda_available() -> bool:
    return bool(torch.cuda.is_available())


def mps_available() -> bool:
    return bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())


def accelerator() -> str | None:
    """The GPU this machine offers to torch: 'cuda', then 'mps', else None."""
    if cuda_available():
        return "cuda"
    if mps_available():
        return "mps"
    return None


def resolve_device(name: str) -> str:
    """Check a device name against this machine; 'auto' picks cuda, mps, then cpu.

    >>> resolve_device("cpu")
    'cpu'
    >>> resolve_device("tpu")
    Traceback (most recent call last):
    ...
    ValueError: unknown device 'tpu': use auto, cuda, mps or cpu
    """
    name = name.strip().lower()
    if name == "auto":
        return accelerator() or "cpu"
    if name not in DEVICES:
        raise ValueError(f"unknown device {name!r}: use auto, cuda, mps or cpu")
    if name == "cuda" and not cuda_available():
        raise ValueError(
            "--device cuda, but torch.cuda.is_available() is False on this machine: "
            "run `gpulesson probe` to see why, or use --device cpu"
        )
    if name == "mps" and not mps_available():
        raise ValueError(
            "--device mps, but torch.backends.mps.is_available() is False on this machine: "
            "MPS needs Apple Silicon and macOS 12.3+; use --device cpu"
        )
    return name


def check_dtype(dtype: str, device: str) -> str:
    """Check a dtype name for a device; TF32 exists only on CUDA.

    >>> check_dtype("bf16", "cpu")
    'bf16'
    >>> check_dtype("fp8", "cpu")
    Traceback (most recent call last):
    ...
    ValueError: unknown dtype 'fp8': use fp32, tf32, bf16 or fp16
    """
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}: use fp32, tf32, bf16 or fp16")
    if dtype == "tf32" and device != "cuda":
        raise ValueError(
            f"tf32 is a CUDA tensor-core mode, not available on {device}: use fp32 or bf16"
        )
    return dtype


def check_sizes(sizes: Sequence[int]) -> tuple[int, ...]:
    """Check matrix sizes: whole numbers from 1 to ``MAX_N``.

    >>> check_sizes([64, 128])
    (64, 128)
    >>> check_sizes([0])
    Traceback (most recent call last):
    ...
    ValueError: matrix size 0 is out of range: use whole numbers from 1 to 32768, like 64,256,1024
    """
    if not sizes:
        raise ValueError("no matrix sizes given: use e.g. --sizes 64,256,1024")
    for n in sizes:
        if not 1 <= n <= MAX_N:
            raise ValueError(
                f"matrix size {n} is out of range: use whole numbers from 1 to {MAX_N}, "
                "like 64,256,1024"
            )
    return tuple(sizes)


def barrier(device: str) -> None:
    """Wait until every queued operation on ``device`` has finished.

    CUDA and MPS queue work and return at once; a CPU operation has finished
    when it returns, so the CPU needs no barrier.
    """
    if device == "cuda":
        torch.cuda.synchronize()
    elif device == "mps":
        torch.mps.synchronize()


def barrier_name(device: str) -> str:
    """The call that ``barrier`` makes, for tables and docs.

    >>> barrier_name("cpu")
    'none needed (CPU ops finish before returning)'
    """
    return {
        "cuda": "torch.cuda.synchronize()",
        "mps": "torch.mps.synchronize()",
    }.get(device, "none needed (CPU ops finish before returning)")


def barrier_clock(device: str) -> Callable[[], float]:
    """A clock that waits for ``device`` before reading the time.

    Handed to ``torch.utils.benchmark.Timer``, which reads the clock right
    before and right after the timed calls: a barrier at start and at stop.
    """

    def clock() -> float:
        barrier(device)
        return time.perf_counter()

    return clock


@contextlib.contextmanager
def matmul_precision(dtype: str) -> Iterator[None]:
    """Allow TF32 for 'tf32' only; every other dtype runs at full fp32 precision."""
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high" if dtype == "tf32" else "highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


def _threads(threads: int | None) -> int:
    if threads is None:
        return torch.get_num_threads()
    if threads < 1:
        raise ValueError(f"thread count {threads} must be at least 1")
    return threads


def time_samples(
    fn: Callable[[], Any],
    device: str,
    threads: int,
    min_run_time_s: float = 0.2,
    warmup: int = 2,
) -> tuple[tuple[float, ...], int]:
    """Warm up, then time ``fn`` with ``blocked_autorange``; (seconds per call, calls per sample).

    The Timer picks a block size so clock overhead is negligible, then repeats
    blocks until ``min_run_time_s`` has passed; each block is one sample. On a
    busy machine a single block can use up the time, so blocks are added until
    there are at least ``MIN_SAMPLES``: a median and a spread need several.
    """
    for _ in range(warmup):
        fn()
    barrier(device)
    timer = benchmark.Timer(
        stmt="fn()", globals={"fn": fn}, timer=barrier_clock(device), num_threads=threads
    )
    measurement = timer.blocked_autorange(min_run_time=min_run_time_s)
    number = int(measurement.number_per_run)
    times = [float(t) for t in measurement.times]
    while len(times) < MIN_SAMPLES:
        times.append(float(timer.timeit(number).times[0]))
    return tuple(times), number


def naive_samples(
    fn: Callable[[], Any], device: str, repeats: int = 10, warmup: int = 2
) -> tuple[float, ...]:
    """Time ``fn`` the naive way: barrier at start, none at stop. Do not copy this.

    After each reading the queue is drained outside the timed region, so every
    sample starts from an idle device, as a one-off stopwatch would.
    """
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeats):
        barrier(device)
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)  # the bug: no barrier before this
        barrier(device)  # drain the queue, untimed
    return tuple(samples)


def cuda_event_samples(
    fn: Callable[[], Any], repeats: int = 10, warmup: int = 2
) -> tuple[float, ...]:
    """Time ``fn`` with CUDA events, recorded on the GPU's own timeline (CUDA only)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        samples.append(start.elapsed_time(stop) / 1e3)  # elapsed_time is in ms
    return tuple(samples)


# --- matmuls ------------------------------------------------------------------------


def _operands(n: int, dtype: str, device: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    torch_dtype = _TORCH_DTYPES[dtype]
    a = torch.randn(n, n, device=device, dtype=torch_dtype)
    b = torch.randn(n, n, device=device, dtype=torch_dtype)
    return a, b, torch.empty(n, n, device=device, dtype=torch_dtype)


def measure_matmul(
    n: int,
    device: str = "cpu",
    dtype: str = "fp32",
    threads: int | None = None,
    min_run_time_s: float = 0.2,
    warmup: int = 2,
) -> MatmulResult:
    """Time an n x n matmul honestly: warm-up, barriers, median of many samples.

    >>> r = measure_matmul(32, min_run_time_s=0.01)
    >>> r.n, r.flops, r.repeats >= MIN_SAMPLES, r.flop_per_s > 0
    (32, 65536, True, True)
    """
    check_sizes([n])
    check_dtype(dtype, device)
    threads = _threads(threads)
    a, b, out = _operands(n, dtype, device)
    with matmul_precision(dtype):
        samples, calls = time_samples(
            lambda: torch.matmul(a, b, out=out), device, threads, min_run_time_s, warmup
        )
    return MatmulResult(device, dtype, n, threads, samples, calls)


def measure_matmul_naive(
    n: int, device: str = "cpu", dtype: str = "fp32", repeats: int = 10, warmup: int = 2
) -> MatmulResult:
    """Time the same matmul without the closing barrier: what a naive stopwatch sees."""
    check_sizes([n])
    check_dtype(dtype, device)
    a, b, out = _operands(n, dtype, device)
    with matmul_precision(dtype):
        samples = naive_samples(lambda: torch.matmul(a, b, out=out), device, repeats, warmup)
    return MatmulResult(
        device, dtype, n, torch.get_num_threads(), samples, 1, closing_barrier=False
    )


@dataclass(frozen=True)
class IllusionResult:
    """One matmul timed honestly and naively on a device, with a CPU baseline."""

    honest: MatmulResult
    naive: MatmulResult
    cpu: MatmulResult

    @property
    def inflation(self) -> float:
        """How many times too fast the naive stopwatch makes the device look."""
        return self.honest.median_s / self.naive.median_s

    @property
    def honest_speedup(self) -> float:
        return self.cpu.median_s / self.honest.median_s

    @property
    def naive_speedup(self) -> float:
        return self.cpu.median_s / self.naive.median_s


def async_illusion(
    n: int, device: str = "cpu", dtype: str = "fp32", min_run_time_s: float = 0.2
) -> IllusionResult:
    """Honest and naive timings of one matmul on ``device``, plus the CPU's time.

    >>> r = async_illusion(64, min_run_time_s=0.01)
    >>> r.honest.closing_barrier, r.naive.closing_barrier, r.cpu is r.honest
    (True, False, True)
    """
    honest = measure_matmul(n, device, dtype, min_run_time_s=min_run_time_s)
    naive = measure_matmul_naive(n, device, dtype)
    cpu_dtype = "fp32" if dtype == "tf32" else dtype
    cpu = (
        honest
        if device == "cpu"
        else measure_matmul(n, "cpu", cpu_dtype, min_run_time_s=min_run_time_s)
    )
    return IllusionResult(honest, naive, cpu)


def sweep(
    device: str = "cpu",
    dtype: str = "fp32",
    budget_s: float = 3.0,
    sizes: Sequence[int] | None = None,
    start_n: int = 64,
    max_n: int = 4096,
    min_run_time_s: float = 0.1,
    threads: int | None = None,
    on_result: Callable[[MatmulResult, float], None] | None = None,
) -> tuple[MatmulResult, ...]:
    """Time matmuls of growing size until the next one would overrun ``budget_s``.

    Without ``sizes``, n doubles from ``start_n`` up to ``max_n``; the next size
    is skipped when its predicted cost (8x the last call, times the warm-up and
    at least three samples, plus ``min_run_time_s``) would pass the budget.
    ``on_result(result, elapsed_s)`` is called after each size (for progress).

    >>> [r.n for r in sweep(budget_s=0.5, start_n=16, max_n=64, min_run_time_s=0.01)]
    [16, 32, 64]
    """
    if budget_s <= 0:
        raise ValueError(f"time budget {budget_s} s must be positive")
    given = check_sizes(list(sizes)) if sizes is not None else None
    todo = list(given) if given else []
    n = start_n
    results: list[MatmulResult] = []
    started = time.perf_counter()
    while True:
        if given is not None:
            if not todo:
                break
            n = todo.pop(0)
        elif n > max_n:
            break
        result = measure_matmul(n, device, dtype, threads, min_run_time_s)
        results.append(result)
        elapsed = time.perf_counter() - started
        if on_result:
            on_result(result, elapsed)
        if given is None:
            next_cost_s = result.median_s * 8 * 6 + min_run_time_s
            if elapsed + next_cost_s > budget_s:
                break
            n *= 2
    return tuple(results)


# --- host-to-device copies and measurement plans -------------------------------


def measure_transfer(
    n: int, device: str, dtype: str = "fp32", pinned: bool = False, min_run_time_s: float = 0.1
) -> OpResult:
    """Time copying both n x n operands from host memory to ``device``.

    Pinned (page-locked) host memory lets the copy engine read it directly;
    pageable memory is staged through a pinned buffer first. Pinning needs CUDA.
    """
    if device == "cpu":
        raise ValueError("a host-to-device copy needs a GPU: use --device cuda or mps")
    if pinned and device != "cuda":
        raise ValueError(f"pinned host memory needs CUDA, not {device}: use pinned=False")
    torch_dtype = _TORCH_DTYPES[dtype]
    a = torch.randn(n, n, dtype=torch_dtype)
    b = torch.randn(n, n, dtype=torch_dtype)
    if pinned:
        a, b = a.pin_memory(), b.pin_memory()
    a_dev = torch.empty(n, n, dtype=torch_dtype, device=device)
    b_dev = torch.empty_like(a_dev)

    def copy() -> None:
        a_dev.copy_(a, non_blocking=pinned)
        b_dev.copy_(b, non_blocking=pinned)

    threads = torch.get_num_threads()
    samples, calls = time_samples(copy, device, threads, min_run_time_s)
    name = "host-to-device copy, " + ("pinned" if pinned else "pageable")
    moved = 2 * a.numel() * a.element_size()
    return OpResult(name, device, dtype, threads, samples, 0, moved, calls)


@dataclass(frozen=True)
class DevicePlan:
    """How big to make each measurement on one kind of device (bigger on a GPU)."""

    sweep_budget_s: float
    sweep_max_n: int
    min_run_time_s: float
    illusion_n: int
    stream_bytes: int  # size of each tensor in the bandwidth and elementwise tests
    small_matmul_n: int
    large_matmul_n: int


# The CPU plan keeps the three lessons' benchmarks within a few seconds on a
# 2-core machine; the GPU plans are sized so launch overhead is negligible.
PLANS: dict[str, DevicePlan] = {
    "cpu": DevicePlan(2.5, 2048, 0.1, 1024, 64 * MIB, 64, 1024),
    "mps": DevicePlan(6.0, 8192, 0.1, 4096, 256 * MIB, 64, 4096),
    "cuda": DevicePlan(8.0, 16384, 0.1, 4096, 1024 * MIB, 64, 8192),
}


def plan_for(device: str) -> DevicePlan:
    """The measurement plan for a device."""
    return PLANS[device]


# --- CPU against GPU -------------------------------------------------------------


@dataclass(frozen=True)
class SweepComparison:
    """The CPU sweep, the GPU sweep when there is a GPU, and host-to-device copies.

    ``pageable`` and ``pinned`` hold one copy timing per GPU size, in the order of ``gpu``.
    """

    cpu: tuple[MatmulResult, ...]
    gpu: tuple[MatmulResult, ...]
    gpu_device: str | None
    pageable: tuple[OpResult, ...] = ()
    pinned: tuple[OpResult, ...] = ()

    def speedup(self, n: int) -> float | None:
        """GPU/CPU speedup at size n (CPU time over GPU time), when both were measured."""
        cpu = {r.n: r for r in self.cpu}.get(n)
        gpu = {r.n: r for r in self.gpu}.get(n)
        if cpu is None or gpu is None:
            return None
        return cpu.median_s / gpu.median_s

    @property
    def transfer_bound_up_to_n(self) -> int | None:
        """The largest GPU size whose pageable operand copy took longer than its matmul."""
        slow = [
            r.n
            for r, copy in zip(self.gpu, self.pageable, strict=False)
            if copy.median_s >= r.median_s
        ]
        return max(slow) if slow else None

    @property
    def crossover_n(self) -> int | None:
        """The smallest measured n from which on the GPU is faster at every measured size."""
        sizes = sorted(r.n for r in self.cpu if self.speedup(r.n) is not None)
        winner = None
        for n in reversed(sizes):
            speedup = self.speedup(n)
            if speedup is None or speedup <= 1:
                break
            winner = n
        return winner


def compare_devices(dtype: str = "fp32") -> SweepComparison:
    """Sweep the CPU and, when present, the GPU; time the operand copies on the GPU."""
    cpu_plan = plan_for("cpu")
    cpu = sweep(
        "cpu",
        dtype,
        cpu_plan.sweep_budget_s,
        max_n=cpu_plan.sweep_max_n,
        min_run_time_s=cpu_plan.min_run_time_s,
    )
    gpu_device = accelerator()
    if gpu_device is None:
        return SweepComparison(cpu, (), None)
    gpu_plan = plan_for(gpu_device)
    gpu = sweep(
        gpu_device,
        dtype,
        gpu_plan.sweep_budget_s,
        max_n=gpu_plan.sweep_max_n,
        min_run_time_s=gpu_plan.min_run_time_s,
    )
    run = gpu_plan.min_run_time_s
    pageable = tuple(measure_transfer(r.n, gpu_device, dtype, False, run) for r in gpu)
    pinned: tuple[OpResult, ...] = ()
    if gpu_device == "cuda":
        pinned = tuple(measure_transfer(r.n, gpu_device, dtype, True, run) for r in gpu)
    return SweepComparison(cpu, gpu, gpu_device, pageable, pinned)
