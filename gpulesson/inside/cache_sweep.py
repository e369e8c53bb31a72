"""Read bandwidth against working-set size: the memory hierarchy as a measurement.

:func:`measure_sweep` reads a working set of a few KiB to well past the last cache many
times over in **one call**: ``x.expand(R, n).sum()`` views the same ``n`` floats ``R``
times (a stride-0 dimension, no copy), so the reduction streams ``R x`` the working set
from whichever memory level holds it. One call per sample matters: a loop of small copies
measures the ~µs per-call overhead of each call, not the cache. Each sample reads about
``bytes_per_sample`` bytes; each size's figure is the median over interleaved rounds
(each round times every size once, so a machine that gets busier slows every size alike),
in one thread, so the caches are one core's, timed by the thread's CPU time on a CPU (so a
busy machine's time slices spent elsewhere do not count) and by the wall clock between
barriers on a GPU. While the working set fits a cache, the read
runs at that cache's speed; past it, it drops to the next level's. :func:`find_steps`
finds those drops, and where each one's edge lies: the size at which the bandwidth has
fallen halfway from the fast level to the slow one, interpolated on the log size axis.

>>> points = tuple(SweepPoint(working_set_bytes=2**k, bytes_per_s=bw)
...                for k, bw in zip(range(14, 22), (9, 9, 9, 4, 4, 4, 4, 4)))
>>> [(s.before_bytes, s.after_bytes, math.log2(s.edge_bytes)) for s in find_steps(points)]
[(16384, 131072, 16.5)]
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from gpulesson.timing import plans
from gpulesson.timing.bench import call_seconds

# A step is a drop in bandwidth by at least STEP_RATIO from one size to the size STEP_SPAN
# points (a factor of 2.8 at half-doublings) later, after smoothing. The levels fade into
# each other over more than one doubling (prefetchers, a shared L3), so the drop is taken
# over one and a half. On a CPU each sample is this thread's CPU time (``time.thread_time``),
# so time slices the machine gives to other processes drop out. In six repeated sweeps on a
# shared 2-core machine, sizes inside one level moved by less than 1.2x over that span,
# leaving L2 cost 1.2x to 1.5x and leaving the last cache 3x to 6x: hence 1.2.
STEP_RATIO = 1.2
STEP_SPAN = 3
CACHE_DIR = Path("/sys/devices/system/cpu/cpu0/cache")


@dataclass(frozen=True, kw_only=True)
class SweepPoint:
    """One working-set size and its median read bandwidth (bytes read per second)."""

    working_set_bytes: int
    bytes_per_s: float
    bytes_read: int = 0  # per sample
    samples_s: tuple[float, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Step:
    """A bandwidth drop: from the last size before it to the first size after it.

    A drop that fades over several sizes, or two neighbouring drops, make a step that spans
    many sizes; ``edge_bytes`` says where in that span the bandwidth halved its way down
    (:func:`edge_size`), which is the figure to set beside a cache's size.
    """

    before_bytes: int
    after_bytes: int
    before_bytes_per_s: float
    after_bytes_per_s: float
    edge_bytes: float

    @property
    def ratio(self) -> float:
        """Bandwidth before over bandwidth after."""
        return self.before_bytes_per_s / self.after_bytes_per_s


@dataclass(frozen=True, kw_only=True)
class Sweep:
    """A working-set sweep on one device."""

    device: str
    points: tuple[SweepPoint, ...]
    rounds: int

    @property
    def steps(self) -> tuple[Step, ...]:
        """The bandwidth steps of this sweep (:func:`find_steps`)."""
        return find_steps(self.points)


def sweep_sizes(smallest_bytes: int, largest_bytes: int) -> tuple[int, ...]:
    """Working-set sizes at half-doublings (x sqrt 2), multiples of 1 KiB.

    >>> sweep_sizes(4096, 16384)
    (4096, 5120, 8192, 11264, 16384)
    """
    sizes, k = [], 0
    while (size := int(smallest_bytes * 2 ** (k / 2)) // 1024 * 1024) <= largest_bytes:
        sizes.append(size)
        k += 1
    return tuple(sizes)


def smoothed(points: Sequence[SweepPoint]) -> list[SweepPoint]:
    """Each bandwidth replaced by the median of itself and its two neighbours.

    One size that a busy neighbour slowed in most rounds is a dip, not a cache level:

    >>> [p.bytes_per_s for p in smoothed([SweepPoint(working_set_bytes=i, bytes_per_s=b)
    ...                                   for i, b in enumerate((9, 9, 1, 9, 9))])]
    [9, 9, 9, 9, 9]
    """
    out = []
    for i, p in enumerate(points):
        near = [q.bytes_per_s for q in points[max(0, i - 1) : i + 2]]
        value = statistics.median(near) if len(near) == 3 else p.bytes_per_s
        out.append(SweepPoint(working_set_bytes=p.working_set_bytes, bytes_per_s=value))
    return out


def edge_size(points: Sequence[SweepPoint]) -> float:
    """Where a drop's edge lies: the size at which the bandwidth first falls below halfway
    from the first point's to the slowest point's, interpolated on a log size axis.

    The midpoint of the two levels, not the last fast or first slow size, so the edge of a
    drop that fades over many sizes is one size, not a span:

    >>> pts = [SweepPoint(working_set_bytes=2**k, bytes_per_s=b)
    ...        for k, b in zip(range(10, 15), (10.0, 10.0, 8.0, 4.0, 2.0))]
    >>> edge_size(pts) == 2 ** 12.5
    True
    """
    if len(points) < 2:
        raise ValueError("a drop's edge needs at least two points, a fast one and a slow one")
    fast = points[0].bytes_per_s
    slow = min(p.bytes_per_s for p in points)
    if not fast > slow:
        raise ValueError(f"no drop: the bandwidth never falls below the first point's {fast!r}")
    half = (fast + slow) / 2
    for a, b in zip(points, points[1:], strict=False):
        if a.bytes_per_s >= half > b.bytes_per_s:
            t = (a.bytes_per_s - half) / (a.bytes_per_s - b.bytes_per_s)
            lo, hi = math.log2(a.working_set_bytes), math.log2(b.working_set_bytes)
            return 2 ** (lo + t * (hi - lo))
    raise AssertionError(
        "unreachable: the slowest point lies below the midpoint"
    )  # pragma: no cover


def find_steps(
    points: Sequence[SweepPoint], ratio: float = STEP_RATIO, span: int = STEP_SPAN
) -> tuple[Step, ...]:
    """Drops of at least ``ratio`` in bandwidth from a size to the one ``span`` points later.

    The sweep is :func:`smoothed` first. A run of neighbouring drops is one step, from
    the fastest size before it to the slowest after it.
    A flat sweep, or one that only rises, has none:

    >>> flat = [SweepPoint(working_set_bytes=2**k, bytes_per_s=5.0) for k in range(10, 20)]
    >>> find_steps(flat)
    ()
    """
    if ratio <= 1:
        raise ValueError(f"ratio={ratio!r}: a step is a drop, so give a ratio above 1")
    pts = smoothed(sorted(points, key=lambda p: p.working_set_bytes))
    marked = [
        i for i in range(len(pts) - span) if pts[i].bytes_per_s >= ratio * pts[i + span].bytes_per_s
    ]
    steps: list[Step] = []
    run: list[int] = []
    for i in marked + [None]:  # type: ignore[list-item]
        if i is not None and (not run or i <= run[-1] + 1):
            run.append(i)
            continue
        if run:
            lo, hi = run[0], run[-1] + span
            first = max(range(lo, run[-1] + 1), key=lambda j: pts[j].bytes_per_s)
            last = min(range(run[0] + span, hi + 1), key=lambda j: pts[j].bytes_per_s)
            steps.append(
                Step(
                    before_bytes=pts[first].working_set_bytes,
                    after_bytes=pts[last].working_set_bytes,
                    before_bytes_per_s=pts[first].bytes_per_s,
                    after_bytes_per_s=pts[last].bytes_per_s,
                    edge_bytes=edge_size(pts[first : last + 1]),
                )
            )
        run = [i] if i is not None else []
    return tuple(steps)


def measure_sweep(
    device: str = "cpu",
    sizes: Sequence[int] | None = None,
    rounds: int | None = None,
    bytes_per_sample: int | None = None,
) -> Sweep:
    """Median read bandwidth per working-set size, interleaved over ``rounds``, one thread.

    Left out, ``sizes`` (from ``smallest_bytes`` to ``largest_bytes``), ``rounds`` and
    ``bytes_per_sample`` are the device's ``cache_sweep`` row of
    ``gpulesson/timing/plans.json``.

    >>> s = measure_sweep("cpu", sizes=(8192, 65536), rounds=2, bytes_per_sample=2**20)
    >>> [p.working_set_bytes for p in s.points], all(p.bytes_per_s > 0 for p in s.points)
    ([8192, 65536], True)
    """
    plan = plans.sizes(device, "cache_sweep")
    sizes = tuple(sizes or sweep_sizes(plan["smallest_bytes"], plan["largest_bytes"]))
    rounds = plan["rounds"] if rounds is None else rounds
    if rounds < 1:
        raise ValueError(f"rounds={rounds!r}: give at least 1 round")
    per_sample = bytes_per_sample or plan["sample_bytes"]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        views = []
        for size in sizes:
            n = max(1, size // 4)  # fp32
            views.append(torch.ones(n, device=device).expand(max(1, per_sample // size), n))
        samples: list[list[float]] = [[] for _ in sizes]
        for _ in range(rounds):
            for i, view in enumerate(views):
                samples[i].append(call_seconds(view.sum, device))
    finally:
        torch.set_num_threads(threads)
    points = tuple(
        SweepPoint(
            working_set_bytes=size,
            bytes_per_s=views[i].numel() * 4 / statistics.median(samples[i]),
            bytes_read=views[i].numel() * 4,
            samples_s=tuple(samples[i]),
        )
        for i, size in enumerate(sizes)
    )
    return Sweep(device=device, points=points, rounds=rounds)


def parse_size(text: str) -> int:
    """A sysfs cache size ("1024K", "32M") in bytes.

    >>> parse_size("1024K"), parse_size("32M")
    (1048576, 33554432)
    """
    text = text.strip()
    units = {"K": 1024, "M": 1024**2, "G": 1024**3}
    if text and text[-1] in units and text[:-1].isdigit():
        return int(text[:-1]) * units[text[-1]]
    if text.isdigit():
        return int(text)
    raise ValueError(f"cache size {text!r}: expected digits with K, M or G, as sysfs writes it")


@dataclass(frozen=True, kw_only=True)
class CacheLevel:
    """One CPU cache level as the kernel reports it."""

    level: int
    kind: str
    size_bytes: int


def cpu_caches(root: Path = CACHE_DIR) -> tuple[CacheLevel, ...]:
    """The data and unified caches of cpu0 (``/sys/devices/system/cpu/cpu0/cache``).

    Empty where the kernel does not report them (not Linux).
    """
    levels = []
    for index in sorted(root.glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            if kind == "Instruction":
                continue
            levels.append(
                CacheLevel(
                    level=int((index / "level").read_text()),
                    kind=kind,
                    size_bytes=parse_size((index / "size").read_text()),
                )
            )
        except OSError:
            continue
    return tuple(levels)


def l2_size_bytes(device: str) -> int | None:
    """The L2 size the system reports: the GPU's (``torch.cuda``) or cpu0's L2 (sysfs)."""
    if device == "cuda":
        return int(torch.cuda.get_device_properties(0).L2_cache_size)
    return next((c.size_bytes for c in cpu_caches() if c.level == 2), None)


def nearest_edge(steps: Sequence[Step], size_bytes: float) -> Step | None:
    """The step whose edge lies nearest ``size_bytes`` on a log axis; None without steps.

    >>> a = Step(before_bytes=1, after_bytes=4, before_bytes_per_s=2.0, after_bytes_per_s=1.0,
    ...          edge_bytes=2)
    >>> b = Step(before_bytes=64, after_bytes=256, before_bytes_per_s=1.0,
    ...          after_bytes_per_s=0.5, edge_bytes=128)
    >>> nearest_edge([a, b], 100).edge_bytes, nearest_edge([], 100)
    (128, None)
    """
    if size_bytes <= 0:
        raise ValueError(f"size_bytes={size_bytes!r}: a cache size is positive")
    if not steps:
        return None
    return min(steps, key=lambda s: abs(math.log(s.edge_bytes / size_bytes)))


def nearest_edge_factor(steps: Sequence[Step], size_bytes: float) -> float | None:
    """How far ``size_bytes`` lies from the nearest step's edge, as a factor (>= 1).

    ``max(edge / size, size / edge)`` for the step whose edge is nearest; None without steps.
    An edge at 8x the size is 8.0 away, however wide the step's span:

    >>> s = Step(before_bytes=2**10, after_bytes=2**30, before_bytes_per_s=2.0,
    ...          after_bytes_per_s=1.0, edge_bytes=2**23)
    >>> nearest_edge_factor([s], 2**20), nearest_edge_factor([s], 2**24), nearest_edge_factor([], 1)
    (8.0, 2.0, None)
    """
    step = nearest_edge(steps, size_bytes)
    if step is None:
        return None
    return max(step.edge_bytes / size_bytes, size_bytes / step.edge_bytes)
