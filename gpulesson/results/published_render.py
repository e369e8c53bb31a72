"""Published measurements beside predictions and bundles: the results page's tables and charts,
and the data the compare page's script looks up.

Every GPU figure is **predicted** (:mod:`gpulesson.results.predict`), **published**
(:mod:`gpulesson.results.published`) or **measured** (a result bundle). This module renders
the three side by side; it computes no figure of its own: values come from the published
rows, the predictions from ``predict``, the bundles' values from their measurements, and the
only arithmetic is a unit's scale and published / predicted (``predict.compare``).

* :func:`published_markdown`: every published row grouped by figure, each with its source
  link, retrieval date and software, the prediction for its device and published /
  predicted, or why there is no model;
* :func:`across_chart`: one figure across GPUs, predicted, published and measured as
  distinct marks, with a text alternative stating the numbers;
* :func:`compare_published_data`: the published rows, the predictions per datasheet device
  and figure, the name-matching keys and, per device and figure, which device's published
  rows to show (its own, or the nearest GPU's that has rows, by memory bandwidth), for
  ``docs/javascripts/compare.js`` to look up.

>>> rows = published.load()
>>> text = published_markdown(rows)
>>> text.count("<a href=") == len(rows), "#### matmul_peak.bf16" in text
(True, True)
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpulesson.results import datasheets, predict, published
from gpulesson.results.compare import Sourced
from gpulesson.results.render import MISSING, display_unit, format_number, format_ratio
from gpulesson.tables import markdown_table
from gpulesson.text import inert
from gpulesson.timing import charts

#: The headline figures charted across GPUs: each has published rows for datasheet devices.
CHART_FIGURES = ("matmul_peak.bf16", "matmul_peak.fp8", "memory_bandwidth", "h2d.pinned")
#: The figures the compare page's data predicts for every datasheet device (the suite's
#: headline names a model covers), on top of every published row's figure.
PREDICTED_FIGURES = (
    "matmul_peak.fp32",
    "matmul_peak.tf32",
    "matmul_peak.bf16",
    "matmul_peak.fp16",
    "matmul_peak.fp8",
    "memory_bandwidth",
    "launch_overhead.eager",
    "launch_overhead.cuda_graph",
    "h2d.pinned",
    "h2d.pageable",
    "d2h.pinned",
    "d2h.pageable",
)
KINDS = ("predicted", "published", "measured")
KIND_COLOURS = (charts.colour(0), charts.colour(2), charts.READER_COLOUR)
KIND_SHAPES = ("diamond", "circle", "square")


def load_rows(path: Path | None = None) -> tuple[published.Published, ...]:
    """The published rows: the package's file, or ``path`` (a copy a test writes), checked.

    A malformed or unsourced row is a ``ValueError`` naming the file, row and field, so the
    page that calls this fails the strict build.
    """
    if path is None:
        return published.load()
    return published.parse(json.loads(path.read_text(encoding="utf-8")), label=str(path))


def device_name(device: str) -> str:
    """A datasheet id's name, or the source's own name for a GPU the datasheets lack.

    >>> device_name("h100-sxm"), device_name("Intel Gaudi 2")
    ('NVIDIA H100 SXM5 80GB', 'Intel Gaudi 2')
    """
    return datasheets.get(device).name if device in datasheets.ids() else device


def prediction_for(row: published.Published) -> predict.Prediction | predict.NoModel:
    """The prediction for a published row's device and figure, or why there is none.

    >>> r = next(r for r in published.load() if r.device == "h100-sxm")
    >>> prediction_for(r).value / 1e12
    989.5
    >>> prediction_for(next(r for r in published.load() if r.device == "Intel Gaudi 2")).reason
    'no model (no datasheet row): the datasheets have no row for Intel Gaudi 2'
    """
    if row.device not in datasheets.ids():
        return predict.NoModel(
            figure=row.figure,
            reason=f"no model (no datasheet row): the datasheets have no row for {row.device}",
        )
    return predict.predict_for(row.device, row.figure)


def published_ratio(
    row: published.Published, p: predict.Prediction | predict.NoModel
) -> float | None:
    """Published / predicted where a prediction exists in the row's unit, else None."""
    if not isinstance(p, predict.Prediction) or p.unit != row.bundle_unit:
        return None
    return predict.compare(row.value_in_bundle_unit, row.bundle_unit, p).ratio


def _in_source_unit(row: published.Published, p: predict.Prediction) -> str:
    return format_number(p.value / published.SOURCE_UNITS[row.unit][1])


def _link_html(url: str, text: str) -> str:
    return f'<a href="{html.escape(url, quote=True)}">{inert(text)}</a>'


def published_markdown(rows: Sequence[published.Published]) -> str:
    """Every published row, grouped by figure: value, prediction, ratio, source, retrieved."""
    figures = list(dict.fromkeys(r.figure for r in rows))
    out = [
        f"{len(rows)} published measurements from {len({r.source for r in rows})} "
        f"publications, in {len(figures)} figures. Each row links to the page that states it; "
        "**predicted** is the course's model for that GPU from its datasheet (no model where "
        "the datasheets lack the GPU or the course has no model for the figure)."
    ]
    header = (
        "device",
        "kind",
        "published",
        "unit",
        "predicted",
        "published ÷ predicted",
        "source",
        "retrieved",
        "software",
    )
    for figure in figures:
        table = []
        for r in (r for r in rows if r.figure == figure):
            p = prediction_for(r)
            ratio = published_ratio(r, p)
            if isinstance(p, predict.Prediction) and ratio is not None:
                shown = f"{_in_source_unit(r, p)} ({inert(p.kind)})"
            else:
                reason = p.reason if isinstance(p, predict.NoModel) else "no model in this unit"
                shown = inert(reason.split(":")[0])
            dated = f" ({inert(r.date)})" if r.date else ""
            cells = (
                inert(device_name(r.device)),
                "published",
                inert(format_number(r.value)),
                inert(r.unit),
                shown,
                format_ratio(ratio),
                _link_html(r.source, r.publisher) + dated,
                inert(r.retrieved.isoformat()),
                inert(r.software or MISSING),
            )
            table.append(cells)
        out += [f"#### {inert(figure)}", markdown_table(header, table, align="llrlrrlll")]
    return "\n\n".join(out)


# --- charts ----------------------------------------------------------------------------


def _bundle_values(figure: str, bundles: Sequence[Sourced]) -> dict[str, list[float]]:
    found: dict[str, list[float]] = {}
    for s in bundles:
        sheet = s.bundle.datasheet
        m = s.bundle.measurement(figure)
        if sheet is not None and m is not None:
            found.setdefault(sheet.id, []).append(m.value)
    return found


def across_points(
    figure: str, rows: Sequence[published.Published], bundles: Sequence[Sourced] = ()
) -> list[dict[str, Any]]:
    """One point per device and kind: predicted (datasheet devices), published, measured.

    Values are in the figure's bundle unit. A reference GPU without a model has no
    predicted point; a published GPU the datasheets lack has only its published point(s).

    >>> pts = across_points("matmul_peak.bf16", published.load())
    >>> sorted({p["kind"] for p in pts if p["device"] == "NVIDIA H100 SXM5 80GB"})
    ['predicted', 'published']
    """
    measured = _bundle_values(figure, bundles)
    points: list[dict[str, Any]] = []
    devices = list(predict.reference_devices(s.bundle for s in bundles))
    devices += [r.device for r in rows if r.figure == figure and r.device not in devices]
    for device in dict.fromkeys(devices):
        name = device_name(device)
        if device in datasheets.ids():
            p = predict.predict_for(device, figure)
            if isinstance(p, predict.Prediction):
                points.append({"device": name, "kind": "predicted", "value": p.value})
        points += [
            {"device": name, "kind": "published", "value": r.value_in_bundle_unit}
            for r in rows
            if r.device == device and r.figure == figure
        ]
        points += [
            {"device": name, "kind": "measured", "value": v} for v in measured.get(device, [])
        ]
    return points


def _unit_of(figure: str, rows: Sequence[published.Published]) -> str:
    for r in rows:
        if r.figure == figure:
            return r.bundle_unit
    p = predict.predict_for(datasheets.reference_ids()[0], figure)
    return p.unit if isinstance(p, predict.Prediction) else ""


def across_chart(
    figure: str, rows: Sequence[published.Published], bundles: Sequence[Sourced] = ()
) -> dict[str, Any]:
    """One figure across GPUs as a dot plot: a row per device, a mark per kind.

    Predicted, published and measured differ in colour and shape; the x axis is in the
    figure's display unit (log scale when the values span more than a hundredfold). The
    description states every point, so a screen reader hears the numbers.

    >>> spec = across_chart("memory_bandwidth", published.load())
    >>> spec["encoding"]["x"]["title"], "published 1,704 GB/s" in spec["description"]
    ('memory_bandwidth (GB/s)', True)
    """
    points = across_points(figure, rows, bundles)
    unit, size = display_unit(_unit_of(figure, rows), [p["value"] for p in points])
    data = [
        {**p, "shown": p["value"] / size, "text": f"{format_number(p['value'] / size)} {unit}"}
        for p in points
    ]
    shown = [d["shown"] for d in data if d["shown"] > 0]
    log = bool(shown) and max(shown) / min(shown) > 100
    by_device: dict[str, list[str]] = {}
    for d in data:
        by_device.setdefault(d["device"], []).append(f"{d['kind']} {d['text']}")
    summary = "; ".join(f"{device}: {', '.join(parts)}" for device, parts in by_device.items())
    devices = list(by_device)
    scale: dict[str, Any] = (
        charts.log_scale(10, charts.power_domain(shown))
        if log
        else {"type": "linear", "zero": True}
    )
    x: dict[str, Any] = {
        "field": "shown",
        "type": "quantitative",
        "title": f"{figure} ({unit}{', log scale' if log else ''})",
        "scale": scale,
    }
    if log:
        x["axis"] = charts.log_axis(10)
    return {
        "title": f"{figure} across GPUs",
        "description": f"Dot plot of {figure} in {unit} per GPU, predicted, published and "
        f"measured as distinct marks. {summary}.",
        "width": "container",
        "height": max(len(devices), 1) * 22,
        "autosize": {"type": "fit-x", "contains": "padding"},
        "data": {"values": data},
        "mark": {"type": "point", "filled": True, "size": 90, "opacity": 0.9},
        "encoding": {
            "y": {
                "field": "device",
                "type": "nominal",
                "sort": devices,
                "title": None,
                "axis": {"labelLimit": 240},
            },
            "x": x,
            "color": {
                "field": "kind",
                "type": "nominal",
                "title": "kind",
                "scale": {"domain": list(KINDS), "range": list(KIND_COLOURS)},
                "legend": {"orient": "bottom", "direction": "horizontal"},
            },
            "shape": {
                "field": "kind",
                "type": "nominal",
                "scale": {"domain": list(KINDS), "range": list(KIND_SHAPES)},
            },
            "tooltip": [
                {"field": "device", "type": "nominal", "title": "GPU"},
                {"field": "kind", "type": "nominal", "title": "kind"},
                {"field": "text", "type": "nominal", "title": "value"},
            ],
        },
    }


def across_charts_html(rows: Sequence[published.Published], bundles: Sequence[Sourced] = ()) -> str:
    """The headline figures' charts across GPUs, each a ``.gl-chart`` figure."""
    return "\n\n".join(
        charts.to_html(
            across_chart(figure, rows, bundles),
            caption=f"{figure} per GPU: predicted (the course's model over the datasheet), "
            "published (the tables below, each row linked to its source) and measured "
            "(this page's bundles, where one exists).",
        )
        for figure in CHART_FIGURES
    )


# --- the compare page's data -----------------------------------------------------------


def _prediction_json(p: predict.Prediction | predict.NoModel) -> dict[str, Any]:
    if isinstance(p, predict.NoModel):
        return {"reason": p.reason}
    return {
        "value": p.value,
        "unit": p.unit,
        "model": p.model,
        "arithmetic": p.arithmetic,
        "kind": p.kind,
    }


def _nearest(device: str, candidates: Sequence[str]) -> str | None:
    """The candidate whose memory bandwidth is nearest ``device``'s (on a log scale)."""
    if not candidates:
        return None
    own = datasheets.get(device).memory_bandwidth_bytes_per_s
    return min(
        candidates,
        key=lambda c: abs(math.log(datasheets.get(c).memory_bandwidth_bytes_per_s / own)),
    )


def compare_published_data(rows: Sequence[published.Published]) -> dict[str, Any]:
    """What compare.js looks up for the reader's device: nothing in it is computed there.

    ``published_for[id][figure]`` names the device whose published rows stand beside the
    reader's figure: the reader's own device where it has rows, else the nearest device
    with rows for that figure by memory bandwidth (``same`` says which).

    >>> d = compare_published_data(published.load())
    >>> d["published_for"]["h100-sxm"]["matmul_peak.bf16"]
    {'device': 'h100-sxm', 'same': True, 'rows': [4]}
    >>> d["published_for"]["h200"]["matmul_peak.bf16"]["same"]
    False
    >>> round(d["predictions"]["h100-sxm"]["memory_bandwidth"]["value"] / 1e12, 2)
    3.35
    """
    figures = list(dict.fromkeys([*PREDICTED_FIGURES, *(r.figure for r in rows)]))
    ids = datasheets.ids()
    rows_json = [
        {
            "device": r.device,
            "device_name": device_name(r.device),
            "figure": r.figure,
            "value": r.value,
            "unit": r.unit,
            "bundle_unit": r.bundle_unit,
            "value_in_bundle_unit": r.value_in_bundle_unit,
            "source": r.source,
            "publisher": r.publisher,
            "retrieved": r.retrieved.isoformat(),
            "software": r.software,
        }
        for r in rows
    ]
    with_rows: dict[str, list[str]] = {}
    for r in rows:
        if r.device in ids:
            with_rows.setdefault(r.figure, []).append(r.device)
    published_for: dict[str, dict[str, Any]] = {}
    for device in ids:
        per_figure = {}
        for figure, devices in with_rows.items():
            chosen = device if device in devices else _nearest(device, sorted(set(devices)))
            per_figure[figure] = {
                "device": chosen,
                "same": chosen == device,
                "rows": [
                    i for i, r in enumerate(rows) if r.device == chosen and r.figure == figure
                ],
            }
        published_for[device] = per_figure
    return {
        "published": rows_json,
        "predictions": {
            device: {f: _prediction_json(predict.predict_for(device, f)) for f in figures}
            for device in ids
        },
        "no_model": dict(predict.NO_MODEL),
        "name_keys": {
            row.id: {"name": row.name, "patterns": list(row.name_patterns)}
            for row in datasheets.all_rows()
        },
        "published_for": published_for,
        "kind_colours": dict(zip(KINDS, KIND_COLOURS, strict=True)),
    }
