"""Bandwidth of a strided read against stride: the cache-line (CPU) and coalescing (GPU) cliff.

Memory moves in lines, not in single numbers: a CPU fetches 64-byte cache lines, and a GPU
serves a warp's loads in 32-byte sectors of 128-byte lines, merging ("coalescing") the 32
threads' addresses into as few as it can. Reading every ``s``-th fp32 of a tensor larger
than the caches still brings in every line while ``s x 4`` bytes is under a line, so the
time hardly falls while the useful bytes fall as ``1/s``. :func:`measure_strided` reads
``x[::s].sum()`` of one large tensor for several strides (one thread on a CPU, medians over
interleaved rounds) and reports the useful bandwidth: elements read x 4 bytes / time.

>>> r = measure_strided("cpu", strides=(1, 16), tensor_bytes=2**20, rounds=2)
>>> [p.stride for p in r.points], r.bandwidth(16) > 0
([1, 16], True)
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from gpulesson.timing import plans
from gpulesson.timing.bench import call_seconds

STRIDES = (1, 2, 4, 8, 16, 32, 64)
LINE_FILE = Path("/sys/devices/system/cpu/cpu0/cache/index0/coherency_line_size")


@dataclass(frozen=True, kw_only=True)
class StridePoint:
    """One stride (in fp32 elements) and its useful bandwidth."""

    stride: int
    elements: int
    median_s: float
    samples_s: tuple[float, ...] = ()

    @property
    def useful_bytes_per_s(self) -> float:
        """Bytes of the elements actually read, per second."""
        return self.elements * 4 / self.median_s


@dataclass(frozen=True, kw_only=True)
class StrideSweep:
    """Strided reads of one tensor on one device."""

    device: str
    tensor_bytes: int
    points: tuple[StridePoint, ...]

    def bandwidth(self, stride: int) -> float:
        """The useful bandwidth at ``stride``, or ValueError naming the measured strides."""
        for p in self.points:
            if p.stride == stride:
                return p.useful_bytes_per_s
        have = ", ".join(str(p.stride) for p in self.points)
        raise ValueError(f"stride {stride} was not measured: use one of {have}")


def cache_line_bytes(path: Path = LINE_FILE) -> int | None:
    """The CPU's cache line size as the kernel reports it, or None where it does not."""
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def measure_strided(
    device: str = "cpu",
    strides: Sequence[int] = STRIDES,
    tensor_bytes: int | None = None,
    rounds: int | None = None,
) -> StrideSweep:
    """Median time of ``x[::s].sum()`` per stride, over interleaved rounds.

    Left out, ``tensor_bytes`` and ``rounds`` are the device's ``strided`` row of
    ``gpulesson/timing/plans.json``.
    """
    plan = plans.sizes(device, "strided")
    rounds = plan["rounds"] if rounds is None else rounds
    if any(s < 1 for s in strides) or rounds < 1:
        raise ValueError(f"strides={tuple(strides)!r}, rounds={rounds!r}: give positive integers")
    size = tensor_bytes or plan["tensor_bytes"]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        x = torch.ones(size // 4, device=device)
        views = [x[::s] for s in strides]
        samples: list[list[float]] = [[] for _ in strides]
        for _ in range(rounds):
            for i, view in enumerate(views):
                samples[i].append(call_seconds(view.sum, device))
    finally:
        torch.set_num_threads(threads)
    points = tuple(
        StridePoint(
            stride=s,
            elements=views[i].numel(),
            median_s=statistics.median(samples[i]),
            samples_s=tuple(samples[i]),
        )
        for i, s in enumerate(strides)
    )
    return StrideSweep(device=device, tensor_bytes=size, points=points)
