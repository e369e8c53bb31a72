"""The memory ledger as stacked bars: recipes side by side, cards, fix-ladder rungs, ZeRO stages.

Each function takes what the lessons already compute (budgets from
:func:`gpulesson.memory.budget.estimate`, capacity rows, fix-ladder rows, ZeRO rows) and
draws one SVG figure with :mod:`gpulesson.timing.figures`. A bar is the budget's *peak
phase*, term by term, so its length is the budget's ``total_bytes``, the number the page's
table prints; the text alternative lists every bar's total.

>>> from gpulesson.memory.budget import estimate
>>> html_ = recipe_bars({"amp": estimate(7e9, preset="amp")}, title="7B")
>>> "amp 112.0 GB" in html_
True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gpulesson.errors.fix_ladder import LadderRow
from gpulesson.memory.budget import Budget, estimate
from gpulesson.memory.capacity import CapacityRow
from gpulesson.memory.comm import ZeroRow
from gpulesson.timing import figures
from gpulesson.units import GB, GIB


def peak_terms(budget: Budget) -> tuple[tuple[str, float], ...]:
    """The budget's peak phase, term by term, in GB; the terms sum to ``total_bytes``.

    >>> from gpulesson.memory.budget import estimate
    >>> b = estimate(7e9, preset="bf16")
    >>> round(sum(v for _, v in peak_terms(b)) * 1e9) == b.total_bytes
    True
    """
    phase = next(p for p in budget.phases if p.name == budget.peak_phase)
    return tuple((term, value / GB) for term, value in phase.alive_bytes.items() if value)


def recipe_bars(budgets: Mapping[str, Budget], *, title: str) -> str:
    """One bar per recipe: its peak, term by term, in GB."""
    bars = [figures.Bar(name, peak_terms(b)) for name, b in budgets.items()]
    totals = "; ".join(f"{name} {b.total_bytes / GB:,.1f} GB" for name, b in budgets.items())
    return figures.stacked_bars(
        bars,
        unit="GB (10^9 bytes) at the step's peak",
        title=title,
        description=f"Stacked bars of each recipe's memory at the step's peak, by term: {totals}.",
    )


def capacity_bars(rows: Sequence[CapacityRow], *, preset: str, title: str) -> str:
    """For each card, the ledger of the largest model ``preset`` fits on it, term by term.

    Each bar is :func:`gpulesson.memory.budget.estimate` of that entry's parameter count, so
    it fills its card (in GiB, the table's unit); the end text is the parameter count.
    """
    bars = []
    words = []
    for r in rows:
        entry = r.entry(preset)
        budget = estimate(entry.params, preset=preset)
        terms = tuple((term, value * GB / GIB) for term, value in peak_terms(budget))
        card = f"{r.card_bytes / GIB:,.0f} GiB"
        bars.append(figures.Bar(card, terms, f"{entry.params / 1e9:,.2f}B parameters"))
        words.append(f"{card}: {entry.params / 1e9:,.2f} billion parameters")
    label = rows[0].entry(preset).label
    return figures.stacked_bars(
        bars,
        unit=f"GiB at the step's peak, {label}",
        title=title,
        description=(
            f"Stacked bars, one per card, of the ledger of the largest model that fits it for "
            f"{label} (preset {preset}), by term: " + "; ".join(words) + "."
        ),
        value_format=",.2f",
    )


def ladder_bars(rows: Sequence[LadderRow], *, title: str) -> str:
    """One bar per rung: the peak it leaves, and what it saves against the run (or adds)."""
    if not rows:
        raise ValueError("the ladder has no rows: pass ladder_budget_rows()")
    base = rows[0].peak_bytes
    bars = []
    for r in rows:
        kept = min(r.peak_bytes, base) / GB
        segments = [("peak after the rung", kept)]
        if r.peak_bytes < base:
            segments.append(("saved against the run", (base - r.peak_bytes) / GB))
        elif r.peak_bytes > base:
            segments.append(("added against the run", (r.peak_bytes - base) / GB))
        label = "the run" if r.rung == "—" else r.rung
        bars.append(figures.Bar(label, tuple(segments), f"{r.peak_bytes / GB:,.2f}"))
    text = "; ".join(
        f"{'the run' if r.rung == '—' else r.rung} {r.peak_bytes / GB:,.2f} GB" for r in rows
    )
    html_ = figures.stacked_bars(
        bars,
        unit="GB (10^9 bytes), the step's peak per GPU",
        title=title,
        description=f"Bars of the example run's peak after each rung alone: {text}.",
        value_format=",.2f",
        marker=("the run", base / GB),
    )
    return html_


def zero_bars(rows: Sequence[ZeroRow], *, title: str) -> str:
    """Two panels: each ZeRO stage's memory per GPU by term, and the bytes it sends per step."""
    gpus = rows[0].budget.gpus
    memory = figures.stacked_bars(
        [figures.Bar(f"ZeRO-{r.stage}", peak_terms(r.budget)) for r in rows],
        unit=f"GB per GPU (of {gpus}) at the step's peak",
        title=f"{title}: memory per GPU",
        description=(
            f"Stacked bars of memory per GPU for ZeRO stages 0 to 3 on {gpus} GPUs, by term: "
            + "; ".join(f"ZeRO-{r.stage} {r.budget.total_bytes / GB:,.2f} GB" for r in rows)
            + "."
        ),
        value_format=",.2f",
    )
    sent = figures.stacked_bars(
        [
            figures.Bar(
                f"ZeRO-{r.stage}",
                tuple(
                    (f"{c.collective} of {c.tensor} ({c.phase})", c.sent_bytes / GB)
                    for c in r.comm.collectives
                ),
            )
            for r in rows
        ],
        unit="GB each GPU sends per step",
        title=f"{title}: bytes sent per step",
        description=(
            f"Stacked bars of the bytes each GPU sends per step for ZeRO stages 0 to 3 on {gpus} "
            "GPUs, by collective: "
            + "; ".join(f"ZeRO-{r.stage} {r.comm.sent_bytes / GB:,.2f} GB" for r in rows)
            + "."
        ),
        value_format=",.2f",
    )
    return memory + sent
