"""Charts for the lesson ``lessons/inside-gpu.md``: the working-set sweep and attention's peaks.

Both are the site's Vega-Lite component (:func:`gpulesson.timing.charts.to_html`): the
data inline, colours as the charts' CSS variables, and a text alternative (the view's
``aria-label``) that states the figures a reader needs, so the chart says the same thing
to a screen reader as the table beside it.

* :func:`sweep_chart` draws read bandwidth against working-set size on a log size axis,
  with each step's edge (:attr:`gpulesson.inside.cache_sweep.Step.edge_bytes`) and the
  cache sizes the kernel reports marked as vertical rules.
* :func:`attention_peaks_chart` draws the traced peak memory of the explicit
  ``softmax(QK^T)V`` and of SDPA against sequence length, on log-log axes.

>>> from gpulesson.inside.cache_sweep import SweepPoint, Sweep
>>> s = Sweep(device="cpu", rounds=1, points=tuple(
...     SweepPoint(working_set_bytes=2**k, bytes_per_s=b)
...     for k, b in zip(range(13, 21), (9e10, 9e10, 9e10, 9e10, 2e10, 2e10, 2e10, 2e10))))
>>> html_ = sweep_chart(s, ())
>>> html_.startswith('<figure class="gl-chart" data-gl-chart>'), "step edge at 90.5 KiB" in html_
(True, True)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from gpulesson.inside.attention_io import AttentionPeak, growth_exponent
from gpulesson.inside.cache_sweep import CacheLevel, Sweep, nearest_edge
from gpulesson.timing import charts
from gpulesson.units import GIB, MIB

KIB = 1024


def size_text(n_bytes: float) -> str:
    """A size in KiB, MiB or GiB with three significant figures.

    >>> size_text(48 * 1024), size_text(1.82 * 2**20), size_text(2**31)
    ('48 KiB', '1.82 MiB', '2 GiB')
    """
    if n_bytes >= GIB:
        return f"{n_bytes / GIB:.3g} GiB"
    if n_bytes >= MIB:
        return f"{n_bytes / MIB:.3g} MiB"
    return f"{n_bytes / KIB:.3g} KiB"


# Axis labels for a size in KiB: 8 KiB, 1 MiB, 2 GiB.
_SIZE_LABEL = (
    "datum.value >= 1048576 ? format(datum.value / 1048576, '~g') + ' GiB' : "
    "datum.value >= 1024 ? format(datum.value / 1024, '~g') + ' MiB' : "
    "format(datum.value, '~g') + ' KiB'"
)


def _rules(
    rows: list[dict[str, Any]], colour: str, dash: list[int], *, top: bool, domain: tuple
) -> list[dict]:
    """Vertical rules at each row's x, each labelled beside it, at the top or the bottom.

    A label reads on the side its row asks for (``"side"``: away from a neighbouring rule),
    or else to the right of its rule; but never past the plot's edge: to the left in the
    last third of the axis, to the right in the first sixth.
    """
    if not rows:
        return []
    low, high = domain
    for row in rows:
        at = math.log(row["x"] / low) / math.log(high / low)
        right = row.pop("side", "right") == "right"
        right = (right and at < 2 / 3) or at < 1 / 6
        row["align"], row["dx"] = ("left", 4) if right else ("right", -4)
    layers: list[dict] = [
        {
            "data": {"values": rows},
            "mark": {"type": "rule", "color": colour, "strokeDash": dash, "strokeWidth": 1.5},
            "encoding": {
                "x": {"field": "x", "type": "quantitative"},
                "tooltip": [{"field": "text", "type": "nominal", "title": "marked"}],
            },
        }
    ]
    for align, dx in (("left", 4), ("right", -4)):
        side = [row for row in rows if row["align"] == align]
        if side:
            layers.append(
                {
                    "data": {"values": side},
                    "mark": {
                        "type": "text",
                        "align": align,
                        "dx": dx,
                        "baseline": "top" if top else "bottom",
                        "dy": 4 if top else -4,
                        "fontSize": 11,
                        "color": colour,
                        "y": 0 if top else "height",
                    },
                    "encoding": {
                        "x": {"field": "x", "type": "quantitative"},
                        "text": {"field": "text", "type": "nominal"},
                    },
                }
            )
    return layers


def sweep_chart(sweep: Sweep, caches: Sequence[CacheLevel]) -> str:
    """Read bandwidth against working set (log size axis), step edges and cache sizes marked.

    Cache sizes outside the swept range are named in the text alternative, not drawn.
    """
    if not sweep.points:
        raise ValueError("the sweep has no points: measure it first")
    xs = [p.working_set_bytes / KIB for p in sweep.points]
    low, high = charts.power_domain(xs, 2)
    rows = [
        {
            "x": p.working_set_bytes / KIB,
            "y": p.bytes_per_s / 1e9,
            "size": size_text(p.working_set_bytes),
        }
        for p in sweep.points
    ]
    edges = [
        {"x": s.edge_bytes / KIB, "text": f"step edge at {size_text(s.edge_bytes)}"}
        for s in sweep.steps
    ]
    drawn = [c for c in caches if low <= c.size_bytes / KIB <= high]
    marks = []
    for c in drawn:  # each cache's label on the side away from the nearest step edge
        near = nearest_edge(sweep.steps, c.size_bytes)
        side = "left" if near is not None and near.edge_bytes > c.size_bytes else "right"
        text = f"L{c.level} {size_text(c.size_bytes)}"
        marks.append({"x": c.size_bytes / KIB, "text": text, "side": side})
    steps_text = (
        "; ".join(
            f"a step from {s.before_bytes_per_s / 1e9:,.0f} to {s.after_bytes_per_s / 1e9:,.0f} "
            f"GB/s with its edge at {size_text(s.edge_bytes)}"
            for s in sweep.steps
        )
        or "no step"
    )
    caches_text = ""
    if caches:
        named = ", ".join(
            f"L{c.level} {size_text(c.size_bytes)}"
            + ("" if c in drawn else " (beyond the sizes swept, not drawn)")
            for c in caches
        )
        caches_text = f" Cache sizes the kernel reports, marked as dotted lines: {named}."
    first, last = sweep.points[0], sweep.points[-1]
    description = (
        f"Line chart of read bandwidth in GB/s against working-set size on a log axis, "
        f"measured on {sweep.device}: {first.bytes_per_s / 1e9:,.0f} GB/s at "
        f"{size_text(first.working_set_bytes)}, {last.bytes_per_s / 1e9:,.1f} GB/s at "
        f"{size_text(last.working_set_bytes)}; {len(sweep.steps)} steps found, "
        f"marked as dashed lines: {steps_text}.{caches_text}"
    )
    spec = charts._frame("Read bandwidth against working-set size", description)
    x = {
        "field": "x",
        "type": "quantitative",
        "title": "working set (log scale)",
        "scale": charts.log_scale(2, (low, high)),
        "axis": {
            "values": [2**k for k in range(round(math.log2(low)), round(math.log2(high)) + 1, 2)],
            "labelExpr": _SIZE_LABEL,
        },
    }
    y = {"field": "y", "type": "quantitative", "title": "read bandwidth (GB/s)"}
    spec["layer"] = [
        *_rules(marks, charts.colour(2), [2, 3], top=True, domain=(low, high)),
        *_rules(edges, charts.colour(1), [6, 4], top=False, domain=(low, high)),
        {
            "data": {"values": rows},
            "mark": {"type": "line", "strokeWidth": 2.5, "color": charts.colour(0), "point": True},
            "encoding": {
                "x": x,
                "y": y,
                "tooltip": [
                    {"field": "size", "type": "nominal", "title": "working set"},
                    {"field": "y", "type": "quantitative", "title": "GB/s", "format": ",.1f"},
                ],
            },
        },
    ]
    return charts.to_html(
        spec, caption="The table above lists the same bandwidths, the steps and the cache sizes."
    )


def attention_peaks_chart(peaks: Sequence[AttentionPeak]) -> str:
    """Traced peak memory (MiB) of explicit attention and SDPA against N, log-log."""
    if len(peaks) < 2:
        raise ValueError("the chart needs at least two sequence lengths: pass measure_peaks()")
    ns = [p.seq_len for p in peaks]
    std = [p.standard_peak_bytes for p in peaks]
    fused = [p.sdpa_peak_bytes for p in peaks]
    series = [
        charts.Series(
            "explicit softmax(QKᵀ)V", tuple((n, b / MIB) for n, b in zip(ns, std, strict=True))
        ),
        charts.Series("SDPA", tuple((n, b / MIB) for n, b in zip(ns, fused, strict=True))),
    ]
    spec = charts.line_chart(
        series,
        "sequence length N (log scale)",
        "peak memory (MiB, log scale)",
        "Peak memory of one attention call against sequence length",
        x_base=2,
        y_format=",.3g",
    )
    spec["description"] = (
        "Line chart on log-log axes of the traced peak memory of one attention call against "
        f"sequence length N, from N = {ns[0]:,} to {ns[-1]:,}: the explicit softmax(QKᵀ)V "
        f"grows from {size_text(std[0])} to {size_text(std[-1])} (as N to the "
        f"{growth_exponent(ns, std):.2f}), SDPA from {size_text(fused[0])} to "
        f"{size_text(fused[-1])} (as N to the {growth_exponent(ns, fused):.2f}); at "
        f"N = {ns[-1]:,} the explicit peak is {std[-1] / fused[-1]:.0f} times SDPA's."
    )
    return charts.to_html(spec, caption="The table above lists the same peaks.")
