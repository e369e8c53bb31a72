"""Rendering of timing, roofline and teaching results: Markdown, text, JSON and SVG.

Compute functions in ``gpulesson.timing.bench``, ``gpulesson.timing.roofline`` and
``gpulesson.timing.teaching`` return data; the functions here turn that data into what a
lesson page or the terminal shows. Used by the lessons ``why-gpus.md``,
``timing.md`` and ``roofline.md`` and by ``gpulesson bench``.

>>> from gpulesson.timing.bench import MatmulResult
>>> print(to_markdown([MatmulResult("cpu", "fp32", 64, 1, (0.001,))]).splitlines()[2])
| 64 | 1 | 0 | 1 | 1 | 1 | 5.24e+05 | 0.5 |
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from gpulesson.timing import charts
from gpulesson.timing.bench import (
    NO_CUDA_TEXT,
    SPREAD_WARNING_IQR_SHARE,
    IllusionResult,
    MatmulResult,
    OpResult,
    SweepComparison,
    _Spread,
    barrier_name,
    matmul_flops,
)
from gpulesson.timing.roofline import (
    SOURCE_ON_DEVICE_TB_PER_S,
    SOURCE_PCIE_GB_PER_S,
    LinkBandwidth,
    PrecisionTraffic,
    Roofline,
)
from gpulesson.timing.teaching import LaneEstimate, TeachingTiming
from gpulesson.units import GB, MIB


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g}"


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


def _label(r: _Spread) -> str:
    if isinstance(r, MatmulResult):
        return f"{r.device} n={r.n}"
    if isinstance(r, OpResult):
        return f"{r.device} {r.name}"
    return "timing"


def _warnings(results: Sequence[_Spread]) -> list[str]:
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
    """Achieved GFLOP/s against n for the CPU and the GPU, as inline SVG."""
    series = [charts.Series("CPU", tuple((float(r.n), r.flop_per_s / 1e9) for r in comparison.cpu))]
    if comparison.gpu:
        series.append(
            charts.Series(
                comparison.gpu_device or "GPU",
                tuple((float(r.n), r.flop_per_s / 1e9) for r in comparison.gpu),
            )
        )
    note = "" if comparison.gpu else f" ({NO_CUDA_TEXT})"
    return charts.line_chart(
        series,
        x_label="matrix size n (log scale)",
        y_label="achieved GFLOP/s (log scale)",
        title=f"Matmul throughput by size{note}",
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


def teaching_timing_markdown(t: TeachingTiming | None = None) -> str:
    """The source's teaching figures and the arithmetic that turns them into ratios."""
    t = t or TeachingTiming()
    return "\n".join(
        [
            f"Teaching estimate (not a measurement), one {t.n} x {t.n} fp32 matmul: "
            f"CPU {t.cpu_s} s, GPU kernel {t.kernel_s} s, launch {t.launch_s * 1e3:g} ms.",
            "",
            "| | arithmetic | result |",
            "|---|---|---:|",
            f"| GPU time, honest | kernel + launch = {t.kernel_s} + {t.launch_s} s "
            f"| {t.gpu_honest_s:.3f} s |",
            f"| GPU time, naive | launch only | {t.gpu_naive_s:.3f} s |",
            f"| speedup, honest | {t.cpu_s} / {t.gpu_honest_s:.3f} | {t.honest_speedup:.1f}x |",
            f"| speedup, naive | {t.cpu_s} / {t.gpu_naive_s:.3f} | {t.naive_speedup:,.0f}x |",
            f"| illusion | {t.naive_speedup:,.0f} / {t.honest_speedup:.1f} | {t.illusion:.0f}x |",
            f"| a 10-hour CPU job, honest | 600 min / {t.honest_speedup:.1f} | "
            f"{600 / t.honest_speedup:.1f} min |",
            f"| the same job, naive | 36,000 s / {t.naive_speedup:,.0f} | "
            f"{36000 / t.naive_speedup:.0f} s |",
        ]
    )


def flops_markdown(sizes: Sequence[int] = (4000, 5000, 10000)) -> str:
    """2n^3 for a few sizes, with the ratio to the first."""
    base = matmul_flops(sizes[0])
    lines = ["| n | 2n^3 FLOPs | relative to n = " + str(sizes[0]) + " |", "|---:|---:|---:|"]
    for n in sizes:
        lines.append(f"| {n:,} | {_sci(matmul_flops(n))} | {matmul_flops(n) / base:.3f}x |")
    return "\n".join(lines)


def lane_estimate_markdown(e: LaneEstimate | None = None) -> str:
    """The lane-width teaching estimate with its arithmetic."""
    e = e or LaneEstimate()
    return "\n".join(
        [
            "| | arithmetic | lane-cycles per second |",
            "|---|---|---:|",
            f"| CPU (example) | {e.cpu_cores} cores x {e.cpu_hz / 1e9:g} GHz | "
            f"{_sci(e.cpu_lane_cycles_per_s)} |",
            f"| GPU (example) | {e.gpu_lanes:,} lanes x {e.gpu_hz / 1e9:g} GHz | "
            f"{_sci(e.gpu_lane_cycles_per_s)} |",
            f"| ratio | {_sci(e.gpu_lane_cycles_per_s)} / {_sci(e.cpu_lane_cycles_per_s)} | "
            f"{e.ratio:.0f}x |",
        ]
    )


def roofline_markdown(roof: Roofline) -> str:
    """Bandwidth, peak, ridge, and each operation's place under the roof."""
    gbps = roof.bandwidth_bytes_per_s / GB
    lines = [
        "| quantity | measured on " + roof.device + " | how |",
        "|---|---:|---|",
        f"| memory bandwidth | {gbps:,.1f} GB/s | copy of "
        f"{roof.bandwidth.bytes_moved // 2 // MIB} MiB: bytes read + written / median time |",
        f"| matmul peak | {_gflops(roof.peak_flop_per_s)} GFLOP/s | "
        f"{roof.peak.name}, fp32: 2n^3 / median time |",
        f"| ridge point | {roof.ridge_flop_per_byte:,.1f} FLOP/byte | peak / bandwidth |",
        "",
        "| operation | FLOP/byte | achieved GFLOP/s | ceiling at that intensity (GFLOP/s) "
        "| share of ceiling | regime |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for op in roof.ops:
        ceiling = roof.ceiling_flop_per_s(op.intensity_flop_per_byte)
        lines.append(
            f"| {op.name} | {op.intensity_flop_per_byte:.3g} | {_gflops(op.flop_per_s)} | "
            f"{_gflops(ceiling)} | {op.flop_per_s / ceiling:.0%} | {roof.bound(op)} |"
        )
    lines += _warnings([roof.bandwidth, *roof.ops])
    return "\n".join(lines)


def roofline_chart(roof: Roofline) -> str:
    """The measured roofline with the operations placed on it, as inline SVG."""
    return charts.roofline_chart(
        peak_flop_per_s=roof.peak_flop_per_s,
        bandwidth_bytes_per_s=roof.bandwidth_bytes_per_s,
        points=tuple(
            charts.Point(op.name, op.intensity_flop_per_byte, op.flop_per_s) for op in roof.ops
        ),
        title=f"Roofline measured on {roof.device}",
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
    ratio = link.on_device.bytes_per_s / (link.pinned or link.pageable).bytes_per_s
    lines += ["", f"On-device copies run {ratio:.0f}x faster than the host link here. {quoted}"]
    lines += _warnings([op for _, op in rows])
    return "\n".join(lines)
