"""A lesson's GPU rows as one small table: predicted, published, measured, measured/predicted.

One renderer for every lesson that shows GPU figures. :func:`rows_markdown` takes the
frozen rows of :func:`gpulesson.results.predict.table_rows` (one per reference GPU) and
prints them with the model's arithmetic in a collapsible "How this is predicted" block,
each published figure linked to its source, and the measured figure (from a reference
bundle of ours, or this build's own device) with its ratio to the prediction where one
exists. :func:`section` is what a lesson block calls: the table, its page facts (each
with its kind) and the GPU claims checked against them.

>>> md = rows_markdown("memory_bandwidth")
>>> print(md.splitlines()[2])
| GPU | predicted | published | measured | measured / predicted |
>>> "NVIDIA H100 SXM" in md and "How this is predicted" in md
True
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from gpulesson.results import predict
from gpulesson.results.bundle import Bundle
from gpulesson.results.compare import load_dir
from gpulesson.site import gpu_claims
from gpulesson.site.results_pages import RESULTS_DIR
from gpulesson.text import inert

#: Display units: the bundle unit, what a reader reads, and the factor.
UNITS = {"FLOP/s": ("TFLOP/s", 1e-12), "B/s": ("GB/s", 1e-9), "s": ("µs", 1e6)}


def shown(value: float, unit: str) -> str:
    """A value in the unit a reader reads.

    >>> shown(9.895e14, "FLOP/s"), shown(6.43e-6, "s"), shown(3.2e10, "B/s")
    ('989.5 TFLOP/s', '6.43 µs', '32 GB/s')
    """
    display, factor = UNITS.get(unit, (unit, 1.0))
    return f"{value * factor:.4g} {display}".strip()


def reference_bundles(root: Path = RESULTS_DIR) -> tuple[Bundle, ...]:
    """The CUDA bundles under ``results/reference/`` (none on a fresh clone)."""
    return tuple(
        s.bundle
        for s in load_dir(Path(root) / "reference", "reference")
        if s.bundle.provenance.device_type == "cuda"
    )


def _predicted(row: predict.TableRow) -> str:
    p = row.predicted
    if isinstance(p, predict.NoModel):
        return "no model"
    bound = " (bound)" if p.kind == "upper bound" else ""
    return shown(p.value, p.unit) + bound


def _published(row: predict.TableRow) -> str:
    if not row.published:
        return "none found"
    return "; ".join(
        f"[{inert(shown(r.value_in_bundle_unit, r.bundle_unit))}]({inert(r.source)}) "
        f"({inert(r.publisher.split(' (')[0])})"
        for r in row.published
    )


def _measured(row: predict.TableRow) -> tuple[str, str]:
    if row.measured is None or row.measured_unit is None:
        return "not measured", "no measurement"
    ratio = f"{row.ratio:.2f}" if row.ratio is not None else "not comparable"
    return shown(row.measured, row.measured_unit), ratio


def kinds(rows: Sequence[predict.TableRow]) -> tuple[str, ...]:
    """Which kinds of figure the rows hold: ``predicted``, ``published``, ``measured``.

    >>> kinds(predict.table_rows("matmul_peak.bf16"))
    ('predicted', 'published')
    """
    found = []
    if any(isinstance(r.predicted, predict.Prediction) for r in rows):
        found.append("predicted")
    if any(r.published for r in rows):
        found.append("published")
    if any(r.measured is not None for r in rows):
        found.append("measured")
    return tuple(found)


def kinds_line(rows: Sequence[predict.TableRow]) -> str:
    """One line naming the kinds of figure in the table, and that none was measured here.

    >>> kinds_line(predict.table_rows("memory_bandwidth"))
    'GPU figures in this table: predicted, published; none measured on this build.'
    """
    found = kinds(rows)
    if not found:
        return "No GPU figure in this table: the course has no model for it (below)."
    tail = "" if "measured" in found else "; none measured on this build"
    return f"GPU figures in this table: {', '.join(found)}{tail}."


def rows_markdown(
    figure: str, bundles: Iterable[Bundle] = (), *, title: str | None = None, limit: int = 8
) -> str:
    """The table for ``figure``: one row per reference GPU with a prediction or a figure.

    GPUs with neither a prediction nor a published or measured figure are left out; at
    most ``limit`` rows, the reference GPUs first.
    """
    rows = [
        r
        for r in predict.table_rows(figure, bundles)
        if isinstance(r.predicted, predict.Prediction) or r.published or r.measured is not None
    ][:limit]
    if not rows:  # no model for any GPU (a profiler table): say so, row by row
        rows = list(predict.table_rows(figure, bundles))[:limit]
    head = f"**{inert(title)}** · " if title else ""
    lines = [
        f"{head}{kinds_line(rows)}",
        "",
        "| GPU | predicted | published | measured | measured / predicted |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        measured, ratio = _measured(r)
        lines.append(
            f"| {inert(r.name)} | {inert(_predicted(r))} | {_published(r)} | "
            f"{inert(measured)} | {inert(ratio)} |"
        )
    how = [
        f"    - {inert(r.name)}: {inert(r.predicted.model)}: {inert(r.predicted.arithmetic)}"
        for r in rows
        if isinstance(r.predicted, predict.Prediction)
    ]
    reasons = sorted(
        {inert(r.predicted.reason) for r in rows if isinstance(r.predicted, predict.NoModel)}
    )
    how += [f"    - {reason}" for reason in reasons]
    lines += ["", '??? note "How this is predicted"', "", *how]
    return "\n".join(lines) + "\n"


def section(
    figures: Sequence[tuple[str, str]],
    claim_keys: Sequence[str] = (),
    *,
    root: Path = RESULTS_DIR,
) -> str:
    """A lesson's GPU section: a table per ``(figure, title)``, then its checked GPU claims.

    Publishes the claims' facts (kinds ``published``, ``predicted``, ``constant``, and
    ``measured`` from a bundle of ours) on the page before checking them.
    """
    bundles = reference_bundles(root)
    parts = [rows_markdown(figure, bundles, title=title) for figure, title in figures]
    if claim_keys:
        values = gpu_claims.gpu_facts(bundles)
        gpu_claims.publish_facts(values)
        parts.append(gpu_claims.claim_markdown(gpu_claims.with_measured(claim_keys), values))
    return "\n".join(parts) + "\n"
