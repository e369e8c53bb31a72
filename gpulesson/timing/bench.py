"""Honest timing of matmuls on CUDA, MPS and CPU: the timing core of the course.

Timing discipline, in the order the code applies it:

1. warm-up calls, so library initialisation and kernel selection are not timed;
2. a barrier (``torch.cuda.synchronize()`` on NVIDIA, ``torch.mps.synchronize()``
   on Apple, nothing on a CPU, whose operations finish before they return) right
   before the clock starts and right before it stops;
3. nothing in the timed region but the operation (operands and outputs are
   allocated beforehand, once ``gpulesson.timing.inputs`` has checked they fit);
4. many samples from ``torch.utils.benchmark.Timer.blocked_autorange``, at a set
   thread count, summarised by median and spread (IQR, min, max).

The one hand-made loop is ``measure_matmul_naive``: it leaves out the closing
barrier on purpose, to measure the "async illusion" (a single call, then the
queue is drained outside the timed region; a library timer would hide the bug).

Results are the frozen dataclasses of ``gpulesson.timing.results``, which keep their
raw samples; ``gpulesson.timing.render`` turns them into Markdown, text, JSON and SVG
charts, ``gpulesson.timing.roofline`` and ``gpulesson.timing.launch`` build on this
module's timer. Used by the lessons ``why-gpus.md`` (the CPU-vs-GPU sweep:
``compare_devices`` -> ``SweepComparison`` -> ``render.comparison_markdown``) and
``timing.md`` (the async illusion) and by ``gpulesson bench``.

>>> r = measure_matmul(32, min_run_time_s=0.01)
>>> r.n, r.flops, r.repeats >= MIN_SAMPLES
(32, 65536, True)
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import torch

from gpulesson.timing import plans
from gpulesson.timing.inputs import (
    DEVICES,
    check_dtype,
    check_fits,
    check_sizes,
    check_threads,
    host_available_bytes,
    largest_fitting_n,
)
from gpulesson.timing.results import IllusionResult, MatmulResult, OpResult, SweepComparison

MIN_SAMPLES = 5  # fewest timed blocks behind a median and its spread

# The torch dtype behind each dtype name of ``gpulesson.timing.inputs.DTYPES``.
TORCH_DTYPES = {
    "fp32": torch.float32,
    "tf32": torch.float32,  # fp32 storage, TF32 tensor-core arithmetic (CUDA only)
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
}

# torch.utils.benchmark imports torch.utils.cpp_extension, which on a CUDA build of
# torch without a GPU logs "No CUDA runtime is found, using CUDA_HOME=..." through
# this logger (logger.warning in cpp_extension._find_cuda_home, run at import). It is
# about compiling C++ extensions, which nothing here does; keep it off stderr.
_IMPORT_CHATTER_LOGGER = "torch.utils.cpp_extension"


def import_benchmark() -> ModuleType:
    """``torch.utils.benchmark``, imported with torch's import-time warnings kept quiet.

    >>> import_benchmark().Timer.__name__
    'Timer'
    """
    logger = logging.getLogger(_IMPORT_CHATTER_LOGGER)
    before = logger.level
    logger.setLevel(logging.ERROR)
    try:
        from torch.utils import benchmark
    finally:
        logger.setLevel(before)
    return benchmark


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


def barrier(device: str) -> None:
    """Wait until every queued operation on ``device`` has finished.

    CUDA and MPS queue work and return at once; a CPU operation has finished
    when it returns, so the CPU needs no barrier.
    """
    if device == "cuda":
        torch.cuda.synchronize()
    elif device == "mps":
        torch.mps.synchronize()


def call_seconds(fn: Callable[[], Any], device: str) -> float:
    """One call of ``fn``, timed: this thread's CPU time on a CPU, so the time slices a busy
    machine gives to other processes drop out; the wall clock between barriers on a GPU.

    >>> call_seconds(lambda: sum(range(10_000)), "cpu") > 0
    True
    """
    if device == "cpu":
        start = time.thread_time()
        fn()
        return time.thread_time() - start
    barrier(device)
    start = time.perf_counter()
    fn()
    barrier(device)
    return time.perf_counter() - start


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


def resolve_threads(threads: int | None) -> int:
    """The thread count to time with: torch's current setting, or a checked given count.

    >>> resolve_threads(1)
    1
    """
    if threads is None:
        return torch.get_num_threads()
    return check_threads(threads)


def _warm_timer(fn: Callable[[], Any], device: str, threads: int, warmup: int) -> Any:
    """``fn`` called ``warmup`` times, the device drained, and a ``Timer`` of it ready."""
    for _ in range(warmup):
        fn()
    barrier(device)
    return import_benchmark().Timer(
        stmt="fn()", globals={"fn": fn}, timer=barrier_clock(device), num_threads=threads
    )


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
    timer = _warm_timer(fn, device, threads, warmup)
    measurement = timer.blocked_autorange(min_run_time=min_run_time_s)
    number = int(measurement.number_per_run)
    times = [float(t) for t in measurement.times]
    while len(times) < MIN_SAMPLES:
        times.append(float(timer.timeit(number).times[0]))
    return tuple(times), number


def time_in_turns(
    fns: Sequence[Callable[[], Any]],
    device: str,
    threads: int,
    min_run_time_s: float = 0.2,
    warmup: int = 2,
) -> list[tuple[tuple[float, ...], int]]:
    """Time several functions in turns, one block of each per turn; for each, as
    :func:`time_samples` gives it: (seconds per call, calls per sample).

    Timed one after the other, two functions can see different machines: a burst of other
    work during one of them moves their ratio several-fold. In turns, each turn times every
    function within a few milliseconds, so a burst slows them alike and the medians keep
    their ratio. Each function's block size is picked once (``blocked_autorange`` over a
    tenth of the time), then turns run until ``min_run_time_s`` per function has passed and
    each has at least ``MIN_SAMPLES`` blocks.

    >>> (fast, n_fast), (slow, n_slow) = time_in_turns(
    ...     [lambda: None, lambda: sum(range(2000))], "cpu", 1, min_run_time_s=0.01)
    >>> len(fast) == len(slow) >= MIN_SAMPLES and n_fast >= n_slow
    True
    """
    timers, numbers, samples = [], [], []
    for fn in fns:
        timer = _warm_timer(fn, device, threads, warmup)
        first = timer.blocked_autorange(min_run_time=min_run_time_s / 10)
        timers.append(timer)
        numbers.append(int(first.number_per_run))
        samples.append([float(first.times[0])])
    spent = [0.0] * len(fns)
    while min(spent) < min_run_time_s or min(len(s) for s in samples) < MIN_SAMPLES:
        for i, (timer, number) in enumerate(zip(timers, numbers, strict=True)):
            per_call = float(timer.timeit(number).times[0])
            samples[i].append(per_call)
            spent[i] += per_call * number
    return [(tuple(s), n) for s, n in zip(samples, numbers, strict=True)]


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


# --- memory -------------------------------------------------------------------------


def available_bytes(device: str) -> tuple[int, str]:
    """Memory free for new tensors on ``device`` now, and its name for messages.

    CUDA asks the driver (``torch.cuda.mem_get_info``); Apple GPUs share the
    host's memory, so MPS and the CPU ask the OS (psutil's available memory).

    >>> free, where = available_bytes("cpu")
    >>> free > 0, where
    (True, 'host memory')
    """
    if device == "cuda":
        free, _total = torch.cuda.mem_get_info()
        return int(free), "memory on the CUDA device"
    if device == "mps":
        return host_available_bytes(), "memory (MPS shares the host's memory)"
    return host_available_bytes(), "host memory"


def check_memory(sizes: Sequence[int], dtype: str, device: str) -> tuple[int, ...]:
    """Refuse, before allocating anything, sizes whose operands do not fit on ``device``.

    >>> check_memory([64], "fp32", "cpu")
    (64,)
    """
    available, where = available_bytes(device)
    return tuple(check_fits(n, dtype, available, where) for n in sizes)


# --- matmuls ------------------------------------------------------------------------


def _operands(n: int, dtype: str, device: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    torch_dtype = TORCH_DTYPES[dtype]
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
    threads = resolve_threads(threads)
    check_memory([n], dtype, device)
    a, b, out = _operands(n, dtype, device)
    with matmul_precision(dtype):
        samples, calls = time_samples(
            lambda: torch.matmul(a, b, out=out), device, threads, min_run_time_s, warmup
        )
    return MatmulResult(
        device=device,
        dtype=dtype,
        n=n,
        threads=threads,
        samples_s=samples,
        calls_per_sample=calls,
    )


def measure_matmul_naive(
    n: int, device: str = "cpu", dtype: str = "fp32", repeats: int = 10, warmup: int = 2
) -> MatmulResult:
    """Time the same matmul without the closing barrier: what a naive stopwatch sees."""
    check_sizes([n])
    check_dtype(dtype, device)
    check_memory([n], dtype, device)
    a, b, out = _operands(n, dtype, device)
    with matmul_precision(dtype):
        samples = naive_samples(lambda: torch.matmul(a, b, out=out), device, repeats, warmup)
    return MatmulResult(
        device=device,
        dtype=dtype,
        n=n,
        threads=torch.get_num_threads(),
        samples_s=samples,
        calls_per_sample=1,
        closing_barrier=False,
    )


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
    return IllusionResult(honest=honest, naive=naive, cpu=cpu)


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
    at least three samples, plus ``min_run_time_s``) would pass the budget, or
    when its operands would not fit in the memory available. Given ``sizes``
    are all checked against the memory before the first is timed.
    ``on_result(result, elapsed_s)`` is called after each size (for progress).

    >>> [r.n for r in sweep(budget_s=10.0, start_n=16, max_n=64, min_run_time_s=0.01)]
    [16, 32, 64]
    """
    if budget_s <= 0:
        raise ValueError(f"time budget {budget_s} s must be positive")
    given = check_sizes(list(sizes)) if sizes is not None else None
    check_dtype(dtype, device)
    if given is not None:
        check_memory(given, dtype, device)
    else:
        max_n = min(max_n, largest_fitting_n(available_bytes(device)[0], dtype))
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
    torch_dtype = TORCH_DTYPES[dtype]
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
    return OpResult(
        name="host-to-device copy, " + ("pinned" if pinned else "pageable"),
        device=device,
        dtype=dtype,
        threads=threads,
        samples_s=samples,
        flops=0,
        bytes_moved=2 * a.numel() * a.element_size(),
        calls_per_sample=calls,
    )


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


# The sizes per device kind live in one table with the other timed measurements' sizes
# (gpulesson/timing/plans.py, which says why they are what they are).
PLANS: dict[str, DevicePlan] = {
    device: DevicePlan(**plans.sizes(device, "bench")) for device in plans.DEVICE_KINDS
}


def plan_for(device: str) -> DevicePlan:
    """The measurement plan for a device.

    >>> plan_for("cpu").illusion_n
    1024
    """
    return PLANS[device]


# --- CPU against GPU -------------------------------------------------------------


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
        return SweepComparison(cpu=cpu, gpu=(), gpu_device=None)
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
    return SweepComparison(
        cpu=cpu, gpu=gpu, gpu_device=gpu_device, pageable=pageable, pinned=pinned
    )
