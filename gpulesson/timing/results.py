"""Timing results: frozen dataclasses that keep their raw samples and judge their own spread.

Every measurement in ``gpulesson.timing`` returns one of these; ``gpulesson.timing.render``
turns them into Markdown, text, JSON and SVG. This module needs no torch, so a renderer,
a results bundle or the CLI's argument checks can use it without importing torch.

Each sample is seconds per call: a clock reading divided by the calls it covered.

>>> result = MatmulResult(device="cpu", dtype="fp32", n=1000, threads=2,
...                       samples_s=(0.010, 0.012, 0.011))
>>> result.flops, result.median_s, round(result.flop_per_s / 1e9)
(2000000000, 0.011, 182)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

# A timing whose IQR is more than this share of its median is flagged: the
# machine was busy or the operation is too short to time well. Same threshold
# as torch.utils.benchmark's Measurement uses for its own warning.
SPREAD_WARNING_IQR_SHARE = 0.10

# An op reaching less than this share of its roofline ceiling is called
# overhead-bound: neither bandwidth nor arithmetic is what holds it back.
OVERHEAD_SHARE = 0.25


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


def matmul_flops(n: int) -> int:
    """FLOPs of an n x n matmul, counting a multiply and an add separately.

    >>> matmul_flops(5000)
    250000000000
    >>> matmul_flops(4000) / matmul_flops(5000)
    0.512
    """
    return 2 * n**3


class Spread:
    """Median and spread of ``samples_s``, shared by every timing result.

    A mixin: a frozen dataclass with a ``samples_s`` field (seconds per call)
    gains the summary statistics and the spread warning.

    >>> LaunchTiming(device="cpu", mode="eager", threads=1, samples_s=(1.0, 2.0, 9.0),
    ...              calls_per_sample=10).median_s
    2.0
    """

    samples_s: tuple[float, ...]

    @property
    def repeats(self) -> int:
        """How many samples were kept."""
        return len(self.samples_s)

    @property
    def median_s(self) -> float:
        """The middle sample: one slow outlier cannot drag it."""
        return quantile(self.samples_s, 0.5)

    @property
    def p25_s(self) -> float:
        """The first quartile."""
        return quantile(self.samples_s, 0.25)

    @property
    def p75_s(self) -> float:
        """The third quartile."""
        return quantile(self.samples_s, 0.75)

    @property
    def iqr_s(self) -> float:
        """Interquartile range: the middle half of the samples spans this much."""
        return self.p75_s - self.p25_s

    @property
    def min_s(self) -> float:
        """The fastest sample."""
        return min(self.samples_s)

    @property
    def max_s(self) -> float:
        """The slowest sample."""
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


# --- matmuls and other operations ----------------------------------------------------


@dataclass(frozen=True)
class MatmulResult(Spread):
    """Timing of one n x n by n x n matmul; each sample is seconds per call.

    ``calls_per_sample`` is how many back-to-back calls one clock reading
    covered (the sample is that reading divided by it). ``closing_barrier`` is
    False only for the deliberately naive measurement.

    >>> r = MatmulResult(device="cpu", dtype="fp32", n=64, threads=1,
    ...                  samples_s=(3.0, 1.0, 2.0, 4.0))
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
        """Achieved rate: FLOPs over the median time."""
        return self.flops / self.median_s


@dataclass(frozen=True)
class OpResult(Spread):
    """Timing of an operation with known work and traffic (for the roofline).

    ``bytes_moved`` is the least traffic the operation needs (each operand read
    once, each output written once); caches can only make real traffic smaller
    for small operands, which is why small ops can sit above the memory roof.

    >>> op = OpResult(name="add", device="cpu", dtype="fp32", threads=2, samples_s=(0.01,),
    ...               flops=10**6, bytes_moved=12 * 10**6)
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
        """Achieved arithmetic rate."""
        return self.flops / self.median_s

    @property
    def bytes_per_s(self) -> float:
        """Achieved traffic rate."""
        return self.bytes_moved / self.median_s

    @property
    def intensity_flop_per_byte(self) -> float:
        """Arithmetic intensity: FLOPs per byte of least traffic."""
        return self.flops / self.bytes_moved


@dataclass(frozen=True)
class FlopCount:
    """2n^3 for one matrix size, and its ratio to a reference size's count.

    >>> flop_counts((4000, 5000))[1].relative_to_first
    1.953125
    """

    n: int
    flops: int
    relative_to_first: float


def flop_counts(sizes: Sequence[int]) -> tuple[FlopCount, ...]:
    """The FLOPs of an n x n matmul for each size, relative to the first size.

    >>> [(c.n, c.flops) for c in flop_counts((10, 20))]
    [(10, 2000), (20, 16000)]
    """
    if not sizes:
        raise ValueError("no sizes to count: give at least one, e.g. (4000, 5000)")
    base = matmul_flops(sizes[0])
    return tuple(
        FlopCount(n=n, flops=matmul_flops(n), relative_to_first=matmul_flops(n) / base)
        for n in sizes
    )


# --- the async illusion ----------------------------------------------------------------


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
        """CPU time over the honest device time."""
        return self.cpu.median_s / self.honest.median_s

    @property
    def naive_speedup(self) -> float:
        """CPU time over the naive device time: the number a missing barrier reports."""
        return self.cpu.median_s / self.naive.median_s

    @property
    def kernel_s(self) -> float:
        """What the closing barrier waited for: honest minus naive median, at least 0."""
        return max(self.honest.median_s - self.naive.median_s, 0.0)


# --- launch overhead ------------------------------------------------------------------


@dataclass(frozen=True)
class LaunchTiming(Spread):
    """Seconds per call of one tiny operation issued back to back, in one mode.

    ``mode`` is ``"eager"`` (one PyTorch call per operation, as a training loop
    runs) or ``"cuda-graph"`` (the same operations captured once in a CUDA
    graph and replayed: what is left is the GPU-side cost per kernel).
    ``calls_per_sample`` is how many operations one clock reading covered.
    """

    device: str
    mode: str
    threads: int
    samples_s: tuple[float, ...]
    calls_per_sample: int


@dataclass(frozen=True)
class LaunchOverhead:
    """What one tiny operation costs per call on a device, eager and (on CUDA) graphed.

    On a GPU the op does almost no work, so its eager cost per call is the
    launch overhead: PyTorch's dispatch plus the driver's kernel launch. On a
    CPU there is no launch: the cost is PyTorch's dispatch of a tiny op.

    >>> eager = LaunchTiming(device="cpu", mode="eager", threads=1,
    ...                      samples_s=(2e-6, 3e-6, 4e-6), calls_per_sample=1000)
    >>> r = LaunchOverhead(device="cpu", op="torch.add", eager=eager, graph=None)
    >>> r.median_s, r.graph_median_s
    (3e-06, None)
    """

    device: str
    op: str
    eager: LaunchTiming
    graph: LaunchTiming | None = None

    @property
    def median_s(self) -> float:
        """The eager median: seconds per call as a PyTorch program pays it."""
        return self.eager.median_s

    @property
    def graph_median_s(self) -> float | None:
        """The CUDA graph replay's median seconds per op; None off CUDA."""
        return self.graph.median_s if self.graph is not None else None


# --- CPU against GPU ----------------------------------------------------------------------


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
    def best_cpu(self) -> MatmulResult | None:
        """The CPU size with the highest achieved rate: this build's achievable CPU roof."""
        return max(self.cpu, key=lambda r: r.flop_per_s, default=None)

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


# --- the roofline ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Placement:
    """One operation under the roofline: its ceiling, the share it reached, its regime."""

    op: OpResult
    ceiling_flop_per_s: float
    share_of_ceiling: float
    regime: str


@dataclass(frozen=True)
class Roofline:
    """Measured bandwidth and matmul peak on one device, with operations placed under them.

    >>> copy = OpResult(name="copy", device="cpu", dtype="fp32", threads=1, samples_s=(1.0,),
    ...                 flops=0, bytes_moved=10**10)
    >>> mm = OpResult(name="mm", device="cpu", dtype="fp32", threads=1, samples_s=(1.0,),
    ...               flops=10**11, bytes_moved=10**8)
    >>> Roofline(device="cpu", bandwidth=copy, peak=mm, ops=()).ridge_flop_per_byte
    10.0
    """

    device: str
    bandwidth: OpResult
    peak: OpResult
    ops: tuple[OpResult, ...]

    @property
    def peak_flop_per_s(self) -> float:
        """The compute roof: the large matmul's achieved rate."""
        return self.peak.flop_per_s

    @property
    def bandwidth_bytes_per_s(self) -> float:
        """The memory roof: the large copy's achieved traffic rate."""
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

    @property
    def placements(self) -> tuple[Placement, ...]:
        """Every operation with its ceiling, its share of it and its regime."""
        rows = []
        for op in self.ops:
            ceiling = self.ceiling_flop_per_s(op.intensity_flop_per_byte)
            rows.append(
                Placement(
                    op=op,
                    ceiling_flop_per_s=ceiling,
                    share_of_ceiling=op.flop_per_s / ceiling,
                    regime=self.bound(op),
                )
            )
        return tuple(rows)


@dataclass(frozen=True)
class PrecisionTraffic:
    """The same elementwise add in fp32 and bf16: half the bytes, about half the time?"""

    fp32: OpResult
    bf16: OpResult

    @property
    def speedup(self) -> float:
        """fp32 median over bf16 median."""
        return self.fp32.median_s / self.bf16.median_s


@dataclass(frozen=True)
class LinkBandwidth:
    """Host-to-device copy rates beside the on-device copy rate (GPU builds only)."""

    device: str
    pageable: OpResult
    pinned: OpResult | None
    on_device: OpResult

    @property
    def on_device_over_link(self) -> float:
        """How many times faster on-device copies are than the best host-to-device copy."""
        return self.on_device.bytes_per_s / (self.pinned or self.pageable).bytes_per_s
