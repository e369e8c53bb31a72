"""SVG figures drawn at build time: stacked bars, stacked areas, timelines and grids of cells.

The pictures of the memory and scale lessons (the ledger as bars, memory over a step, a
profiler trace, the ring all-reduce, pipeline schedules, ZeRO's shards) are plain SVG made
here from numbers the caller computed or measured: no script draws them, so they render
without JavaScript and fetch nothing. Colours are CSS classes (``gl-k0`` ... ``gl-k5``),
which ``docs/stylesheets/charts.css`` maps to the charts' colour variables for the light
and dark schemes; text takes the theme's foreground.

:func:`figure` wraps an SVG in ``<figure class="gl-figure">`` with ``role="img"`` and an
``aria-label``: the text alternative, which states the key numbers; the caption repeats it
for every reader. Everything a caller passes is escaped. One line of HTML, so Markdown
leaves it alone.

>>> html_ = stacked_bars([Bar("a", (("x", 3.0), ("y", 1.0)))], unit="GB", title="T",
...                      description="a: 4 GB.")
>>> html_.startswith('<figure class="gl-figure">'), 'role="img"' in html_, "\\n" in html_
(True, True, False)
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

WIDTH_PX = 720
KINDS = 6  # colour classes gl-k0 .. gl-k5
ROW_PX = 26


def kind_class(index: int) -> str:
    """The colour class of series ``index`` (charts.css sets its fill per colour scheme).

    >>> kind_class(0), kind_class(7)
    ('gl-k0', 'gl-k1')
    """
    return f"gl-k{index % KINDS}"


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _n(value: float) -> str:
    """A coordinate with one decimal at most: short SVG."""
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


def text(x: float, y: float, body: str, *, anchor: str = "start", cls: str = "") -> str:
    """An SVG text element, escaped.

    >>> text(1, 2, "a<b")
    '<text x="1" y="2" text-anchor="start">a&lt;b</text>'
    """
    extra = f' class="{_e(cls)}"' if cls else ""
    return f'<text x="{_n(x)}" y="{_n(y)}" text-anchor="{anchor}"{extra}>{_e(body)}</text>'


def rect(x: float, y: float, w: float, h: float, cls: str, title: str = "") -> str:
    """A rectangle of colour class ``cls``, with a hover title when given."""
    inner = f"<title>{_e(title)}</title>" if title else ""
    return (
        f'<rect x="{_n(x)}" y="{_n(y)}" width="{_n(max(w, 0.0))}" height="{_n(h)}" '
        f'class="{_e(cls)}">{inner}</rect>'
    )


def figure(
    body: str, *, width: float, height: float, title: str, description: str, caption: str = ""
) -> str:
    """One line of HTML: ``<figure class="gl-figure">`` holding the SVG and a caption.

    ``description`` is the SVG's ``aria-label`` (the text alternative: state the key
    numbers); the caption, shown to everyone, is ``caption`` or else the description.

    >>> 'aria-label="d &quot;q&quot;"' in figure("", width=10, height=5, title="t",
    ...                                        description='d "q"')
    True
    """
    if not description.strip():
        raise ValueError("a figure needs a text alternative: pass a description with its numbers")
    shown = caption or description
    return (
        '<figure class="gl-figure">'
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_n(width)} {_n(height)}" '
        f'width="{_n(width)}" height="{_n(height)}" role="img" aria-label="{_e(description)}">'
        f"{text(width / 2, 16, title, anchor='middle', cls='gl-fig-title')}{body}</svg>"
        f"<figcaption>{_e(shown)}</figcaption></figure>"
    )


def legend(names: Sequence[str], y: float, *, x0: float = 8) -> tuple[str, float]:
    """Colour swatches with their names from ``x0`` at height ``y``, wrapping at the width;
    and the height of the last row.

    >>> legend(["a", "b"], 40)[1], legend(["x" * 60, "y" * 60], 40)[1]
    (40, 58)
    """
    parts = []
    x = x0
    for i, name in enumerate(names):
        room = 28 + 6.6 * len(name)
        if x > x0 and x + room > WIDTH_PX:
            x, y = x0, y + 18
        parts.append(rect(x, y - 10, 12, 12, kind_class(i)))
        parts.append(text(x + 16, y, name))
        x += room
    return "".join(parts), y


def label_margin(labels: Sequence[str]) -> float:
    """Room left of the plot for the longest label (about 6.6 px a character at 12 px).

    >>> label_margin(["a"]), label_margin(["x" * 30])
    (80.0, 212.0)
    """
    return float(min(max(14 + 6.6 * max(len(t) for t in labels), 80), 320))


def nice_step(high: float, ticks: int = 5) -> float:
    """A round tick step (1, 2 or 5 times a power of ten) giving about ``ticks`` ticks to ``high``.

    >>> nice_step(93.0), nice_step(0.8), nice_step(7)
    (20.0, 0.2, 2.0)
    """
    if high <= 0 or not math.isfinite(high):
        raise ValueError(f"an axis needs a positive finite top, got {high!r}")
    raw = high / ticks
    power = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if m * power >= raw:
            return float(m * power)
    return float(10 * power)  # pragma: no cover - the loop always returns


def _axis(x0: float, x1: float, y: float, top: float, label: str, fmt: str) -> tuple[str, float]:
    """A horizontal value axis from 0 to a round top >= ``top``; and that round top."""
    step = nice_step(top)
    high = step * math.ceil(top / step - 1e-9)
    parts = [f'<line x1="{_n(x0)}" y1="{_n(y)}" x2="{_n(x1)}" y2="{_n(y)}" class="gl-axis"/>']
    k = 0
    while k * step <= high + 1e-9:
        value = k * step
        x = x0 + (x1 - x0) * value / high
        parts.append(
            f'<line x1="{_n(x)}" y1="{_n(y)}" x2="{_n(x)}" y2="{_n(y + 4)}" class="gl-axis"/>'
        )
        parts.append(text(x, y + 16, format(value, fmt), anchor="middle"))
        k += 1
    parts.append(text((x0 + x1) / 2, y + 32, label, anchor="middle"))
    return "".join(parts), high


@dataclass(frozen=True)
class Bar:
    """One horizontal bar: a label, its (term, value) segments left to right, and the text
    at its end (``end_text``; by default the segments' sum)."""

    label: str
    segments: tuple[tuple[str, float], ...]
    end_text: str = ""


def stacked_bars(
    bars: Sequence[Bar],
    *,
    unit: str,
    title: str,
    description: str,
    caption: str = "",
    marker: tuple[str, float] | None = None,
    value_format: str = ",.1f",
    axis_format: str = ",g",
) -> str:
    """Horizontal stacked bars, one colour per term (in first-seen order), total at the end.

    ``marker`` is a labelled vertical line at a value (a card's memory). Values are in
    ``unit`` already; each segment's hover title gives its term and value.

    >>> svg = stacked_bars([Bar("a", (("w", 2.0),)), Bar("b", (("w", 1.0), ("g", 1.0)))],
    ...                    unit="GB", title="T", description="two bars", marker=("card", 3.0))
    >>> svg.count("<rect"), "card" in svg
    (5, True)
    """
    if not bars:
        raise ValueError("a bar chart needs at least one bar")
    terms: list[str] = []
    for bar in bars:
        for term, value in bar.segments:
            if value < 0 or not math.isfinite(value):
                raise ValueError(f"bar {bar.label!r}, term {term!r}: value {value!r} is not >= 0")
            if term not in terms:
                terms.append(term)
    totals = [sum(v for _, v in bar.segments) for bar in bars]
    top = max([*totals, marker[1] if marker else 0.0]) or 1.0
    ends = [b.end_text or format(t, value_format) for b, t in zip(bars, totals, strict=True)]
    x0 = label_margin([bar.label for bar in bars])
    x1 = WIDTH_PX - max(40.0, 12 + 6.6 * max(len(e) for e in ends))
    keys, legend_y = legend(terms, 40)
    y0 = legend_y + 18
    parts = [keys]
    axis_y = y0 + ROW_PX * len(bars) + 4
    axis, high = _axis(x0, x1, axis_y, top, unit, axis_format)
    scale = (x1 - x0) / high
    for row, (bar, end_text) in enumerate(zip(bars, ends, strict=True)):
        y = y0 + row * ROW_PX
        parts.append(text(x0 - 6, y + 15, bar.label, anchor="end"))
        x = x0
        for term, value in bar.segments:
            title_ = f"{bar.label}: {term} {format(value, value_format)} {unit}"
            parts.append(
                rect(x, y + 3, value * scale, ROW_PX - 8, kind_class(terms.index(term)), title_)
            )
            x += value * scale
        parts.append(text(x + 4, y + 15, end_text))
    if marker:
        mx = x0 + marker[1] * scale
        parts.append(
            f'<line x1="{_n(mx)}" y1="{_n(y0 - 2)}" x2="{_n(mx)}" y2="{_n(axis_y)}" '
            'class="gl-marker"/>'
        )
        parts.append(text(mx, y0 - 6, marker[0], anchor="middle"))
    parts.append(axis)
    return figure(
        "".join(parts),
        width=WIDTH_PX,
        height=axis_y + 42,
        title=title,
        description=description,
        caption=caption,
    )


def stacked_area(
    layers: Mapping[str, Sequence[float]],
    *,
    phases: Sequence[tuple[str, int, int]],
    x_label: str,
    unit: str,
    title: str,
    description: str,
    caption: str = "",
    peak_label: str = "",
) -> str:
    """Layers stacked over a common x (0 .. n-1), with shaded phase bands and the peak marked.

    ``layers`` maps each term to one value per x, in ``unit``; ``phases`` are
    (name, first x, last x) bands drawn behind; the highest total is marked.

    >>> svg = stacked_area({"a": [1, 2, 1], "b": [0, 1, 0]}, phases=[("f", 0, 2)],
    ...                    x_label="op", unit="MB", title="T", description="peak 3")
    >>> svg.count("<polygon"), "peak" in svg
    (2, True)
    """
    names = list(layers)
    if not names:
        raise ValueError("an area chart needs at least one layer")
    count = len(layers[names[0]])
    if count < 2 or any(len(layers[n]) != count for n in names):
        raise ValueError("every layer needs the same number of points, at least 2")
    totals = [sum(layers[n][i] for n in names) for i in range(count)]
    peak_index = max(range(count), key=lambda i: totals[i])
    x0, x1 = 70.0, WIDTH_PX - 20.0
    keys, legend_y = legend(names, 44)
    y_top = legend_y + 32.0
    y_bottom = y_top + 266.0
    step = nice_step(totals[peak_index] or 1.0)
    high = step * math.ceil((totals[peak_index] or 1.0) / step - 1e-9)

    def px(i: float) -> float:
        return x0 + (x1 - x0) * i / (count - 1)

    def py(v: float) -> float:
        return y_bottom - (y_bottom - y_top) * v / high

    parts = [keys]
    for k, (name, first, last) in enumerate(phases):
        cls = "gl-band" if k % 2 == 0 else "gl-band gl-band-alt"
        parts.append(rect(px(first), y_top, px(last) - px(first), y_bottom - y_top, cls))
        parts.append(text((px(first) + px(last)) / 2, y_top - 5, name, anchor="middle"))
    below = [0.0] * count
    for k, name in enumerate(names):
        above = [below[i] + layers[name][i] for i in range(count)]
        upper = " ".join(f"{_n(px(i))},{_n(py(above[i]))}" for i in range(count))
        lower = " ".join(f"{_n(px(i))},{_n(py(below[i]))}" for i in reversed(range(count)))
        parts.append(f'<polygon points="{upper} {lower}" class="{kind_class(k)}"/>')
        below = above
    v = 0.0
    while v <= high + 1e-9:
        parts.append(
            f'<line x1="{_n(x0)}" y1="{_n(py(v))}" x2="{_n(x1)}" y2="{_n(py(v))}" class="gl-grid"/>'
        )
        parts.append(text(x0 - 6, py(v) + 4, format(v, ",g"), anchor="end"))
        v += step
    parts.append(text(14, (y_top + y_bottom) / 2, unit, anchor="middle", cls="gl-fig-vertical"))
    parts.append(text((x0 + x1) / 2, y_bottom + 22, x_label, anchor="middle"))
    pxp, pyp = px(peak_index), py(totals[peak_index])
    parts.append(f'<circle cx="{_n(pxp)}" cy="{_n(pyp)}" r="4" class="gl-marker-dot"/>')
    label = peak_label or f"peak {totals[peak_index]:,.2f} {unit}"
    anchor = "end" if pxp > (x0 + x1) / 2 else "start"
    parts.append(text(pxp + (-8 if anchor == "end" else 8), pyp - 6, label, anchor=anchor))
    return figure(
        "".join(parts),
        width=WIDTH_PX,
        height=y_bottom + 34,
        title=title,
        description=description,
        caption=caption,
    )


@dataclass(frozen=True)
class Span:
    """A bar on a timeline: its lane, start and end (in the axis's unit), kind and label."""

    lane: str
    start: float
    end: float
    kind: str
    label: str = ""


def timeline(
    spans: Sequence[Span],
    *,
    lanes: Sequence[str],
    kinds: Sequence[str],
    x_label: str,
    title: str,
    description: str,
    caption: str = "",
    lane_px: int = ROW_PX,
    end: float | None = None,
) -> str:
    """Bars on a shared time axis, one row per lane, one colour per kind; gaps stay empty.

    Bars narrower than a pixel are drawn a pixel wide, so short ops stay visible.

    >>> svg = timeline([Span("main", 0, 1, "op", "mm"), Span("main", 2, 3, "op")],
    ...                lanes=["main"], kinds=["op"], x_label="ms", title="T", description="d")
    >>> svg.count("<rect")
    4
    """
    if not spans:
        raise ValueError("a timeline needs at least one span")
    for s in spans:
        if s.lane not in lanes or s.kind not in kinds:
            raise ValueError(f"span {s.label!r}: lane {s.lane!r} or kind {s.kind!r} is not listed")
        if not s.end >= s.start:
            raise ValueError(f"span {s.label!r} ends ({s.end}) before it starts ({s.start})")
    start = min(s.start for s in spans)
    stop = end if end is not None else max(s.end for s in spans)
    width = stop - start or 1.0
    x0, x1 = label_margin(lanes), WIDTH_PX - 20
    keys, legend_y = legend(list(kinds), 40)
    y0 = legend_y + 18
    parts = [keys]
    for row, lane in enumerate(lanes):
        y = y0 + row * lane_px
        parts.append(text(x0 - 6, y + lane_px / 2 + 4, lane, anchor="end"))
        parts.append(rect(x0, y + 2, x1 - x0, lane_px - 4, "gl-lane"))
    axis_y = y0 + lane_px * len(lanes) + 4
    axis, high = _axis(x0, x1, axis_y, width, x_label, ",g")
    scale = (x1 - x0) / high
    for s in spans:
        y = y0 + lanes.index(s.lane) * lane_px
        w = max((s.end - s.start) * scale, 1.0)
        tip = f"{s.label} {s.end - s.start:,.3g} {x_label.split(' ')[0]}" if s.label else ""
        parts.append(
            rect(
                x0 + (s.start - start) * scale,
                y + 4,
                w,
                lane_px - 8,
                kind_class(kinds.index(s.kind)),
                tip,
            )
        )
    parts.append(axis)
    return figure(
        "".join(parts),
        width=WIDTH_PX,
        height=axis_y + 42,
        title=title,
        description=description,
        caption=caption,
    )
