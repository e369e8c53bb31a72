"""A lesson's GPU rows as one small table: predicted, published, measured, measured/predicted.

One renderer for every lesson that shows GPU figures. :func:`rows_markdown` takes the
frozen rows of :func:`gpulesson.results.predict.table_rows` (one per reference GPU) and
prints them with the model's arithmetic in a collapsible "How this is predicted" block,
each published figure linked to its source, and the measured figure (from a reference
bundle of ours, or this build's own device) with its ratio to the prediction where one
exists. :func:`section` is what a lesson block calls: the table, its page facts (each
with its kind) and the GPU claims checked against them.

A lesson asks for a table with ``(figure, title)``, or with ``(figure, title, params)`` /
a :class:`RowSpec` for a figure whose model needs the lesson's numbers
(:data:`gpulesson.results.predict.PARAMETERISED`: ``decode.b1``, ``all_reduce.time``,
``train_step.time``). Every reference GPU gets a row; one whose datasheet lacks an input
says which ("no NVLink or PCIe figure"). :func:`section` publishes each predicted figure it
shows as ``pred.<key>.<gpu>`` (kind ``predicted``) and each measured one as
``ours.<key>.<gpu>`` (kind ``measured``), in the table's unit: ``<key>`` is the figure with
dots as underscores unless the spec names one, ``<gpu>`` the datasheet id with dashes as
underscores (``pred.decode_b1.h100_sxm``).

>>> md = rows_markdown("memory_bandwidth")
>>> print(md.splitlines()[2])
| GPU | predicted | published | measured | measured / predicted |
>>> "NVIDIA H100 SXM" in md and "How this is predicted" in md
True
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpulesson.results import datasheets, predict
from gpulesson.results.bundle import Bundle
from gpulesson.results.compare import load_dir
from gpulesson.site import facts, gpu_claims
from gpulesson.site.results_pages import RESULTS_DIR
from gpulesson.tables import markdown_table
from gpulesson.text import inert

#: Display units: the bundle unit, what a reader reads, and the factor.
UNITS = {"FLOP/s": ("TFLOP/s", 1e-12), "B/s": ("GB/s", 1e-9), "s": ("µs", 1e6)}
#: Seconds in a larger unit when a table's largest time reaches it (µs below 1 ms).
_SECONDS = (("s", 1.0, 1.0), ("ms", 1e3, 1e-3))

Scale = tuple[str, float]  # the display unit and the factor from the bundle unit


def scale_for(unit: str, values: Iterable[float] = ()) -> Scale:
    """The display unit and factor for a table in ``unit``: seconds by the largest value.

    >>> scale_for("FLOP/s"), scale_for("s", [6.4e-6]), scale_for("s", [0.0154, 0.2344])
    (('TFLOP/s', 1e-12), ('µs', 1000000.0), ('ms', 1000.0))
    """
    if unit == "s":
        largest = max(values, default=0.0)
        for display, factor, least in _SECONDS:
            if largest >= least:
                return display, factor
    return UNITS.get(unit, (unit, 1.0))


def shown(value: float, unit: str, scale: Scale | None = None) -> str:
    """A value in the unit a reader reads (``scale``: the table's, from :func:`scale_for`).

    >>> shown(9.895e14, "FLOP/s"), shown(6.43e-6, "s"), shown(3.2e10, "B/s")
    ('989.5 TFLOP/s', '6.43 µs', '32 GB/s')
    >>> shown(0.1089, "s", ("ms", 1e3)), shown(209.375, "tokens/s")
    ('108.9 ms', '209.4 tokens/s')
    """
    display, factor = scale or UNITS.get(unit, (unit, 1.0))
    return f"{value * factor:.4g} {display}".strip()


@dataclass(frozen=True, kw_only=True)
class RowSpec:
    """One table a lesson asks for: the figure, its title, and params where its model needs them.

    ``params`` are checked by :func:`gpulesson.results.predict.check_params` (a typo fails the
    build with the fix); ``key`` names the table's page facts (default: the figure with dots
    as underscores), so two tables of one figure on a page can be told apart.

    >>> RowSpec(figure="decode.b1", title="8B in fp16", params={"bytes_per_token": 16e9}).fact_key
    'decode_b1'
    """

    figure: str
    title: str | None = None
    params: Mapping[str, float | int | str] | None = None
    key: str | None = None

    def __post_init__(self) -> None:
        if self.params is not None:
            predict.check_params(self.figure, self.params)
        if self.key is not None and not re.fullmatch(r"[a-z0-9_]+", self.key):
            raise ValueError(f"key={self.key!r} must be lower-case letters, digits and _")

    @property
    def fact_key(self) -> str:
        return self.key or re.sub(r"[^a-z0-9]+", "_", self.figure.lower()).strip("_")


TableSpec = tuple[str, str] | tuple[str, str, Mapping[str, float | int | str]] | RowSpec


def as_spec(item: TableSpec) -> RowSpec:
    """A lesson's ``(figure, title)``, ``(figure, title, params)`` or :class:`RowSpec`, as one.

    >>> as_spec(("all_reduce.time", "8 GPUs", {"message_bytes": 28e9, "gpus": 8})).params
    {'message_bytes': 28000000000.0, 'gpus': 8}
    """
    if isinstance(item, RowSpec):
        return item
    if (
        isinstance(item, tuple)
        and len(item) in (2, 3)
        and all(isinstance(x, str) for x in item[:2])
    ):
        params = item[2] if len(item) == 3 else None
        return RowSpec(figure=item[0], title=item[1], params=params)  # type: ignore[arg-type]
    raise ValueError(
        f"{item!r}: give (figure, title), (figure, title, params) or a RowSpec, "
        "e.g. ('decode.b1', 'Batch-1 decode', {'bytes_per_token': 16e9})"
    )


def gpu_key(device: str) -> str:
    """A device id as a fact name part: ``h100-sxm`` -> ``h100_sxm``."""
    return re.sub(r"[^a-z0-9]+", "_", device.lower()).strip("_")


def reference_bundles(root: Path = RESULTS_DIR) -> tuple[Bundle, ...]:
    """The CUDA bundles under ``results/reference/`` (none on a fresh clone)."""
    return tuple(
        s.bundle
        for s in load_dir(Path(root) / "reference", "reference")
        if s.bundle.provenance.device_type == "cuda"
    )


def _in(unit: str, scale: Scale | None, table_unit: str | None) -> Scale | None:
    """The table's scale for a figure in the table's unit; None (the default) otherwise."""
    return scale if unit == table_unit else None


def _predicted(row: predict.TableRow, scale: Scale | None = None) -> str:
    p = row.predicted
    if isinstance(p, predict.NoModel):
        return p.reason.split(":")[0]  # "no model", "no NVLink or PCIe figure", "no bf16 peak"
    bound = " (bound)" if p.kind == "upper bound" else ""
    return shown(p.value, p.unit, scale) + bound


def _published(row: predict.TableRow, scale: Scale | None = None, unit: str | None = None) -> str:
    if not row.published:
        return "none found"
    return "; ".join(
        f"[{inert(shown(r.value_in_bundle_unit, r.bundle_unit, _in(r.bundle_unit, scale, unit)))}]"
        f"({inert(r.source)}) ({inert(r.publisher.split(' (')[0])})"
        for r in row.published
    )


def _measured(
    row: predict.TableRow, scale: Scale | None = None, unit: str | None = None
) -> tuple[str, str]:
    if row.measured is None or row.measured_unit is None:
        return "not measured", "no measurement"
    ratio = f"{row.ratio:.2f}" if row.ratio is not None else "not comparable"
    at = _in(row.measured_unit, scale, unit)
    return shown(row.measured, row.measured_unit, at), ratio


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


@dataclass(frozen=True, kw_only=True)
class Table:
    """The rows one table shows, and the unit it shows them in."""

    spec: RowSpec
    rows: tuple[predict.TableRow, ...]
    unit: str | None  # the bundle unit of its predictions (None: no prediction)
    scale: Scale | None


def table(spec: TableSpec, bundles: Iterable[Bundle] = (), *, limit: int = 10) -> Table:
    """The rows a table shows: every reference GPU, then other GPUs with a figure.

    A reference GPU without a prediction stays, its row saying why; another GPU needs a
    prediction or a published or measured figure. At most ``limit`` rows. The table's unit
    (µs, ms or s for times) follows its largest prediction.
    """
    spec = as_spec(spec)
    every = predict.table_rows(spec.figure, bundles, spec.params)
    reference = set(datasheets.reference_ids())
    rows = [
        r
        for r in every
        if r.device in reference
        or isinstance(r.predicted, predict.Prediction)
        or r.published
        or r.measured is not None
    ][:limit]
    if not kinds(rows):
        rows = list(every)[:limit]  # no model for any GPU (a profiler table): say so, row by row
    made = [r.predicted for r in rows if isinstance(r.predicted, predict.Prediction)]
    unit = made[0].unit if made else None
    scale = None
    if unit is not None:  # from the predictions alone, so a page's fact units stay put
        scale = scale_for(unit, [p.value for p in made if p.unit == unit])
    return Table(spec=spec, rows=tuple(rows), unit=unit, scale=scale)


def table_markdown(t: Table) -> str:
    """One table's Markdown: the kinds line, one row per GPU, then how each is predicted."""
    head = f"**{inert(t.spec.title)}** · " if t.spec.title else ""
    cells = []
    for r in t.rows:
        measured, ratio = _measured(r, t.scale, t.unit)
        cells.append(
            (
                inert(r.name),
                inert(_predicted(r, t.scale)),
                _published(r, t.scale, t.unit),
                inert(measured),
                inert(ratio),
            )
        )
    header = ("GPU", "predicted", "published", "measured", "measured / predicted")
    lines = [f"{head}{kinds_line(t.rows)}", "", markdown_table(header, cells, align="lllll")]
    how = [
        f"    - {inert(r.name)}: {inert(r.predicted.model)}: {inert(r.predicted.arithmetic)}"
        for r in t.rows
        if isinstance(r.predicted, predict.Prediction)
    ]
    reasons = sorted(
        {inert(r.predicted.reason) for r in t.rows if isinstance(r.predicted, predict.NoModel)}
    )
    how += [f"    - {reason}" for reason in reasons]
    lines += ["", '??? note "How this is predicted"', "", *how]
    return "\n".join(lines) + "\n"


def rows_markdown(
    figure: str,
    bundles: Iterable[Bundle] = (),
    *,
    title: str | None = None,
    limit: int = 10,
    params: Mapping[str, float | int | str] | None = None,
) -> str:
    """The table for ``figure`` (with ``params`` where its model needs them); see :func:`table`.

    >>> md = rows_markdown("all_reduce.time", params={"message_bytes": 28e9, "gpus": 8})
    >>> [line for line in md.splitlines() if "H100 SXM" in line][0]
    '| NVIDIA H100 SXM5 80GB | 108.9 ms | none found | not measured | no measurement |'
    >>> "| NVIDIA T4 | no NVLink or PCIe figure |" in md
    True
    """
    spec = RowSpec(figure=figure, title=title, params=params)
    return table_markdown(table(spec, bundles, limit=limit))


def table_facts(t: Table) -> dict[str, gpu_claims.GpuFact]:
    """The page facts a table's figures give: ``pred.<key>.<gpu>`` and ``ours.<key>.<gpu>``.

    >>> t = table(("decode.b1", "8B, fp16", {"bytes_per_token": 16e9}))
    >>> f = table_facts(t)["pred.decode_b1.h100_sxm"]
    >>> round(f.value, 3), f.unit, f.kind
    (209.375, 'tokens/s', 'predicted')
    """
    out: dict[str, gpu_claims.GpuFact] = {}
    display, factor = t.scale or ("", 1.0)
    for r in t.rows:
        where = f"{t.spec.fact_key}.{gpu_key(r.device)}"
        p = r.predicted
        if isinstance(p, predict.Prediction) and p.unit == t.unit:
            out[f"pred.{where}"] = gpu_claims.GpuFact(
                p.value * factor, display, facts.PREDICTED, p.arithmetic
            )
        if r.measured is not None and r.measured_unit == t.unit:
            out[f"ours.{where}"] = gpu_claims.GpuFact(
                r.measured * factor, display, facts.MEASURED, f"a bundle of ours ({r.device})"
            )
    return out


def section(
    figures: Sequence[TableSpec],
    claim_keys: Sequence[str] = (),
    *,
    root: Path = RESULTS_DIR,
) -> str:
    """A lesson's GPU section: a table per ``(figure, title[, params])`` or :class:`RowSpec`,
    then its checked GPU claims.

    Publishes each table's predicted and measured figures (:func:`table_facts`), and the
    claims' facts (kinds ``published``, ``predicted``, ``constant``, and ``measured`` from a
    bundle of ours), on the page before checking them.
    """
    bundles = reference_bundles(root)
    tables = [table(spec, bundles) for spec in figures]
    for t in tables:
        gpu_claims.publish_facts(table_facts(t))
    parts = [table_markdown(t) for t in tables]
    if claim_keys:
        values = gpu_claims.gpu_facts(bundles)
        gpu_claims.publish_facts(values)
        parts.append(gpu_claims.claim_markdown(gpu_claims.with_measured(claim_keys), values))
    return "\n".join(parts) + "\n"
