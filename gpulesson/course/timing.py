"""The lesson ``timing.md``: its renderers and texts.

Its pictures and tables: the corrected launch figure, the launch cost and the async
illusion, and the timing lab's table.

Renderers take the frozen results of the topic packages and return Markdown, HTML or chart
markup; nothing here measures. See :mod:`gpulesson.course`.
"""

from __future__ import annotations

import html
import json

from gpulesson.course.why_gpus import NO_CUDA_TEXT, _sci, _warnings
from gpulesson.tables import markdown_table
from gpulesson.text import inert
from gpulesson.timing.render import _gflops, _ms
from gpulesson.timing.results import (
    IllusionResult,
    LaunchOverhead,
)
from gpulesson.timing.teaching import (
    EAGER_LAUNCH_S_RANGE,
    SOURCE_LAUNCH_S,
    LaunchCorrection,
    StopwatchReading,
    TimingLabInputs,
    peak_kernel_s,
)


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.3g}"


def _time(seconds: float) -> str:
    """A duration in the unit that reads best.

    >>> _time(0.205), _time(5e-3), _time(1e-5), _time(36.0), _time(1476.0)
    ('205 ms', '5 ms', '10 µs', '36 s', '24.6 min')
    """
    if seconds >= 60:
        return f"{seconds / 60:.3g} min"
    if seconds >= 1:
        return f"{seconds:.3g} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} µs"


def _time_range(low_s: float, high_s: float) -> str:
    """Two durations in one unit, as a range.

    >>> _time_range(5e-6, 10e-6)
    '5-10 µs'
    """
    low, high = _time(low_s), _time(high_s)
    low_value, low_unit = low.split(" ")
    if high.endswith(" " + low_unit):
        return f"{low_value}-{high}"
    return f"{low} to {high}"


def _ratio(value: float) -> str:
    """A ratio with thousands separators above 100, three digits below.

    >>> _ratio(24.39), _ratio(500000.0)
    ('24.4x', '500,000x')
    """
    return f"{value:,.0f}x" if value >= 100 else f"{value:.3g}x"


def illusion_markdown(result: IllusionResult) -> str:
    """Honest against naive timing of one matmul, with the CPU baseline."""
    h, v = result.honest, result.naive
    rows = [
        ("honest: barrier at start and stop", h),
        ("naive: no barrier before stopping", v),
    ]
    header = (f"{h.device}, n = {h.n}, {h.dtype}", "median (ms)", "IQR (ms)", "repeats", "GFLOP/s")
    cells = [
        (label, _ms(r.median_s), _ms(r.iqr_s), r.repeats, _gflops(r.flop_per_s))
        for label, r in rows
    ]
    lines = [markdown_table(header, cells), ""]
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


def launch_correction_markdown(c: LaunchCorrection) -> str:
    """The source's example at its 5 ms launch and at the cited launch costs, side by side."""
    examples = (c.source, *c.corrected)
    t = c.source
    header = (
        "",
        "arithmetic",
        f"source's launch, {_time(t.launch_s)}",
        *(f"launch {_time(x.launch_s)}" for x in c.corrected),
    )
    # each row: what it is, its arithmetic, then its value at each launch cost
    rows = [
        ("GPU time, honest", "kernel + launch", *(_time(x.gpu_honest_s) for x in examples)),
        ("GPU time, naive", "launch only", *(_time(x.gpu_naive_s) for x in examples)),
        (
            "speedup, honest",
            f"{t.cpu_s:g} s / honest",
            *(_ratio(x.honest_speedup) for x in examples),
        ),
        ("speedup, naive", f"{t.cpu_s:g} s / naive", *(_ratio(x.naive_speedup) for x in examples)),
        ("illusion", "naive / honest speedup", *(_ratio(x.illusion) for x in examples)),
        (
            f"a {t.cpu_job_s / 3600:g}-hour CPU job, honest",
            f"{t.cpu_job_s:,.0f} s / honest speedup",
            *(_time(x.job_honest_s) for x in examples),
        ),
        (
            "the same job, naive",
            f"{t.cpu_job_s:,.0f} s / naive speedup",
            *(_time(x.job_naive_s) for x in examples),
        ),
    ]
    at_peak = ", a T4's datasheet fp32 peak" if t.kernel_s == peak_kernel_s(t.n) else ""
    low, high = c.naive_speedup_range
    ill_low, ill_high = c.illusion_range
    honest = sorted({f"{x.honest_speedup:.3g}x" for x in c.corrected})
    return "\n".join(
        [
            f"Teaching estimate (not a measurement), one {t.n} x {t.n} fp32 matmul: "
            f"CPU {t.cpu_s:g} s, GPU kernel {_time(t.kernel_s)} "
            f"(2n^3 = {t.flops:.3g} FLOPs at {t.gpu_flop_per_s / 1e12:g} TFLOP/s"
            f"{at_peak}). The source adds a "
            f"{_time(SOURCE_LAUNCH_S)} launch; a launch from PyTorch eager costs about "
            f"{_time_range(*EAGER_LAUNCH_S_RANGE)} (cited).",
            "",
            markdown_table(header, rows, align="ll" + "r" * len(examples)),
            "",
            f"At the source's {_time(SOURCE_LAUNCH_S)} the naive stopwatch says "
            f"{_ratio(c.source.naive_speedup)}. At a launch cost of microseconds it says "
            f"{_sci(low)} to {_sci(high)}, and overstates the GPU's speed {_sci(ill_low)} to "
            f"{_sci(ill_high)} times (kernel over launch). The honest speedup hardly moves: "
            f"{_ratio(c.source.honest_speedup)} at the source's launch, {' to '.join(honest)} "
            "at microseconds.",
        ]
    )


def launch_markdown(r: LaunchOverhead) -> str:
    """The tiny op's cost per call on this build's device, labelled by what it measures."""
    timings = [r.eager] + ([r.graph] if r.graph is not None else [])
    header = (
        f"{r.op} on {r.device}",
        "median per call (µs)",
        "IQR (µs)",
        "samples",
        "calls per sample",
    )
    labels = {"eager": "eager (one PyTorch call each)", "cuda-graph": "CUDA graph replay"}
    cells = [
        (
            labels.get(t.mode, t.mode),
            _us(t.median_s),
            _us(t.iqr_s),
            t.repeats,
            f"{t.calls_per_sample:,}",
        )
        for t in timings
    ]
    lines = [markdown_table(header, cells), ""]
    cited = _time_range(*EAGER_LAUNCH_S_RANGE)
    if r.device == "cpu":
        lines.append(
            f"This build has no GPU, so this is **not a kernel launch**: it is what PyTorch's "
            f"dispatch of a tiny op costs per call on this CPU, {_time(r.median_s)}. A GPU "
            "call adds the driver's kernel launch to that dispatch: about "
            f"{cited} per launch from PyTorch eager (cited), "
            f"{SOURCE_LAUNCH_S / EAGER_LAUNCH_S_RANGE[1]:,.0f}-"
            f"{SOURCE_LAUNCH_S / EAGER_LAUNCH_S_RANGE[0]:,.0f} times less than the source's "
            f"{_time(SOURCE_LAUNCH_S)}."
        )
    else:
        sentence = (
            f"On this build's {r.device}, a tiny op costs {_time(r.median_s)} per call from "
            "PyTorch eager: that is the launch overhead, "
            f"{SOURCE_LAUNCH_S / r.median_s:,.0f} times less than the source's "
            f"{_time(SOURCE_LAUNCH_S)}."
        )
        if r.graph_median_s is not None:
            sentence += (
                f" Replayed from a CUDA graph, the same op costs {_time(r.graph_median_s)}: "
                "the GPU-side cost, once the CPU no longer launches each kernel."
            )
        lines.append(sentence)
    lines += _warnings(timings)
    return "\n".join(lines)


# --- the timing lab: toggle the closing barrier ------------------------------------


def timing_markdown(readings: tuple[StopwatchReading, ...]) -> str:
    """Stopwatch readings as a table.

    >>> from gpulesson.timing.teaching import timing_lab_inputs
    >>> print(timing_markdown(timing_lab_inputs().readings).splitlines()[2])
    | no | 0.01 | 500,000× |
    """
    return markdown_table(
        ("closing `synchronize()`", "stopwatch reads (ms)", "speedup a reader would claim"),
        [
            (
                "yes" if r.synchronized else "no",
                f"{r.measured_s * 1e3:,.3g}",
                f"{r.claimed_speedup:,.0f}×",
            )
            for r in readings
        ],
    )


def timing_lab_markdown(inputs: TimingLabInputs) -> str:
    """The timing lab's container and its static table (measured inputs travel to the script).

    >>> from gpulesson.timing.teaching import timing_lab_inputs
    >>> print(timing_lab_markdown(timing_lab_inputs()).splitlines()[0])
    <div class="gl-lab" data-lab="timing"></div>
    """
    table = timing_markdown(inputs.readings)
    if not inputs.measured:
        return '<div class="gl-lab" data-lab="timing"></div>\n\n' + table
    data = {
        "cpu_s": inputs.cpu_s,
        "launch_s": inputs.launch_s,
        "kernel_s": inputs.kernel_s,
        "label": inputs.label,
    }
    attr = html.escape(json.dumps(data), quote=True)
    return (
        f'<div class="gl-lab" data-lab="timing" data-measured="{attr}"></div>\n\n'
        + f"Measured on this build's GPU ({inert(inputs.label)}):\n\n"
        + table
    )
