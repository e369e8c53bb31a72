"""Teaching estimates, not measurements: the source lesson's example figures.

These numbers are chosen to be checkable by hand and are shown on a page only
under a "teaching estimate" label with their arithmetic beside them
(``gpulesson.timing.render.teaching_timing_markdown`` and
``lane_estimate_markdown``). Used by the lessons ``timing.md`` (the async
illusion's example timings) and ``why-gpus.md`` (the lane-width comparison).

>>> round(TeachingTiming().illusion), round(LaneEstimate().ratio)
(41, 128)
"""

from __future__ import annotations

from dataclasses import dataclass


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
    def flops(self) -> float:
        """2n^3 for the example matmul."""
        return 2.0 * self.n**3

    @property
    def cpu_flop_per_s(self) -> float:
        """The CPU rate these timings imply: 2.5 x 10^11 FLOPs in 5.0 s is 5 x 10^10."""
        return self.flops / self.cpu_s

    @property
    def gpu_flop_per_s(self) -> float:
        """The GPU kernel rate these timings imply: 2.5 x 10^11 FLOPs in 0.20 s."""
        return self.flops / self.kernel_s

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
