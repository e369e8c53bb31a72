"""Render diagnoses and the fix ladder: JSON, terminal text, Markdown.

One job: turn what :mod:`gpulesson.errors.diagnose` and
:mod:`gpulesson.errors.fix_ladder` return into output. Renderers take results
and format them; they never diagnose, estimate or read files themselves (a
page diagnoses its example messages, then hands the diagnoses here).

Used by the lessons ``lessons/oom.md``, ``lessons/fix-ladder.md`` and
``lessons/cuda-errors.md``, and by ``gpulesson diagnose``.

>>> from gpulesson.errors.diagnose import diagnose
>>> d = diagnose("AssertionError: Torch not compiled with CUDA enabled")
>>> to_text(d).splitlines()[0]
'Kind: cpu_only_wheel (CPU-only wheel: this torch build has no CUDA at all)'
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from gpulesson.errors.diagnose import Diagnosis
from gpulesson.errors.fix_ladder import FIX_LADDER, CheckpointingLeftover, LadderRow, Rung, Step
from gpulesson.errors.numbers import format_bytes
from gpulesson.units import GB

_NUMBER_ROWS: tuple[tuple[str, str], ...] = (
    ("requested_bytes", "Requested (one allocation)"),
    ("total_bytes", "Total on the device"),
    ("free_bytes", "Free on the device"),
    ("limit_bytes", "Limit for this process"),
    ("allocated_bytes", "Allocated by PyTorch (live tensors)"),
    ("reserved_bytes", "Reserved by PyTorch (allocated + cache)"),
    ("reserved_unallocated_bytes", "Reserved but unallocated (cache)"),
    ("process_bytes", "This process, including non-PyTorch memory"),
    ("outside_process_bytes", "Held outside this process"),
    ("other_allocations_bytes", "Other allocations (MPS)"),
)


def to_dict(diagnosis: Diagnosis) -> dict[str, Any]:
    """The diagnosis as plain data."""
    return asdict(diagnosis)


def to_json(diagnosis: Diagnosis) -> str:
    """The diagnosis as one JSON object."""
    return json.dumps(to_dict(diagnosis), indent=2)


def number_rows(diagnosis: Diagnosis) -> list[tuple[str, str]]:
    """The numbers the message states, as (label, value) rows; absent ones left out."""
    rows = []
    for field, label in _NUMBER_ROWS:
        value = getattr(diagnosis, field)
        if field == "outside_process_bytes" and diagnosis.process_bytes is None:
            label = "Held outside PyTorch's pool (other processes, CUDA context)"
        if value is not None:
            rows.append((label, f"{format_bytes(value)} ({value:,} bytes)"))
    if diagnosis.collective is not None:
        rows.append(("Collective", diagnosis.collective))
    if diagnosis.rank is not None:
        rows.append(("Rank that reported it", str(diagnosis.rank)))
    if diagnosis.timeout_s is not None:
        rows.append(("Timeout", f"{diagnosis.timeout_s:,.1f} s"))
    if diagnosis.elapsed_s is not None:
        rows.append(("Ran for", f"{diagnosis.elapsed_s:,.1f} s"))
    return rows


def to_text(diagnosis: Diagnosis) -> str:
    """A plain report for the terminal."""
    lines = [f"Kind: {diagnosis.kind} ({diagnosis.title})"]
    if diagnosis.verdict:
        lines.append(f"Verdict: {diagnosis.verdict}")
    if diagnosis.wording:
        lines.append(f"Wording: {diagnosis.wording}")
    if diagnosis.device:
        lines.append(f"Device: {diagnosis.device}")
    rows = number_rows(diagnosis)
    if rows:
        width = max(len(label) for label, _ in rows)
        lines += ["", "Numbers in the message:"]
        lines += [f"  {label.ljust(width)}  {value}" for label, value in rows]
    lines += ["", diagnosis.summary]
    if diagnosis.detail:
        lines.append(diagnosis.detail)
    lines += [f"Note: {note}" for note in diagnosis.notes]
    lines += ["", "What to do, in order:"]
    for i, step in enumerate(diagnosis.steps, 1):
        tag = " [free]" if step.free else ""
        lines.append(f"  {i}. {step.action}{tag}: {step.detail}")
    return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _steps_lines(steps: tuple[Step, ...], ladder_href: str | None) -> list[str]:
    """The numbered steps; with ``ladder_href``, the fix ladder's rungs as one linked step.

    >>> from gpulesson.errors.fix_ladder import oom_steps
    >>> lines = _steps_lines(oom_steps("cuda_oom", "exhaustion"), "fix-ladder.md")
    >>> len(lines), lines[-1].startswith("1. **Climb the [fix ladder](fix-ladder.md)**")
    (1, True)
    """
    rungs = {rung.name: i for i, rung in enumerate(FIX_LADDER, 1)}
    lines: list[str] = []
    ladder: list[Step] = []

    def flush() -> None:
        if ladder:
            first, last = rungs[ladder[0].action], rungs[ladder[-1].action]
            lines.append(
                f"{len(lines) + 1}. **Climb the [fix ladder]({ladder_href})**: rungs {first} "
                f'to {last} in order, from "{ladder[0].action}" to "{ladder[-1].action}", '
                "each priced there."
            )
            ladder.clear()

    for step in steps:
        if ladder_href is not None and step.action in rungs:
            ladder.append(step)
            continue
        flush()
        tag = " *(free)*" if step.free else ""
        lines.append(f"{len(lines) + 1}. **{step.action}**{tag}: {step.detail}")
    flush()
    return lines


def to_markdown(diagnosis: Diagnosis, ladder_href: str | None = None) -> str:
    """A Markdown report: numbers table, verdict admonition, numbered steps.

    ``ladder_href`` links the fix ladder's rungs to the lesson that prices them, as one
    step, instead of listing them all (a page with several verdicts then repeats one line).
    """
    lines = [f"**Kind:** `{diagnosis.kind}`: {diagnosis.title}."]
    if diagnosis.wording:
        lines[0] += f" Wording: {diagnosis.wording}."
    rows = number_rows(diagnosis)
    if rows:
        lines += ["", "| number in the message | value |", "|---|---|"]
        lines += [f"| {label} | {_cell(value)} |" for label, value in rows]
    kind = "warning" if diagnosis.verdict else "info"
    head = f"Verdict: {diagnosis.verdict}" if diagnosis.verdict else "Diagnosis"
    lines += ["", f'!!! {kind} "{head}"', f"    {diagnosis.summary}"]
    if diagnosis.detail:
        lines += ["", f"    {diagnosis.detail}"]
    for note in diagnosis.notes:
        lines += ["", f"    {note}"]
    lines += ["", "What to do, in order:", ""]
    lines += _steps_lines(diagnosis.steps, ladder_href)
    return "\n".join(lines)


def example_markdown(
    name: str, message: str, diagnosis: Diagnosis, ladder_href: str | None = None
) -> str:
    """An example message as a labelled text block, then its diagnosis (:func:`to_markdown`).

    >>> from gpulesson.errors.diagnose import diagnose
    >>> text = "RuntimeError: CUDA error: an illegal memory access was encountered"
    >>> example_markdown("demo", text, diagnose(text)).splitlines()[0]
    '???+ example "Example message (demo): constructed for this lesson"'
    """
    block = "\n".join("    " + line for line in message.splitlines())
    return (
        f'???+ example "Example message ({name}): constructed for this lesson"\n'
        f"    ```text\n{block}\n    ```\n\n" + to_markdown(diagnosis, ladder_href)
    )


def examples_table_markdown(diagnoses: Mapping[str, Diagnosis]) -> str:
    """Tabulate diagnosed example messages: kind, verdict, key numbers, first step."""
    lines = [
        "| example | kind | verdict | requested / free / total | first step |",
        "|---|---|---|---|---|",
    ]
    for name, d in diagnoses.items():
        numbers = (d.requested_bytes, d.free_bytes, d.total_bytes)
        sizes = " / ".join(format_bytes(n) for n in numbers) if any(numbers) else "—"
        lines.append(
            f"| {name} | {d.kind.replace('_', ' ')} | {d.verdict or '—'} | {sizes} | "
            f"{_cell(d.steps[0].action)} |"
        )
    return "\n".join(lines)


# --- the fix ladder ------------------------------------------------------------------


def ladder_markdown(rungs: tuple[Rung, ...]) -> str:
    """The fix ladder as a table, in order, with what each rung cuts and costs.

    >>> from gpulesson.errors.fix_ladder import FIX_LADDER
    >>> ladder_markdown(FIX_LADDER).splitlines()[2].startswith("| 1 | Release references")
    True
    """
    lines = [
        "| rung | what to try | what it cuts | what it costs | free? |",
        "|---|---|---|---|---|",
    ]
    for i, rung in enumerate(rungs, 1):
        free = "yes" if rung.free else "no"
        lines.append(f"| {i} | {rung.name} | {rung.what_it_cuts} | {rung.cost} | {free} |")
    return "\n".join(lines)


def ladder_budget_markdown(rows: tuple[LadderRow, ...]) -> str:
    """The rungs' effect on one example run's peak memory, as a table in decimal GB."""
    lines = [
        "| rung | change to the example run | peak per GPU (GB) | vs the run | effective batch |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        delta = "—" if row.vs_run_fraction is None else f"{row.vs_run_fraction:+.0%}"
        batch = row.effective_batch if row.effective_batch is not None else "—"
        lines.append(
            f"| {row.rung} | {row.change} | {row.peak_bytes / GB:.1f} | {delta} | {batch} |"
        )
    return "\n".join(lines)


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
        "| tensor | shape | bytes per value | size (GB) |",
        "|---|---|---|---|",
    ]
    for t in x.logits_tensors:
        shape = " × ".join(f"{n:,}" for _, n in t.dims)
        names = " × ".join(name for name, _ in t.dims)
        lines.append(
            f"| {t.name} | {shape} ({names}) | {t.bytes_per_value:g} | {t.total_bytes / GB:.2f} |"
        )
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
