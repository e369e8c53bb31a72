"""Suite entries about memory: measured GPT training-step peaks beside the estimate, and an OOM.

``gpt_memory`` runs the GPT-2 cases the lesson "What fills GPU memory" measures
(:func:`gpulesson.memory.measure.build_cases`) through
:func:`gpulesson.memory.measure.run_accuracy`: on CUDA the peak is
``torch.cuda.max_memory_allocated()``, elsewhere fake tensors (nothing allocated); beside
each, ``gpulesson.memory``'s estimate and its error.

The memory lessons' other measured figures, each rebuilt for the page by a
``*_from_measurements`` function beside its entry (the frozen result the lesson's renderer
takes, from the bundle's rows):

* ``gpt_memory_step``: the one step the lesson measures phase by phase
  (:data:`gpulesson.memory.measure.LESSON_CONFIG`), read back by :func:`step_from_measurements`;
* ``gpt_memory_timeline``: the same step operator by operator
  (:func:`gpulesson.memory.timeline.trace_gpt2`), without and with checkpointing, a series of
  live bytes per ledger line each (:func:`timeline_from_measurements`); on CUDA the
  allocator's live bytes over two steps instead (:func:`cuda_live_from_measurements`);
* ``hf_memory``: transformers' GPT-2 measured, beside each implementation's estimate
  (:func:`gpulesson.memory.impl_accuracy.run_impl_comparison`,
  :func:`impl_rows_from_measurements`);
* ``gpt_block_saved``: the tensors each implementation's first block saves for backward
  (:func:`gpulesson.memory.saved.first_block_saved`, real CPU tensors,
  :func:`saved_from_measurements`).

``gpt_memory``'s rows read back with :func:`accuracy_from_measurements`. A step's peak is a
``bytes`` measurement whose samples are its three phase peaks (forward, backward, optimizer
step); what was alive at the peak, the step's method and the case are its params.

``oom`` provokes one out-of-memory error on purpose, catches it and diagnoses it with
:func:`gpulesson.errors.diagnose.diagnose`: on CUDA it asks for twice the card's memory,
which fails at once without touching what is allocated; on a CPU or Apple GPU it asks for
``HOST_OOM_BYTES`` (1 PiB, more than any machine's address space, so the allocator refuses
it without the operating system doing anything).

>>> [e.name for e in ENTRIES]
['gpt_memory', 'oom', 'gpt_memory_step', 'gpt_memory_timeline', 'hf_memory', 'gpt_block_saved']
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import torch

from gpulesson.errors.diagnose import diagnose
from gpulesson.memory import impl_accuracy, saved, timeline, torch_tools
from gpulesson.memory.budget import IMPLS
from gpulesson.memory.gpt2 import GPT2Config
from gpulesson.memory.impl_accuracy import ImplRow, run_impl_comparison
from gpulesson.memory.measure import (
    LESSON_BATCH,
    LESSON_CONFIG,
    PHASES,
    AccuracyCase,
    AccuracyRow,
    MeasuredStep,
    build_cases,
    measure_gpt2,
    run_accuracy,
)
from gpulesson.memory.saved import SavedTensor
from gpulesson.results.bundle import MAX_SERIES_POINTS, Measurement, Scalar, Series
from gpulesson.results.measurements import single
from gpulesson.results.suite import Context, SuiteEntry

QUICK_CASES = 1  # --quick measures the first cases of the lesson's grid only
HOST_OOM_BYTES = 2**50
CONFIG_FIELDS = tuple(f.name for f in dataclasses.fields(GPT2Config))
TIMELINE_VARIANTS = {"plain": False, "ckpt": True}  # name: checkpointing


def slug(text: str) -> str:
    """A measurement-name part (or a params key part) from a label.

    >>> slug("optimizer state")
    'optimizer_state'
    """
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def case_slug(label: str) -> str:
    """A measurement-name part from a case label.

    >>> case_slug("V512 s64 h64 L2 b4 eager no-ckpt fp32 adamw")
    'v512_s64_h64_l2_b4_eager_no_ckpt_fp32_adamw'
    """
    return slug(label)


def _mode(context: Context) -> str:
    """How a step is measured on the context's device: real allocations on CUDA, else fake."""
    return "cuda" if context.device.type == "cuda" else "fake"


def config_params(config: GPT2Config) -> dict[str, Scalar]:
    """A model's shape as flat params (``model_<field>``).

    >>> config_from_params(config_params(LESSON_CONFIG)) == LESSON_CONFIG
    True
    """
    return {f"model_{name}": getattr(config, name) for name in CONFIG_FIELDS}


def config_from_params(params: Mapping[str, Scalar]) -> GPT2Config:
    """The :class:`GPT2Config` :func:`config_params` wrote."""
    return GPT2Config(**{name: params[f"model_{name}"] for name in CONFIG_FIELDS})  # type: ignore[arg-type]


def step_measurement(
    step: MeasuredStep,
    *,
    name: str,
    entry: str,
    label: str,
    params: Mapping[str, Scalar] | None = None,
) -> Measurement:
    """One measured step as a ``bytes`` measurement: its peak, from its phase peaks.

    The samples are the phase peaks in step order (forward, backward, optimizer step); the
    params keep each phase's peak, what was alive at the peak by ledger line, the method and
    the device's allocator readings (None off CUDA), so :func:`step_from_measurement` gives
    the same :class:`MeasuredStep` back.
    """
    kept: dict[str, Scalar] = {
        "method": step.method,
        "device": step.device,
        "peak_phase": step.peak_phase,
        **{f"phase_{slug(p)}_bytes": v for p, v in step.phase_peaks_bytes.items()},
        **{f"at_peak_{slug(c)}_bytes": v for c, v in step.at_peak_bytes.items()},
        "reserved_bytes": step.reserved_bytes,
        "free_bytes": step.free_bytes,
        "device_total_bytes": step.device_total_bytes,
    }
    return Measurement(
        name=name,
        entry=entry,
        unit="bytes",
        value=float(step.peak_bytes),
        samples=tuple(float(v) for v in step.phase_peaks_bytes.values()),
        samples_unit="bytes",
        label=label,
        limit="device_memory" if step.reserved_bytes is not None else None,
        params={**kept, **(params or {})},
        note="value = the step's peak; samples = the peak of each phase, in order "
        f"({', '.join(step.phase_peaks_bytes)})",
    )


def _optional_int(value: Scalar | None) -> int | None:
    return None if value is None else int(value)


def step_from_measurement(m: Measurement) -> MeasuredStep:
    """The :class:`MeasuredStep` :func:`step_measurement` wrote."""
    p = m.params
    phases = {
        ph: int(p[f"phase_{slug(ph)}_bytes"]) for ph in PHASES if f"phase_{slug(ph)}_bytes" in p
    }
    at_peak = {
        c: int(p[f"at_peak_{slug(c)}_bytes"])
        for c in torch_tools.CATEGORIES
        if f"at_peak_{slug(c)}_bytes" in p
    }
    return MeasuredStep(
        method=str(p["method"]),
        device=str(p["device"]),
        peak_bytes=int(m.value),
        peak_phase=str(p["peak_phase"]),
        phase_peaks_bytes=phases,
        at_peak_bytes=at_peak,
        reserved_bytes=_optional_int(p.get("reserved_bytes")),
        free_bytes=_optional_int(p.get("free_bytes")),
        device_total_bytes=_optional_int(p.get("device_total_bytes")),
    )


def case_params(case: AccuracyCase, index: int) -> dict[str, Scalar]:
    """An accuracy case as flat params: its place in the grid, model, batch, dtype, optimizer."""
    return {
        "case": index,
        **config_params(case.config),
        "batch": case.batch,
        "case_dtype": case.dtype,
        "optimizer": case.optimizer,
        "tuned": case.tuned,
        "impl": case.impl,
    }


def case_from_params(params: Mapping[str, Scalar]) -> AccuracyCase:
    """The :class:`AccuracyCase` :func:`case_params` wrote."""
    return AccuracyCase(
        config=config_from_params(params),
        batch=int(params["batch"]),
        dtype=str(params["case_dtype"]),
        optimizer=str(params["optimizer"]),
        tuned=bool(params["tuned"]),
        impl=str(params["impl"]),
    )


def _of_entry(measurements: Sequence[Measurement], entry: str) -> list[Measurement]:
    """``entry``'s measurements, in the order of their ``case`` param."""
    return sorted(
        (m for m in measurements if m.entry == entry), key=lambda m: int(m.params["case"])
    )


def run_gpt_memory(context: Context) -> list[Measurement]:
    """Measured peak of each GPT-2 training step beside the estimate."""
    cases = build_cases()
    if context.quick:
        cases = cases[:QUICK_CASES]
    out = []
    for i, row in enumerate(run_accuracy(cases, mode=_mode(context))):
        out.append(
            step_measurement(
                row.measured,
                name=f"gpt_memory.{case_slug(row.case.label())}",
                entry="gpt_memory",
                label=f"GPT-2 step peak: {row.case.label()}",
                params={
                    **case_params(row.case, i),
                    "estimate_bytes": row.estimate_bytes,
                    "estimate_phase": row.estimate_phase,
                    "estimate_error": round(row.error, 6),
                },
            )
        )
    return out


def accuracy_from_measurements(measurements: Sequence[Measurement]) -> tuple[AccuracyRow, ...]:
    """The rows of :func:`gpulesson.memory.measure.run_accuracy` ``gpt_memory`` measured."""
    return tuple(
        AccuracyRow(
            case=case_from_params(m.params),
            estimate_bytes=int(m.params["estimate_bytes"]),
            estimate_phase=str(m.params["estimate_phase"]),
            measured=step_from_measurement(m),
        )
        for m in _of_entry(measurements, "gpt_memory")
    )


# --- the lesson's one step, phase by phase -----------------------------------------------


def run_gpt_memory_step(context: Context) -> list[Measurement]:
    """The memory lesson's GPT-2 step, measured phase by phase (fake tensors off CUDA)."""
    step = measure_gpt2(LESSON_CONFIG, batch=LESSON_BATCH, mode=_mode(context))
    return [
        step_measurement(
            step,
            name="gpt_memory_step.peak",
            entry="gpt_memory_step",
            label="the memory lesson's two-layer GPT-2 (batch 4, AdamW, fp32): one step's peak",
            params={**config_params(LESSON_CONFIG), "batch": LESSON_BATCH, "optimizer": "adamw"},
        )
    ]


def step_from_measurements(measurements: Sequence[Measurement]) -> MeasuredStep | None:
    """The step ``gpt_memory_step`` measured; None without it."""
    found = [m for m in measurements if m.name == "gpt_memory_step.peak"]
    return step_from_measurement(found[0]) if found else None


# --- the same step, operator by operator -------------------------------------------------


def timeline_measurements(
    trace: timeline.StepTrace, variant: str, **params: Scalar
) -> list[Measurement]:
    """A step's trace as measurements ``gpt_memory_timeline.<variant>[.<ledger line>]``.

    The first is the total: its value the peak, its samples the phase peaks, its series the
    bytes alive after each operator (x: the operator's number, from 1); its params the phase
    spans and the operator at the peak. Then one per ledger line
    (:data:`gpulesson.memory.torch_tools.CATEGORIES`): its value what that line held at the
    peak, its series what it held after each operator. Operator names other than the peak's
    are not kept (the chart names only that one).
    """
    rows = trace.rows
    if len(rows) > MAX_SERIES_POINTS:
        raise ValueError(
            f"the step ran {len(rows)} operators: a series holds at most {MAX_SERIES_POINTS}"
        )
    peak_row = max(range(len(rows)), key=lambda i: rows[i].total_bytes)
    base = f"gpt_memory_timeline.{variant}"
    x_label = "operator, in the order the step ran them"
    spans: dict[str, Scalar] = {}
    for p in trace.phases:
        spans[f"phase_{slug(p.name)}_first"] = p.first
        spans[f"phase_{slug(p.name)}_last"] = p.last
    out = [
        Measurement(
            name=base,
            entry="gpt_memory_timeline",
            unit="bytes",
            value=float(trace.peak_bytes),
            samples=tuple(float(p.peak_bytes) for p in trace.phases),
            samples_unit="bytes",
            label=f"memory alive after each operator of one training step ({variant})",
            dtype="fp32",
            params={
                "method": trace.method,
                "variant": variant,
                "ops": len(rows),
                "peak_index": peak_row,
                "peak_op": rows[peak_row].op,
                "peak_phase": trace.peak_phase,
                **spans,
                **params,
            },
            note="value = the most bytes alive after any operator; samples = each phase's "
            "peak, in order (" + ", ".join(p.name for p in trace.phases) + ")",
            series=Series(
                x_label=x_label,
                x_unit="op",
                y_unit="bytes",
                points=tuple((float(i + 1), float(r.total_bytes)) for i, r in enumerate(rows)),
            ),
        )
    ]
    for k, term in enumerate(torch_tools.CATEGORIES):
        values = [r.by_term_bytes[k][1] for r in rows]
        out.append(
            replace(
                single(
                    values[peak_row],
                    name=f"{base}.{slug(term)}",
                    entry="gpt_memory_timeline",
                    unit="bytes",
                    label=f"{term} alive after each operator ({variant}); value: at the peak",
                    params={"variant": variant, "term": term},
                ),
                series=Series(
                    x_label=x_label,
                    x_unit="op",
                    y_unit="bytes",
                    points=tuple((float(i + 1), float(v)) for i, v in enumerate(values)),
                ),
            )
        )
    return out


def _ys(m: Measurement) -> list[int]:
    if m.series is None:
        raise ValueError(f"{m.name} has no series: it is not a timeline")
    return [int(y) for _, y in sorted(m.series.points)]


def timeline_from_measurements(
    measurements: Sequence[Measurement], variant: str = "plain"
) -> timeline.StepTrace | None:
    """The :class:`~gpulesson.memory.timeline.StepTrace` of ``variant`` (``plain``, ``ckpt``).

    None when the measurements hold no such trace. Its rows carry the operator name of the
    peak row only (the one :func:`~gpulesson.memory.timeline.memory_chart` names); the
    others' ``op`` is empty.
    """
    base = f"gpt_memory_timeline.{variant}"
    by_name = {m.name: m for m in measurements if m.entry == "gpt_memory_timeline"}
    if base not in by_name:
        return None
    total_m = by_name[base]
    p = total_m.params
    totals = _ys(total_m)
    terms = {term: _ys(by_name[f"{base}.{slug(term)}"]) for term in torch_tools.CATEGORIES}
    spans = [
        (name, int(p[f"phase_{slug(name)}_first"]), int(p[f"phase_{slug(name)}_last"]))
        for name in timeline.PHASES
    ]
    peak_index = int(p["peak_index"])
    rows = tuple(
        timeline.OpRow(
            phase=next(name for name, first, last in spans if first <= i <= last),
            op=str(p["peak_op"]) if i == peak_index else "",
            by_term_bytes=tuple((term, terms[term][i]) for term in torch_tools.CATEGORIES),
            total_bytes=totals[i],
        )
        for i in range(int(p["ops"]))
    )
    phases = tuple(
        timeline.PhaseSpan(
            name=name,
            first=first,
            last=last,
            peak_bytes=max(r.total_bytes for r in rows[first : last + 1]),
        )
        for name, first, last in spans
    )
    return timeline.StepTrace(method=str(p["method"]), rows=rows, phases=phases)


def cuda_live_measurement(live: Sequence[int]) -> Measurement:
    """The CUDA allocator's live bytes after each event, as one measurement with a series.

    More events than a series holds keep, of each of ``MAX_SERIES_POINTS`` groups of
    consecutive events, the one with the most bytes (:func:`gpulesson.memory.timeline.columns`:
    the peak is always kept); ``params["events"]`` is the full count.
    """
    picks = timeline.columns(len(live), live, width=MAX_SERIES_POINTS)
    peak = max(live)
    return Measurement(
        name="gpt_memory_timeline.cuda_live",
        entry="gpt_memory_timeline",
        unit="bytes",
        value=float(peak),
        samples=(float(peak),),
        samples_unit="bytes",
        label="CUDA memory allocated after each allocator event of two training steps",
        dtype="fp32",
        limit="device_memory",
        params={
            **config_params(LESSON_CONFIG),
            "batch": LESSON_BATCH,
            "optimizer": "adamw",
            "events": len(live),
            "kept": len(picks),
            "method": "torch.cuda.memory._snapshot() after _record_memory_history",
        },
        series=Series(
            x_label="allocator event",
            x_unit="event",
            y_unit="bytes",
            points=tuple((float(i + 1), float(live[i])) for i in picks),
        ),
    )


@dataclass(frozen=True)
class CudaLive:
    """The CUDA allocator's live bytes as a bundle kept them, of ``events`` events in all."""

    live_bytes: tuple[int, ...]
    events: int


def cuda_live_from_measurements(measurements: Sequence[Measurement]) -> CudaLive | None:
    """The live bytes ``gpt_memory_timeline`` read from a CUDA device; None without them.

    >>> cuda_live_from_measurements([cuda_live_measurement([5, 9, 7])])
    CudaLive(live_bytes=(5, 9, 7), events=3)
    """
    found = [m for m in measurements if m.name == "gpt_memory_timeline.cuda_live"]
    if not found:
        return None
    return CudaLive(live_bytes=tuple(_ys(found[0])), events=int(found[0].params["events"]))


def run_gpt_memory_timeline(context: Context) -> list[Measurement]:
    """The lesson's step op by op (fake tensors), plain and checkpointed; on CUDA, the allocator."""
    if context.device.type == "cuda":  # pragma: no cover - needs a CUDA device
        return [cuda_live_measurement(timeline.cuda_live_bytes(LESSON_CONFIG, batch=LESSON_BATCH))]
    out = []
    variants = list(TIMELINE_VARIANTS.items())
    for variant, ckpt in variants[:1] if context.quick else variants:
        config = replace(LESSON_CONFIG, checkpointing=ckpt)
        trace = timeline.trace_gpt2(config, batch=LESSON_BATCH)
        out += timeline_measurements(
            trace, variant, **config_params(config), batch=LESSON_BATCH, optimizer="adamw"
        )
    return out


# --- transformers' GPT-2 against each implementation's estimate --------------------------


def run_hf_memory(context: Context) -> list[Measurement]:
    """transformers' GPT-2 steps of the lesson, each beside every implementation's estimate."""
    cases = impl_accuracy.build_cases()
    if context.quick:
        cases = cases[:QUICK_CASES]
    out = []
    for i, row in enumerate(run_impl_comparison(cases, mode=_mode(context))):
        out.append(
            step_measurement(
                row.measured,
                name=f"hf_memory.{case_slug(row.case.label())}",
                entry="hf_memory",
                label=f"transformers' GPT-2 step peak: {row.case.label()}",
                params={
                    **case_params(row.case, i),
                    **{f"estimate_{impl}_bytes": row.estimates_bytes[impl] for impl in IMPLS},
                },
            )
        )
    return out


def impl_rows_from_measurements(measurements: Sequence[Measurement]) -> tuple[ImplRow, ...]:
    """The rows :func:`~gpulesson.memory.impl_accuracy.run_impl_comparison` gave ``hf_memory``."""
    return tuple(
        ImplRow(
            case=case_from_params(m.params),
            measured=step_from_measurement(m),
            estimates_bytes={impl: int(m.params[f"estimate_{impl}_bytes"]) for impl in IMPLS},
        )
        for m in _of_entry(measurements, "hf_memory")
    )


# --- what each implementation's first block saves ----------------------------------------


@dataclass(frozen=True)
class BlockSaved:
    """What :func:`~gpulesson.memory.saved.first_block_saved` found, and on which model."""

    config: GPT2Config
    batch: int
    saved: dict[str, tuple[SavedTensor, ...]]


def run_gpt_block_saved(context: Context) -> list[Measurement]:
    """Each tensor the first block of each implementation saves, real CPU tensors."""
    found = saved.first_block_saved(saved.SAVED_CONFIG, saved.SAVED_BATCH)
    out = []
    for k, (impl, tensors) in enumerate(found.items()):
        for i, t in enumerate(tensors):
            out.append(
                single(
                    t.storage_bytes,
                    name=f"gpt_block_saved.{slug(impl)}.t{i:03d}",
                    entry="gpt_block_saved",
                    unit="bytes",
                    label=f"{impl}'s first block saves for backward: {t.module or '(outside)'}",
                    params={
                        **config_params(saved.SAVED_CONFIG),
                        "batch": saved.SAVED_BATCH,
                        "impl": impl,
                        "impl_index": k,
                        "index": i,
                        "module": t.module,
                        "made_by": t.made_by,
                        "shape": "x".join(str(n) for n in t.shape),
                        "tensor_dtype": t.dtype,
                    },
                )
            )
    return out


def saved_from_measurements(measurements: Sequence[Measurement]) -> BlockSaved | None:
    """The saved tensors ``gpt_block_saved`` measured, by implementation; None without them."""
    rows = [m for m in measurements if m.entry == "gpt_block_saved"]
    if not rows:
        return None
    by_impl: dict[str, list[Measurement]] = {}
    for m in sorted(rows, key=lambda m: (int(m.params["impl_index"]), int(m.params["index"]))):
        by_impl.setdefault(str(m.params["impl"]), []).append(m)
    found = {
        impl: tuple(
            SavedTensor(
                module=str(m.params["module"]),
                shape=tuple(int(n) for n in str(m.params["shape"]).split("x") if n),
                dtype=str(m.params["tensor_dtype"]),
                storage_bytes=int(m.value),
                made_by=str(m.params["made_by"]),
            )
            for m in ms
        )
        for impl, ms in by_impl.items()
    }
    first = rows[0].params
    return BlockSaved(config=config_from_params(first), batch=int(first["batch"]), saved=found)


def provoke_oom(device: str, total_bytes: int | None) -> tuple[int, BaseException]:
    """Ask ``device`` for more memory than it has; return the request and the error raised."""
    if device == "cuda":
        request = 2 * int(total_bytes or torch.cuda.get_device_properties(0).total_memory)
    else:
        request = HOST_OOM_BYTES
    try:
        torch.empty(request, dtype=torch.uint8, device=device)
    except (torch.OutOfMemoryError, RuntimeError) as exc:
        return request, exc
    raise ValueError(  # pragma: no cover - no machine holds 1 PiB
        f"asking {device} for {request} bytes did not fail: cannot provoke an OOM here"
    )


def run_oom(context: Context) -> list[Measurement]:
    """The request that failed, as the diagnosis read it from the error message."""
    device = context.device.type
    request, exc = provoke_oom(device, context.device.total_bytes)
    d = diagnose(exc)
    read = d.requested_bytes if d.requested_bytes is not None else request
    return [
        single(
            read,
            name="oom.requested",
            entry="oom",
            unit="bytes",
            label="an out-of-memory error provoked on purpose: the request, as diagnosed",
            params={
                "asked_bytes": request,
                "error_type": type(exc).__name__,
                "kind": d.kind,
                "verdict": d.verdict,
                "diagnosed_total_bytes": d.total_bytes,
                "diagnosed_free_bytes": d.free_bytes,
                "read_from_message": d.requested_bytes is not None,
            },
            note=d.summary,
        )
    ]


ENTRIES = (
    SuiteEntry(
        name="gpt_memory",
        description="measured peak memory of the memory lesson's GPT-2 steps beside the estimate",
        applies=lambda device: True,
        needs="nothing",
        run=run_gpt_memory,
    ),
    SuiteEntry(
        name="oom",
        description="one out-of-memory error provoked on purpose, caught and diagnosed",
        applies=lambda device: True,
        needs="nothing",
        run=run_oom,
    ),
    SuiteEntry(
        name="gpt_memory_step",
        description="the memory lesson's GPT-2 step: each phase's peak, what is alive at the peak",
        applies=lambda device: True,
        needs="nothing",
        run=run_gpt_memory_step,
    ),
    SuiteEntry(
        name="gpt_memory_timeline",
        description="memory alive after each operator of the memory lesson's GPT-2 step, "
        "without and with checkpointing (on CUDA: after each allocator event)",
        applies=lambda device: True,
        needs="nothing",
        run=run_gpt_memory_timeline,
    ),
    SuiteEntry(
        name="hf_memory",
        description="transformers' GPT-2 steps measured, beside each implementation's estimate",
        applies=lambda device: True,
        needs="nothing",
        run=run_hf_memory,
    ),
    SuiteEntry(
        name="gpt_block_saved",
        description="the tensors the first block of the course's and transformers' GPT-2 "
        "save for backward (real CPU tensors)",
        applies=lambda device: device.type == "cpu",
        needs="a CPU (it runs a real forward pass on CPU tensors)",
        run=run_gpt_block_saved,
    ),
)
