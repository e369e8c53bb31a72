"""Diagrams computed from the course's functions: the ring all-reduce, pipeline schedules, ZeRO.

Each diagram is a simulation whose numbers are checked against the formula the lesson
prints, then drawn as SVG (:mod:`gpulesson.timing.figures`):

* :func:`ring_steps` runs a ring all-reduce on N GPUs chunk by chunk (reduce-scatter, then
  all-gather); the bytes each GPU sends add up to
  :func:`gpulesson.memory.comm.ring_all_reduce_bytes`.
* :func:`pipeline_schedule` places every forward and backward of m micro-batches on p
  stages (GPipe: all forwards, then all backwards; 1F1B: one forward, one backward once
  the pipeline is full), each op one time unit, as soon as its inputs are ready; the idle
  share equals :func:`gpulesson.memory.parallel.bubble_fraction`.
* :func:`pipeline_lab` draws both schedules for every cell of a small grid of stage and
  micro-batch counts, each checked against the formula, with two selects that
  ``docs/javascripts/pipeline.js`` uses to show one cell; without JavaScript the default
  cell shows. The script only shows and hides: the schedules and the bubble are these.
* :func:`zero_shards` reads what one GPU holds of the weights, gradients and optimizer
  state at each ZeRO stage from the budgets :func:`gpulesson.memory.comm.zero_tradeoffs`
  computes.

>>> s = pipeline_schedule("1f1b", stages=4, microbatches=8)
>>> round(s.bubble_share, 3), s.makespan
(0.273, 22)
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

from gpulesson.memory.comm import ZeroRow
from gpulesson.memory.parallel import bubble_fraction
from gpulesson.timing import figures
from gpulesson.timing.figures import _n, rect, text

SCHEDULES = ("gpipe", "1f1b")


@dataclass(frozen=True)
class RingStep:
    """One step of the ring: its phase, and each GPU's chunks after it (contributions summed).

    ``sent[i]`` is the chunk GPU i sent to GPU i+1 in this step; ``held[i][c]`` is the set of
    GPUs whose values chunk c on GPU i now sums.
    """

    phase: str
    sent: tuple[int, ...]
    held: tuple[tuple[frozenset[int], ...], ...]


def ring_steps(gpus: int) -> tuple[RingStep, ...]:
    """The 2(N-1) steps of a ring all-reduce over ``gpus`` GPUs, each message cut in N chunks.

    Reduce-scatter step s: GPU i sends chunk (i - s) mod N to GPU i+1, which adds it to its
    own. All-gather step s: GPU i sends its finished chunk (i + 1 - s) mod N on.

    >>> steps = ring_steps(4)
    >>> len(steps), [len(c) for c in steps[2].held[0]], all(
    ...     len(c) == 4 for gpu in steps[-1].held for c in gpu)
    (6, [1, 4, 3, 2], True)
    """
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 2:
        raise ValueError(f"gpus={gpus!r}: a ring needs a whole number of GPUs, at least 2")
    n = gpus
    held = [[frozenset({i}) for _ in range(n)] for i in range(n)]
    out = []
    for phase in ("reduce-scatter", "all-gather"):
        for s in range(n - 1):
            shift = s if phase == "reduce-scatter" else s - 1
            sent = tuple((i - shift) % n for i in range(n))
            incoming = [(i - 1) % n for i in range(n)]
            new = [list(row) for row in held]
            for i in range(n):
                src, chunk = incoming[i], sent[incoming[i]]
                if phase == "reduce-scatter":
                    new[i][chunk] = held[i][chunk] | held[src][chunk]
                else:
                    new[i][chunk] = held[src][chunk]
            held = new
            out.append(RingStep(phase, sent, tuple(tuple(row) for row in held)))
    return tuple(out)


def ring_sent_bytes(message_bytes: float, gpus: int) -> float:
    """What each GPU sends in the simulated ring: one chunk (message / N) per step.

    >>> from gpulesson.memory.comm import ring_all_reduce_bytes
    >>> ring_sent_bytes(28e9, 8) == ring_all_reduce_bytes(28e9, 8)
    True
    """
    return len(ring_steps(gpus)) * message_bytes / gpus


def ring_diagram(gpus: int, message_bytes: float, *, what: str) -> str:
    """A grid: one row per GPU, one column per step; each cell the GPU's N chunks after it.

    A chunk's shade counts the GPUs summed in it (darkest: all N); the outlined chunk is
    the one that GPU sent in that step.
    """
    steps = ring_steps(gpus)
    n = gpus
    cell = 18.0
    col_w = n * cell + 22
    x0, y0 = 70.0, 78.0
    row_h = cell + 16
    parts = []
    for k, step in enumerate(steps):
        x = x0 + k * col_w
        parts.append(text(x + n * cell / 2, y0 - 24, f"step {k + 1}", anchor="middle"))
        parts.append(
            text(x + n * cell / 2, y0 - 10, step.phase, anchor="middle", cls="gl-fig-small")
        )
        for i in range(n):
            y = y0 + i * row_h
            for c in range(n):
                count = len(step.held[i][c])
                cls = f"gl-k0 gl-shade-{count * 4 // n}"
                tip = f"GPU {i}, chunk {c}: sum of {count} of {n} GPUs"
                parts.append(rect(x + c * cell, y, cell - 2, cell - 2, cls, tip))
                if c == step.sent[i]:
                    parts.append(
                        f'<rect x="{_n(x + c * cell - 1)}" y="{_n(y - 1)}" width="{_n(cell)}" '
                        f'height="{_n(cell)}" class="gl-outline"/>'
                    )
    for i in range(n):
        parts.append(text(x0 - 8, y0 + i * row_h + cell - 3, f"GPU {i}", anchor="end"))
    sent = ring_sent_bytes(message_bytes, n)
    bottom = y0 + n * row_h + 8
    parts.append(
        text(
            x0,
            bottom + 8,
            f"each GPU sends {len(steps)} chunks of 1/{n}: {sent / 1e9:,.2f} GB of a "
            f"{message_bytes / 1e9:,.2f} GB message, {len(steps) / n:g} times it",
        )
    )
    parts.append(
        text(
            x0,
            bottom + 26,
            f"shade: GPUs summed in a chunk (light 1, dark all {n}); outlined: the chunk sent",
        )
    )
    bottom += 18
    width = max(x0 + len(steps) * col_w + 10, float(figures.WIDTH_PX))
    description = (
        f"Ring all-reduce of {what} on {n} GPUs, in {len(steps)} steps: {n - 1} of reduce-scatter, "
        f"in which each GPU sends one chunk (1/{n} of the message) to the next GPU, which adds "
        f"it to its own, until each GPU holds one chunk summed over all {n}; then {n - 1} of "
        f"all-gather, passing the finished chunks round the ring. Each GPU sends "
        f"{len(steps)} chunks, {len(steps) / n:g} times the message: {sent / 1e9:,.2f} GB of "
        f"{message_bytes / 1e9:,.2f} GB."
    )
    return figures.figure(
        "".join(parts),
        width=width,
        height=bottom + 20,
        title=f"Ring all-reduce on {n} GPUs: which chunk each GPU sends, step by step",
        description=description,
    )


@dataclass(frozen=True)
class Slot:
    """One unit of work on a stage: forward or backward of a micro-batch, from ``start``."""

    stage: int
    kind: str  # "forward" or "backward"
    microbatch: int
    start: int


@dataclass(frozen=True)
class Schedule:
    """Every op of a pipeline step, each one time unit long."""

    name: str
    stages: int
    microbatches: int
    slots: tuple[Slot, ...]

    @property
    def makespan(self) -> int:
        """Time units from the first forward to the last backward."""
        return max(s.start for s in self.slots) + 1

    @property
    def bubble_share(self) -> float:
        """The idle share of stage-time: 1 - work / (stages x makespan)."""
        return 1 - len(self.slots) / (self.stages * self.makespan)

    def in_flight(self, stage: int) -> int:
        """The most micro-batches ``stage`` holds activations for at once (forward done,
        backward not yet)."""
        events = sorted(
            (s.start, 1 if s.kind == "forward" else -1) for s in self.slots if s.stage == stage
        )
        level = most = 0
        for _, change in events:
            level += change
            most = max(most, level)
        return most


def _order(name: str, stage: int, stages: int, microbatches: int) -> list[tuple[str, int]]:
    forwards = [("forward", j) for j in range(microbatches)]
    backwards = [("backward", j) for j in range(microbatches)]
    if name == "gpipe":
        return forwards + backwards
    warm = min(stages - stage - 1, microbatches)
    order = forwards[:warm]
    for j in range(microbatches - warm):
        order += [forwards[warm + j], backwards[j]]
    return order + backwards[microbatches - warm :]


def pipeline_schedule(name: str, *, stages: int, microbatches: int) -> Schedule:
    """Place each stage's ops in order, each as soon as its input is ready (unit times).

    A forward needs the previous stage's forward of the micro-batch; a backward needs the
    next stage's backward (the last stage: its own forward).

    >>> pipeline_schedule("gpipe", stages=2, microbatches=2).makespan
    6
    >>> pipeline_schedule("zb", stages=2, microbatches=2)
    Traceback (most recent call last):
    ...
    ValueError: schedule 'zb' is not drawn here: use one of gpipe, 1f1b
    """
    if name not in SCHEDULES:
        raise ValueError(f"schedule {name!r} is not drawn here: use one of {', '.join(SCHEDULES)}")
    for label, value in (("stages", stages), ("microbatches", microbatches)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{label}={value!r} must be a whole number, at least 1")
    orders = [_order(name, s, stages, microbatches) for s in range(stages)]
    done: dict[tuple[str, int, int], int] = {}  # (kind, stage, micro-batch) -> end time
    free = [0] * stages
    position = [0] * stages
    slots = []
    while any(position[s] < len(orders[s]) for s in range(stages)):
        progressed = False
        for s in range(stages):
            if position[s] == len(orders[s]):
                continue
            kind, j = orders[s][position[s]]
            if kind == "forward":
                need = ("forward", s - 1, j) if s else None
            else:
                need = ("backward", s + 1, j) if s < stages - 1 else ("forward", s, j)
            if need is not None and need not in done:
                continue
            start = max(free[s], done[need] if need else 0)
            slots.append(Slot(s, kind, j, start))
            done[(kind, s, j)] = start + 1
            free[s] = start + 1
            position[s] += 1
            progressed = True
        if not progressed:  # pragma: no cover - the orders above never deadlock
            raise RuntimeError(f"schedule {name} deadlocked")
    return Schedule(name, stages, microbatches, tuple(slots))


def _count(n: int, word: str) -> str:
    """``n`` and ``word``, plural unless n is 1: "1 stage", "8 micro-batches".

    >>> _count(1, "micro-batch"), _count(8, "micro-batch"), _count(4, "stage")
    ('1 micro-batch', '8 micro-batches', '4 stages')
    """
    if n == 1:
        return f"{n} {word}"
    return f"{n} {word}es" if word.endswith(("ch", "sh", "s", "x")) else f"{n} {word}s"


def lab_status(stages: int, microbatches: int) -> str:
    """What the pipeline lab says beside the figure it shows: the formula's bubble.

    >>> lab_status(4, 8)
    "4 stages and 8 micro-batches: the formula's bubble 27.3%."
    """
    bubble = bubble_fraction(stages=stages, microbatches=microbatches)
    return (
        f"{_count(stages, 'stage')} and {_count(microbatches, 'micro-batch')}: the formula's "
        f"bubble {bubble:.1%}."
    )


def _lane_ops(
    sched: Schedule, label: str, stage: int, x0: float, y: float, unit: float, row_h: float
) -> str:
    """One stage's boxes as one path per kind (with a hover title), and their micro-batch
    numbers as one text: compact enough that a page can carry a grid of these diagrams."""
    slots = sorted((s for s in sched.slots if s.stage == stage), key=lambda s: s.start)
    parts = []
    for kind, cls in (("forward", "gl-k0"), ("backward", "gl-k1")):
        mine = [s for s in slots if s.kind == kind]
        d = "".join(
            f"M{_n(x0 + s.start * unit + 0.5)} {_n(y + 2)}h{_n(unit - 1)}v{_n(row_h - 4)}"
            f"h{_n(1 - unit)}z"
            for s in mine
        )
        tip = f"{label} stage {stage}: {kind} of micro-batch" + (
            f"es 0 to {len(mine) - 1}" if len(mine) > 1 else " 0"
        )
        parts.append(f'<path d="{d}" class="{cls}"><title>{html.escape(tip)}</title></path>')
    numbers = "".join(
        f'<tspan x="{_n(x0 + s.start * unit + unit / 2)}">{s.microbatch}</tspan>' for s in slots
    )
    parts.append(f'<text y="{_n(y + 14)}" text-anchor="middle" class="gl-fig-on">{numbers}</text>')
    return "".join(parts)


def pipeline_diagram(schedules: Sequence[Schedule], *, bubble: float) -> str:
    """Each schedule as a timeline: a row per stage, forward and backward boxes numbered by
    micro-batch, idle time left empty; ``bubble`` is the page's formula, checked here."""
    for s in schedules:
        if abs(s.bubble_share - bubble) > 1e-12:
            raise ValueError(
                f"the {s.name} schedule idles {s.bubble_share:.4f} of the step, not the formula's "
                f"{bubble:.4f}: the simulation and bubble_fraction disagree"
            )
    first = schedules[0]
    p, m = first.stages, first.microbatches
    span = max(s.makespan for s in schedules)
    x0 = 92.0
    unit = (figures.WIDTH_PX - x0 - 16) / span
    row_h = 20.0
    parts = [
        figures.legend(["forward", "backward"], 40)[0],
    ]
    y = 64.0
    for sched in schedules:
        label = "GPipe" if sched.name == "gpipe" else "1F1B"
        most = max(sched.in_flight(st) for st in range(p))
        parts.append(
            text(
                x0,
                y + 4,
                f"{label}: bubble {sched.bubble_share:.1%}, up to {_count(most, 'micro-batch')} "
                "in flight",
            )
        )
        y += 10
        for st in range(p):
            parts.append(text(x0 - 8, y + st * row_h + 14, f"stage {st}", anchor="end"))
            parts.append(rect(x0, y + st * row_h + 1, span * unit, row_h - 2, "gl-lane"))
        for st in range(p):
            parts.append(_lane_ops(sched, label, st, x0, y + st * row_h, unit, row_h))
        y += p * row_h + 22
    parts.append(
        text(x0, y, f"time, in units of one stage's forward (= its backward); {span} units")
    )
    description = (
        f"Pipeline schedules for {_count(p, 'stage')} and {_count(m, 'micro-batch')}, each "
        "forward and backward one "
        f"time unit: "
        + "; ".join(
            f"{'GPipe' if s.name == 'gpipe' else '1F1B'} takes {s.makespan} units and idles "
            f"{s.bubble_share:.1%} of the stage-time, with up to "
            f"{_count(max(s.in_flight(st) for st in range(p)), 'micro-batch')} in flight on "
            "stage 0"
            for s in schedules
        )
        + f". The bubble formula (p-1)/(m+p-1) gives {bubble:.1%}."
    )
    return figures.figure(
        "".join(parts),
        width=figures.WIDTH_PX,
        height=y + 12,
        title=f"GPipe and 1F1B on {_count(p, 'stage')}, {_count(m, 'micro-batch')}",
        description=description,
    )


LAB_STAGES = (2, 4, 8)
LAB_MICROBATCHES = (1, 2, 4, 8, 16)
LAB_DEFAULT = (4, 8)


def _select(name: str, label: str, values: Sequence[int], chosen: int) -> str:
    options = "".join(
        f'<option value="{v}"{" selected" if v == chosen else ""}>{v}</option>' for v in values
    )
    return (
        f'<span><label for="gl-pipeline-{name}">{label}</label> '
        f'<select id="gl-pipeline-{name}" name="{name}">{options}</select></span>'
    )


def pipeline_lab(
    stages: Sequence[int] = LAB_STAGES,
    microbatches: Sequence[int] = LAB_MICROBATCHES,
    default: tuple[int, int] = LAB_DEFAULT,
) -> str:
    """GPipe and 1F1B for every (stages, micro-batches) in the grid, one figure per cell, and
    the two selects that pick a cell; one line of HTML.

    Each cell carries its bubble (``bubble_fraction``, which :func:`pipeline_diagram` checks
    the simulation against) as ``data-bubble``; every cell but ``default`` is ``hidden``, and
    so are the selects, which ``docs/javascripts/pipeline.js`` shows and wires up.

    >>> lab = pipeline_lab((2, 4), (1, 8), (4, 8))
    >>> lab.count('class="gl-pipeline-cell"'), lab.count(" hidden>"), 'data-bubble="0.2727' in lab
    (4, 4, True)
    """
    if default[0] not in stages or default[1] not in microbatches:
        raise ValueError(f"default={default!r} is not a cell of the grid {stages} x {microbatches}")
    cells = []
    for p in stages:
        for m in microbatches:
            bubble = bubble_fraction(stages=p, microbatches=m)
            schedules = [pipeline_schedule(n, stages=p, microbatches=m) for n in SCHEDULES]
            shown = "" if (p, m) == tuple(default) else " hidden"
            cells.append(
                f'<div class="gl-pipeline-cell" data-stages="{p}" data-microbatches="{m}" '
                f'data-bubble="{bubble!r}" data-bubble-text="{bubble:.1%}" '
                f'data-status="{html.escape(lab_status(p, m))}"{shown}>'
                f"{pipeline_diagram(schedules, bubble=bubble)}</div>"
            )
    note = html.escape(lab_status(*default))
    controls = (
        '<div class="gl-pipeline-controls" hidden>'
        + _select("stages", "Stages", stages, default[0])
        + " "
        + _select("microbatches", "Micro-batches", microbatches, default[1])
        + f' <output class="gl-pipeline-status" aria-live="polite">{note}</output></div>'
    )
    return f'<div class="gl-pipeline-lab">{controls}{"".join(cells)}</div>'


TERMS = (
    ("weights", "weights_bytes"),
    ("gradients", "gradients_bytes"),
    ("optimizer state", "optimizer_bytes"),
)


def zero_shards(rows: Sequence[ZeroRow]) -> tuple[tuple[int, tuple[tuple[str, int], ...]], ...]:
    """Per stage, how many of the N shards of each term GPU 0 holds (N: all of it; 1: its own).

    Read from the budgets: a term's bytes at the stage over its bytes at stage 0, times N.

    >>> from gpulesson.memory.comm import zero_tradeoffs
    >>> zero_shards(zero_tradeoffs({"params": 7e9, "preset": "amp"}, 4))[3]
    (3, (('weights', 1), ('gradients', 1), ('optimizer state', 1)))
    """
    base = rows[0].budget
    n = base.gpus
    out = []
    for r in rows:
        held = []
        for name, field in TERMS:
            whole = getattr(base, field)
            part = getattr(r.budget, field)
            held.append((name, round(n * part / whole) if whole else 0))
        out.append((r.stage, tuple(held)))
    return tuple(out)


def zero_diagram(rows: Sequence[ZeroRow], *, what: str) -> str:
    """A grid: a row per ZeRO stage, for each term N boxes (the term's N shards), each box
    filled where GPU 0 holds that shard; GPU 0's bytes per term at the end."""
    shards = zero_shards(rows)
    n = rows[0].budget.gpus
    box = min(16.0, 150.0 / n)
    x0, y0 = 80.0, 70.0
    block = n * box + 40
    parts = []
    for t, (name, _) in enumerate(TERMS):
        parts.append(text(x0 + t * block + n * box / 2, y0 - 12, name, anchor="middle"))
    row_h = box + 18
    for k, ((stage, held), r) in enumerate(zip(shards, rows, strict=True)):
        y = y0 + k * row_h
        parts.append(text(x0 - 8, y + box - 3, f"ZeRO-{stage}", anchor="end"))
        for t, (name, count) in enumerate(held):
            for i in range(n):
                cls = figures.kind_class(t) if i < count else "gl-empty"
                verb = "holds" if i < count else "does not hold"
                tip = f"ZeRO-{stage}: GPU 0 {verb} {name} shard {i}"
                parts.append(rect(x0 + t * block + i * box, y, box - 2, box - 2, cls, tip))
        gb = ", ".join(f"{getattr(r.budget, f) / 1e9:,.1f}" for _, f in TERMS)
        parts.append(text(x0 + 3 * block, y + box - 3, f"{gb} GB"))
    bottom = y0 + len(rows) * row_h + 10
    parts.append(text(x0, bottom, f"each box: 1/{n} of the term; filled: GPU 0 keeps it"))
    description = (
        f"ZeRO sharding of {what} on {n} GPUs: what GPU 0 holds of the weights, gradients and "
        "optimizer state, in shards of 1/"
        f"{n}: "
        + "; ".join(
            f"ZeRO-{stage} keeps "
            + ", ".join(f"{c} of {n} {name} shards" for name, c in held)
            + f" ({r.budget.total_bytes / 1e9:,.1f} GB at the peak)"
            for (stage, held), r in zip(shards, rows, strict=True)
        )
        + "."
    )
    return figures.figure(
        "".join(parts),
        width=figures.WIDTH_PX,
        height=bottom + 12,
        title=f"What ZeRO shards across {n} GPUs (GPU 0's share shown)",
        description=description,
    )
