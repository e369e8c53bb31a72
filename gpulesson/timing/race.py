"""The throughput race: one n x n matmul on the teaching CPU and GPU, simulated.

A teaching simulation, not a measurement: the CPU runs at the source lesson's example rate
(5.0 s for a 5000 x 5000 matmul) or at the rate a lesson measured on the machine that built
the page; the GPU at a T4's cited fp32 peak plus a cited launch cost per call
(:mod:`gpulesson.timing.teaching`). The lesson "Why GPUs win at training" renders it
(:func:`gpulesson.course.why_gpus.race_markdown`) and the race lab animates the same
figures in the browser (``assets/labs/labs.json``).

>>> race(5000).gpu_s < race(5000).cpu_s
True
>>> race(16).gpu_s > race(16).cpu_s
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpulesson.timing.teaching import SOURCE_LAUNCH_S, TEACHING

# The race runs at the teaching figures (gpulesson.timing.teaching): the source's example
# CPU rate against a T4's cited fp32 peak, with a cited launch cost per GPU call (10 µs,
# the upper end of the 5-10 µs a launch costs from PyTorch eager), not the source's 5 ms.
TEACHING_CPU_FLOP_PER_S = TEACHING.cpu_flop_per_s
TEACHING_GPU_FLOP_PER_S = TEACHING.gpu_flop_per_s
TEACHING_LAUNCH_S = TEACHING.launch_s
RACE_SIZES = (8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)


@dataclass(frozen=True)
class RaceResult:
    """One matrix size in the simulated race: FLOPs and both simulated times."""

    n: int
    flops: float
    cpu_s: float
    gpu_s: float

    @property
    def speedup(self) -> float:
        """CPU time over GPU time: above 1 the GPU wins."""
        return self.cpu_s / self.gpu_s

    @property
    def winner(self) -> str:
        """'GPU' when the GPU is faster, else 'CPU'."""
        return "GPU" if self.speedup > 1 else "CPU"


def race(
    n: int,
    cpu_flop_per_s: float = TEACHING_CPU_FLOP_PER_S,
    gpu_flop_per_s: float = TEACHING_GPU_FLOP_PER_S,
    launch_s: float = TEACHING_LAUNCH_S,
) -> RaceResult:
    """Simulate one n×n matmul (2n³ FLOPs) on the teaching CPU and GPU.

    The GPU pays ``launch_s`` once per call, so it loses at small sizes.

    >>> r = race(5000)
    >>> round(r.cpu_s, 2), round(r.gpu_s, 5), round(r.speedup)
    (5.0, 0.03087, 162)
    """
    if n < 1:
        raise ValueError(f"matrix size n={n} must be a positive integer, e.g. 1024")
    flops = 2.0 * n**3
    return RaceResult(
        n=n,
        flops=flops,
        cpu_s=flops / cpu_flop_per_s,
        gpu_s=launch_s + flops / gpu_flop_per_s,
    )


def race_crossover_n(
    cpu_flop_per_s: float = TEACHING_CPU_FLOP_PER_S,
    gpu_flop_per_s: float = TEACHING_GPU_FLOP_PER_S,
    launch_s: float = TEACHING_LAUNCH_S,
) -> float:
    """The size at which both simulated times are equal; above it the GPU wins.

    Solve 2n³/cpu = launch + 2n³/gpu: n = (launch / (2 (1/cpu - 1/gpu)))^(1/3).

    >>> round(race_crossover_n(), 1), round(race_crossover_n(launch_s=5e-3))
    (63.1, 501)
    """
    if not gpu_flop_per_s > cpu_flop_per_s:
        raise ValueError("the GPU rate must be above the CPU rate for the GPU ever to win")
    return (launch_s / (2 * (1 / cpu_flop_per_s - 1 / gpu_flop_per_s))) ** (1 / 3)


@dataclass(frozen=True)
class RaceTable:
    """The race at several sizes, with the exact crossover and the source's 5 ms crossover."""

    rows: tuple[RaceResult, ...]
    launch_s: float
    crossover_n: float
    source_crossover_n: float
    cpu_flop_per_s: float = TEACHING_CPU_FLOP_PER_S

    @property
    def first_gpu_win_n(self) -> int | None:
        """The smallest tabulated size the GPU wins (it keeps winning above it)."""
        return next((r.n for r in self.rows if r.winner == "GPU"), None)


def race_table(
    sizes: tuple[int, ...] = RACE_SIZES, cpu_flop_per_s: float = TEACHING_CPU_FLOP_PER_S
) -> RaceTable:
    """The race over ``sizes``, with where the GPU starts to win.

    ``cpu_flop_per_s`` is the CPU's rate: a lesson passes the best rate its own sweep
    measured on the machine that built the page; the GPU runs at a T4's datasheet fp32 peak.

    >>> t = race_table((32, 64, 128))
    >>> [r.winner for r in t.rows], t.first_gpu_win_n
    (['CPU', 'GPU', 'GPU'], 64)
    >>> race_table((64, 128), cpu_flop_per_s=2e11).first_gpu_win_n  # a faster CPU holds longer
    128
    """
    if not (math.isfinite(cpu_flop_per_s) and 0 < cpu_flop_per_s < TEACHING_GPU_FLOP_PER_S):
        raise ValueError(
            f"cpu_flop_per_s={cpu_flop_per_s!r}: give a positive rate below the GPU's "
            f"{TEACHING_GPU_FLOP_PER_S:.3g} FLOP/s (the CPU's measured matmul rate)"
        )
    return RaceTable(
        rows=tuple(race(n, cpu_flop_per_s=cpu_flop_per_s) for n in sizes),
        launch_s=TEACHING_LAUNCH_S,
        crossover_n=race_crossover_n(cpu_flop_per_s=cpu_flop_per_s),
        source_crossover_n=race_crossover_n(
            cpu_flop_per_s=cpu_flop_per_s, launch_s=SOURCE_LAUNCH_S
        ),
        cpu_flop_per_s=cpu_flop_per_s,
    )
