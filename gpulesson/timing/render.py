"""Rendering of timing, roofline and teaching results: Markdown, text, JSON and charts.

Compute functions in ``gpulesson.timing.bench``, ``roofline``, ``launch``, ``peak`` and
``teaching`` return the result objects of ``gpulesson.timing.results`` (and their own);
the functions here only turn those results into what a lesson page or the terminal
shows: they never measure, and every figure they print is a field or property of a
result. This module needs no torch. Used by the lessons ``why-gpus.md``, ``timing.md``
and ``roofline.md`` and by ``gpulesson bench``.

>>> from gpulesson.timing.results import MatmulResult
>>> r = MatmulResult(device="cpu", dtype="fp32", n=64, threads=1, samples_s=(0.001,))
>>> print(to_markdown([r]).splitlines()[2])
| 64 | 1 | 0 | 1 | 1 | 1 | 5.24e+05 | 0.5 |
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gpulesson.text import inert
from gpulesson.timing import charts
from gpulesson.timing.inputs import barrier_name
from gpulesson.timing.peak import FLOPS_PER_FMA_LANE, FMA_UNIT_BOUNDS, CpuRoof
from gpulesson.timing.results import (
    SPREAD_WARNING_IQR_SHARE,
    FlopCount,
    IllusionResult,
    LaunchOverhead,
    LaunchTiming,
    LinkBandwidth,
    MatmulResult,
    OpResult,
    Placement,
    PrecisionTraffic,
    Roofline,
    Spread,
    SweepComparison,
)
from gpulesson.timing.teaching import (
    EAGER_LAUNCH_S_RANGE,
    SOURCE_LAUNCH_S,
    SOURCE_ON_DEVICE_TB_PER_S,
    SOURCE_PCIE_GB_PER_S,
    LaunchCorrection,
    peak_kernel_s,
)
from gpulesson.units import GB, MIB

if TYPE_CHECKING:
    from gpulesson.results.bundle import Measurement
    from gpulesson.results.datasheets import Datasheet

NO_CUDA_TEXT = "no CUDA device in this build"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g}"


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


def _gflops(flop_per_s: float) -> str:
    return f"{flop_per_s / 1e9:,.1f}"


def _sci(value: float) -> str:
    """Scientific notation for prose.

    >>> _sci(2.5e11)
    '2.5 x 10^11'
    """
    exponent = math.floor(math.log10(abs(value)))
    mantissa = value / 10**exponent
    return f"{mantissa:.3g} x 10^{exponent}"


def result_dict(result: MatmulResult) -> dict[str, Any]:
    """One measurement as plain data: every field the JSON output promises."""
    return {
        "device": result.device,
        "dtype": result.dtype,
        "n": result.n,
        "threads": result.threads,
        "median_s": result.median_s,
        "iqr_s": result.iqr_s,
        "min_s": result.min_s,
        "max_s": result.max_s,
        "repeats": result.repeats,
        "calls_per_sample": result.calls_per_sample,
        "closing_barrier": result.closing_barrier,
        "flops": result.flops,
        "flop_per_s": result.flop_per_s,
        "spread_warning": result.spread_warning,
        "samples_s": list(result.samples_s),
    }


COMPARE_HINT = (
    "To compare with the published GPU figures, open the course page 'Why GPUs win at "
    "training' (lessons/why-gpus/): its sweep table was measured on the CUDA GPU named in "
    "the page's stamp and its build-record.json. Compare rows with the same n and dtype, "
    "and the GFLOP/s column rather than raw times."
)


def to_json(results: Sequence[MatmulResult], device: str, dtype: str) -> str:
    """All measurements as one JSON object."""
    return json.dumps(
        {
            "device": device,
            "dtype": dtype,
            "barrier": barrier_name(device),
            "spread_warning_iqr_share": SPREAD_WARNING_IQR_SHARE,
            "measurements": [result_dict(r) for r in results],
            "how_to_compare": COMPARE_HINT,
        },
        indent=2,
    )


_TABLE_HEADER = (
    "n",
    "median (ms)",
    "IQR (ms)",
    "min (ms)",
    "max (ms)",
    "repeats",
    "FLOPs",
    "GFLOP/s",
)


def _table_row(r: MatmulResult) -> tuple[str, ...]:
    return (
        str(r.n),
        _ms(r.median_s),
        _ms(r.iqr_s),
        _ms(r.min_s),
        _ms(r.max_s),
        str(r.repeats),
        f"{r.flops:.3g}",
        _gflops(r.flop_per_s),
    )


def to_markdown(results: Sequence[MatmulResult]) -> str:
    """Matmul results as a Markdown table, with any spread warnings below it."""
    lines = ["| " + " | ".join(_TABLE_HEADER) + " |", "|" + "---:|" * len(_TABLE_HEADER)]
    lines += ["| " + " | ".join(_table_row(r)) + " |" for r in results]
    lines += _warnings(results)
    return "\n".join(lines)


def _label(r: Spread) -> str:
    if isinstance(r, MatmulResult):
        return f"{r.device} n={r.n}"
    if isinstance(r, OpResult):
        return f"{r.device} {r.name}"
    if isinstance(r, LaunchTiming):
        return f"{r.device} tiny op, {r.mode}"
    return "timing"


def _warnings(results: Sequence[Spread]) -> list[str]:
    """Spread warnings as one Markdown admonition (empty when every spread is small)."""
    found = [f"    - {_label(r)}: {r.spread_warning}." for r in results if r.spread_warning]
    if not found:
        return []
    return ["", '!!! warning "Spread warning"', *found]


def to_text(results: Sequence[MatmulResult]) -> str:
    """Matmul results as an aligned plain-text table for the terminal."""
    if not results:
        return "no measurements"
    first = results[0]
    rows = [_TABLE_HEADER] + [_table_row(r) for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_TABLE_HEADER))]
    lines = [
        f"device {first.device}, dtype {first.dtype}, {first.threads} threads, "
        f"barrier: {barrier_name(first.device)}",
        "",
    ]
    lines += ["  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    lines += [f"warning, {_label(r)}: {r.spread_warning}" for r in results if r.spread_warning]
    lines += ["", COMPARE_HINT]
    return "\n".join(lines)


def comparison_markdown(comparison: SweepComparison) -> str:
    """The CPU-vs-GPU sweep as one table, with copy times and the crossover."""
    gpu_name = comparison.gpu_device or "GPU"
    gpu = {r.n: r for r in comparison.gpu}
    pageable = {r.n: o for r, o in zip(comparison.gpu, comparison.pageable, strict=False)}
    pinned = {r.n: o for r, o in zip(comparison.gpu, comparison.pinned, strict=False)}
    sizes = sorted({r.n for r in comparison.cpu} | set(gpu))
    cpu = {r.n: r for r in comparison.cpu}
    if comparison.gpu_device is None:
        lines = ["| n | CPU median (ms) | CPU GFLOP/s | GPU |", "|---:|---:|---:|---|"]
        for r in comparison.cpu:
            lines.append(
                f"| {r.n} | {_ms(r.median_s)} | {_gflops(r.flop_per_s)} | {NO_CUDA_TEXT} |"
            )
    else:
        lines = [
            "| n | CPU median (ms) | CPU GFLOP/s | "
            f"{gpu_name} median (ms) | {gpu_name} GFLOP/s | {gpu_name}/CPU speedup | "
            "copy A, B to GPU, pageable (ms) | pinned (ms) |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
    for n in sizes if comparison.gpu_device else ():
        c, g = cpu.get(n), gpu.get(n)
        speedup = comparison.speedup(n)
        cells = [
            str(n),
            _ms(c.median_s) if c else "over the CPU budget",
            _gflops(c.flop_per_s) if c else "over the CPU budget",
            _ms(g.median_s) if g else "over the GPU budget",
            _gflops(g.flop_per_s) if g else "over the GPU budget",
            f"{speedup:.2f}x" if speedup is not None else "needs both",
            _ms(pageable[n].median_s) if n in pageable else "not measured",
            _ms(pinned[n].median_s)
            if n in pinned
            else ("needs CUDA" if comparison.gpu_device == "mps" else "not measured"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    if comparison.gpu_device is None:
        lines.append(
            f"GPU column: {NO_CUDA_TEXT} (and no Apple GPU), so no GPU time, speedup, copy "
            "time or crossover was measured here. The CPU columns are this build's CPU."
        )
    elif comparison.crossover_n is None:
        lines.append(f"The {gpu_name} did not beat the CPU at any size measured together.")
    else:
        lines.append(
            f"The {gpu_name} is faster than the CPU from n = {comparison.crossover_n} on, at "
            "every size measured on both."
        )
    bound = comparison.transfer_bound_up_to_n
    if comparison.pageable and bound is not None:
        lines.append(
            f" Up to n = {bound}, copying the two operands to the {gpu_name} (pageable) takes "
            "longer than multiplying them there: a job that copies its operands for every "
            "multiply at those sizes is transfer-bound."
        )
    elif comparison.pageable:
        lines.append(
            f" At every size measured, the pageable copy of the operands to the {gpu_name} "
            "took less time than the multiply."
        )
    lines += _warnings(list(comparison.cpu) + list(comparison.gpu))
    return "\n".join(lines)


def sweep_chart(comparison: SweepComparison) -> str:
    """Achieved GFLOP/s against n for the CPU and the GPU: a chart (Vega-Lite) in a figure."""
    series = [charts.Series("CPU", tuple((float(r.n), r.flop_per_s / 1e9) for r in comparison.cpu))]
    if comparison.gpu:
        series.append(
            charts.Series(
                comparison.gpu_device or "GPU",
                tuple((float(r.n), r.flop_per_s / 1e9) for r in comparison.gpu),
            )
        )
    note = "" if comparison.gpu else f" ({NO_CUDA_TEXT})"
    spec = charts.line_chart(
        series,
        x_label="matrix size n (log scale)",
        y_label="achieved GFLOP/s (log scale)",
        title=f"Matmul throughput by size{note}",
        x_base=2,
    )
    return charts.to_html(
        spec, caption="Matmul throughput by size: every value is in the table above."
    )


def illusion_markdown(result: IllusionResult) -> str:
    """Honest against naive timing of one matmul, with the CPU baseline."""
    h, v = result.honest, result.naive
    rows = [
        ("honest: barrier at start and stop", h),
        ("naive: no barrier before stopping", v),
    ]
    lines = [
        f"| {h.device}, n = {h.n}, {h.dtype} | median (ms) | IQR (ms) | repeats | GFLOP/s |",
        "|---|---:|---:|---:|---:|",
    ]
    for label, r in rows:
        lines.append(
            f"| {label} | {_ms(r.median_s)} | {_ms(r.iqr_s)} | {r.repeats} | "
            f"{_gflops(r.flop_per_s)} |"
        )
    lines.append("")
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
    head = " | ".join(
        [f"source's launch, {_time(t.launch_s)}"]
        + [f"launch {_time(x.launch_s)}" for x in c.corrected]
    )

    def row(label: str, arithmetic: str, cells: list[str]) -> str:
        return f"| {label} | {arithmetic} | " + " | ".join(cells) + " |"

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
            f"| | arithmetic | {head} |",
            "|---|---|" + "---:|" * len(examples),
            row("GPU time, honest", "kernel + launch", [_time(x.gpu_honest_s) for x in examples]),
            row("GPU time, naive", "launch only", [_time(x.gpu_naive_s) for x in examples]),
            row(
                "speedup, honest",
                f"{t.cpu_s:g} s / honest",
                [_ratio(x.honest_speedup) for x in examples],
            ),
            row(
                "speedup, naive",
                f"{t.cpu_s:g} s / naive",
                [_ratio(x.naive_speedup) for x in examples],
            ),
            row("illusion", "naive / honest speedup", [_ratio(x.illusion) for x in examples]),
            row(
                f"a {t.cpu_job_s / 3600:g}-hour CPU job, honest",
                f"{t.cpu_job_s:,.0f} s / honest speedup",
                [_time(x.job_honest_s) for x in examples],
            ),
            row(
                "the same job, naive",
                f"{t.cpu_job_s:,.0f} s / naive speedup",
                [_time(x.job_naive_s) for x in examples],
            ),
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
    lines = [
        f"| {r.op} on {r.device} | median per call (µs) | IQR (µs) | samples | calls per sample |",
        "|---|---:|---:|---:|---:|",
    ]
    labels = {"eager": "eager (one PyTorch call each)", "cuda-graph": "CUDA graph replay"}
    for t in timings:
        lines.append(
            f"| {labels.get(t.mode, t.mode)} | {_us(t.median_s)} | {_us(t.iqr_s)} | "
            f"{t.repeats} | {t.calls_per_sample:,} |"
        )
    lines.append("")
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


def flops_markdown(counts: Sequence[FlopCount]) -> str:
    """2n^3 for a few sizes, with the ratio to the first (``results.flop_counts``)."""
    lines = [
        f"| n | 2n^3 FLOPs | relative to n = {counts[0].n} |",
        "|---:|---:|---:|",
    ]
    for c in counts:
        lines.append(f"| {c.n:,} | {_sci(c.flops)} | {c.relative_to_first:.3f}x |")
    return "\n".join(lines)


def cpu_peak_markdown(roof: CpuRoof) -> str:
    """The CPU peak model's terms, its bounds, the best measured matmul, and what they imply."""
    p = roof.peak

    def known(value: object, text: str) -> str:
        return text if value is not None else "not revealed"

    per_unit = p.per_fma_unit_flop_per_s
    bounds = " or ".join(f"{_gflops(rate)}" for _, rate in p.bounds_flop_per_s)
    units = " or ".join(str(u) for u in FMA_UNIT_BOUNDS)
    clock = f"{p.clock_hz / 1e9:.3g} GHz" if p.clock_hz is not None else None
    lines = [
        f"| term of the CPU peak ({p.dtype}) | value | where it comes from |",
        "|---|---:|---|",
        f"| cores | {known(p.cores, str(p.cores))} | {p.cores_source} |",
        "| FMA units per core | not revealed | the CPU does not report it; vendors' "
        f"optimization manuals do ({units} on current cores) |",
        f"| SIMD lanes | {known(p.simd_lanes, str(p.simd_lanes))} | "
        f"{p.simd or 'CPU flags'}: {p.lanes_note} |",
        f"| FLOPs per lane per FMA | {FLOPS_PER_FMA_LANE} | a multiply and an add"
        + ("" if p.fma else " (no FMA flag: on separate units)")
        + " |",
        f"| clock | {clock or 'not revealed'} | {p.clock_source} |",
    ]
    if per_unit is not None:
        lines += [
            f"| peak per FMA unit (GFLOP/s) | {_gflops(per_unit)} | "
            f"{p.cores} x {p.simd_lanes} x {FLOPS_PER_FMA_LANE} x {clock} |",
            f"| peak with {units} FMA units per core (GFLOP/s) | {bounds} | "
            f"peak per FMA unit x {units} |",
        ]
    lines += [
        f"| best measured matmul (GFLOP/s) | {_gflops(roof.achieved_flop_per_s)} | "
        f"{roof.achieved_source} |",
        "",
    ]
    achieved = f"{_gflops(roof.achieved_flop_per_s)} GFLOP/s"
    implied = roof.fma_units_implied
    verdict = roof.verdict
    if verdict == "unknown":
        lines.append(
            f"This machine does not reveal its {', '.join(p.unknown_terms[1:])}, so the model "
            f"gives no peak here; the roof this page can count on is the measured {achieved}."
        )
    elif verdict == "below_one_unit":
        lines.append(
            f"The best matmul measured here reached {implied:.0%} of the one-unit peak, so this "
            "measurement cannot tell whether the cores have one FMA unit or two; the achievable "
            f"roof is the measured {achieved}."
        )
    elif verdict == "needs_two_units":
        lines.append(
            f"The best matmul measured here ran at {implied:.2f} times the one-unit peak: "
            "faster than one FMA unit per core can go, so these cores have at least two, and "
            f"the matmul reached {implied / FMA_UNIT_BOUNDS[-1]:.0%} of the two-unit peak. "
            f"The achievable roof is the measured {achieved}."
        )
    else:
        lines.append(
            f"The best matmul measured here ran at {implied:.2f} times the one-unit peak, "
            f"faster than even {FMA_UNIT_BOUNDS[-1]} FMA units per core at {clock}: the cores "
            "ran above the clock the machine reported (boost), or have more units. The "
            f"achievable roof is the measured {achieved}."
        )
    return "\n".join(lines)


# An op right of the ridge is called compute-bound only once it reaches half its roof;
# below that the table says the roof is above it and how much of it the op reached.
HALF_OF_ROOF = 0.5


def _regime(p: Placement) -> str:
    """The regime, with the share: a compute-side op well short of the peak is not "bound".

    >>> from types import SimpleNamespace as NS
    >>> _regime(NS(regime="compute-bound", share_of_ceiling=0.3))
    'compute roof above it, reached 30%'
    >>> _regime(NS(regime="memory-bound", share_of_ceiling=0.72))
    'memory-bound'
    """
    if p.regime == "compute-bound" and p.share_of_ceiling < HALF_OF_ROOF:
        return f"compute roof above it, reached {p.share_of_ceiling:.0%}"
    return p.regime


def roofline_markdown(roof: Roofline) -> str:
    """Bandwidth, peak, ridge, and each operation's place under the roof."""
    gbps = roof.bandwidth_bytes_per_s / GB
    lines = [
        "| quantity | measured on " + roof.device + " | how |",
        "|---|---:|---|",
        f"| memory bandwidth | {gbps:,.1f} GB/s | {roof.bandwidth.name}, "
        f"{roof.bandwidth.bytes_moved / MIB:,.0f} MiB read + written / median time |",
        f"| matmul peak | {_gflops(roof.peak_flop_per_s)} GFLOP/s | "
        f"{roof.peak.name}, fp32: 2n^3 / median time |",
        f"| ridge point | {roof.ridge_flop_per_byte:,.1f} FLOP/byte | peak / bandwidth |",
        "",
        "| operation | FLOP/byte | achieved GFLOP/s | ceiling at that intensity (GFLOP/s) "
        "| share of ceiling | regime |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for p in roof.placements:
        op = p.op
        lines.append(
            f"| {op.name} | {op.intensity_flop_per_byte:.3g} | {_gflops(op.flop_per_s)} | "
            f"{_gflops(p.ceiling_flop_per_s)} | {p.share_of_ceiling:.0%} | {_regime(p)} |"
        )
    lines += _warnings([roof.bandwidth, *(op for op in roof.ops if op is not roof.bandwidth)])
    return "\n".join(lines)


def roofline_chart(roof: Roofline) -> str:
    """The measured roofline with the operations placed on it: a chart (Vega-Lite) in a figure."""
    spec = charts.roofline_chart(
        peak_flop_per_s=roof.peak_flop_per_s,
        bandwidth_bytes_per_s=roof.bandwidth_bytes_per_s,
        points=tuple(
            charts.Point(op.name, op.intensity_flop_per_byte, op.flop_per_s) for op in roof.ops
        ),
        title=f"Roofline measured on {roof.device}",
    )
    return charts.to_html(
        spec,
        caption="The roofline and the operations under it: every value is in the tables above.",
    )


def precision_markdown(p: PrecisionTraffic) -> str:
    """The fp32-vs-bf16 add as a small table."""
    lines = [
        f"| c = a + b, {p.fp32.flops:,} elements on {p.fp32.device} | bytes moved (MiB) "
        "| median (ms) | GB/s |",
        "|---|---:|---:|---:|",
    ]
    for op in (p.fp32, p.bf16):
        lines.append(
            f"| {op.dtype} | {op.bytes_moved / MIB:,.0f} | {_ms(op.median_s)} | "
            f"{op.bytes_per_s / GB:,.1f} |"
        )
    lines += ["", f"bf16 moves half the bytes and runs {p.speedup:.2f}x as fast here."]
    lines += _warnings([p.fp32, p.bf16])
    return "\n".join(lines)


def link_markdown(link: LinkBandwidth | None) -> str:
    """The link table, or a plain statement that no GPU was present, with the source's ranges."""
    quoted = (
        f"The source lesson's ranges (quoted, not measured here): PCIe about "
        f"{SOURCE_PCIE_GB_PER_S[0]}-{SOURCE_PCIE_GB_PER_S[1]} GB/s, on-device memory about "
        f"{SOURCE_ON_DEVICE_TB_PER_S[0]}-{SOURCE_ON_DEVICE_TB_PER_S[1]} TB/s."
    )
    if link is None:
        return (
            f"Host-to-device copies: {NO_CUDA_TEXT}, so there is no PCIe link to measure; "
            f"this build's on-device figure is the CPU's memory bandwidth above. {quoted}"
        )
    rows = [("host to device, pageable", link.pageable)]
    if link.pinned is not None:
        rows.append(("host to device, pinned", link.pinned))
    rows.append((f"on {link.device}, device to device", link.on_device))
    lines = ["| copy | bytes moved (MiB) | median (ms) | GB/s |", "|---|---:|---:|---:|"]
    for label, op in rows:
        lines.append(
            f"| {label} | {op.bytes_moved / MIB:,.0f} | {_ms(op.median_s)} | "
            f"{op.bytes_per_s / GB:,.1f} |"
        )
    lines += [
        "",
        f"On-device copies run {link.on_device_over_link:.0f}x faster than the host link here. "
        f"{quoted}",
    ]
    lines += _warnings([op for _, op in rows])
    return "\n".join(lines)


MISSING = "—"
DATASHEET_DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8")


def _tflops_cell(flop_per_s: float | None) -> str:
    return MISSING if flop_per_s is None else f"{flop_per_s / 1e12:,.1f}"


def _sources(sheet: Datasheet) -> str:
    for s in sheet.sources:  # a link's target is data too: a plain https URL, nothing else
        if not re.fullmatch(r"https://[^\s()<>\\]+", s.url):
            raise ValueError(
                f"datasheet {sheet.id!r}: source {s.title!r} has url {s.url!r}, not a plain "
                "https:// URL: fix it in gpulesson/results/datasheets.json"
            )
    return ", ".join(f"[{inert(s.title)}]({s.url})" for s in sheet.sources)


def gpu_peaks_markdown(
    device_name: str | None, sheet: Datasheet | None, measured: Sequence[Measurement]
) -> str:
    """Measured matmul peaks of one GPU beside its datasheet's dense peaks, dtype by dtype.

    ``measured`` are ``matmul_peak.<dtype>`` measurements (a bundle's, or this build's from
    the same suite entry); each fraction is :func:`gpulesson.results.compare.datasheet_fraction`.
    With no device at all it says that nothing was measured. Used by ``why-gpus.md``.

    >>> from gpulesson.results import datasheets
    >>> print(gpu_peaks_markdown("NVIDIA H100 80GB HBM3", datasheets.get("h100-sxm"), ()
    ...       ).splitlines()[2])
    | fp32 | not measured | 67.0 | — |
    >>> gpu_peaks_markdown(None, None, ())[:40]
    'No CUDA GPU in this build and no referen'
    """
    from gpulesson.results.compare import datasheet_fraction

    if device_name is None:
        return (
            "No CUDA GPU in this build and no reference result bundle, so no GPU matmul was "
            "measured for this table. The datasheet peaks of common GPUs, with their sources, "
            "are on [Results across GPUs](../../results/)."  # a site URL: not rewritten
        )
    by_dtype = {m.dtype: m for m in measured if m.dtype}
    dtypes = [
        d
        for d in DATASHEET_DTYPES
        if d in by_dtype or (sheet is not None and sheet.dense_flop_per_s(d) is not None)
    ]
    lines = [
        f"| {inert(device_name)}: matmul | best measured (TFLOP/s) "
        "| datasheet dense peak (TFLOP/s) | measured / datasheet |",
        "|---|---:|---:|---:|",
    ]
    for d in dtypes:
        m = by_dtype.get(d)
        peak = sheet.dense_flop_per_s(d) if sheet is not None else None
        fraction = datasheet_fraction(m, sheet) if m is not None else None
        lines.append(
            f"| {d} | {_tflops_cell(m.value) if m else 'not measured'} | "
            f"{_tflops_cell(peak)} | {MISSING if fraction is None else f'{fraction:.0%}'} |"
        )
    lines.append("")
    if sheet is None:
        lines.append(
            f"gpulesson's datasheet table has no row for {inert(device_name)}, so there is no "
            "peak to compare against (`gpulesson/results/datasheets.json`)."
        )
    else:
        halved = [d for d in dtypes if d in sheet.peaks and sheet.peaks[d].with_sparsity]
        note = (
            f" The {', '.join(halved)} figures are half the printed ones, which assume 2:4 "
            "structured sparsity (NVIDIA's footnote)."
            if halved
            else ""
        )
        lines.append(f"Datasheet: {_sources(sheet)}.{note}")
    return "\n".join(lines)


def datasheets_markdown(
    rows: Sequence[Datasheet], dtypes: Sequence[str] = ("fp32", "bf16", "fp16")
) -> str:
    """Memory bandwidth and dense peaks of some GPUs, as their datasheets print them.

    A dash means the datasheet gives no figure (a dtype the card has no tensor cores for).
    Used by ``roofline.md``.

    >>> from gpulesson.results import datasheets
    >>> print(datasheets_markdown([datasheets.get("t4")]).splitlines()[2][:36])
    | NVIDIA T4 | 320 | 8.1 | — | 65.0 |
    """
    head = " | ".join(f"dense {d} (TFLOP/s)" for d in dtypes)
    lines = [
        f"| GPU | memory bandwidth (GB/s) | {head} | source |",
        "|---|---:|" + "---:|" * len(dtypes) + "---|",
    ]
    for r in rows:
        peaks = " | ".join(_tflops_cell(r.dense_flop_per_s(d)) for d in dtypes)
        lines.append(
            f"| {inert(r.name)} | {r.memory_bandwidth_stated_gb_per_s:,.0f} | {peaks} | "
            f"{_sources(r)} |"
        )
    return "\n".join(lines)
