"""Memory traffic and the roofline: bandwidth, matmul peak and where operations sit.

Every measurement here is timed by ``gpulesson.timing.bench`` (warm-up, barriers, median
of many samples) and keeps its FLOP and byte counts beside its time, so the
roofline's bandwidth roof, compute roof and ridge point all come from this build's
machine. The results (an ``OpResult`` per operation, the ``Roofline`` of them) live in
``gpulesson.timing.results``; :mod:`gpulesson.course.roofline` renders them. Used by the
lesson ``roofline.md``.

>>> op = measure_bandwidth(n_bytes=4 * MIB, min_run_time_s=0.01)
>>> op.name, op.bytes_moved == 8 * MIB
('copy', True)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from gpulesson.timing.bench import (
    TORCH_DTYPES,
    DevicePlan,
    measure_matmul,
    plan_for,
    time_samples,
)
from gpulesson.timing.results import OpResult, Roofline
from gpulesson.units import MIB


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
    return OpResult(
        name=name,
        device=device,
        dtype=dtype,
        threads=threads,
        samples_s=samples,
        flops=flops,
        bytes_moved=bytes_moved,
        calls_per_sample=calls,
    )


def measure_bandwidth(
    device: str = "cpu", n_bytes: int = 64 * MIB, dtype: str = "fp32", min_run_time_s: float = 0.1
) -> OpResult:
    """Copy one large tensor into another: read n_bytes, write n_bytes.

    >>> op = measure_bandwidth(n_bytes=4 * MIB, min_run_time_s=0.01)
    >>> op.bytes_moved == 8 * MIB, op.flops
    (True, 0)
    """
    torch_dtype = TORCH_DTYPES[dtype]
    count = n_bytes // torch.empty((), dtype=torch_dtype).element_size()
    src = torch.randn(count, device=device).to(torch_dtype)
    dst = torch.empty_like(src)
    moved = 2 * src.numel() * src.element_size()
    return measure_op("copy", lambda: dst.copy_(src), device, dtype, 0, moved, min_run_time_s)


def measure_add(
    device: str = "cpu", n_bytes: int = 64 * MIB, dtype: str = "fp32", min_run_time_s: float = 0.1
) -> OpResult:
    """Elementwise add, c = a + b: one FLOP per element, three tensors of traffic."""
    torch_dtype = TORCH_DTYPES[dtype]
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
    torch_dtype = TORCH_DTYPES[dtype]
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
    itemsize = torch.empty((), dtype=TORCH_DTYPES[dtype]).element_size()
    return OpResult(
        name=f"matmul n={n}",
        device=device,
        dtype=dtype,
        threads=result.threads,
        samples_s=result.samples_s,
        flops=result.flops,
        bytes_moved=3 * n * n * itemsize,
        calls_per_sample=result.calls_per_sample,
    )


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
    return Roofline(device=device, bandwidth=bandwidth, peak=large, ops=ops)
