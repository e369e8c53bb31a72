"""Charts as plain inline SVG strings, legible in light and dark themes.

No plotting library: a chart is a string of SVG elements that a page prints.
Text and axes use ``currentColor`` (the page's text colour, which the theme
flips), and data colours come from CSS variables (``--gl-chart-0`` ...,
defined per colour scheme in ``docs/stylesheets/charts.css``) with fallbacks
that read on both white and near-black backgrounds. Both axes are logarithmic,
which suits the quantities the course plots (sizes, FLOP/s, FLOP per byte).
Used through ``gpulesson.timing.render`` by the lessons ``why-gpus.md`` and ``roofline.md``.

>>> svg = line_chart([Series("cpu", ((64.0, 10.0), (128.0, 20.0)))], "n", "GFLOP/s", "t")
>>> svg.startswith('<figure class="gl-chart">') and "currentColor" in svg
True
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

WIDTH = 640
HEIGHT = 380
MARGIN_LEFT = 78
MARGIN_RIGHT = 24
MARGIN_TOP = 40
MARGIN_BOTTOM = 58

# Fallbacks chosen to keep 3:1 contrast on white and on mkdocs-material's slate.
PALETTE_FALLBACKS = ("#1e88e5", "#e65100", "#8e24aa", "#00897b", "#c62828")


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
    """The CSS colour for data series ``index``, a variable with a fallback.

    >>> colour(0)
    'var(--gl-chart-0, #1e88e5)'
    """
    i = index % len(PALETTE_FALLBACKS)
    return f"var(--gl-chart-{i}, {PALETTE_FALLBACKS[i]})"


def format_tick(value: float) -> str:
    """A short label for a tick: 0.01, 1, 250, 10k, 2M.

    >>> [format_tick(v) for v in (0.01, 1, 64, 2048, 10000, 2.5e6)]
    ['0.01', '1', '64', '2048', '10k', '2.5M']
    """
    if value >= 1e6:
        return f"{value / 1e6:g}M"
    if value >= 1e4:
        return f"{value / 1e3:g}k"
    return f"{value:g}"


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


class _LogAxes:
    """Maps data to pixels on log-log axes inside the plot area."""

    def __init__(self, x_range: tuple[float, float], y_range: tuple[float, float]) -> None:
        self.x0, self.x1 = (math.log10(v) for v in x_range)
        self.y0, self.y1 = (math.log10(v) for v in y_range)
        self.left, self.right = MARGIN_LEFT, WIDTH - MARGIN_RIGHT
        self.top, self.bottom = MARGIN_TOP, HEIGHT - MARGIN_BOTTOM

    def x(self, value: float) -> float:
        share = (math.log10(value) - self.x0) / (self.x1 - self.x0)
        return self.left + share * (self.right - self.left)

    def y(self, value: float) -> float:
        share = (math.log10(value) - self.y0) / (self.y1 - self.y0)
        return self.bottom - share * (self.bottom - self.top)


def _text(
    x: float, y: float, text: str, anchor: str = "middle", size: int = 12, extra: str = ""
) -> str:
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" fill="currentColor" '
        f'font-size="{size}"{extra}>{html.escape(text)}</text>'
    )


def _frame(
    axes: _LogAxes,
    x_ticks: Sequence[float],
    y_ticks: Sequence[float],
    x_label: str,
    y_label: str,
    title: str,
) -> list[str]:
    """Grid, ticks, axis labels and the title."""
    parts = [
        _text(WIDTH / 2, 20, title, size=14, extra=' font-weight="bold"'),
        '<g stroke="currentColor" stroke-opacity="0.18" stroke-width="1">',
    ]
    for t in x_ticks:
        parts.append(
            f'<line x1="{axes.x(t):.1f}" y1="{axes.top}" x2="{axes.x(t):.1f}" y2="{axes.bottom}"/>'
        )
    for t in y_ticks:
        parts.append(
            f'<line x1="{axes.left}" y1="{axes.y(t):.1f}" x2="{axes.right}" y2="{axes.y(t):.1f}"/>'
        )
    parts.append("</g>")
    parts.append(
        f'<rect x="{axes.left}" y="{axes.top}" width="{axes.right - axes.left}" '
        f'height="{axes.bottom - axes.top}" fill="none" stroke="currentColor" '
        'stroke-opacity="0.6"/>'
    )
    for t in x_ticks:
        parts.append(_text(axes.x(t), axes.bottom + 16, format_tick(t)))
    for t in y_ticks:
        parts.append(_text(axes.left - 6, axes.y(t) + 4, format_tick(t), anchor="end"))
    parts.append(_text((axes.left + axes.right) / 2, HEIGHT - 14, x_label))
    middle = (axes.top + axes.bottom) / 2
    parts.append(_text(16, middle, y_label, extra=f' transform="rotate(-90 16 {middle:.1f})"'))
    return parts


def _wrap(parts: list[str], title: str) -> str:
    """One line of HTML (no blank lines, so Markdown leaves it alone)."""
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{html.escape(title)}" '
        'style="max-width:100%;height:auto;font-family:inherit">'
        f"<title>{html.escape(title)}</title>" + "".join(parts) + "</svg>"
    )
    return f'<figure class="gl-chart">{svg}</figure>'


def _range(values: Sequence[float], pad: float) -> tuple[float, float]:
    low, high = min(values), max(values)
    if low <= 0:
        raise ValueError(f"log axes need positive values, got {low}: drop zero or negative data")
    return low / pad, high * pad


def line_chart(
    series: Sequence[Series],
    x_label: str,
    y_label: str,
    title: str,
) -> str:
    """Lines with markers on log-log axes; x ticks at the data's x values.

    >>> svg = line_chart([Series("a", ((1.0, 1.0), (10.0, 100.0)))], "x (s)", "y (B)", "T")
    >>> svg.count("<circle"), "x (s)" in svg, "y (B)" in svg
    (2, True, True)
    """
    xs = [x for s in series for x, _ in s.points]
    ys = [y for s in series for _, y in s.points]
    if not xs:
        raise ValueError("a chart needs at least one point: pass a series with data")
    axes = _LogAxes(_range(xs, 1.15), _range(ys, 1.6))
    x_ticks = sorted(set(xs))
    y_ticks = [t for t in decade_ticks(min(ys), max(ys)) if axes.y0 <= math.log10(t) <= axes.y1]
    parts = _frame(axes, x_ticks, y_ticks, x_label, y_label, title)
    for index, s in enumerate(series):
        stroke = colour(index)
        points = " ".join(f"{axes.x(x):.1f},{axes.y(y):.1f}" for x, y in s.points)
        parts.append(
            f'<polyline points="{points}" fill="none" stroke-width="2.5" style="stroke:{stroke}"/>'
        )
        for x, y in s.points:
            parts.append(
                f'<circle cx="{axes.x(x):.1f}" cy="{axes.y(y):.1f}" r="3.5" style="fill:{stroke}"/>'
            )
        legend_y = axes.top + 18 + 18 * index
        parts.append(
            f'<line x1="{axes.left + 10}" y1="{legend_y - 4}" x2="{axes.left + 34}" '
            f'y2="{legend_y - 4}" stroke-width="3" style="stroke:{stroke}"/>'
        )
        parts.append(_text(axes.left + 40, legend_y, s.label, anchor="start"))
    return _wrap(parts, title)


def roofline_chart(
    peak_flop_per_s: float,
    bandwidth_bytes_per_s: float,
    points: Sequence[Point],
    title: str,
) -> str:
    """A roofline (min of bandwidth x intensity and peak) with measured points.

    Axes: arithmetic intensity in FLOP/byte, and GFLOP/s.

    >>> svg = roofline_chart(1e11, 1e10, [Point("add", 0.083, 8e8)], "R")
    >>> "ridge 10 FLOP/byte" in svg, "add" in svg
    (True, True)
    """
    if peak_flop_per_s <= 0 or bandwidth_bytes_per_s <= 0:
        raise ValueError("peak and bandwidth must be positive: measure them first")
    ridge = peak_flop_per_s / bandwidth_bytes_per_s
    xs = [p.x for p in points] + [ridge]
    gys = [p.y / 1e9 for p in points] + [peak_flop_per_s / 1e9]
    x_low, x_high = min(xs) / 3, max(xs) * 6
    y_low, y_high = min(gys) / 3, max(gys) * 3
    axes = _LogAxes((x_low, x_high), (y_low, y_high))
    x_ticks = [t for t in decade_ticks(x_low, x_high) if x_low <= t <= x_high]
    y_ticks = [t for t in decade_ticks(y_low, y_high) if y_low <= t <= y_high]
    parts = _frame(
        axes,
        x_ticks,
        y_ticks,
        "arithmetic intensity (FLOP/byte, log scale)",
        "GFLOP/s (log scale)",
        title,
    )
    peak_g = peak_flop_per_s / 1e9
    bw_g = bandwidth_bytes_per_s / 1e9
    start_x = max(x_low, y_low / bw_g)  # where the slanted roof enters the plot
    roof = [(start_x, bw_g * start_x), (ridge, peak_g), (x_high, peak_g)]
    path = " ".join(f"{axes.x(x):.1f},{axes.y(y):.1f}" for x, y in roof)
    roof_colour = colour(0)
    parts.append(
        f'<polyline points="{path}" fill="none" stroke-width="3" style="stroke:{roof_colour}"/>'
    )
    parts.append(
        f'<line x1="{axes.x(ridge):.1f}" y1="{axes.y(peak_g):.1f}" x2="{axes.x(ridge):.1f}" '
        f'y2="{axes.bottom}" stroke="currentColor" stroke-dasharray="4 4" '
        'stroke-opacity="0.7"/>'
    )
    parts.append(
        _text(
            axes.x(ridge) + 6,
            axes.bottom - 8,
            f"ridge {ridge:.3g} FLOP/byte",
            anchor="start",
        )
    )
    parts.append(
        _text(axes.x(ridge) + 6, axes.y(peak_g) - 8, f"peak {peak_g:,.0f} GFLOP/s", anchor="start")
    )
    mid_x = math.sqrt(start_x * ridge)
    parts.append(
        _text(
            axes.x(mid_x) - 6,
            axes.y(bw_g * mid_x) - 8,
            f"bandwidth {bw_g:,.1f} GB/s",
            anchor="end",
        )
    )
    point_colour = colour(1)
    for p in points:
        px, py = axes.x(p.x), axes.y(p.y / 1e9)
        parts.append(
            f'<circle cx="{px:.1f}" cy="{py:.1f}" r="5" style="fill:{point_colour}" '
            'stroke="currentColor" stroke-width="1"/>'
        )
        anchor = "end" if px > (axes.left + axes.right) / 2 else "start"
        dx = -8 if anchor == "end" else 8
        parts.append(_text(px + dx, py + 16, p.label, anchor=anchor))
    return _wrap(parts, title)
