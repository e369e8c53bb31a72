"""Checks on what a timing run is asked to do, before anything is allocated or torch imported.

Device and dtype names, matrix sizes, thread counts, and whether the operands of a
matmul fit in the memory available: each check raises ``ValueError`` with the bad
value and the fix, which the CLI turns into one line and exit status 2. Nothing here
imports torch, so ``gpulesson bench`` can refuse bad input without loading it.

>>> check_sizes([64, 128])
(64, 128)
>>> operand_bytes(1024, "fp32")
12582912
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

from gpulesson.units import GIB

DEVICES = ("cuda", "mps", "cpu")
DTYPES = ("fp32", "tf32", "bf16", "fp16")
MAX_N = 32768  # an fp32 operand at this size is already 4 GiB

# Bytes per element of each dtype name (tf32 is fp32 storage with TF32 arithmetic).
DTYPE_BYTES = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2}

# A matmul run holds three n x n tensors at once: a, b and the output.
OPERANDS_PER_MATMUL = 3

# Share of the reported free memory a run may plan to use: the allocator, the
# runtime and other processes need the rest, and the report can be a moment old.
USABLE_MEMORY_SHARE = 0.9


def check_sizes(sizes: Sequence[int]) -> tuple[int, ...]:
    """Check matrix sizes: whole numbers from 1 to ``MAX_N``.

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


def barrier_name(device: str) -> str:
    """The call ``gpulesson.timing.bench.barrier`` makes on a device, for tables and docs.

    >>> barrier_name("cpu")
    'none needed (CPU ops finish before returning)'
    """
    return {
        "cuda": "torch.cuda.synchronize()",
        "mps": "torch.mps.synchronize()",
    }.get(device, "none needed (CPU ops finish before returning)")


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the OS has one).

    >>> usable_cpus() >= 1
    True
    """
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def check_threads(threads: int, cpus: int | None = None) -> int:
    """Check a CPU thread count: from 1 to the CPUs this process may use.

    More threads than CPUs only makes them take turns, and a huge count overflows
    torch's C++ integer.

    >>> check_threads(2, cpus=4)
    2
    >>> check_threads(10**20, cpus=4)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: thread count 100000000000000000000 is out of range: ... from 1 to 4
    """
    cpus = usable_cpus() if cpus is None else cpus
    if not 1 <= threads <= cpus:
        raise ValueError(
            f"thread count {threads} is out of range: this machine lets this process use "
            f"{cpus} CPUs; use a whole number from 1 to {cpus}"
        )
    return threads


def operand_bytes(n: int, dtype: str) -> int:
    """Bytes of the three n x n tensors one matmul run holds (a, b and the output).

    >>> operand_bytes(32768, "fp32") / GIB
    12.0
    """
    return OPERANDS_PER_MATMUL * n * n * DTYPE_BYTES[dtype]


def largest_fitting_n(available_bytes: int, dtype: str) -> int:
    """The largest power of two whose operands fit in ``USABLE_MEMORY_SHARE`` of the memory.

    0 when not even a 1 x 1 matmul fits.

    >>> largest_fitting_n(16 * GIB, "fp32")  # 3 x 32768^2 x 4 B = 12 GiB <= 14.4 GiB
    32768
    """
    usable = available_bytes * USABLE_MEMORY_SHARE
    per_element = OPERANDS_PER_MATMUL * DTYPE_BYTES[dtype]
    if usable < per_element:
        return 0
    n = math.isqrt(int(usable // per_element))
    return 2 ** int(math.log2(n))


def check_fits(n: int, dtype: str, available_bytes: int, where: str) -> int:
    """Refuse a size whose three operands do not fit in the memory available ``where``.

    ``available_bytes`` is what the OS or the driver reports free now; a run may
    plan to use ``USABLE_MEMORY_SHARE`` of it.

    >>> check_fits(1024, "fp32", 8 * GIB, "host memory")
    1024
    >>> check_fits(32768, "fp32", 8 * GIB, "host memory")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: matrix size 32768 needs 12.0 GiB ... 7.2 GiB of host memory ... --sizes 16384
    """
    needed = operand_bytes(n, dtype)
    usable = available_bytes * USABLE_MEMORY_SHARE
    if needed <= usable:
        return n
    largest = largest_fitting_n(available_bytes, dtype)
    fix = f"use a smaller size, e.g. --sizes {largest}" if largest else "free some memory first"
    raise ValueError(
        f"matrix size {n} needs {needed / GIB:.1f} GiB for its three {dtype} tensors "
        f"({OPERANDS_PER_MATMUL} x {n}^2 x {DTYPE_BYTES[dtype]} B), but only "
        f"{usable / GIB:.1f} GiB of {where} is usable ({USABLE_MEMORY_SHARE:.0%} of "
        f"{available_bytes / GIB:.1f} GiB available): {fix}"
    )


def host_available_bytes() -> int:
    """Host memory the OS could give this process now without swapping (psutil's ``available``).

    >>> host_available_bytes() > 0
    True
    """
    import psutil

    return int(psutil.virtual_memory().available)
