"""Suite entries for the lesson "Feeding the GPU": loader, fusion, shape alignment, copy calls.

Each entry calls the function the lesson calls and keeps its samples:

* ``loader``: seconds per batch of a ``DataLoader`` loop by worker count, on the host's
  CPU whatever the device (:func:`gpulesson.timing.loader.measure_loader`); rows
  ``loader.w0``, ``loader.w1``, ``loader.w2``, ``loader.w2_persistent`` (each with its
  run's every clock reading as a series: the page's timeline) and the work per item,
  ``loader.item``; the full plan is the lesson's (:data:`FULL_LOADER`, five epochs);
* ``fusion``: a 30-op pointwise chain eager and under ``torch.compile`` on the device
  (:func:`gpulesson.timing.fusion.measure_fusion`, CPU or CUDA): ``fusion.eager``,
  ``fusion.compiled`` (seconds per call) and ``fusion.compile`` (the first call), or where
  ``torch.compile`` cannot compile here the eager row alone, its ``compile_error`` param
  saying why; before
  them, as the lesson times them, one bare tiny op at the chain's one thread
  (``fusion.tiny_op``, :func:`gpulesson.timing.launch.measure_launch_overhead`) and the
  bare op and the eager chain back to back in rounds (``fusion.rounds.chain_op``,
  ``fusion.rounds.bare_op``, ``fusion.rounds.ratio``,
  :func:`gpulesson.timing.fusion.measure_overhead_rounds`);
* ``alignment``: matmuls at an aligned size and its odd neighbours, and a GPT-2 output
  layer at vocabularies 50,257 and 50,304, per dtype of the device's plan
  (:func:`gpulesson.timing.alignment.measure_shapes`): ``alignment.<dtype>.n<size>`` and
  ``alignment.<dtype>.vocab<size>`` in FLOP/s;
* ``copy_call``: host time inside one host-to-device copy, pageable and pinned with
  ``non_blocking=True`` (:func:`gpulesson.timing.syncs.measure_copy_call`, CUDA only).

:func:`loader_from_measurements` and :func:`fusion_from_measurements` rebuild from an
entry's rows the results the page renders. :func:`rows_named` and :func:`reference_rows`
pick rows by name for a page, leaving out the ones an older bundle lacks, so a page never
fails on a bundle made before an entry existed.

>>> [e.name for e in ENTRIES]
['loader', 'fusion', 'alignment', 'copy_call']
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gpulesson.results.bundle import Measurement, Series, Skipped
from gpulesson.results.compare import Across, Sourced, across
from gpulesson.results.measurements import seconds, single
from gpulesson.results.suite import Context, SuiteEntry
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
from gpulesson.timing.fusion import (
    COMPILE_DEVICES,
    OPS_PER_CALL,
    CallTiming,
    FusionResult,
    OverheadRounds,
    measure_fusion,
    measure_overhead_rounds,
)
from gpulesson.timing.inputs import DTYPE_BYTES
from gpulesson.timing.launch import measure_launch_overhead
from gpulesson.timing.loader import (
    ItemTiming,
    LoaderComparison,
    LoaderPlan,
    LoaderRun,
    measure_loader,
)
from gpulesson.timing.results import LaunchOverhead, LaunchTiming, Spread
from gpulesson.timing.syncs import measure_copy_call

QUICK_LOADER = LoaderPlan(items=48, words_per_item=150, batches_per_epoch=6)
# The lesson's plan: five epochs per setting, so each rate is a median of five epochs' mean
# gaps and one epoch slowed by other work on a shared machine does not set it.
FULL_LOADER = LoaderPlan(epochs=5)
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


def _run_series(run: LoaderRun) -> Series:
    """Every clock reading of a run: per batch of the run, the seconds since the last one.

    Batch ``e * batches_per_epoch`` (the first of epoch ``e``) is the wait from asking for
    an iterator to that batch; the others are the gaps between consecutive batches.
    """
    points: list[tuple[float, float]] = []
    gaps = iter(run.gaps_s)
    for first in run.first_batch_s:
        points.append((float(len(points)), first))
        for _ in range(run.batches_per_epoch - 1):
            points.append((float(len(points)), next(gaps)))
    return Series(
        x_label="batch of the run (epoch after epoch; the first of each epoch waits for it)",
        x_unit="batch",
        y_unit="s",
        points=tuple(points),
    )


def loader_measurements(c: LoaderComparison) -> list[Measurement]:
    """The work per item, then one row per loader setting (seconds per batch).

    Each setting's row keeps every clock reading of its run as a series (the page's
    timeline is drawn from them), so :func:`loader_from_measurements` rebuilds the run.
    """
    out = [
        _seconds(
            c.item,
            name="loader.item",
            entry="loader",
            label="one dataset item: generate and tokenize a text (CPU)",
            params={
                "words_per_item": c.words_per_item,
                "cpus": c.cpus,
                "items": c.items,
                "step_share": c.step_share,
            },
        )
    ]
    for run in c.runs:
        suffix = f"w{run.num_workers}" + ("_persistent" if run.persistent_workers else "")
        row = _seconds(
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
                "epochs": run.epochs,
                "step_s": run.step_s,
                "first_batch_s": run.first_batch_s[0],
                "later_first_batch_s": run.later_first_batch_s,
                "start_method": run.start_method,
                "cpus": c.cpus,
            },
        )
        out.append(dataclasses.replace(row, series=_run_series(run)))
    return out


def loader_from_measurements(measurements: Sequence[Measurement]) -> LoaderComparison | None:
    """Rebuild the :class:`LoaderComparison` the ``loader`` rows came from; None without them.

    The runs come back in the rows' order, with their samples, every gap and every
    epoch's first batch (from the series), so the page's table, timeline and headline
    figures are the same as on the comparison measured.
    """
    rows = [m for m in measurements if m.entry == "loader"]
    item = next((m for m in rows if m.name == "loader.item"), None)
    runs = []
    for m in rows:
        if m.name == "loader.item" or m.series is None:
            continue
        p = m.params
        per_epoch = int(p["batches_per_epoch"])
        readings = [y for _, y in m.series.points]
        runs.append(
            LoaderRun(
                num_workers=int(p["num_workers"]),
                prefetch_factor=None if p["prefetch_factor"] is None else int(p["prefetch_factor"]),
                persistent_workers=bool(p["persistent_workers"]),
                batch_size=int(p["batch_size"]),
                batches_per_epoch=per_epoch,
                epochs=int(p["epochs"]),
                step_s=float(p["step_s"]),
                samples_s=tuple(m.samples),
                gaps_s=tuple(y for i, y in enumerate(readings) if i % per_epoch),
                first_batch_s=tuple(readings[::per_epoch]),
                start_method=None if p.get("start_method") is None else str(p["start_method"]),
            )
        )
    if item is None or not runs:
        return None
    return LoaderComparison(
        item=ItemTiming(samples_s=tuple(item.samples)),
        runs=tuple(runs),
        items=int(item.params["items"]),
        words_per_item=int(item.params["words_per_item"]),
        cpus=int(item.params["cpus"]),
        step_share=float(item.params["step_share"]),
    )


def run_loader(context: Context) -> list[Measurement]:
    """The loader loop on this machine's CPU (the device plays no part)."""
    plan = QUICK_LOADER if context.quick else FULL_LOADER
    return loader_measurements(measure_loader(plan=plan))


# --- fusion ------------------------------------------------------------------------------


@dataclass(frozen=True)
class FusionPlan:
    """What the ``fusion`` entry times, and for how long: the lesson's plan at full size.

    ``threads`` for all three parts (one: the tensors are small, and one thread keeps
    OpenMP's wake-ups out of a comparison of per-call costs); ``rounds`` of the bare op
    and the eager chain back to back, each half ``round_time_s``; the bare tiny op alone
    for ``tiny_op_time_s``; the chain eager and compiled for ``chain_time_s`` each.
    """

    threads: int = 1
    rounds: int = 9
    round_time_s: float = 0.02
    tiny_op_time_s: float = 0.1
    chain_time_s: float = 0.1


FUSION_PLANS = {  # by context.quick
    False: FusionPlan(),
    True: FusionPlan(rounds=5, round_time_s=0.01, tiny_op_time_s=0.05),
}


@dataclass(frozen=True)
class FusionFigures:
    """What the ``fusion`` entry measured: the chain, the bare tiny op, the rounds of both.

    ``tiny_op`` and ``rounds`` are None when read from a bundle made before they were
    part of the entry.
    """

    fusion: FusionResult
    tiny_op: LaunchOverhead | None
    rounds: OverheadRounds | None


def fusion_measurements(
    f: FusionResult, tiny_op: LaunchOverhead | None = None, rounds: OverheadRounds | None = None
) -> list[Measurement]:
    """Eager and compiled seconds per call, the first (compiling) call; then, given, the
    bare tiny op's seconds per call and the rounds of the two back to back. Where the chain
    could not be compiled, the eager row's ``compile_error`` param says why, and there are
    no compiled rows."""
    params = {
        "n_elements": f.n_elements,
        "ops_per_call": f.ops_per_call,
        "threads": f.threads,
        "device": f.device,
    }
    failed = {"compile_error": f.compile_error} if f.compile_error else {}
    out = [
        _seconds(
            f.eager,
            name="fusion.eager",
            entry="fusion",
            label=f"{f.ops_per_call} pointwise ops, eager, seconds per call",
            params={**params, "calls_per_sample": f.eager.calls_per_sample, **failed},
        )
    ]
    if f.compiled is not None and f.compile_s is not None:
        out += [
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
    if tiny_op is not None:
        out.append(
            seconds(
                tiny_op.eager,
                name="fusion.tiny_op",
                entry="fusion",
                label="one tiny op (an add of one element), eager, seconds per call",
                params={"op": tiny_op.op},
            )
        )
    if rounds is not None:
        per_round = {
            "device": rounds.device,
            "n_elements": rounds.n_elements,
            "threads": rounds.threads,
        }
        out += [
            Measurement(
                name="fusion.rounds.chain_op",
                entry="fusion",
                unit="s",
                value=statistics.median(rounds.per_op_s),
                samples=rounds.per_op_s,
                samples_unit="s",
                label="an op of the eager chain, seconds, one sample per round (in order)",
                params={**per_round, "ops_per_call": OPS_PER_CALL},
            ),
            Measurement(
                name="fusion.rounds.bare_op",
                entry="fusion",
                unit="s",
                value=statistics.median(rounds.bare_op_s),
                samples=rounds.bare_op_s,
                samples_unit="s",
                label="the bare tiny op timed in the same rounds, seconds, one sample per round",
                params=per_round,
            ),
            Measurement(
                name="fusion.rounds.ratio",
                entry="fusion",
                unit="ratio",
                value=rounds.median_ratio,
                samples=rounds.ratios,
                samples_unit="ratio",
                label="an op of the eager chain over the bare op, the median round",
                params=per_round,
                note="Samples: each round's chain op over the same round's bare op.",
            ),
        ]
    return out


def fusion_from_measurements(measurements: Sequence[Measurement]) -> FusionFigures | None:
    """Rebuild what the ``fusion`` rows came from; None without the chain's three rows (or
    its eager row and why it was not compiled)."""
    by_name = {m.name: m for m in measurements if m.entry == "fusion"}
    eager = by_name.get("fusion.eager")
    compiled, compile_ = by_name.get("fusion.compiled"), by_name.get("fusion.compile")
    error = "" if eager is None else str(eager.params.get("compile_error") or "")
    if eager is None or not (error or (compiled is not None and compile_ is not None)):
        return None
    p = eager.params

    def calls(mode: str, m: Measurement) -> CallTiming:
        return CallTiming(
            mode=mode,
            samples_s=tuple(m.samples),
            calls_per_sample=int(m.params["calls_per_sample"]),
        )

    fusion = FusionResult(
        device=str(p.get("device") or "cpu"),
        n_elements=int(p["n_elements"]),
        ops_per_call=int(p["ops_per_call"]),
        threads=int(p["threads"]),
        eager=calls("eager", eager),
        compiled=None if compiled is None else calls("compiled", compiled),
        compile_s=None if compile_ is None else compile_.value,
        max_abs_diff=None if compile_ is None else float(compile_.params["max_abs_diff"]),
        compile_error=error,
    )
    tiny = by_name.get("fusion.tiny_op")
    tiny_op = None
    if tiny is not None:
        tp = tiny.params
        timing = LaunchTiming(
            device=str(tp["device"]),
            mode="eager",
            threads=int(tp["threads"]),
            samples_s=tuple(tiny.samples),
            calls_per_sample=int(tp["calls_per_sample"]),
        )
        tiny_op = LaunchOverhead(device=timing.device, op=str(tp["op"]), eager=timing)
    chain, bare = by_name.get("fusion.rounds.chain_op"), by_name.get("fusion.rounds.bare_op")
    rounds = None
    if chain is not None and bare is not None:
        rounds = OverheadRounds(
            device=str(chain.params["device"]),
            n_elements=int(chain.params["n_elements"]),
            threads=int(chain.params["threads"]),
            per_op_s=tuple(chain.samples),
            bare_op_s=tuple(bare.samples),
        )
    return FusionFigures(fusion=fusion, tiny_op=tiny_op, rounds=rounds)


def run_fusion(context: Context) -> list[Measurement]:
    """The lesson's three timings on the suite's device (inductor: CPU or CUDA), in its order.

    First the bare op and the eager chain back to back in rounds (before any compile),
    then the bare op alone, then the chain eager and compiled; all at the plan's threads.
    """
    device = context.device.type
    plan = FUSION_PLANS[context.quick]
    rounds = measure_overhead_rounds(
        device, threads=plan.threads, rounds=plan.rounds, min_run_time_s=plan.round_time_s
    )
    tiny_op = measure_launch_overhead(
        device, threads=plan.threads, min_run_time_s=plan.tiny_op_time_s, graph=False
    )
    f = measure_fusion(device, threads=plan.threads, min_run_time_s=plan.chain_time_s)
    return fusion_measurements(f, tiny_op, rounds)


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


def alignment_comparisons(
    measurements: Sequence[Measurement],
) -> list[tuple[str, ShapeComparison, dict[str, tuple[float, str]]]]:
    """Every comparison in ``alignment`` rows: (kind, result, headline figures), as the plan
    ran them (each dtype in the rows' order, the square neighbours then the vocabulary).

    Kinds are ``square`` and ``vocab``, as :func:`gpulesson.timing.alignment.measure_plan`
    names them; a comparison the rows lack (another device's dtypes, skipped for memory) is
    left out, so rows without any give ``[]``.

    >>> alignment_comparisons([])
    []
    """
    dtypes = dict.fromkeys(m.dtype for m in measurements if m.entry == "alignment" and m.dtype)
    found = []
    for dtype in dtypes:
        for kind, headline_kind in ALIGNMENT_KINDS.items():
            c = shapes_from_rows(measurements, dtype, kind)
            if c is not None:
                found.append((headline_kind, c, alignment_figures(c, headline_kind)))
    return found


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


def rows_named(
    measurements: Iterable[Measurement], names: Sequence[str]
) -> tuple[Measurement, ...]:
    """The rows ``names`` among ``measurements``, in the order of ``names``.

    Leaves out any that are absent (an older bundle, an entry skipped for memory): the
    page lists them as not measured. The measurements come from the suite
    (:func:`gpulesson.site.gpu_figures.gpu_measurements`: this build's GPU, else a
    reference bundle); this function only picks.

    >>> from gpulesson.results.measurements import single
    >>> rows = [single(1.0, name=n, entry="x", unit="s", label=n) for n in ("b", "a")]
    >>> [m.name for m in rows_named(rows, ("a", "c", "b"))]
    ['a', 'b']
    """
    by_name = {m.name: m for m in measurements}
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

    >>> from gpulesson.results.measurements import seconds, single
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
