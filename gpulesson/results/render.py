"""Render bundles and comparisons as terminal text, Markdown tables and JSON for the browser.

Renderers format; they compute nothing of their own: values, ratios and datasheet fractions
come from :mod:`gpulesson.results.compare`. Each table row shows one measurement in one
display unit, chosen from the largest value in the row and named in the row's unit column
(GB and GB/s are decimal, MiB and GiB binary).

>>> display_unit("FLOP/s", [3.5e9, 8.0e14])
('TFLOP/s', 1000000000000.0)
>>> format_number(989.46), format_number(3.5e-3), format_number(12.0)
('989', '0.0035', '12.0')
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from gpulesson.results.bundle import Measurement
from gpulesson.results.compare import Across, Cell, Comparison, Row, Sourced
from gpulesson.tables import markdown_table
from gpulesson.text import inert
from gpulesson.timing import charts

MISSING = "—"

_SCALES: dict[str, tuple[tuple[str, float], ...]] = {
    "FLOP/s": (("TFLOP/s", 1e12), ("GFLOP/s", 1e9), ("MFLOP/s", 1e6)),
    "B/s": (("GB/s", 1e9), ("MB/s", 1e6)),
    "s": (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)),
    "bytes": (("GiB", 2.0**30), ("MiB", 2.0**20), ("KiB", 2.0**10), ("bytes", 1.0)),
}


def display_scales() -> dict[str, list[list[Any]]]:
    """The display units per unit, largest first, for the browser to choose the same way.

    >>> display_scales()["B/s"]
    [['GB/s', 1000000000.0], ['MB/s', 1000000.0]]
    """
    return {unit: [[name, size] for name, size in scales] for unit, scales in _SCALES.items()}


def display_unit(unit: str, values: Sequence[float]) -> tuple[str, float]:
    """The display unit for a row and its divisor: the largest scale the biggest value reaches.

    >>> display_unit("s", [2e-6, 9e-6])
    ('µs', 1e-06)
    >>> display_unit("ratio", [3.0])
    ('x', 1.0)
    """
    if unit == "ratio":
        return "x", 1.0
    scales = _SCALES.get(unit)
    if not scales:
        return unit, 1.0
    top = max((abs(v) for v in values), default=0.0)
    for name, size in scales:
        if top >= size:
            return name, size
    return scales[-1]


def format_number(value: float) -> str:
    """About three significant figures, thousands separated; small values keep two figures.

    >>> format_number(123456.7), format_number(0.0)
    ('123,457', '0')
    """
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    magnitude = abs(value)
    if magnitude >= 100:
        return f"{value:,.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    digits = 1 - math.floor(math.log10(magnitude))
    return f"{value:.{digits}f}"


def format_fraction(fraction: float | None) -> str:
    """A share as a percentage, or a dash.

    >>> format_fraction(0.7134), format_fraction(None)
    ('71%', '—')
    """
    return MISSING if fraction is None else f"{fraction:.0%}"


def format_ratio(ratio: float | None) -> str:
    """A ratio as '0.21x', or a dash.

    >>> format_ratio(0.2134), format_ratio(12.0), format_ratio(None)
    ('0.21x', '12.0x', '—')
    """
    return MISSING if ratio is None else f"{format_number(ratio)}x"


def _row_scale(row: Row) -> tuple[str, float]:
    return display_unit(row.unit, [c.value for c in row.cells if c is not None])


def _value(cell: Cell | None, size: float) -> str:
    return MISSING if cell is None else format_number(cell.value / size)


def _text_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(header, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    for r in rows:
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return "\n".join(lines)


def provenance_line(sourced: Sourced) -> str:
    """Device, source, date, torch (and its CUDA), gpulesson commit, on one line."""
    p = sourced.bundle.provenance
    cuda = f" (CUDA {p.cuda_version})" if p.cuda_version else ""
    commit = p.gpulesson_commit or "no commit recorded"
    quick = ", --quick" if p.suite.quick else ""
    return (
        f"{p.device_name} [{p.device_type}], {sourced.source} bundle {sourced.file}, "
        f"{p.created_utc}, torch {p.torch_version}{cuda}, gpulesson {p.gpulesson_version} "
        f"({commit}){quick}"
    )


# --- comparison ------------------------------------------------------------------------


def comparison_rows(comparison: Comparison) -> tuple[list[str], list[list[str]]]:
    """Header and rows shared by the text and Markdown comparison tables."""
    header = ["measurement", "unit", "mine", "mine: of datasheet"]
    for i, _other in enumerate(comparison.others, start=1):
        header += [f"[{i}]", f"[{i}]: of datasheet", f"mine ÷ [{i}]"]
    rows = []
    for row in comparison.rows:
        unit, size = _row_scale(row)
        mine = row.cells[0]
        mine_fraction = mine.datasheet_fraction if mine else None
        line = [row.label, unit, _value(mine, size), format_fraction(mine_fraction)]
        for cell in row.cells[1:]:
            line += [
                _value(cell, size),
                format_fraction(cell and cell.datasheet_fraction),
                format_ratio(cell and cell.ratio_to_mine),
            ]
        rows.append(line)
    return header, rows


def comparison_to_text(comparison: Comparison) -> str:
    """The comparison as the terminal shows it: who is who, then the table."""
    lines = [f"mine: {provenance_line(comparison.mine)}"]
    for i, other in enumerate(comparison.others, start=1):
        lines.append(f"[{i}]:  {provenance_line(other)}")
    if not comparison.others:
        lines.append("(nothing to compare against: this bundle's own figures)")
    header, rows = comparison_rows(comparison)
    if not rows:
        lines += ["", "This bundle has no headline figures; use --all to see every figure."]
        return "\n".join(lines)
    lines += ["", _text_table(header, rows)]
    return "\n".join(lines)


def comparison_to_markdown(comparison: Comparison) -> str:
    """The comparison as a Markdown table, with who is who above it."""
    lines = [f"- mine: {inert(provenance_line(comparison.mine))}"]
    for i, other in enumerate(comparison.others, start=1):
        lines.append(f"- [{i}]: {inert(provenance_line(other))}")
    header, rows = comparison_rows(comparison)
    # The header is this module's own text ("[1]: of datasheet"); the cells hold bundle data.
    table = markdown_table(header, rows, align="ll" + "r" * (len(header) - 2), inert_cells=True)
    return "\n".join(lines) + "\n\n" + table


# --- every bundle (the results page) -----------------------------------------------------


def bundles_markdown(bundles: Sequence[Sourced]) -> str:
    """The list of bundles, numbered as the tables' columns, reference and community apart."""
    header = (
        "#",
        "device",
        "source",
        "date (UTC)",
        "torch",
        "CUDA",
        "driver",
        "gpulesson commit",
        "suite",
    )
    rows = []
    for i, s in enumerate(bundles, start=1):
        p = s.bundle.provenance
        suite = "--quick" if p.suite.quick else "full"
        cells = (
            f"[{i}]",
            f"{inert(p.device_name)} ({inert(p.device_type)})",
            inert(s.source),
            inert(p.created_utc),
            inert(p.torch_version),
            inert(p.cuda_version or MISSING),
            inert(p.driver_version or MISSING),
            inert(p.gpulesson_commit or MISSING),
            suite,
        )
        rows.append(cells)
    return markdown_table(header, rows, align="l" * len(header))


def across_to_markdown(table: Across) -> str:
    """One row per measurement, per bundle its value and fraction of its datasheet figure."""
    header = ["measurement", "unit"]
    for i, _s in enumerate(table.bundles, start=1):
        header += [f"[{i}]", f"[{i}] of datasheet"]
    rows = []
    for row in table.rows:
        unit, size = _row_scale(row)
        line = [row.label, unit]
        for cell in row.cells:
            line += [_value(cell, size), format_fraction(cell and cell.datasheet_fraction)]
        rows.append(line)
    # The header is this module's own text ("[1] of datasheet"); the cells hold bundle data.
    return markdown_table(header, rows, align="ll" + "r" * (len(header) - 2), inert_cells=True)


# --- one bundle --------------------------------------------------------------------------


def summary_text(comparison: Comparison) -> str:
    """What ``gpulesson measure --out FILE`` prints: the bundle, its headline figures, and
    the entries that did not run here."""
    mine = comparison.mine
    lines = [
        f"wrote {mine.file}: {len(mine.bundle.measurements)} measurements",
        provenance_line(mine),
    ]
    header, rows = comparison_rows(comparison)
    if rows:
        lines += ["", _text_table(header, rows)]
    if mine.bundle.skipped:
        lines += ["", "not measured here:"]
        lines += [f"  {s.entry}: {s.reason}" for s in mine.bundle.skipped]
    return "\n".join(lines)


# --- the compare page's data ---------------------------------------------------------------


def browser_data(bundles: Sequence[Sourced], datasheet_rows: Sequence[Any]) -> dict[str, Any]:
    """What docs/javascripts/compare.js needs: each bundle's figures and the datasheet peaks."""
    return {
        "references": [
            {
                "label": s.label,
                "device": s.device,
                "source": s.source,
                "date": s.date,
                "torch": s.bundle.provenance.torch_version,
                "device_type": s.bundle.provenance.device_type,
                "datasheet_id": s.bundle.datasheet.id if s.bundle.datasheet else None,
                "measurements": {
                    m.name: {
                        "label": m.label or m.name,
                        "unit": m.unit,
                        "value": m.value,
                        "dtype": m.dtype,
                        "limit": m.limit,
                        "headline": m.headline,
                    }
                    for m in s.bundle.measurements
                },
            }
            for s in bundles
        ],
        "datasheets": {
            row.id: {
                "name": row.name,
                "peaks_flop_per_s": {d: p.dense_flop_per_s for d, p in row.peaks.items()},
                "memory_bandwidth_bytes_per_s": row.memory_bandwidth_bytes_per_s,
            }
            for row in datasheet_rows
        },
    }


# --- charts: the course's charts across bundles, with room for the reader's ----------------

#: The rows of a chart's measurements dataset: one per measurement, its fields copied from
#: the bundle as they are (compare.js writes the reader's bundle the same way); the chart
#: spec filters and scales them.
OVERLAY_DATASET = "measurements"
# Reference series take these colours; the reader's own is charts.READER_COLOUR.
_REFERENCE_COLOURS = tuple(charts.colour(i) for i in (0, 2, 3, 4))
_MATMUL_NAME = "^matmul[.][a-z0-9]+[.]n[0-9]+$"  # the rows the chart draws: matmul.<dtype>.n<size>
_MATMUL_BY_SIZE = f"test(/{_MATMUL_NAME}/, datum.name)"
_SIZE_FROM_NAME = "toNumber(replace(datum.name, /^matmul[.][a-z0-9]+[.]n/, ''))"
#: The smallest and largest n ``gpulesson measure`` sweeps (``entries_matmul.PLANS``): the size
#: axis is exactly this span, so bundles line up and a bundle with one size still has an axis.
SWEEP_SPAN_N = (64, 16384)


def series_label(index: int, sourced: Sourced) -> str:
    """How a chart names bundle ``index`` (1-based, as the tables' columns).

    >>> from types import SimpleNamespace
    >>> series_label(2, SimpleNamespace(device="Tesla T4"))
    '[2] Tesla T4'
    """
    return f"[{index}] {sourced.device}"


def measurement_rows(
    series: str, colour: str, measurements: Sequence[Measurement], *, reader: bool = False
) -> list[dict[str, Any]]:
    """A bundle's measurements as chart rows: name, unit, value and dtype, unchanged.

    >>> m = Measurement(name="matmul.fp32.n64", entry="matmul", unit="FLOP/s", value=2e9,
    ...                 samples=(1.0,), samples_unit="s", dtype="fp32")
    >>> measurement_rows("[1] cpu", "var(--gl-chart-0)", [m])[0]["value"]
    2000000000.0
    """
    return [
        {
            "series": series,
            "colour": colour,
            "reader": reader,
            "name": m.name,
            "unit": m.unit,
            "value": m.value,
            "dtype": m.dtype,
        }
        for m in measurements
    ]


def throughput_chart(bundles: Sequence[Sourced], *, reader: bool = False) -> dict[str, Any]:
    """Matmul throughput by size, one line per bundle and dtype, in TFLOP/s on log-log axes.

    The chart of the lesson "Why GPUs win at training", for every bundle. Its data is the
    named dataset :data:`OVERLAY_DATASET` of :func:`measurement_rows`; with ``reader``,
    ``usermeta.gl_overlay`` tells compare.js where to add the reader's rows, which of them
    the chart draws (``rows``, a pattern of names: a bundle without such rows leaves the
    chart hidden, not drawn empty) and in which colour, so the reader's series lands on the
    same chart.

    >>> spec = throughput_chart([], reader=True)
    >>> spec["usermeta"]["gl_overlay"]["dataset"], spec["datasets"]["measurements"]
    ('measurements', [])
    """
    rows = [
        row
        for i, s in enumerate(bundles, start=1)
        for row in measurement_rows(
            series_label(i, s),
            _REFERENCE_COLOURS[(i - 1) % len(_REFERENCE_COLOURS)],
            s.bundle.measurements,
        )
    ]
    x_title = "matrix size n (log scale)"
    y_title = "achieved TFLOP/s (log scale)"
    spec = {
        "title": "Matmul throughput by size",
        "description": (
            f"Line chart on log-log axes: {y_title} against {x_title}, one line per bundle "
            "and dtype" + (", your bundle's in bold once you choose it." if reader else ".")
        ),
        "width": "container",
        "height": charts.HEIGHT_PX,
        "autosize": {"type": "fit-x", "contains": "padding"},
        "datasets": {OVERLAY_DATASET: rows},
        "data": {"name": OVERLAY_DATASET},
        "transform": [
            {"filter": _MATMUL_BY_SIZE},
            {"calculate": _SIZE_FROM_NAME, "as": "n"},  # matmul.<dtype>.n<size>
            {"calculate": "datum.value / 1e12", "as": "tflops"},
        ],
        "encoding": {
            "x": {
                "field": "n",
                "type": "quantitative",
                "title": x_title,
                "scale": charts.log_scale(2, SWEEP_SPAN_N),
                "axis": charts.log_axis(2),
            },
            "y": {
                "field": "tflops",
                "type": "quantitative",
                "title": y_title,
                "scale": charts.log_scale(10),
                "axis": charts.log_axis(10),
            },
            "tooltip": [
                {"field": "series", "type": "nominal", "title": "bundle"},
                {"field": "dtype", "type": "nominal", "title": "dtype"},
                {"field": "n", "type": "quantitative", "title": "n", "format": ",d"},
                {"field": "tflops", "type": "quantitative", "title": "TFLOP/s", "format": ",.3~r"},
            ],
        },
        "layer": [
            {
                "mark": {"type": "line"},
                "encoding": {
                    "color": {
                        "field": "series",
                        "type": "nominal",
                        "title": "bundle",
                        "scale": {"range": {"field": "colour"}},
                        "legend": {"orient": "bottom", "direction": "vertical"},
                    },
                    "strokeWidth": {
                        "condition": {"test": "datum.reader", "value": 4},
                        "value": 2,
                    },
                    "strokeDash": {
                        "field": "dtype",
                        "type": "nominal",
                        "title": "dtype",
                        "legend": {
                            "orient": "bottom",
                            "direction": "vertical",
                            "symbolType": "stroke",
                            "symbolStrokeWidth": 2,
                            "symbolStrokeColor": "var(--md-default-fg-color)",
                        },
                    },
                },
            },
            {
                "mark": {"type": "point", "filled": True, "size": 50, "opacity": 1},
                "encoding": {"color": {"field": "series", "type": "nominal"}},
            },
        ],
    }
    if reader:
        spec["usermeta"] = {
            "gl_overlay": {
                "dataset": OVERLAY_DATASET,
                "rows": _MATMUL_NAME,
                "reader_colour": charts.READER_COLOUR,
            }
        }
    return spec


BAR_PX = 30


def headline_chart_template() -> dict[str, Any]:
    """One headline figure as bars, yours beside each reference: the spec compare.js fills.

    compare.js sets the title, the description and the dataset ``bars`` (rows with
    ``series``, ``colour``, ``reader``, ``shown``: the value in the row's display unit, and
    ``text``: it as the table prints it), sets the height to :data:`BAR_PX` per bar, leaves
    room right of the longest bar for its text, and makes the x scale logarithmic (with
    ``usermeta.gl_log_axis``) when the values span more than a hundredfold.

    >>> spec = headline_chart_template()
    >>> spec["data"], spec["encoding"]["x"]["field"]
    ({'name': 'bars'}, 'shown')
    """
    return {
        "title": "",
        "description": "",
        "width": "container",
        "height": BAR_PX,  # per bar: compare.js multiplies by the number of bars
        "autosize": {"type": "fit-x", "contains": "padding"},
        "datasets": {"bars": []},
        "data": {"name": "bars"},
        "usermeta": {
            "gl_colours": {"reader": charts.READER_COLOUR, "reference": charts.colour(0)},
            "gl_bar_px": BAR_PX,
            "gl_log_axis": charts.log_axis(10),
        },
        "encoding": {
            "y": {
                "field": "series",
                "type": "nominal",
                "sort": None,
                "title": None,
                "axis": {"labelLimit": 260},
            },
            "x": {
                "field": "shown",
                "type": "quantitative",
                "title": "",
                "scale": {"type": "linear"},
            },
            "tooltip": [
                {"field": "series", "type": "nominal", "title": "bundle"},
                {"field": "text", "type": "nominal", "title": "value"},
            ],
        },
        "layer": [
            {
                "mark": {"type": "bar", "height": {"band": 0.75}},
                "encoding": {"color": {"field": "colour", "type": "nominal", "scale": None}},
            },
            {
                "mark": {"type": "text", "align": "left", "dx": 4},
                "encoding": {"text": {"field": "text", "type": "nominal"}},
            },
        ],
    }
