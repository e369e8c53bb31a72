"""Render a :class:`~gpulesson.errors.diagnose.Diagnosis`: JSON, terminal text, Markdown.

One job: turn what :func:`gpulesson.errors.diagnose.diagnose` returns into output.
The Markdown renderers also diagnose the constructed messages of
:data:`gpulesson.errors.examples.EXAMPLES` for the lessons.

Used by the lessons ``lessons/oom.md`` and ``lessons/cuda-errors.md``, and by
``gpulesson diagnose``.

>>> d = diagnose("AssertionError: Torch not compiled with CUDA enabled")
>>> to_text(d).splitlines()[0]
'Kind: cpu_only_wheel (CPU-only wheel: this torch build has no CUDA at all)'
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from gpulesson.errors.diagnose import Diagnosis, diagnose, format_bytes
from gpulesson.errors.examples import EXAMPLES

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


def to_markdown(diagnosis: Diagnosis) -> str:
    """A Markdown report: numbers table, verdict admonition, numbered steps."""
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
    for i, step in enumerate(diagnosis.steps, 1):
        tag = " *(free)*" if step.free else ""
        lines.append(f"{i}. **{step.action}**{tag}: {step.detail}")
    return "\n".join(lines)


def example_markdown(name: str) -> str:
    """An example message from :data:`EXAMPLES` as a labelled text block, then its diagnosis."""
    if name not in EXAMPLES:
        raise ValueError(f"no example named {name!r}: choose one of {', '.join(EXAMPLES)}")
    message = EXAMPLES[name]
    block = "\n".join("    " + line for line in message.splitlines())
    return (
        f'???+ example "Example message ({name}): constructed for this lesson"\n'
        f"    ```text\n{block}\n    ```\n\n" + to_markdown(diagnose(message))
    )


def examples_table_markdown(names: tuple[str, ...] | None = None) -> str:
    """Diagnose several example messages and tabulate kind, verdict and key numbers."""
    names = names or tuple(EXAMPLES)
    lines = [
        "| example | kind | verdict | requested / free / total | first step |",
        "|---|---|---|---|---|",
    ]
    for name in names:
        if name not in EXAMPLES:
            raise ValueError(f"no example named {name!r}: choose one of {', '.join(EXAMPLES)}")
        d = diagnose(EXAMPLES[name])
        numbers = (d.requested_bytes, d.free_bytes, d.total_bytes)
        sizes = " / ".join(format_bytes(n) for n in numbers) if any(numbers) else "—"
        lines.append(
            f"| {name} | {d.kind.replace('_', ' ')} | {d.verdict or '—'} | {sizes} | "
            f"{_cell(d.steps[0].action)} |"
        )
    return "\n".join(lines)
