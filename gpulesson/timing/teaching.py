"""Teaching estimates, not measurements: the source lesson's example timings, corrected.

The source lesson times one 5000 x 5000 fp32 matmul with example figures: CPU 5.0 s,
GPU kernel 0.20 s, kernel launch 5 ms. The CPU figure is kept as a teaching estimate,
checkable by hand. The kernel figure is not: 2 x 5000^3 FLOPs in 0.20 s is 1.25 x 10^12
FLOP/s, below even a T4's datasheet fp32 peak, so the example's kernel runs at that cited
peak instead (``TEACHING_GPU``, from :mod:`gpulesson.results.datasheets`; the 0.20 s is kept
only as ``SOURCE_KERNEL_S``, quoted). The 5 ms launch is wrong by about three orders
of magnitude: a kernel launch from PyTorch eager costs about 5-10 microseconds of CPU
time, and a few microseconds on the GPU's side (``LAUNCH_SOURCES``). It is kept only as
``SOURCE_LAUNCH_S``, quoted so the lesson can correct it; every computed example uses
the cited range, ``EAGER_LAUNCH_S_RANGE``, or a launch measured on the build's GPU
(``gpulesson.timing.launch``).

Shown on a page only under a "teaching estimate" label with their arithmetic beside
them (``gpulesson.course.timing.launch_correction_markdown``). Used by the lesson
``timing.md``, by the throughput race (:mod:`gpulesson.timing.race`) and by the timing lab
(:func:`timing_lab_inputs`, :func:`stopwatch`).

>>> round(TeachingTiming(launch_s=SOURCE_LAUNCH_S).naive_speedup)
1000
>>> round(TeachingTiming().naive_speedup), round(TeachingTiming().honest_speedup)
(500000, 162)
>>> TeachingTiming().gpu_flop_per_s == datasheets.get("t4").dense_flop_per_s("fp32")
True
"""

from __future__ import annotations

from dataclasses import dataclass

from gpulesson.results import datasheets
from gpulesson.timing.results import IllusionResult

# The source lesson's launch figure, quoted only to be corrected.
SOURCE_LAUNCH_S = 5e-3

# The source lesson's kernel figure, quoted only to be corrected: it implies 1.25 TFLOP/s.
SOURCE_KERNEL_S = 0.20

# The GPU whose cited fp32 peak the example kernel runs at: the free notebook GPU.
TEACHING_GPU = "t4"
TEACHING_N = 5000


def _fp32_peak_flop_per_s(gpu: str) -> float:
    """``gpu``'s datasheet fp32 peak; ValueError for a row that states none."""
    peak = datasheets.get(gpu).dense_flop_per_s("fp32")
    if peak is None:
        raise ValueError(f"datasheet row {gpu!r} states no fp32 peak: use a row that does")
    return peak


def peak_kernel_s(n: int = TEACHING_N, gpu: str = TEACHING_GPU) -> float:
    """Seconds for one n x n fp32 matmul (2n^3 FLOPs) at ``gpu``'s datasheet fp32 peak.

    A bound no real kernel beats; the teaching example uses it as the kernel's time.

    >>> round(peak_kernel_s() * 1e3, 1)  # 2.5 x 10^11 FLOPs at a T4's 8.1 TFLOP/s
    30.9
    """
    return 2.0 * n**3 / _fp32_peak_flop_per_s(gpu)


def kernel_basis(n: int = TEACHING_N, gpu: str = TEACHING_GPU) -> str:
    """How :func:`peak_kernel_s` predicts the teaching kernel's time, for the lab's label.

    >>> kernel_basis()
    'predicted: 2 × 5000³ FLOPs at the NVIDIA T4 datasheet fp32 peak, 8.1 TFLOP/s'
    """
    return (
        f"predicted: 2 × {n}³ FLOPs at the {datasheets.get(gpu).name} datasheet fp32 peak, "
        f"{_fp32_peak_flop_per_s(gpu) / 1e12:.3g} TFLOP/s"
    )


# Kernel launch cost from PyTorch eager, as cited: about 5-10 us per launch of CPU
# time (dispatch plus the driver's launch call), a few us on the GPU's side.
EAGER_LAUNCH_S_RANGE = (5e-6, 10e-6)

LAUNCH_SOURCES: tuple[tuple[str, str], ...] = (
    (
        "PyTorch blog, Accelerating PyTorch with CUDA Graphs (2021): launch overhead per "
        "kernel, and CUDA graphs that replay many kernels with one launch",
        "https://pytorch.org/blog/accelerating-pytorch-with-cuda-graphs/",
    ),
    (
        "Horace He, Making Deep Learning Go Brrrr From First Principles (2022): the "
        "overhead-bound regime, where time goes to Python and launches, not arithmetic",
        "https://horace.io/brrr_intro.html",
    ),
    (
        "Modal GPU Glossary, CUDA Graph: each launch takes on the order of microseconds",
        "https://modal.com/gpu-glossary/host-software/cuda-graph",
    ),
)

# The source lesson's ranges for the host link and on-device memory, shown only as
# quoted ranges beside this build's measurements, never as its figures.
SOURCE_PCIE_GB_PER_S = (10, 60)
SOURCE_ON_DEVICE_TB_PER_S = (1, 3)

TEN_HOURS_S = 36_000.0  # the example CPU job the lesson scales


@dataclass(frozen=True)
class TeachingTiming:
    """Example timings for one n x n fp32 matmul, and every ratio a stopwatch would give.

    Defaults: the source's CPU figure, the kernel at a T4's cited fp32 peak
    (:func:`peak_kernel_s`), and the cited upper launch cost.

    >>> t = TeachingTiming(launch_s=SOURCE_LAUNCH_S)
    >>> round(t.naive_speedup), round(t.honest_speedup, 1), round(t.illusion, 1)
    (1000, 139.4, 7.2)
    """

    cpu_s: float = 5.0
    kernel_s: float = peak_kernel_s()
    launch_s: float = EAGER_LAUNCH_S_RANGE[1]
    n: int = TEACHING_N
    cpu_job_s: float = TEN_HOURS_S

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
        """The GPU kernel rate these timings imply: by default a T4's fp32 peak."""
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
        """CPU time over the naive GPU time: what a missing barrier reports."""
        return self.cpu_s / self.gpu_naive_s

    @property
    def honest_speedup(self) -> float:
        """CPU time over the honest GPU time."""
        return self.cpu_s / self.gpu_honest_s

    @property
    def illusion(self) -> float:
        """How many times too fast the naive stopwatch makes the GPU look."""
        return self.naive_speedup / self.honest_speedup

    @property
    def job_honest_s(self) -> float:
        """The example CPU job (``cpu_job_s``) on the GPU, at the honest speedup."""
        return self.cpu_job_s / self.honest_speedup

    @property
    def job_naive_s(self) -> float:
        """The same job at the naive speedup: the plan a missing barrier would make."""
        return self.cpu_job_s / self.naive_speedup


@dataclass(frozen=True)
class LaunchCorrection:
    """The source's example with its 5 ms launch, beside the same example at cited costs."""

    source: TeachingTiming
    corrected: tuple[TeachingTiming, ...]

    @property
    def naive_speedup_range(self) -> tuple[float, float]:
        """The naive speedups the cited launch costs give, lowest first."""
        values = sorted(t.naive_speedup for t in self.corrected)
        return values[0], values[-1]

    @property
    def illusion_range(self) -> tuple[float, float]:
        """How many times too fast the GPU looks at the cited launch costs, lowest first."""
        values = sorted(t.illusion for t in self.corrected)
        return values[0], values[-1]


def launch_correction(
    cpu_s: float = 5.0, kernel_s: float | None = None, n: int = TEACHING_N
) -> LaunchCorrection:
    """The example at the source's launch and at each end of the cited range.

    ``kernel_s`` defaults to the kernel at a T4's cited fp32 peak (:func:`peak_kernel_s`).

    >>> c = launch_correction()
    >>> [round(v) for v in c.illusion_range], round(c.source.illusion, 1)
    ([3087, 6174], 7.2)
    """
    if kernel_s is None:
        kernel_s = peak_kernel_s(n)

    def example(launch_s: float) -> TeachingTiming:
        return TeachingTiming(cpu_s=cpu_s, kernel_s=kernel_s, launch_s=launch_s, n=n)

    return LaunchCorrection(
        source=example(SOURCE_LAUNCH_S),
        corrected=tuple(example(s) for s in sorted(EAGER_LAUNCH_S_RANGE, reverse=True)),
    )


#: The teaching example every lab starts from: the source's CPU figure, the kernel at a T4's
#: cited fp32 peak, the cited upper launch cost.
TEACHING = TeachingTiming()


# --- the stopwatch lab: what a stopwatch around one GPU call reads ---------------------


@dataclass(frozen=True)
class StopwatchReading:
    """What a stopwatch around one GPU call reads, with or without the closing barrier."""

    synchronized: bool
    measured_s: float
    cpu_s: float

    @property
    def claimed_speedup(self) -> float:
        """The speedup a reader would report from this reading."""
        return self.cpu_s / self.measured_s


@dataclass(frozen=True)
class TimingLabInputs:
    """The three times the timing lab animates, and where they come from.

    ``measured`` is True when they were measured on the build's GPU (the lab
    then shows them), False for the teaching figures.
    """

    cpu_s: float
    launch_s: float
    kernel_s: float
    label: str
    measured: bool

    @property
    def readings(self) -> tuple[StopwatchReading, StopwatchReading]:
        """The stopwatch without, then with, the closing barrier."""
        return (stopwatch(False, self), stopwatch(True, self))


def timing_lab_inputs(measured: IllusionResult | None = None) -> TimingLabInputs:
    """The teaching figures, or (given ``async_illusion`` on a GPU) the measured medians.

    Measured: the launch is the naive median, the kernel what the closing barrier
    waited for (honest minus naive), the CPU time the CPU's median.

    >>> t = timing_lab_inputs()
    >>> t.launch_s, round(t.kernel_s, 5), t.measured
    (1e-05, 0.03086, False)
    """
    if measured is None:
        return TimingLabInputs(
            cpu_s=TEACHING.cpu_s,
            launch_s=TEACHING.launch_s,
            kernel_s=TEACHING.kernel_s,
            label=f"teaching figures, one {TEACHING.n}×{TEACHING.n} fp32 matmul",
            measured=False,
        )
    honest = measured.honest
    return TimingLabInputs(
        cpu_s=measured.cpu.median_s,
        launch_s=measured.naive.median_s,
        kernel_s=measured.kernel_s,
        label=f"{honest.n}×{honest.n} {honest.dtype} matmul on {honest.device}, medians",
        measured=True,
    )


def stopwatch(synchronized: bool, inputs: TimingLabInputs | None = None) -> StopwatchReading:
    """The reading: launch plus kernel with the closing barrier, the launch alone without.

    >>> round(stopwatch(False).claimed_speedup), round(stopwatch(True).claimed_speedup)
    (500000, 162)
    """
    t = inputs or timing_lab_inputs()
    measured_s = t.launch_s + t.kernel_s if synchronized else t.launch_s
    return StopwatchReading(synchronized=synchronized, measured_s=measured_s, cpu_s=t.cpu_s)
