"""Honest timing of matmuls and memory traffic on CUDA, MPS and CPU.

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

Results are frozen dataclasses that keep their raw samples; the renderers at the
end of the module turn them into Markdown, text, JSON and SVG charts. Used by the
lessons ``why-gpus.md``, ``timing.md`` and ``roofline.md`` and by ``gpulesson bench``.

>>> result = MatmulResult("cpu", "fp32", 1000, 2, (0.010, 0.012, 0.011))
>>> result.flops, result.median_s, round(result.flop_per_s / 1e9)
(2000000000, 0.011, 182)
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils import benchmark

from gpulesson import charts
from gpulesson.units import GB, MIB

# A timing whose IQR is more than this share of its median is flagged: the
# machine was busy or the operation is too short to time well. Same threshold
# as torch.utils.benchmark's Measurement uses for its own warning.
SPREAD_WARNING_IQR_SHARE = 0.10

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
    blocks until ``min_run_time_s`` has passed; each block is one sample.
    """
    for _ in range(warmup):
        fn()
    barrier(device)
    timer = benchmark.Timer(
        stmt="fn()", globals={"fn": fn}, timer=barrier_clock(device), num_threads=threads
    )
    measurement = timer.blocked_autorange(min_run_time=min_run_time_s)
    return tuple(float(t) for t in measurement.times), int(measurement.number_per_run)


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
    >>> r.n, r.flops, r.repeats > 1, r.flop_per_s > 0
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


# --- transfers and memory traffic --------------------------------------------------


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


def measure_op(
    name: str,
    fn: Callable[[], Any],
    device: str,
    dtype: str,
    flops: int,
    bytes_moved: int,
    min_run_time_s: float = 0.1,
) -> OpResult:
    """Time any operation honestly and keep its FLOP and byte counts beside it."""
    threads = torch.get_num_threads()
    samples, calls = time_samples(fn, device, threads, min_run_time_s)
    return OpResult(name, device, dtype, threads, samples, flops, bytes_moved, calls)


def measure_bandwidth(
    device: str = "cpu", n_bytes: int = 64 * MIB, dtype: str = "fp32", min_run_time_s: float = 0.1
) -> OpResult:
    """Copy one large tensor into another: read n_bytes, write n_bytes.

    >>> op = measure_bandwidth(n_bytes=4 * MIB, min_run_time_s=0.01)
    >>> op.bytes_moved == 8 * MIB, op.flops
    (True, 0)
    """
    torch_dtype = _TORCH_DTYPES[dtype]
    count = n_bytes // torch.empty((), dtype=torch_dtype).element_size()
    src = torch.randn(count, device=device).to(torch_dtype)
    dst = torch.empty_like(src)
    moved = 2 * src.numel() * src.element_size()
    return measure_op("copy", lambda: dst.copy_(src), device, dtype, 0, moved, min_run_time_s)


def measure_add(
    device: str = "cpu", n_bytes: int = 64 * MIB, dtype: str = "fp32", min_run_time_s: float = 0.1
) -> OpResult:
    """Elementwise add, c = a + b: one FLOP per element, three tensors of traffic."""
    torch_dtype = _TORCH_DTYPES[dtype]
    count = n_bytes // torch.empty((), dtype=torch_dtype).element_size()
    a = torch.randn(count, device=device).to(torch_dtype)
    b = torch.randn(count, device=device).to(torch_dtype)
    out = torch.empty_like(a)
    moved = 3 * a.numel() * a.element_size()
    return measure_op(
        f"elementwise add ({dtype})",
        lambda: torch.add(a, b, out=out),
        device,
        dtype,
        a.numel(),
        moved,
        min_run_time_s,
    )


SOFTMAX_FLOP_PER_ELEMENT = 5  # max, subtract, exp, sum, divide: a count, not a measurement


def measure_softmax(
    device: str = "cpu", n_bytes: int = 64 * MIB, dtype: str = "fp32", min_run_time_s: float = 0.1
) -> OpResult:
    """Row softmax over a (rows, 1024) tensor; FLOPs counted as 5 per element."""
    torch_dtype = _TORCH_DTYPES[dtype]
    count = n_bytes // torch.empty((), dtype=torch_dtype).element_size()
    x = torch.randn(count // 1024, 1024, device=device).to(torch_dtype)
    out = torch.empty_like(x)
    moved = 2 * x.numel() * x.element_size()
    return measure_op(
        "softmax (rows of 1024)",
        lambda: torch.softmax(x, -1, out=out),
        device,
        dtype,
        SOFTMAX_FLOP_PER_ELEMENT * x.numel(),
        moved,
        min_run_time_s,
    )


def measure_matmul_op(
    n: int, device: str = "cpu", dtype: str = "fp32", min_run_time_s: float = 0.1
) -> OpResult:
    """An n x n matmul as a roofline point: 2n^3 FLOPs over 3n^2 elements of traffic."""
    result = measure_matmul(n, device, dtype, min_run_time_s=min_run_time_s)
    itemsize = torch.empty((), dtype=_TORCH_DTYPES[dtype]).element_size()
    return OpResult(
        f"matmul n={n}",
        device,
        dtype,
        result.threads,
        result.samples_s,
        result.flops,
        3 * n * n * itemsize,
        result.calls_per_sample,
    )


# An op reaching less than this share of its roofline ceiling is called
# overhead-bound: neither bandwidth nor arithmetic is what holds it back.
OVERHEAD_SHARE = 0.25


@dataclass(frozen=True)
class Roofline:
    """Measured bandwidth and matmul peak on one device, with operations placed under them."""

    device: str
    bandwidth: OpResult
    peak: OpResult
    ops: tuple[OpResult, ...]

    @property
    def peak_flop_per_s(self) -> float:
        return self.peak.flop_per_s

    @property
    def bandwidth_bytes_per_s(self) -> float:
        return self.bandwidth.bytes_per_s

    @property
    def ridge_flop_per_byte(self) -> float:
        """The intensity above which the matmul peak, not bandwidth, is the ceiling."""
        return self.peak_flop_per_s / self.bandwidth_bytes_per_s

    def ceiling_flop_per_s(self, intensity_flop_per_byte: float) -> float:
        """The roofline: min(peak, bandwidth x intensity)."""
        return min(self.peak_flop_per_s, self.bandwidth_bytes_per_s * intensity_flop_per_byte)

    def bound(self, op: OpResult) -> str:
        """Which roof is above the op; 'overhead-bound' when it is far below either.

        Left of the ridge the bandwidth roof limits an op, right of it the peak
        does. An op under ``OVERHEAD_SHARE`` of its ceiling is held back by
        something the roofline does not model: per-call overhead, for small ops.
        """
        ceiling = self.ceiling_flop_per_s(op.intensity_flop_per_byte)
        if op.flop_per_s < OVERHEAD_SHARE * ceiling:
            return "overhead-bound (far below its roof)"
        if op.intensity_flop_per_byte < self.ridge_flop_per_byte:
            return "memory-bound"
        return "compute-bound"


def measure_roofline(device: str = "cpu", plan: DevicePlan | None = None) -> Roofline:
    """Measure bandwidth, the matmul peak and four operations on one device."""
    plan = plan or plan_for(device)
    run = plan.min_run_time_s
    bandwidth = measure_bandwidth(device, plan.stream_bytes, min_run_time_s=run)
    large = measure_matmul_op(plan.large_matmul_n, device, min_run_time_s=run)
    ops = (
        measure_add(device, plan.stream_bytes, min_run_time_s=run),
        measure_softmax(device, plan.stream_bytes, min_run_time_s=run),
        measure_matmul_op(plan.small_matmul_n, device, min_run_time_s=run),
        large,
    )
    return Roofline(device, bandwidth, large, ops)


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


# --- teaching estimates (labelled as such wherever they are shown) -----------------


@dataclass(frozen=True)
class TeachingTiming:
    """The source lesson's example timings for one 5000 x 5000 fp32 matmul.

    They are chosen to be checkable by hand, not measured on any machine.

    >>> t = TeachingTiming()
    >>> round(t.naive_speedup), round(t.honest_speedup, 1), round(t.illusion)
    (1000, 24.4, 41)
    """

    cpu_s: float = 5.0
    kernel_s: float = 0.20
    launch_s: float = 0.005
    n: int = 5000

    @property
    def gpu_honest_s(self) -> float:
        """With the closing barrier the clock sees the launch and the kernel."""
        return self.kernel_s + self.launch_s

    @property
    def gpu_naive_s(self) -> float:
        """Without it, the clock stops once the launch returns."""
        return self.launch_s

    @property
    def naive_speedup(self) -> float:
        return self.cpu_s / self.gpu_naive_s

    @property
    def honest_speedup(self) -> float:
        return self.cpu_s / self.gpu_honest_s

    @property
    def illusion(self) -> float:
        return self.naive_speedup / self.honest_speedup


@dataclass(frozen=True)
class LaneEstimate:
    """The source's crude parallel-width comparison: lanes x clock, CPU vs GPU.

    >>> e = LaneEstimate()
    >>> e.cpu_lane_cycles_per_s, e.gpu_lane_cycles_per_s, round(e.ratio)
    (32000000000.0, 4096000000000.0, 128)
    """

    cpu_cores: int = 8
    cpu_hz: float = 4e9
    gpu_lanes: int = 2560
    gpu_hz: float = 1.6e9

    @property
    def cpu_lane_cycles_per_s(self) -> float:
        return self.cpu_cores * self.cpu_hz

    @property
    def gpu_lane_cycles_per_s(self) -> float:
        return self.gpu_lanes * self.gpu_hz

    @property
    def ratio(self) -> float:
        return self.gpu_lane_cycles_per_s / self.cpu_lane_cycles_per_s


# --- rendering ------------------------------------------------------------------------


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g}"


def _gflops(flop_per_s: float) -> str:
    return f"{flop_per_s / 1e9:,.1f}"


def _sci(value: float) -> str:
    """Scientific notation for prose.

    >>> _sci(2.5e11)
    '2.5 x 10^11'
    """
    exponent = math.floor(math.log10(abs(value)))
    mantissa = value / 10**exponent
    return f"{mantissa:.3g} x 10^{exponent}"


def result_dict(result: MatmulResult) -> dict[str, Any]:
    """One measurement as plain data: every field the JSON output promises."""
    return {
        "device": result.device,
        "dtype": result.dtype,
        "n": result.n,
        "threads": result.threads,
        "median_s": result.median_s,
        "iqr_s": result.iqr_s,
        "min_s": result.min_s,
        "max_s": result.max_s,
        "repeats": result.repeats,
        "calls_per_sample": result.calls_per_sample,
        "closing_barrier": result.closing_barrier,
        "flops": result.flops,
        "flop_per_s": result.flop_per_s,
        "spread_warning": result.spread_warning,
        "samples_s": list(result.samples_s),
    }


COMPARE_HINT = (
    "To compare with the published GPU figures, open the course page 'Why GPUs win at "
    "training' (lessons/why-gpus/): its sweep table was measured on the CUDA GPU named in "
    "the page's stamp and its build-record.json. Compare rows with the same n and dtype, "
    "and the GFLOP/s column rather than raw times."
)


def to_json(results: Sequence[MatmulResult], device: str, dtype: str) -> str:
    """All measurements as one JSON object."""
    return json.dumps(
        {
            "device": device,
            "dtype": dtype,
            "barrier": barrier_name(device),
            "spread_warning_iqr_share": SPREAD_WARNING_IQR_SHARE,
            "measurements": [result_dict(r) for r in results],
            "how_to_compare": COMPARE_HINT,
        },
        indent=2,
    )


_TABLE_HEADER = (
    "n",
    "median (ms)",
    "IQR (ms)",
    "min (ms)",
    "max (ms)",
    "repeats",
    "FLOPs",
    "GFLOP/s",
)


def _table_row(r: MatmulResult) -> tuple[str, ...]:
    return (
        str(r.n),
        _ms(r.median_s),
        _ms(r.iqr_s),
        _ms(r.min_s),
        _ms(r.max_s),
        str(r.repeats),
        f"{r.flops:.3g}",
        _gflops(r.flop_per_s),
    )


def to_markdown(results: Sequence[MatmulResult]) -> str:
    """Matmul results as a Markdown table, with any spread warnings below it."""
    lines = ["| " + " | ".join(_TABLE_HEADER) + " |", "|" + "---:|" * len(_TABLE_HEADER)]
    lines += ["| " + " | ".join(_table_row(r)) + " |" for r in results]
    lines += _warnings(results)
    return "\n".join(lines)


def _label(r: _Spread) -> str:
    if isinstance(r, MatmulResult):
        return f"{r.device} n={r.n}"
    if isinstance(r, OpResult):
        return f"{r.device} {r.name}"
    return "timing"


def _warnings(results: Sequence[_Spread]) -> list[str]:
    """Spread warnings as one Markdown admonition (empty when every spread is small)."""
    found = [f"    - {_label(r)}: {r.spread_warning}." for r in results if r.spread_warning]
    if not found:
        return []
    return ["", '!!! warning "Spread warning"', *found]


def to_text(results: Sequence[MatmulResult]) -> str:
    """Matmul results as an aligned plain-text table for the terminal."""
    if not results:
        return "no measurements"
    first = results[0]
    rows = [_TABLE_HEADER] + [_table_row(r) for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_TABLE_HEADER))]
    lines = [
        f"device {first.device}, dtype {first.dtype}, {first.threads} threads, "
        f"barrier: {barrier_name(first.device)}",
        "",
    ]
    lines += ["  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    lines += [f"warning, {_label(r)}: {r.spread_warning}" for r in results if r.spread_warning]
    lines += ["", COMPARE_HINT]
    return "\n".join(lines)


def comparison_markdown(comparison: SweepComparison) -> str:
    """The CPU-vs-GPU sweep as one table, with copy times and the crossover."""
    gpu_name = comparison.gpu_device or "GPU"
    gpu = {r.n: r for r in comparison.gpu}
    pageable = {r.n: o for r, o in zip(comparison.gpu, comparison.pageable, strict=False)}
    pinned = {r.n: o for r, o in zip(comparison.gpu, comparison.pinned, strict=False)}
    sizes = sorted({r.n for r in comparison.cpu} | set(gpu))
    cpu = {r.n: r for r in comparison.cpu}
    if comparison.gpu_device is None:
        lines = ["| n | CPU median (ms) | CPU GFLOP/s | GPU |", "|---:|---:|---:|---|"]
        for r in comparison.cpu:
            lines.append(
                f"| {r.n} | {_ms(r.median_s)} | {_gflops(r.flop_per_s)} | {NO_CUDA_TEXT} |"
            )
    else:
        lines = [
            "| n | CPU median (ms) | CPU GFLOP/s | "
            f"{gpu_name} median (ms) | {gpu_name} GFLOP/s | {gpu_name}/CPU speedup | "
            "copy A, B to GPU, pageable (ms) | pinned (ms) |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
    for n in sizes if comparison.gpu_device else ():
        c, g = cpu.get(n), gpu.get(n)
        speedup = comparison.speedup(n)
        cells = [
            str(n),
            _ms(c.median_s) if c else "over the CPU budget",
            _gflops(c.flop_per_s) if c else "over the CPU budget",
            _ms(g.median_s) if g else "over the GPU budget",
            _gflops(g.flop_per_s) if g else "over the GPU budget",
            f"{speedup:.2f}x" if speedup is not None else "needs both",
            _ms(pageable[n].median_s) if n in pageable else "not measured",
            _ms(pinned[n].median_s)
            if n in pinned
            else ("needs CUDA" if comparison.gpu_device == "mps" else "not measured"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    if comparison.gpu_device is None:
        lines.append(
            f"GPU column: {NO_CUDA_TEXT} (and no Apple GPU), so no GPU time, speedup, copy "
            "time or crossover was measured here. The CPU columns are this build's CPU."
        )
    elif comparison.crossover_n is None:
        lines.append(f"The {gpu_name} did not beat the CPU at any size measured together.")
    else:
        lines.append(
            f"The {gpu_name} is faster than the CPU from n = {comparison.crossover_n} on, at "
            "every size measured on both."
        )
    bound = comparison.transfer_bound_up_to_n
    if comparison.pageable and bound is not None:
        lines.append(
            f" Up to n = {bound}, copying the two operands to the {gpu_name} (pageable) takes "
            "longer than multiplying them there: a job that copies its operands for every "
            "multiply at those sizes is transfer-bound."
        )
    elif comparison.pageable:
        lines.append(
            f" At every size measured, the pageable copy of the operands to the {gpu_name} "
            "took less time than the multiply."
        )
    lines += _warnings(list(comparison.cpu) + list(comparison.gpu))
    return "\n".join(lines)


def sweep_chart(comparison: SweepComparison) -> str:
    """Achieved GFLOP/s against n for the CPU and the GPU, as inline SVG."""
    series = [charts.Series("CPU", tuple((float(r.n), r.flop_per_s / 1e9) for r in comparison.cpu))]
    if comparison.gpu:
        series.append(
            charts.Series(
                comparison.gpu_device or "GPU",
                tuple((float(r.n), r.flop_per_s / 1e9) for r in comparison.gpu),
            )
        )
    note = "" if comparison.gpu else f" ({NO_CUDA_TEXT})"
    return charts.line_chart(
        series,
        x_label="matrix size n (log scale)",
        y_label="achieved GFLOP/s (log scale)",
        title=f"Matmul throughput by size{note}",
    )


def illusion_markdown(result: IllusionResult) -> str:
    """Honest against naive timing of one matmul, with the CPU baseline."""
    h, v = result.honest, result.naive
    rows = [
        ("honest: barrier at start and stop", h),
        ("naive: no barrier before stopping", v),
    ]
    lines = [
        f"| {h.device}, n = {h.n}, {h.dtype} | median (ms) | IQR (ms) | repeats | GFLOP/s |",
        "|---|---:|---:|---:|---:|",
    ]
    for label, r in rows:
        lines.append(
            f"| {label} | {_ms(r.median_s)} | {_ms(r.iqr_s)} | {r.repeats} | "
            f"{_gflops(r.flop_per_s)} |"
        )
    lines.append("")
    lines.append(
        f"Honest / naive = {_ms(h.median_s)} ms / {_ms(v.median_s)} ms = "
        f"**{result.inflation:.2f}**."
    )
    if h.device == "cpu":
        lines.append(
            " On a CPU the ratio is about 1: a CPU matmul has finished when the call returns, "
            f"so there is nothing left for a barrier to wait for ({NO_CUDA_TEXT})."
        )
    else:
        lines.append(
            f" The naive stopwatch makes the {h.device} look {result.inflation:.0f}x faster than "
            f"it is. Against the CPU ({_ms(result.cpu.median_s)} ms), the honest speedup is "
            f"{result.honest_speedup:.1f}x and the naive one {result.naive_speedup:.0f}x."
        )
    lines += _warnings([h, v])
    return "\n".join(lines)


def teaching_timing_markdown(t: TeachingTiming | None = None) -> str:
    """The source's teaching figures and the arithmetic that turns them into ratios."""
    t = t or TeachingTiming()
    return "\n".join(
        [
            f"Teaching estimate (not a measurement), one {t.n} x {t.n} fp32 matmul: "
            f"CPU {t.cpu_s} s, GPU kernel {t.kernel_s} s, launch {t.launch_s * 1e3:g} ms.",
            "",
            "| | arithmetic | result |",
            "|---|---|---:|",
            f"| GPU time, honest | kernel + launch = {t.kernel_s} + {t.launch_s} s "
            f"| {t.gpu_honest_s:.3f} s |",
            f"| GPU time, naive | launch only | {t.gpu_naive_s:.3f} s |",
            f"| speedup, honest | {t.cpu_s} / {t.gpu_honest_s:.3f} | {t.honest_speedup:.1f}x |",
            f"| speedup, naive | {t.cpu_s} / {t.gpu_naive_s:.3f} | {t.naive_speedup:,.0f}x |",
            f"| illusion | {t.naive_speedup:,.0f} / {t.honest_speedup:.1f} | {t.illusion:.0f}x |",
            f"| a 10-hour CPU job, honest | 600 min / {t.honest_speedup:.1f} | "
            f"{600 / t.honest_speedup:.1f} min |",
            f"| the same job, naive | 36,000 s / {t.naive_speedup:,.0f} | "
            f"{36000 / t.naive_speedup:.0f} s |",
        ]
    )


def flops_markdown(sizes: Sequence[int] = (4000, 5000, 10000)) -> str:
    """2n^3 for a few sizes, with the ratio to the first."""
    base = matmul_flops(sizes[0])
    lines = ["| n | 2n^3 FLOPs | relative to n = " + str(sizes[0]) + " |", "|---:|---:|---:|"]
    for n in sizes:
        lines.append(f"| {n:,} | {_sci(matmul_flops(n))} | {matmul_flops(n) / base:.3f}x |")
    return "\n".join(lines)


def lane_estimate_markdown(e: LaneEstimate | None = None) -> str:
    """The lane-width teaching estimate with its arithmetic."""
    e = e or LaneEstimate()
    return "\n".join(
        [
            "| | arithmetic | lane-cycles per second |",
            "|---|---|---:|",
            f"| CPU (example) | {e.cpu_cores} cores x {e.cpu_hz / 1e9:g} GHz | "
            f"{_sci(e.cpu_lane_cycles_per_s)} |",
            f"| GPU (example) | {e.gpu_lanes:,} lanes x {e.gpu_hz / 1e9:g} GHz | "
            f"{_sci(e.gpu_lane_cycles_per_s)} |",
            f"| ratio | {_sci(e.gpu_lane_cycles_per_s)} / {_sci(e.cpu_lane_cycles_per_s)} | "
            f"{e.ratio:.0f}x |",
        ]
    )


def roofline_markdown(roof: Roofline) -> str:
    """Bandwidth, peak, ridge, and each operation's place under the roof."""
    gbps = roof.bandwidth_bytes_per_s / GB
    lines = [
        "| quantity | measured on " + roof.device + " | how |",
        "|---|---:|---|",
        f"| memory bandwidth | {gbps:,.1f} GB/s | copy of "
        f"{roof.bandwidth.bytes_moved // 2 // MIB} MiB: bytes read + written / median time |",
        f"| matmul peak | {_gflops(roof.peak_flop_per_s)} GFLOP/s | "
        f"{roof.peak.name}, fp32: 2n^3 / median time |",
        f"| ridge point | {roof.ridge_flop_per_byte:,.1f} FLOP/byte | peak / bandwidth |",
        "",
        "| operation | FLOP/byte | achieved GFLOP/s | ceiling at that intensity (GFLOP/s) "
        "| share of ceiling | regime |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for op in roof.ops:
        ceiling = roof.ceiling_flop_per_s(op.intensity_flop_per_byte)
        lines.append(
            f"| {op.name} | {op.intensity_flop_per_byte:.3g} | {_gflops(op.flop_per_s)} | "
            f"{_gflops(ceiling)} | {op.flop_per_s / ceiling:.0%} | {roof.bound(op)} |"
        )
    lines += _warnings([roof.bandwidth, *roof.ops])
    return "\n".join(lines)


def roofline_chart(roof: Roofline) -> str:
    """The measured roofline with the operations placed on it, as inline SVG."""
    return charts.roofline_chart(
        peak_flop_per_s=roof.peak_flop_per_s,
        bandwidth_bytes_per_s=roof.bandwidth_bytes_per_s,
        points=tuple(
            charts.Point(op.name, op.intensity_flop_per_byte, op.flop_per_s) for op in roof.ops
        ),
        title=f"Roofline measured on {roof.device}",
    )


@dataclass(frozen=True)
class PrecisionTraffic:
    """The same elementwise add in fp32 and bf16: half the bytes, about half the time?"""

    fp32: OpResult
    bf16: OpResult

    @property
    def speedup(self) -> float:
        return self.fp32.median_s / self.bf16.median_s


def measure_precision_traffic(device: str = "cpu", n_elements: int = 8 * 2**20) -> PrecisionTraffic:
    """Time c = a + b on the same element count in fp32 and in bf16."""
    run = plan_for(device).min_run_time_s
    return PrecisionTraffic(
        measure_add(device, n_elements * 4, "fp32", run),
        measure_add(device, n_elements * 2, "bf16", run),
    )


def precision_markdown(p: PrecisionTraffic) -> str:
    """The fp32-vs-bf16 add as a small table."""
    lines = [
        f"| c = a + b, {p.fp32.flops:,} elements on {p.fp32.device} | bytes moved (MiB) "
        "| median (ms) | GB/s |",
        "|---|---:|---:|---:|",
    ]
    for op in (p.fp32, p.bf16):
        lines.append(
            f"| {op.dtype} | {op.bytes_moved / MIB:,.0f} | {_ms(op.median_s)} | "
            f"{op.bytes_per_s / GB:,.1f} |"
        )
    lines += ["", f"bf16 moves half the bytes and runs {p.speedup:.2f}x as fast here."]
    lines += _warnings([p.fp32, p.bf16])
    return "\n".join(lines)


@dataclass(frozen=True)
class LinkBandwidth:
    """Host-to-device copy rates beside the on-device copy rate (GPU builds only)."""

    device: str
    pageable: OpResult
    pinned: OpResult | None
    on_device: OpResult


def measure_link(device: str, n: int = 4096) -> LinkBandwidth:
    """Copy two n x n fp32 operands host-to-device (pageable, pinned) and on the device."""
    if device == "cpu":
        raise ValueError("a host-to-device link needs a GPU: use cuda or mps")
    run = plan_for(device).min_run_time_s
    pageable = measure_transfer(n, device, "fp32", False, run)
    pinned = measure_transfer(n, device, "fp32", True, run) if device == "cuda" else None
    on_device = measure_bandwidth(device, plan_for(device).stream_bytes, min_run_time_s=run)
    return LinkBandwidth(device, pageable, pinned, on_device)


# The source lesson's ranges, shown only as quoted ranges, never as this build's figures.
SOURCE_PCIE_GB_PER_S = (10, 60)
SOURCE_ON_DEVICE_TB_PER_S = (1, 3)


def link_markdown(link: LinkBandwidth | None) -> str:
    """The link table, or a plain statement that no GPU was present, with the source's ranges."""
    quoted = (
        f"The source lesson's ranges (quoted, not measured here): PCIe about "
        f"{SOURCE_PCIE_GB_PER_S[0]}-{SOURCE_PCIE_GB_PER_S[1]} GB/s, on-device memory about "
        f"{SOURCE_ON_DEVICE_TB_PER_S[0]}-{SOURCE_ON_DEVICE_TB_PER_S[1]} TB/s."
    )
    if link is None:
        return (
            f"Host-to-device copies: {NO_CUDA_TEXT}, so there is no PCIe link to measure; "
            f"this build's on-device figure is the CPU's memory bandwidth above. {quoted}"
        )
    rows = [("host to device, pageable", link.pageable)]
    if link.pinned is not None:
        rows.append(("host to device, pinned", link.pinned))
    rows.append((f"on {link.device}, device to device", link.on_device))
    lines = ["| copy | bytes moved (MiB) | median (ms) | GB/s |", "|---|---:|---:|---:|"]
    for label, op in rows:
        lines.append(
            f"| {label} | {op.bytes_moved / MIB:,.0f} | {_ms(op.median_s)} | "
            f"{op.bytes_per_s / GB:,.1f} |"
        )
    ratio = link.on_device.bytes_per_s / (link.pinned or link.pageable).bytes_per_s
    lines += ["", f"On-device copies run {ratio:.0f}x faster than the host link here. {quoted}"]
    lines += _warnings([op for _, op in rows])
    return "\n".join(lines)
