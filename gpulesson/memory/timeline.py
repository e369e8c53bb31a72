"""Memory over one training step: live bytes after every operator, by ledger term.

:func:`trace_gpt2` runs exactly the measurement of :func:`gpulesson.memory.measure.measure_gpt2`
with ``mode="fake"`` (two steps under ``FakeTensorMode`` and torch's ``MemTracker``, the
second one kept), with one more dispatch mode inside the tracker's: after each operator it
reads the tracker's *current* snapshot, so each row is what was alive when that op
returned, by category. The rows of the second step, in order, are the step's memory
profile: the rise through the forward pass, the peak, the fall through backward, the
optimizer's bump. Its peak is the tracker's peak, the number the memory lesson reports
(a test checks they are equal).

On a CUDA build, :func:`cuda_live_bytes` reads the same curve from
``torch.cuda.memory._snapshot()`` after ``_record_memory_history`` (every allocation and
completed free, replayed); :func:`live_from_snapshot` is the parsing, tested with a small
fake snapshot.

:func:`memory_chart` draws the profile as stacked areas (``gpulesson.timing.figures``). To
keep the picture small, ops are grouped into about 360 columns, each showing the op in it
with the most bytes alive, so the highest op, the peak, is always drawn.

>>> from gpulesson.memory.gpt2 import GPT2Config
>>> t = trace_gpt2(GPT2Config(vocab_size=64, seq_len=8, hidden=16, heads=2, layers=1), batch=2)
>>> [p.name for p in t.phases], t.peak_bytes == max(r.total_bytes for r in t.rows)
(['forward', 'backward', 'optimizer step'], True)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from gpulesson.memory import measure, torch_tools
from gpulesson.memory.gpt2 import GPT2, GPT2Config
from gpulesson.timing import figures

PHASES = ("forward", "backward", "optimizer step")
COLUMNS = 360
MIB = 2**20


@dataclass(frozen=True)
class OpRow:
    """What was alive when one operator returned: its phase, name and bytes per ledger line."""

    phase: str
    op: str
    by_term_bytes: tuple[tuple[str, int], ...]  # in torch_tools.CATEGORIES order
    total_bytes: int


@dataclass(frozen=True)
class PhaseSpan:
    """A phase's rows: ``first`` to ``last`` index, inclusive, and its peak."""

    name: str
    first: int
    last: int
    peak_bytes: int


@dataclass(frozen=True)
class StepTrace:
    """Every operator of one steady training step, with live bytes after each."""

    method: str
    rows: tuple[OpRow, ...]
    phases: tuple[PhaseSpan, ...]

    @property
    def peak_bytes(self) -> int:
        """The most bytes alive after any op of the step."""
        return max(r.total_bytes for r in self.rows)

    @property
    def peak_phase(self) -> str:
        """The phase in which the peak falls."""
        return max(self.phases, key=lambda p: p.peak_bytes).name

    @property
    def phase_peaks_bytes(self) -> dict[str, int]:
        """Each phase's peak, as :class:`gpulesson.memory.measure.MeasuredStep` has it."""
        return {p.name: p.peak_bytes for p in self.phases}


def _current(tracker: Any) -> tuple[int, dict[str, int]]:
    """The tracker's current snapshot: total bytes, and bytes per ledger line."""
    terms = dict.fromkeys(torch_tools.CATEGORIES, 0)
    total = 0
    for dev_snap in tracker.get_tracker_snapshot("current").values():
        for key, value in dev_snap.items():
            name = getattr(key, "value", key)
            if name == torch_tools.TOTAL_KEY:
                total += value
            elif name in torch_tools.TRACKER_CATEGORIES:
                terms[torch_tools.TRACKER_CATEGORIES[name]] += value
            else:
                raise torch_tools.PrivateTorchAPIError(
                    f"MemTracker's snapshot has an unknown category {name!r}: update "
                    "gpulesson/memory/torch_tools.py for this torch"
                )
    return total, terms


class _Recorder(TorchDispatchMode):
    """After each op (once switched on), what the tracker holds, filed under the phase."""

    def __init__(self, tracker: Any) -> None:
        super().__init__()
        self.tracker = tracker
        self.on = False
        self.phase = 0
        self.rows: list[OpRow] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if self.on and self.phase < len(PHASES):
            total, terms = _current(self.tracker)
            self.rows.append(OpRow(PHASES[self.phase], str(func), tuple(terms.items()), total))
        return out


def trace_gpt2(
    config: GPT2Config, *, batch: int, dtype: str = "fp32", optimizer: str = "adamw"
) -> StepTrace:
    """The fake-tensor measurement of :func:`measure.measure_gpt2`, op by op (CPU kernels)."""
    if dtype not in measure.DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}: use one of {', '.join(measure.DTYPES)}")
    make_inputs = measure._token_inputs(config, batch)
    with torch_tools.fake_tensor_mode():
        with measure._default_dtype(measure.DTYPES[dtype]):
            model = GPT2(config)
        model.train()
        opt = measure.make_optimizer(optimizer, model.parameters())
        inputs = make_inputs(torch.device("cpu"))
        tracker = torch_tools.mem_tracker()
        tracker.track_external(model, opt, *inputs)
        recorder = _Recorder(tracker)

        def after_first() -> None:
            tracker.reset_mod_stats()
            recorder.on = True

        def end_phase(name: str) -> None:
            recorder.phase += 1

        with tracker, recorder:
            measure._steps(
                model,
                opt,
                inputs,
                lambda: torch_tools.reset_peak(tracker),
                end_phase,
                after_first,
            )
    rows = tuple(recorder.rows)
    return StepTrace(method=measure.FAKE_METHOD, rows=rows, phases=_spans(rows))


def _spans(rows: Sequence[OpRow]) -> tuple[PhaseSpan, ...]:
    spans = []
    for name in PHASES:
        index = [i for i, r in enumerate(rows) if r.phase == name]
        if not index:
            raise ValueError(f"the step recorded no op in its {name} phase: nothing to draw")
        peak = max(rows[i].total_bytes for i in index)
        spans.append(PhaseSpan(name=name, first=index[0], last=index[-1], peak_bytes=peak))
    return tuple(spans)


def live_from_snapshot(snapshot: Mapping[str, Any], baseline_bytes: int = 0) -> tuple[int, ...]:
    """Live bytes after each event of a CUDA memory snapshot's first device trace.

    ``alloc`` adds its size, ``free_completed`` takes it away (as
    :func:`gpulesson.timing.profile.replay_peak` counts them); other actions keep the level.

    >>> live_from_snapshot({"device_traces": [[{"action": "alloc", "size": 512},
    ...     {"action": "free_requested", "size": 512}, {"action": "alloc", "size": 256},
    ...     {"action": "free_completed", "size": 512}]]}, baseline_bytes=100)
    (612, 612, 868, 356)
    >>> live_from_snapshot({"segments": []})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: the snapshot has no device_traces: record with ...
    """
    traces = snapshot.get("device_traces")
    if not traces:
        raise ValueError(
            "the snapshot has no device_traces: record with "
            "torch.cuda.memory._record_memory_history() first"
        )
    live = baseline_bytes
    out = []
    for event in traces[0]:
        action = event.get("action")
        if action == "alloc":
            live += int(event["size"])
        elif action == "free_completed":
            live -= int(event["size"])
        out.append(live)
    return tuple(out)


def cuda_live_bytes(config: GPT2Config, *, batch: int) -> tuple[int, ...]:  # pragma: no cover
    """Live bytes after every allocator event of two AdamW steps of ``GPT2(config)`` on CUDA."""
    if not torch.cuda.is_available():
        raise ValueError("cuda_live_bytes needs a CUDA device: use trace_gpt2 on this machine")
    torch.cuda.synchronize()
    baseline = torch.cuda.memory_allocated()
    torch.cuda.memory._record_memory_history(max_entries=200_000)
    try:
        with torch.device("cuda"):
            model = GPT2(config)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        (idx, targets) = measure._token_inputs(config, batch)(torch.device("cuda"))
        for _ in range(2):
            model(idx, targets).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        snapshot = torch.cuda.memory._snapshot()
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
    return live_from_snapshot(snapshot, int(baseline))


def columns(count: int, totals: Sequence[int], width: int = COLUMNS) -> tuple[int, ...]:
    """Row indices to draw: per group of consecutive rows, the one with the most bytes.

    >>> columns(6, [1, 5, 2, 2, 9, 1], width=3)
    (1, 2, 4)
    """
    if count <= width:
        return tuple(range(count))
    picks = []
    for c in range(width):
        lo, hi = c * count // width, (c + 1) * count // width
        picks.append(max(range(lo, hi), key=lambda i: totals[i]))
    return tuple(picks)


# The ledger lines a chart shows, and the tracker categories each gathers.
CHART_TERMS = ("parameters", "optimizer state", "gradients", "activations", "temporaries", "other")


def memory_chart(trace: StepTrace, *, title: str, what: str) -> str:
    """The step as stacked areas of MiB per ledger line, with the phases and the peak marked.

    ``what`` names the model in the text alternative.
    """
    totals = [r.total_bytes for r in trace.rows]
    count = len(trace.rows)
    picks = columns(count, totals)

    def column_of(index: int) -> int:  # the group of rows that holds ``index``
        width = len(picks)
        return next(c for c in range(width) if index < (c + 1) * count // width)

    layers = {
        term: [dict(trace.rows[i].by_term_bytes)[term] / MIB for i in picks] for term in CHART_TERMS
    }
    layers = {k: v for k, v in layers.items() if any(v)}
    phases = [(p.name, column_of(p.first), column_of(p.last)) for p in trace.phases]
    peak = trace.peak_bytes
    peaks = ", ".join(f"{p.name} {p.peak_bytes / MIB:,.2f} MiB" for p in trace.phases)
    peak_row = max(range(len(trace.rows)), key=lambda i: totals[i])
    at_peak = ", ".join(
        f"{term} {value / MIB:,.2f}" for term, value in trace.rows[peak_row].by_term_bytes if value
    )
    description = (
        f"Stacked area chart of memory alive (MiB) after each of the {len(trace.rows):,} operators "
        f"of one training step of {what}, measured with {trace.method}. Phase peaks: {peaks}. "
        f"The step peaks at {peak / MIB:,.2f} MiB ({peak:,} bytes) in the {trace.peak_phase} "
        f"phase, at op {peak_row + 1:,} ({trace.rows[peak_row].op}); alive then, in MiB: {at_peak}."
    )
    return figures.stacked_area(
        layers,
        phases=phases,
        x_label=f"operator, in the order the step ran them ({len(trace.rows):,} ops)",
        unit="MiB",
        title=title,
        description=description,
        peak_label=f"peak {peak / MIB:,.2f} MiB",
    )


def live_chart(
    live_bytes: Sequence[int], *, title: str, what: str, events: int | None = None
) -> str:  # pragma: no cover
    """A CUDA snapshot's live bytes after each allocator event, as one area (MiB).

    ``events`` is how many events ``live_bytes`` was picked from, when a result bundle kept
    only the most-bytes event of each group of them (default: one value per event).
    """
    picks = columns(len(live_bytes), live_bytes)
    peak = max(live_bytes)
    count = len(live_bytes) if events is None else events
    return figures.stacked_area(
        {"allocated": [live_bytes[i] / MIB for i in picks]},
        phases=[("two steps", 0, len(picks) - 1)],
        x_label=f"allocator event ({count:,} events)",
        unit="MiB",
        title=title,
        description=(
            f"Area chart of CUDA memory allocated (MiB) after each of {count:,} "
            f"allocator events of two training steps of {what}, replayed from "
            f"torch.cuda.memory._snapshot(); peak {peak / MIB:,.2f} MiB ({peak:,} bytes)."
        ),
    )
