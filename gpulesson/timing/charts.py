"""Vega-Lite specs for the course's charts, and the one line of HTML a page prints for each.

A chart is a Vega-Lite spec (https://vega.github.io/vega-lite/docs/), built here as plain
dicts: the data inline (never a URL, so the renderer fetches nothing), log axes labelled at
powers of ten (0.01, 0.1, 1, 10, 100, 1000, then 1e4, 1e5, ...; :data:`DECADE_LABEL`) or at
powers of two for matrix sizes, and tooltips that show each point's figures in the page
table's own format. Colours are written as CSS variables (``var(--gl-chart-0)``, ...;
``docs/stylesheets/charts.css`` sets them per colour scheme): in the browser,
``docs/javascripts/charts.js`` resolves them for the scheme the reader chose, sets the
axis and text colours from the theme, and renders the spec with the vega, vega-lite and
vega-embed builds shipped in ``docs/javascripts/vendor/``.

:func:`to_html` wraps a spec in a ``<figure>`` whose label says what the chart shows and
where its table is (the table on the page is the chart's text equivalent, for screen
readers and for readers without JavaScript). The functions here render; they compute no
figure a page reports: callers pass values and labels already formatted as their tables
show them. Used through ``gpulesson.timing.render`` by the lessons ``why-gpus.md`` and
``roofline.md``, and by ``gpulesson.results.render`` for the results and compare pages.

>>> spec = line_chart([Series("cpu", ((64.0, 10.0), (128.0, 20.0)))], "n", "GFLOP/s", "T")
>>> spec["encoding"]["y"]["scale"]["type"], len(spec["data"]["values"])
('log', 2)
>>> to_html(spec, caption="T.").startswith('<figure class="gl-chart" data-gl-chart>')
True
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpulesson.text import script_json

HEIGHT_PX = 320
PALETTE_SIZE = 5
READER_COLOUR = "var(--gl-chart-reader)"
POWERS_OF_TWO = 24  # ticks of a base-2 axis: up to n = 16,777,216

# A label at each power of ten and none between; plain numbers from 0.001 to 1000, then
# 1e4, 1e-4 ...: readable at any magnitude, never 0.000001 or 1,000,000.
_EXPONENT = "log(datum.value) / LN10"
DECADE_TEST = f"abs({_EXPONENT} - round({_EXPONENT})) < 1e-6"
DECADE_LABEL = (
    f"{DECADE_TEST} ? (abs(round({_EXPONENT})) <= 3 ? format(datum.value, '~g') : "
    f"'1e' + round({_EXPONENT})) : ''"
)


@dataclass(frozen=True)
class Series:
    """A named line of (x, y) points."""

    label: str
    points: tuple[tuple[float, float], ...]


@dataclass(frozen=True)
class Point:
    """A labelled marker at (x, y)."""

    label: str
    x: float
    y: float


def colour(index: int) -> str:
    """The colour of data series ``index``: a CSS variable charts.js resolves per scheme.

    >>> colour(0), colour(6)
    ('var(--gl-chart-0)', 'var(--gl-chart-1)')
    """
    return f"var(--gl-chart-{index % PALETTE_SIZE})"


def log_scale(base: int = 10, domain: tuple[float, float] | None = None) -> dict[str, Any]:
    """A logarithmic scale; with a domain, exactly that domain.

    >>> log_scale(2)
    {'type': 'log', 'base': 2, 'nice': True}
    """
    if domain is None:
        return {"type": "log", "base": base, "nice": True}
    return {"type": "log", "base": base, "domain": list(domain), "nice": False}


def log_axis(base: int = 10) -> dict[str, Any]:
    """Axis labels for a log scale: powers of ten as :data:`DECADE_LABEL`, or powers of two.

    Grid lines between the powers of ten are fainter than at them. Base 2 lists its ticks
    (every power of two up to 2**POWERS_OF_TWO; vega draws those inside the domain): left to
    itself, a log scale spanning few powers falls back to ticks such as 2500, 3000.

    >>> log_axis(2)["values"][:4], log_axis(2)["labelExpr"]
    ([1, 2, 4, 8], "format(datum.value, '~g')")
    """
    if base == 2:
        return {
            "values": [2**k for k in range(POWERS_OF_TWO + 1)],
            "labelExpr": "format(datum.value, '~g')",
            "labelOverlap": "greedy",
        }
    if base != 10:
        raise ValueError(f"log axes here use base 10 or 2, got {base}: pass 10 or 2")
    return {
        "labelExpr": DECADE_LABEL,
        "labelOverlap": False,
        "gridOpacity": {"condition": {"test": DECADE_TEST, "value": 1}, "value": 0.35},
        "tickSize": {"condition": {"test": DECADE_TEST, "value": 6}, "value": 3},
    }


def decade_ticks(low: float, high: float) -> list[float]:
    """Powers of ten from below ``low`` to above ``high``.

    >>> decade_ticks(3, 250)
    [1, 10, 100, 1000]
    """
    if low <= 0 or high <= 0:
        raise ValueError(f"log axes need positive values, got {low} and {high}")
    first = math.floor(math.log10(low))
    last = math.ceil(math.log10(high))
    return [10**k if k >= 0 else 10.0**k for k in range(first, last + 1)]


def decade_domain(low: float, high: float) -> tuple[float, float]:
    """``(low, high)``, widened to powers of ten when it would show fewer than two of them.

    >>> decade_domain(0.03, 1000.0), decade_domain(20.0, 90.0)
    ((0.03, 1000.0), (10, 100))
    """
    inside = [t for t in decade_ticks(low, high) if low <= t <= high]
    if len(inside) >= 2:
        return low, high
    ticks = decade_ticks(low, high)
    return ticks[0], ticks[-1]


def power_domain(values: Sequence[float], base: int = 10) -> tuple[float, float]:
    """The powers of ``base`` at or just outside the values: always two or more of them.

    A log axis over a single value would have no extent to place ticks on.

    >>> power_domain([64, 100, 4096], 2), power_domain([8192], 2), power_domain([0.013])
    ((64, 4096), (4096, 16384), (0.01, 0.1))
    """
    low = math.floor(math.log(min(values), base) + 1e-9)
    high = math.ceil(math.log(max(values), base) - 1e-9)
    if high == low:  # one value, itself a power: one power either side
        low, high = low - 1, high + 1
    return _power(base, low), _power(base, high)


def _power(base: int, exponent: int) -> float:
    return base**exponent if exponent >= 0 else float(base) ** exponent


def _positive(values: Sequence[float], what: str) -> None:
    if not values:
        raise ValueError(f"a chart needs at least one point: pass {what} with data")
    low = min(values)
    if low <= 0 or not math.isfinite(low):
        raise ValueError(
            f"log axes need positive values, got {low} in {what}: drop zero or negative data"
        )


def _frame(title: str, description: str) -> dict[str, Any]:
    """What every chart spec starts with: title, description, size that fits its column."""
    return {
        "title": title,
        "description": description,
        "width": "container",
        "height": HEIGHT_PX,
        "autosize": {"type": "fit-x", "contains": "padding"},
    }


def line_chart(
    series: Sequence[Series],
    x_label: str,
    y_label: str,
    title: str,
    *,
    x_base: int = 10,
    y_format: str = ",.1f",
) -> dict[str, Any]:
    """Lines with markers on log-log axes, one colour per series, with a legend and tooltips.

    ``x_base`` 2 labels the x axis at powers of two (matrix sizes); ``y_format`` is the
    d3 format of y in tooltips (the page table's format).

    >>> spec = line_chart([Series("a", ((1.0, 1.0), (10.0, 100.0)))], "x (s)", "y (B)", "T")
    >>> [layer["mark"]["type"] for layer in spec["layer"]], spec["encoding"]["x"]["title"]
    (['line', 'point'], 'x (s)')
    """
    _positive([v for s in series for point in s.points for v in point], "series")
    xs = [x for s in series for x, _ in s.points]
    ys = [y for s in series for _, y in s.points]
    rows = [
        {"series": s.label, "colour": colour(i), "x": x, "y": y}
        for i, s in enumerate(series)
        for x, y in s.points
    ]
    names = " and ".join(s.label for s in series)
    spec = _frame(
        title,
        f"Line chart on log-log axes: {y_label} against {x_label}, for {names}.",
    )
    spec["data"] = {"values": rows}
    spec["encoding"] = {
        "x": {
            "field": "x",
            "type": "quantitative",
            "title": x_label,
            "scale": log_scale(x_base, power_domain(xs, x_base)),
            "axis": log_axis(x_base),
        },
        "y": {
            "field": "y",
            "type": "quantitative",
            "title": y_label,
            "scale": log_scale(10, power_domain(ys, 10)),
            "axis": log_axis(10),
        },
        "tooltip": [
            {"field": "series", "type": "nominal", "title": "series"},
            {"field": "x", "type": "quantitative", "title": x_label, "format": ",~g"},
            {"field": "y", "type": "quantitative", "title": y_label, "format": y_format},
        ],
    }
    # The colour scale takes its range from the rows' colour field, declared in one layer
    # only (two declarations of a field range conflict, even when equal).
    series_colour = {"field": "series", "type": "nominal", "title": None}
    spec["layer"] = [
        {
            "mark": {"type": "line", "strokeWidth": 2.5},
            "encoding": {
                "color": {
                    **series_colour,
                    "scale": {"range": {"field": "colour"}},
                    "legend": {"orient": "top-left", "symbolStrokeWidth": 3},
                }
            },
        },
        {
            "mark": {"type": "point", "filled": True, "size": 60, "opacity": 1},
            "encoding": {"color": series_colour},
        },
    ]
    return spec


def _labels(rows: list[dict[str, Any]], align: str, dx: int, dy: int) -> dict[str, Any]:
    """A layer of text labels at data positions (the layer's own data)."""
    return {
        "data": {"values": rows},
        "mark": {"type": "text", "align": align, "dx": dx, "dy": dy, "fontSize": 12},
        "encoding": {"text": {"field": "text", "type": "nominal"}},
    }


def roofline_chart(
    peak_flop_per_s: float,
    bandwidth_bytes_per_s: float,
    points: Sequence[Point],
    title: str,
) -> dict[str, Any]:
    """A roofline (min of bandwidth x intensity and peak) with measured points.

    Axes: arithmetic intensity in FLOP/byte, and GFLOP/s; the points' tooltips give
    FLOP/byte and GFLOP/s as the roofline table prints them.

    >>> spec = roofline_chart(1e11, 1e10, [Point("add", 0.083, 8e8)], "R")
    >>> texts = [r["text"] for layer in spec["layer"] if layer["mark"]["type"] == "text"
    ...          for r in layer["data"]["values"]]
    >>> "ridge 10 FLOP/byte" in texts, "add" in texts
    (True, True)
    """
    if peak_flop_per_s <= 0 or bandwidth_bytes_per_s <= 0:
        raise ValueError("peak and bandwidth must be positive: measure them first")
    ridge = peak_flop_per_s / bandwidth_bytes_per_s
    peak_g = peak_flop_per_s / 1e9
    bw_g = bandwidth_bytes_per_s / 1e9
    _positive([v for p in points for v in (p.x, p.y)] or [1.0], "points")
    xs = [p.x for p in points] + [ridge]
    gys = [p.y / 1e9 for p in points] + [peak_g]
    x_low, x_high = decade_domain(min(xs) / 3, max(xs) * 6)
    y_low, y_high = decade_domain(min(gys) / 3, max(gys) * 3)
    start_x = max(x_low, y_low / bw_g)  # where the slanted roof enters the plot
    roof = [(start_x, bw_g * start_x), (ridge, peak_g), (x_high, peak_g)]
    mid_x = math.sqrt(start_x * ridge)
    by_intensity = sorted(points, key=lambda p: p.x)  # neighbours' labels: below, above, below
    x_title = "arithmetic intensity (FLOP/byte, log scale)"
    y_title = "GFLOP/s (log scale)"
    spec = _frame(
        title,
        f"Roofline on log-log axes: {y_title} against {x_title}. The roof rises with "
        f"bandwidth {bw_g:,.1f} GB/s up to the ridge at {ridge:.3g} FLOP/byte, then stays "
        f"at the peak, {peak_g:,.0f} GFLOP/s. Operations placed under it: "
        + ", ".join(p.label for p in points)
        + ".",
    )
    x = {
        "field": "x",
        "type": "quantitative",
        "title": x_title,
        "scale": log_scale(10, (x_low, x_high)),
        "axis": log_axis(10),
    }
    y = {
        "field": "y",
        "type": "quantitative",
        "title": y_title,
        "scale": log_scale(10, (y_low, y_high)),
        "axis": log_axis(10),
    }
    spec["encoding"] = {"x": x, "y": y}
    spec["layer"] = [
        {
            "data": {"values": [{"x": a, "y": b} for a, b in roof]},
            "mark": {"type": "line", "strokeWidth": 3, "color": colour(0), "tooltip": False},
        },
        {
            "data": {"values": [{"x": ridge, "y": y_low, "y2": peak_g}]},
            "mark": {"type": "rule", "strokeDash": [4, 4], "opacity": 0.7},
            "encoding": {"y2": {"field": "y2"}},
        },
        _labels([{"x": ridge, "y": y_low, "text": f"ridge {ridge:.3g} FLOP/byte"}], "left", 6, -8),
        _labels([{"x": ridge, "y": peak_g, "text": f"peak {peak_g:,.0f} GFLOP/s"}], "left", 6, -10),
        _labels(
            [{"x": mid_x, "y": bw_g * mid_x, "text": f"bandwidth {bw_g:,.1f} GB/s"}],
            "right",
            -6,
            -10,
        ),
        {
            "data": {"values": [{"op": p.label, "x": p.x, "y": p.y / 1e9} for p in points]},
            "mark": {
                "type": "point",
                "filled": True,
                "size": 90,
                "opacity": 1,
                "color": colour(1),
                "stroke": "var(--md-default-fg-color)",
                "strokeWidth": 1,
            },
            "encoding": {
                "tooltip": [
                    {"field": "op", "type": "nominal", "title": "operation"},
                    {"field": "x", "type": "quantitative", "title": "FLOP/byte", "format": ".3~g"},
                    {"field": "y", "type": "quantitative", "title": "GFLOP/s", "format": ",.1f"},
                ]
            },
        },
        *(
            {
                "data": {"values": [{"x": p.x, "y": p.y / 1e9, "text": p.label} for p in side]},
                "mark": {"type": "text", "dy": dy, "fontSize": 12},
                "encoding": {"text": {"field": "text", "type": "nominal"}},
            }
            for side, dy in ((by_intensity[0::2], 16), (by_intensity[1::2], -12))
            if side
        ),
    ]
    return spec


def to_html(spec: Mapping[str, Any], *, caption: str, hidden: bool = False) -> str:
    """The chart as one line of HTML: a figure with its label, caption and spec.

    The view's ``aria-label`` is the spec's description; ``caption`` (visible, and all a
    reader without JavaScript sees) should say where the chart's figures are in text.
    One line, with no blank line, so Markdown leaves it alone; ``<`` in the JSON is
    escaped, so no value can close the script element. A ``hidden`` figure is not drawn
    until a script shows it (the compare page's chart, before the reader's data).

    >>> html_ = to_html({"description": "A <b>", "title": "t"}, caption="See the table.")
    >>> 'aria-label="A &lt;b&gt;"' in html_, "\\\\u003cb" in html_, "\\n" in html_
    (True, True, False)
    """
    payload = script_json(spec)
    label = html.escape(str(spec.get("description") or spec.get("title") or "chart"))
    return (
        f'<figure class="gl-chart" data-gl-chart{" hidden" if hidden else ""}>'
        f'<div class="gl-chart-view" role="img" aria-label="{label}"></div>'
        f"<figcaption>{html.escape(caption)}</figcaption>"
        f'<script type="application/json" class="gl-chart-spec">{payload}</script>'
        "</figure>"
    )
