"""Timelines of measured work: a profiler trace's ops per thread (or stream), and a loader's
batches (data wait against compute).

:func:`trace_spans` reads the Chrome trace the profiler exported
(``StepProfile.trace_gz``): the labelled regions (``record_function``) on one row per
thread, the *top-level* operators (those not inside another operator on the same thread)
on another, and on a CUDA trace each stream's kernels and copies on a row of their own. A
gap on an operator row is time no operator ran on that thread: Python, the autograd
engine, the profiler. :func:`profile_timeline` draws them (:mod:`gpulesson.timing.figures`).

:func:`loader_timeline` draws each :class:`gpulesson.timing.loader.LoaderRun`'s first epoch
from its own readings: the wait for the first batch, then per batch the step (its
``step_s``) and the rest of the gap to the next batch, the wait for data.

>>> import gzip, json
>>> raw = {"traceEvents": [
...     {"ph": "X", "cat": "user_annotation", "name": "forward", "tid": 1, "ts": 0, "dur": 10},
...     {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "tid": 1, "ts": 1, "dur": 4},
...     {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "tid": 1, "ts": 2, "dur": 1},
...     {"ph": "X", "cat": "cpu_op", "name": "aten::add", "tid": 1, "ts": 7, "dur": 2}]}
>>> t = trace_spans(gzip.compress(json.dumps(raw).encode()))
>>> [(s.kind, s.label) for s in t.spans]
[('forward', 'forward'), ('matmul', 'aten::mm'), ('other operator', 'aten::add')]
>>> t.lanes
('thread 1: regions', 'thread 1: operators')
>>> round(t.busy_s * 1e6, 6), round(t.step_s * 1e6, 6)
(6.0, 10.0)
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpulesson.timing import figures
from gpulesson.timing.loader import LoaderRun

REGION_KINDS = ("forward", "backward", "optimizer.step", "zero_grad")
OP_KINDS = ("matmul", "other operator")
GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
KINDS = (*OP_KINDS, *REGION_KINDS)
MATMUL_WORDS = ("mm", "addmm", "bmm", "matmul", "linear", "Addmm", "Mm", "Bmm")
US = 1e-6


@dataclass(frozen=True)
class TraceTimeline:
    """The spans of one profiled step (seconds from its start), and its totals."""

    spans: tuple[figures.Span, ...]
    lanes: tuple[str, ...]
    step_s: float  # first start to last end
    busy_s: float  # the operator rows of the busiest thread: time covered by an operator
    ops: int


def _kind(name: str) -> str:
    return "matmul" if any(w in name for w in MATMUL_WORDS) else "other operator"


def _top_level(events: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Events not inside an earlier one (by start and end), in start order."""
    out: list[dict[str, Any]] = []
    end = float("-inf")
    for e in sorted(events, key=lambda e: (e["ts"], -e["dur"])):
        if e["ts"] >= end:
            out.append(e)
            end = e["ts"] + e["dur"]
    return out


def trace_spans(trace_gz: bytes) -> TraceTimeline:
    """The regions, top-level operators and GPU work of a gzip-compressed Chrome trace."""
    try:
        events = json.loads(gzip.decompress(trace_gz))["traceEvents"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(
            f"not a gzip-compressed Chrome trace with traceEvents ({exc}): pass "
            "StepProfile.trace_gz from profile_callable(..., trace=True)"
        ) from exc
    complete = [e for e in events if e.get("ph") == "X" and "ts" in e and "dur" in e]
    regions = [
        e for e in complete if e.get("cat") == "user_annotation" and e["name"] in REGION_KINDS
    ]
    ops = [e for e in complete if e.get("cat") == "cpu_op"]
    gpu = [e for e in complete if e.get("cat") in GPU_CATEGORIES]
    if not ops:
        raise ValueError("the trace has no operator events (cat cpu_op): profile a step first")
    start = min(e["ts"] for e in (*regions, *ops, *gpu))
    spans: list[figures.Span] = []
    lanes: list[str] = []
    busy = 0.0
    threads = sorted({e["tid"] for e in ops}, key=lambda t: -sum(1 for e in ops if e["tid"] == t))
    for tid in threads:
        mine = [e for e in regions if e["tid"] == tid]
        if mine:
            lanes.append(f"thread {tid}: regions")
            spans += [
                figures.Span(
                    lanes[-1],
                    (e["ts"] - start) * US,
                    (e["ts"] + e["dur"] - start) * US,
                    e["name"],
                    e["name"],
                )
                for e in mine
            ]
        top = _top_level([e for e in ops if e["tid"] == tid])
        lanes.append(f"thread {tid}: operators")
        spans += [
            figures.Span(
                lanes[-1],
                (e["ts"] - start) * US,
                (e["ts"] + e["dur"] - start) * US,
                _kind(e["name"]),
                e["name"],
            )
            for e in top
        ]
        busy = max(busy, sum(e["dur"] for e in top) * US)
    numbered = [t for t in {e["tid"] for e in gpu} if isinstance(t, int)]
    named = [t for t in {e["tid"] for e in gpu} if not isinstance(t, int)]
    for stream in [*sorted(numbered), *sorted(named, key=str)]:
        lanes.append(f"GPU stream {stream}")
        spans += [
            figures.Span(
                lanes[-1],
                (e["ts"] - start) * US,
                (e["ts"] + e["dur"] - start) * US,
                _kind(e["name"]),
                e["name"],
            )
            for e in _top_level([e for e in gpu if e["tid"] == stream])
        ]
    stop = max(s.end for s in spans)
    return TraceTimeline(tuple(spans), tuple(lanes), stop, busy, len(ops))


def profile_timeline(t: TraceTimeline, *, title: str, what: str) -> str:
    """The trace as bars in milliseconds, one row per lane; gaps are time with no operator."""
    ms = [figures.Span(s.lane, s.start * 1e3, s.end * 1e3, s.kind, s.label) for s in t.spans]
    regions = {s.label: (s.end - s.start) * 1e3 for s in t.spans if s.kind in REGION_KINDS}
    region_text = ", ".join(f"{name} {value:,.1f} ms" for name, value in regions.items())
    kinds = [k for k in KINDS if any(s.kind == k for s in t.spans)]
    idle = t.step_s - t.busy_s
    description = (
        f"Timeline of {what}, from the profiler's own events ({t.ops:,} operator events): "
        f"{len(t.lanes)} rows ({', '.join(t.lanes)}). Regions: {region_text}. The step spans "
        f"{t.step_s * 1e3:,.1f} ms; top-level operators cover {t.busy_s * 1e3:,.1f} ms of it, "
        f"leaving {idle * 1e3:,.1f} ms ({idle / t.step_s:.0%}) with no operator running."
    )
    return figures.timeline(
        ms,
        lanes=list(t.lanes),
        kinds=kinds,
        x_label="ms from the step's start",
        title=title,
        description=description,
    )


def loader_spans(run: LoaderRun) -> tuple[figures.Span, ...]:
    """A run's first epoch in seconds from the first batch's arrival (the wait for it, which
    includes starting workers, is the table's own column): per batch its step, then the rest
    of the gap to the next batch, the wait for data.

    >>> run = LoaderRun(num_workers=0, prefetch_factor=None, persistent_workers=False,
    ...                 batch_size=8, batches_per_epoch=3, epochs=1, step_s=0.01,
    ...                 samples_s=(0.04,), gaps_s=(0.03, 0.05), first_batch_s=(0.02,),
    ...                 start_method=None)
    >>> [(s.kind, round(s.start, 3), round(s.end, 3)) for s in loader_spans(run)][:3]
    [('step', 0.0, 0.01), ('waiting for data', 0.01, 0.03), ('step', 0.03, 0.04)]
    """
    lane = run.setting.label
    spans = []
    t = 0.0
    gaps = run.gaps_s[: run.batches_per_epoch - 1]
    for k, gap in enumerate(gaps):
        step = min(run.step_s, gap)
        spans.append(figures.Span(lane, t, t + step, "step", f"step on batch {k + 1}"))
        spans.append(figures.Span(lane, t + step, t + gap, "waiting for data", f"batch {k + 2}"))
        t += gap
    spans.append(figures.Span(lane, t, t + run.step_s, "step", f"step on batch {len(gaps) + 1}"))
    return tuple(spans)


def loader_timeline(runs: Sequence[LoaderRun], *, title: str) -> str:
    """Each setting's first epoch as a row: step (compute) and waiting for data, in ms."""
    spans = [
        figures.Span(s.lane, s.start * 1e3, s.end * 1e3, s.kind, s.label)
        for run in runs
        for s in loader_spans(run)
    ]
    rows = []
    for run in runs:
        mine = [s for s in spans if s.lane == run.setting.label]
        wait = sum(s.end - s.start for s in mine if s.kind == "waiting for data")
        total = max(s.end for s in mine)
        rows.append(
            f"{run.setting.label}: {total:,.0f} ms, {wait:,.0f} ms of it waiting for data "
            f"(first batch after {run.first_batch_s[0] * 1e3:,.0f} ms)"
        )
    description = (
        f"Timeline of each loader setting's first epoch ({runs[0].batches_per_epoch} batches) "
        f"from the first batch's arrival, drawn from the measured gaps between batches; each "
        f"step takes {runs[0].step_s * 1e3:,.1f} ms: " + "; ".join(rows) + "."
    )
    return figures.timeline(
        spans,
        lanes=[r.setting.label for r in runs],
        kinds=["step", "waiting for data"],
        x_label="ms from the first batch's arrival",
        title=title,
        description=description,
    )
