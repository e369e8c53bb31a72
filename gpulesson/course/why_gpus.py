"""The lesson ``why-gpus.md``: its renderers and texts.

Its pictures and tables: the matmul sweep (table and chart), the FLOP count, the CPU peak
model, the GPUs' datasheet peaks and the throughput race (a teaching simulation).

Renderers take the frozen results of the topic packages and return Markdown, HTML or chart
markup; nothing here measures. See :mod:`gpulesson.course`.

>>> from gpulesson.timing.results import MatmulResult
>>> r = MatmulResult(device="cpu", dtype="fp32", n=64, threads=1, samples_s=(0.001,))
>>> print(to_markdown([r]).splitlines()[2])
| 64 | 1 | 0 | 1 | 1 | 1 | 5.24e+05 | 0.5 |
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gpulesson.tables import markdown_table
from gpulesson.text import inert
from gpulesson.timing import charts
from gpulesson.timing.peak import FLOPS_PER_FMA_LANE, FMA_UNIT_BOUNDS, CpuRoof
from gpulesson.timing.race import RaceTable
from gpulesson.timing.results import (
    FlopCount,
    MatmulResult,
    Spread,
    SweepComparison,
)
from gpulesson.timing.teaching import SOURCE_LAUNCH_S

if TYPE_CHECKING:
    from gpulesson.results.bundle import Measurement
    from gpulesson.results.datasheets import Datasheet
from gpulesson.timing.render import _TABLE_HEADER, _gflops, _label, _ms, _table_row

NO_CUDA_TEXT = "no CUDA device in this build"


def _sci(value: float) -> str:
    """Scientific notation for prose.

    >>> _sci(2.5e11)
    '2.5 x 10^11'
    """
    exponent = math.floor(math.log10(abs(value)))
    mantissa = value / 10**exponent
    return f"{mantissa:.3g} x 10^{exponent}"


def to_markdown(results: Sequence[MatmulResult]) -> str:
    """Matmul results as a Markdown table, with any spread warnings below it."""
    table = markdown_table(
        _TABLE_HEADER, [_table_row(r) for r in results], align="r" * len(_TABLE_HEADER)
    )
    lines = table.splitlines()
    lines += _warnings(results)
    return "\n".join(lines)


def _warnings(results: Sequence[Spread]) -> list[str]:
    """Spread warnings as one Markdown admonition (empty when every spread is small)."""
    found = [f"    - {_label(r)}: {r.spread_warning}." for r in results if r.spread_warning]
    if not found:
        return []
    return ["", '!!! warning "Spread warning"', *found]


def comparison_markdown(comparison: SweepComparison) -> str:
    """The CPU-vs-GPU sweep as one table, with copy times and the crossover."""
    gpu_name = comparison.gpu_device or "GPU"
    gpu = {r.n: r for r in comparison.gpu}
    pageable = {r.n: o for r, o in zip(comparison.gpu, comparison.pageable, strict=False)}
    pinned = {r.n: o for r, o in zip(comparison.gpu, comparison.pinned, strict=False)}
    sizes = sorted({r.n for r in comparison.cpu} | set(gpu))
    cpu = {r.n: r for r in comparison.cpu}
    header: tuple[str, ...] = ("n", "CPU median (ms)", "CPU GFLOP/s")
    if comparison.gpu_device is None:
        header += ("GPU",)
        align = "rrrl"
        rows = [
            [str(r.n), _ms(r.median_s), _gflops(r.flop_per_s), NO_CUDA_TEXT] for r in comparison.cpu
        ]
    else:
        header += (
            f"{gpu_name} median (ms)",
            f"{gpu_name} GFLOP/s",
            f"{gpu_name}/CPU speedup",
            "copy A, B to GPU, pageable (ms)",
            "pinned (ms)",
        )
        align = "r" * len(header)
        rows = []
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
        rows.append(cells)
    lines = [markdown_table(header, rows, align=align), ""]
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


def flops_markdown(counts: Sequence[FlopCount]) -> str:
    """2n^3 for a few sizes, with the ratio to the first (``results.flop_counts``)."""
    return markdown_table(
        ("n", "2n^3 FLOPs", f"relative to n = {counts[0].n}"),
        [(f"{c.n:,}", _sci(c.flops), f"{c.relative_to_first:.3f}x") for c in counts],
        align="rrr",
    )


def cpu_peak_markdown(roof: CpuRoof) -> str:
    """The CPU peak model's terms, its bounds, the best measured matmul, and what they imply."""
    p = roof.peak

    def known(value: object, text: str) -> str:
        return text if value is not None else "not revealed"

    per_unit = p.per_fma_unit_flop_per_s
    bounds = " or ".join(f"{_gflops(rate)}" for _, rate in p.bounds_flop_per_s)
    units = " or ".join(str(u) for u in FMA_UNIT_BOUNDS)
    clock = f"{p.clock_hz / 1e9:.3g} GHz" if p.clock_hz is not None else None
    rows = [
        ("cores", known(p.cores, str(p.cores)), p.cores_source),
        (
            "FMA units per core",
            "not revealed",
            f"the CPU does not report it; vendors' optimization manuals do ({units} on current "
            "cores)",
        ),
        (
            "SIMD lanes",
            known(p.simd_lanes, str(p.simd_lanes)),
            f"{p.simd or 'CPU flags'}: {p.lanes_note}",
        ),
        (
            "FLOPs per lane per FMA",
            str(FLOPS_PER_FMA_LANE),
            "a multiply and an add" + ("" if p.fma else " (no FMA flag: on separate units)"),
        ),
        ("clock", clock or "not revealed", p.clock_source),
    ]
    if per_unit is not None:
        rows += [
            (
                "peak per FMA unit (GFLOP/s)",
                _gflops(per_unit),
                f"{p.cores} x {p.simd_lanes} x {FLOPS_PER_FMA_LANE} x {clock}",
            ),
            (
                f"peak with {units} FMA units per core (GFLOP/s)",
                bounds,
                f"peak per FMA unit x {units}",
            ),
        ]
    rows.append(
        ("best measured matmul (GFLOP/s)", _gflops(roof.achieved_flop_per_s), roof.achieved_source)
    )
    lines = [
        markdown_table(
            (f"term of the CPU peak ({p.dtype})", "value", "where it comes from"), rows, align="lrl"
        ),
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
    rows = []
    for d in dtypes:
        m = by_dtype.get(d)
        peak = sheet.dense_flop_per_s(d) if sheet is not None else None
        fraction = datasheet_fraction(m, sheet) if m is not None else None
        rows.append(
            (
                d,
                _tflops_cell(m.value) if m else "not measured",
                _tflops_cell(peak),
                MISSING if fraction is None else f"{fraction:.0%}",
            )
        )
    header = (
        f"{inert(device_name)}: matmul",
        "best measured (TFLOP/s)",
        "datasheet dense peak (TFLOP/s)",
        "measured / datasheet",
    )
    lines = [markdown_table(header, rows, align="lrrr"), ""]
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


# --- the throughput race (a teaching simulation) ------------------------------------


def race_lab_html(table: RaceTable) -> str:
    """The race lab's container, carrying the CPU rate the table above it used.

    >>> from gpulesson.timing.race import race_table
    >>> race_lab_html(race_table((64,), cpu_flop_per_s=1.5e11))
    '<div class="gl-lab" data-lab="race" data-cpu-flop-per-s="150000000000.0"></div>'
    """
    return (
        f'<div class="gl-lab" data-lab="race" '
        f'data-cpu-flop-per-s="{float(table.cpu_flop_per_s)!r}"></div>'
    )


def race_markdown(table: RaceTable) -> str:
    """The race as a Markdown table (teaching simulation), with the computed crossover.

    >>> from gpulesson.timing.race import race_table
    >>> print(race_markdown(race_table((64,))).splitlines()[2])
    | 64 | 5.24e+05 | 10.5 | 10.1 | 1.04 | GPU |
    """

    def us(seconds: float) -> str:
        value = seconds * 1e6
        return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"

    header = (
        "n",
        "FLOPs (2n³)",
        "simulated CPU (µs)",
        "simulated GPU (µs)",
        "speedup (×)",
        "winner",
    )
    cells = [
        (str(r.n), f"{r.flops:.2e}", us(r.cpu_s), us(r.gpu_s), f"{r.speedup:.3g}", r.winner)
        for r in table.rows
    ]
    rows = [
        markdown_table(header, cells, align="rrrrrl"),
        "",
        f"With {table.launch_s * 1e6:g} µs of launch per GPU call, the simulated times are "
        f"equal at n ≈ {table.crossover_n:.0f}, and the GPU wins from n = "
        f"{table.first_gpu_win_n} on in this table. With the source lesson's "
        f"{SOURCE_LAUNCH_S * 1e3:g} ms launch the crossover would sit at n ≈ "
        f"{table.source_crossover_n:.0f}: a launch cost {SOURCE_LAUNCH_S / table.launch_s:,.0f} "
        f"times too large moves it {table.source_crossover_n / table.crossover_n:.0f} times too "
        "far, because the work grows as n³.",
    ]
    return "\n".join(rows)
