"""Suite entries for the lesson "Feeding the GPU": loader, fusion, shape alignment, copy calls.

Each entry calls the function the lesson calls and keeps its samples:

* ``loader``: seconds per batch of a ``DataLoader`` loop by worker count, on the host's
  CPU whatever the device (:func:`gpulesson.timing.loader.measure_loader`); rows
  ``loader.w0``, ``loader.w1``, ``loader.w2``, ``loader.w2_persistent`` and the work
  per item, ``loader.item``;
* ``fusion``: a 30-op pointwise chain eager and under ``torch.compile`` on the device
  (:func:`gpulesson.timing.fusion.measure_fusion`, CPU or CUDA): ``fusion.eager``,
  ``fusion.compiled`` (seconds per call) and ``fusion.compile`` (the first call);
* ``alignment``: matmuls at an aligned size and its odd neighbours, and a GPT-2 output
  layer at vocabularies 50,257 and 50,304, per dtype of the device's plan
  (:func:`gpulesson.timing.alignment.measure_shapes`): ``alignment.<dtype>.n<size>`` and
  ``alignment.<dtype>.vocab<size>`` in FLOP/s;
* ``copy_call``: host time inside one host-to-device copy, pageable and pinned with
  ``non_blocking=True`` (:func:`gpulesson.timing.syncs.measure_copy_call`, CUDA only).

:func:`reference_rows` picks a bundle's rows by name for a page, leaving out the ones an
older bundle lacks, so a page never fails on a bundle made before an entry existed.

>>> [e.name for e in ENTRIES]
['loader', 'fusion', 'alignment', 'copy_call']
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence

from gpulesson.results.bundle import Bundle, Measurement, Skipped
from gpulesson.results.compare import Across, Sourced, across
from gpulesson.results.measurements import single
from gpulesson.results.suite import Context, Device, SuiteEntry
from gpulesson.timing.alignment import (
    GemmShape,
    ShapeComparison,
    ShapeTiming,
    measure_shapes,
    plan_for,
    square_neighbours,
    vocab_projection,
)
from gpulesson.timing.alignment import headline_figures as alignment_figures
from gpulesson.timing.fusion import COMPILE_DEVICES, FusionResult, measure_fusion
from gpulesson.timing.inputs import DTYPE_BYTES
from gpulesson.timing.loader import LoaderComparison, LoaderPlan, measure_loader
from gpulesson.timing.results import Spread
from gpulesson.timing.syncs import measure_copy_call

QUICK_LOADER = LoaderPlan(items=48, words_per_item=150, batches_per_epoch=6)
COPY_BYTES = {True: 16 * 2**20, False: 64 * 2**20}  # by context.quick


def _seconds(
    r: Spread, *, name: str, entry: str, label: str, params: dict, dtype: str | None = None
) -> Measurement:
    return Measurement(
        name=name,
        entry=entry,
        unit="s",
        value=r.median_s,
        samples=tuple(r.samples_s),
        samples_unit="s",
        label=label,
        dtype=dtype,
        params=params,
        warning=r.spread_warning,
    )


# --- loader ------------------------------------------------------------------------------


def loader_measurements(c: LoaderComparison) -> list[Measurement]:
    """The work per item, then one row per loader setting (seconds per batch)."""
    out = [
        _seconds(
            c.item,
            name="loader.item",
            entry="loader",
            label="one dataset item: generate and tokenize a text (CPU)",
            params={"words_per_item": c.words_per_item, "cpus": c.cpus},
        )
    ]
    for run in c.runs:
        suffix = f"w{run.num_workers}" + ("_persistent" if run.persistent_workers else "")
        out.append(
            _seconds(
                run,
                name=f"loader.{suffix}",
                entry="loader",
                label=f"DataLoader seconds per batch, {run.setting.label}",
                params={
                    "num_workers": run.num_workers,
                    "prefetch_factor": run.prefetch_factor,
                    "persistent_workers": run.persistent_workers,
                    "batch_size": run.batch_size,
                    "batches_per_epoch": run.batches_per_epoch,
                    "step_s": run.step_s,
                    "first_batch_s": run.first_batch_s[0],
                    "later_first_batch_s": run.later_first_batch_s,
                    "cpus": c.cpus,
                },
            )
        )
    return out


def run_loader(context: Context) -> list[Measurement]:
    """The loader loop on this machine's CPU (the device plays no part)."""
    plan = QUICK_LOADER if context.quick else LoaderPlan()
    return loader_measurements(measure_loader(plan=plan))


# --- fusion ------------------------------------------------------------------------------


def fusion_measurements(f: FusionResult) -> list[Measurement]:
    """Eager and compiled seconds per call, and the first (compiling) call."""
    params = {"n_elements": f.n_elements, "ops_per_call": f.ops_per_call, "threads": f.threads}
    return [
        _seconds(
            f.eager,
            name="fusion.eager",
            entry="fusion",
            label=f"{f.ops_per_call} pointwise ops, eager, seconds per call",
            params={**params, "calls_per_sample": f.eager.calls_per_sample},
        ),
        _seconds(
            f.compiled,
            name="fusion.compiled",
            entry="fusion",
            label=f"the same {f.ops_per_call} ops under torch.compile, seconds per call",
            params={**params, "calls_per_sample": f.compiled.calls_per_sample},
        ),
        single(
            f.compile_s,
            name="fusion.compile",
            entry="fusion",
            unit="s",
            label="torch.compile's first call (trace, generate, compile)",
            params={**params, "max_abs_diff": f.max_abs_diff},
        ),
    ]


def run_fusion(context: Context) -> list[Measurement]:
    """The chain on the suite's device (inductor: CPU or CUDA)."""
    return fusion_measurements(measure_fusion(context.device.type))


# --- alignment ---------------------------------------------------------------------------


def shape_measurements(c: ShapeComparison, kind: str) -> list[Measurement]:
    """One FLOP/s row per shape: ``alignment.<dtype>.<kind><size>``."""
    out = []
    for t in c.timings:
        s = t.shape
        size = s.n if kind == "vocab" else s.m
        out.append(
            Measurement(
                name=f"alignment.{c.dtype}.{kind}{size}",
                entry="alignment",
                unit="FLOP/s",
                value=t.flop_per_s,
                samples=t.samples_s,
                samples_unit="s",
                label=f"{s.label} matmul ({s.m} x {s.k} x {s.n}), {c.dtype}",
                dtype=c.dtype,
                limit="peak_flops",
                params={
                    "flop": s.flops,
                    "shape": s.label,
                    "m": s.m,
                    "k": s.k,
                    "n": s.n,
                    "aligned": s.aligned,
                    "device": c.device,
                    "calls_per_sample": c.calls_per_sample,
                    "threads": c.threads,
                },
                warning=t.spread_warning,
            )
        )
    return out


def shape_bytes(shapes: Sequence[GemmShape], dtype: str) -> int:
    """Bytes of every shape's operands and output, held at once during a measurement.

    >>> shape_bytes(square_neighbours(4), "fp32") == 4 * 3 * (9 + 16 + 25)
    True
    """
    per = DTYPE_BYTES[dtype]
    return sum(per * (s.m * s.k + s.k * s.n + s.m * s.n) for s in shapes)


def run_alignment(context: Context) -> list[Measurement | Skipped]:
    """Square neighbours and the vocabulary projection, per dtype of the device's plan."""
    device = context.device.type
    plan = plan_for(device)
    rounds = max(3, plan.rounds // 2) if context.quick else plan.rounds
    groups = (
        ("n", square_neighbours(plan.square_n)),
        ("vocab", vocab_projection(plan.tokens, plan.hidden)),
    )
    out: list[Measurement | Skipped] = []
    for dtype in plan.dtypes:
        for kind, shapes in groups:
            if not context.fits(shape_bytes(shapes, dtype)):
                out.append(
                    Skipped(
                        "alignment",
                        f"{kind} shapes in {dtype} need {shape_bytes(shapes, dtype)} bytes, "
                        f"more than this run's budget of {context.memory_budget_bytes}",
                    )
                )
                continue
            c = measure_shapes(
                shapes, device, dtype, rounds, plan.calls_per_sample, threads=plan.threads
            )
            out.extend(shape_measurements(c, kind))
    return out


def shapes_from_rows(
    measurements: Sequence[Measurement], dtype: str, kind: str
) -> ShapeComparison | None:
    """Rebuild a :class:`ShapeComparison` from ``alignment`` rows; None if they are absent.

    ``kind`` is ``"n"`` (square neighbours) or ``"vocab"``. The timings are the rows'
    samples, so the page's renderer and :attr:`ShapeComparison.aligned_gain` work on a
    bundle's rows exactly as on a measurement of this build.
    """
    prefix = f"alignment.{dtype}.{kind}"
    rows = [
        m
        for m in measurements
        if m.entry == "alignment" and m.name.startswith(prefix) and m.name[len(prefix) :].isdigit()
    ]
    if sum(bool(m.params.get("aligned")) for m in rows) != 1 or len(rows) < 2:
        return None
    timings = tuple(
        ShapeTiming(
            shape=GemmShape(
                label=str(m.params["shape"]),
                m=int(m.params["m"]),
                k=int(m.params["k"]),
                n=int(m.params["n"]),
                aligned=bool(m.params["aligned"]),
            ),
            samples_s=tuple(m.samples),
        )
        for m in rows
    )
    first = rows[0].params
    return ShapeComparison(
        device=str(first["device"]),
        dtype=dtype,
        calls_per_sample=int(first["calls_per_sample"]),
        timings=timings,
        threads=int(first.get("threads") or 1),
    )


# --- copy calls --------------------------------------------------------------------------


def run_copy_call(context: Context) -> list[Measurement]:
    """Host time inside one host-to-device copy call, pageable and pinned (CUDA)."""
    r = measure_copy_call("cuda", COPY_BYTES[context.quick])
    params = {"bytes": r.n_bytes}
    return [
        _seconds(
            r.pageable,
            name="copy_call.pageable",
            entry="copy_call",
            label="host time inside a pageable host-to-device copy",
            params=params,
        ),
        _seconds(
            r.pinned,
            name="copy_call.pinned",
            entry="copy_call",
            label="host time inside a pinned, non_blocking host-to-device copy",
            params=params,
        ),
        _seconds(
            r.copy,
            name="copy_call.copy",
            entry="copy_call",
            label="the same copy timed with barriers (pinned)",
            params=params,
        ),
    ]


# --- a page's GPU rows: this build's GPU, else a reference bundle -------------------------

RunEntry = Callable[[Context], Iterable[Measurement | Skipped]]


def gpu_rows(
    bundle: Bundle | None, names: Sequence[str], runs: Sequence[RunEntry]
) -> tuple[Measurement, ...]:
    """The rows ``names`` for a page: measured now by ``runs`` on a CUDA build, else the bundle's.

    Returns them in the order of ``names``, leaving out any that neither has (an older
    bundle, an entry skipped for memory); empty on a CPU build without a bundle.
    """
    import torch

    if torch.cuda.is_available():
        context = Context(device=Device.this("cuda"), quick=False)
        found = [m for run in runs for m in run(context) if isinstance(m, Measurement)]
    elif bundle is not None:
        found = list(bundle.measurements)
    else:
        return ()
    by_name = {m.name: m for m in found}
    return tuple(by_name[n] for n in names if n in by_name)


COPY_ROWS = (
    "h2d.pageable",
    "h2d.pinned",
    "copy_call.pageable",
    "copy_call.pinned",
    "copy_call.copy",
)


def copy_figures(rows: Sequence[Measurement]) -> dict[str, tuple[float, str]]:
    """Display figures from the copy rows present: GB/s for bandwidths, µs for call times.

    >>> from gpulesson.results.measurements import single
    >>> row = single(2e-5, name="copy_call.pinned", entry="copy_call", unit="s", label="x")
    >>> copy_figures([row])
    {'gpu_pinned_call_us': (20.0, 'µs')}
    """
    names = {
        "h2d.pageable": ("gpu_h2d_pageable_gb_s", 1e-9, "GB/s"),
        "h2d.pinned": ("gpu_h2d_pinned_gb_s", 1e-9, "GB/s"),
        "copy_call.pageable": ("gpu_pageable_call_us", 1e6, "µs"),
        "copy_call.pinned": ("gpu_pinned_call_us", 1e6, "µs"),
        "copy_call.copy": ("gpu_copy_us", 1e6, "µs"),
    }
    return {
        names[m.name][0]: (m.value * names[m.name][1], names[m.name][2])
        for m in rows
        if m.name in names
    }


ALIGNMENT_KINDS = {"n": "square", "vocab": "vocab"}  # bundle row names -> headline kinds


def gpu_alignment(
    bundle: Bundle | None,
) -> list[tuple[ShapeComparison, dict[str, tuple[float, str]]]]:
    """The GPU's alignment comparisons: measured now on a CUDA build, else the bundle's.

    One (comparison, headline figures) per dtype and kind found; empty on a CPU build
    without a bundle, or with a bundle whose device has no such rows.
    """
    import torch

    if torch.cuda.is_available():
        context = Context(device=Device.this("cuda"), quick=False)
        rows = [m for m in run_alignment(context) if isinstance(m, Measurement)]
    elif bundle is not None and bundle.provenance.device_type == "cuda":
        rows = list(bundle.measurements)
    else:
        return []
    found = []
    for dtype in ("fp32", "tf32", "bf16", "fp16"):
        for kind, headline_kind in ALIGNMENT_KINDS.items():
            c = shapes_from_rows(rows, dtype, kind)
            if c is not None:
                found.append((c, alignment_figures(c, headline_kind)))
    return found


# --- a page's view of a bundle -----------------------------------------------------------


def reference_rows(ref: Sourced, names: Sequence[str]) -> tuple[Across, tuple[str, ...]]:
    """The bundle's rows called ``names`` (in that order) and the names it lacks.

    >>> from pathlib import Path
    >>> from gpulesson.results.bundle import load
    >>> fixture = Path(__file__).parents[2] / "tests/fixtures/bundles/fixture_h100.json"
    >>> table, missing = reference_rows(Sourced(load(fixture), "reference", "f.json"),
    ...                                 ["h2d.pinned", "copy_call.pinned"])
    >>> [r.name for r in table.rows], missing
    (['h2d.pinned'], ('copy_call.pinned',))
    """
    table = across([ref])
    by_name = {r.name: r for r in table.rows}
    rows = tuple(by_name[n] for n in names if n in by_name)
    missing = tuple(n for n in names if n not in by_name)
    return dataclasses.replace(table, rows=rows), missing


def _is_cuda(device) -> bool:
    return device.type == "cuda"


ENTRIES = (
    SuiteEntry(
        name="loader",
        description="DataLoader seconds per batch by worker count (on the host's CPU)",
        applies=lambda device: True,
        needs="nothing",
        run=run_loader,
    ),
    SuiteEntry(
        name="fusion",
        description="30 pointwise ops eager and under torch.compile, and the compile",
        applies=lambda device: device.type in COMPILE_DEVICES,
        needs="a CPU or CUDA device (torch.compile's inductor backends)",
        run=run_fusion,
    ),
    SuiteEntry(
        name="alignment",
        description="matmuls at aligned and odd sizes: n and a GPT-2 vocabulary",
        applies=lambda device: True,
        needs="nothing",
        run=run_alignment,
    ),
    SuiteEntry(
        name="copy_call",
        description="host time inside a pageable vs a pinned non_blocking copy",
        applies=_is_cuda,
        needs="a CUDA device",
        run=run_copy_call,
    ),
)
