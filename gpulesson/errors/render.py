"""Render diagnoses for ``gpulesson diagnose``: JSON and terminal text.

One job: turn what :mod:`gpulesson.errors.diagnose` and
:mod:`gpulesson.errors.fix_ladder` return into output. Renderers take results
and format them; they never diagnose, estimate or read files themselves (a
page diagnoses its example messages, then hands the diagnoses here).

Used by ``gpulesson diagnose``. The lessons' Markdown of diagnoses and of the fix ladder
lives in :mod:`gpulesson.course.oom` and :mod:`gpulesson.course.fix_ladder`.

>>> from gpulesson.errors.diagnose import diagnose
>>> d = diagnose("AssertionError: Torch not compiled with CUDA enabled")
>>> to_text(d).splitlines()[0]
'Kind: cpu_only_wheel (CPU-only wheel: this torch build has no CUDA at all)'
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from gpulesson.errors.diagnose import Diagnosis
from gpulesson.errors.numbers import format_bytes

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
