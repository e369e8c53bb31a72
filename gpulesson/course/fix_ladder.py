"""The lesson ``fix-ladder.md``: its renderers and texts.

Its pictures and tables: the ladder, its budget per rung, the checkpointing leftover and the
steps of a diagnosis.

Renderers take the frozen results of the topic packages and return Markdown, HTML or chart
markup; nothing here measures. See :mod:`gpulesson.course`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpulesson.errors.fix_ladder import CheckpointingLeftover, LadderRow, Rung, Step
from gpulesson.tables import markdown_table
from gpulesson.units import GB


def ladder_markdown(rungs: tuple[Rung, ...]) -> str:
    """The fix ladder as a table, in order, with what each rung cuts and costs.

    >>> from gpulesson.errors.fix_ladder import FIX_LADDER
    >>> ladder_markdown(FIX_LADDER).splitlines()[2].startswith("| 1 | Release references")
    True
    """
    rows = [
        (i, rung.name, rung.what_it_cuts, rung.cost, "yes" if rung.free else "no")
        for i, rung in enumerate(rungs, 1)
    ]
    header = ("rung", "what to try", "what it cuts", "what it costs", "free?")
    return markdown_table(header, rows, align="lllll")


def ladder_budget_markdown(rows: tuple[LadderRow, ...]) -> str:
    """The rungs' effect on one example run's peak memory, as a table in decimal GB."""
    cells = []
    for row in rows:
        delta = "—" if row.vs_run_fraction is None else f"{row.vs_run_fraction:+.0%}"
        batch = row.effective_batch if row.effective_batch is not None else "—"
        cells.append((row.rung, row.change, f"{row.peak_bytes / GB:.1f}", delta, batch))
    header = (
        "rung",
        "change to the example run",
        "peak per GPU (GB)",
        "vs the run",
        "effective batch",
    )
    return markdown_table(header, cells, align="lllll")


def checkpointing_leftover_markdown(leftover: CheckpointingLeftover) -> str:
    """Why checkpointing saves what it saves: the logits tensors left, as a table and prose."""
    x = leftover
    lines = [
        f"Full checkpointing takes the example run's peak from {x.run_peak_bytes / GB:.1f} GB "
        f"to {x.checkpointed_peak_bytes / GB:.1f} GB, {x.checkpointing_saving_fraction:.0%} "
        f"less. Of the {x.checkpointed_peak_bytes / GB:.1f} GB left, "
        f"{x.logits_bytes / GB:.1f} GB ({x.logits_fraction_of_checkpointed:.0%}) are "
        f"{len(x.logits_tensors)} tensors the loss keeps over the whole vocabulary while its "
        "backward pass runs:",
        "",
    ]
    rows = []
    for t in x.logits_tensors:
        shape = " × ".join(f"{n:,}" for _, n in t.dims)
        names = " × ".join(name for name, _ in t.dims)
        rows.append(
            (t.name, f"{shape} ({names})", f"{t.bytes_per_value:g}", f"{t.total_bytes / GB:.2f}")
        )
    header = ("tensor", "shape", "bytes per value", "size (GB)")
    lines.append(markdown_table(header, rows, align="llll"))
    lines += [
        "",
        "Checkpointing recomputes what the blocks saved; these belong to the loss, so they "
        f"stay. With the cross-entropy computed in {x.loss_chunks} slices of tokens as well, "
        f"the peak is {x.both_peak_bytes / GB:.1f} GB, {x.both_saving_fraction:.0%} below "
        "the run.",
    ]
    return "\n".join(lines)


def steps_markdown(steps: tuple[Step, ...]) -> str:
    """A numbered list of steps, the free ones marked.

    >>> steps_markdown((Step(action="Smaller batch", detail="why", free=True),))
    '1. **Smaller batch** *(free)*'
    """
    return "\n".join(
        f"{i}. **{step.action}**{' *(free)*' if step.free else ''}"
        for i, step in enumerate(steps, 1)
    )


def checkpointing_savings(facts: Mapping[str, Any]) -> dict[str, str]:
    """Checkpointing's saving on the ladder's run (%), and two savings a reader expects instead.

    Reads checkpointing's own saving, ``ladder.checkpointing_saving_pct`` (the ladder
    table's row) or ``ladder.ckpt_saving_pct`` (the leftover block's; the same figure),
    ``ladder.both_saving_pct`` (checkpointing with a chunked loss), ``ladder.run_gb`` and
    ``ladder.run_persistent_gb``. ``everything`` is what checkpointing would save if
    every byte beyond the weights, gradients and optimizer state belonged to the blocks.

    >>> checkpointing_savings({"ladder.ckpt_saving_pct": 42.9, "ladder.both_saving_pct": 82.8,
    ...                        "ladder.run_gb": 21.15, "ladder.run_persistent_gb": 1.99})
    {'ckpt': '43', 'both': '83', 'everything': '91'}
    >>> checkpointing_savings({"ladder.checkpointing_saving_pct": 42.9,
    ...     "ladder.both_saving_pct": 82.8, "ladder.run_gb": 21.15,
    ...     "ladder.run_persistent_gb": 1.99})["ckpt"]
    '43'
    """
    own = facts.get("ladder.checkpointing_saving_pct", facts.get("ladder.ckpt_saving_pct"))
    if own is None:
        raise ValueError(
            "checkpointing_savings needs ladder.checkpointing_saving_pct (or "
            "ladder.ckpt_saving_pct): list it under facts"
        )
    ckpt, both = float(own), float(facts["ladder.both_saving_pct"])
    everything = 100 * (
        1 - float(facts["ladder.run_persistent_gb"]) / float(facts["ladder.run_gb"])
    )
    return {"ckpt": f"{ckpt:.0f}", "both": f"{both:.0f}", "everything": f"{everything:.0f}"}
