"""Render a memory budget for ``gpulesson budget``: JSON and the terminal ledger.

One job: turn what :mod:`gpulesson.memory.budget` and
:mod:`gpulesson.memory.capacity` compute (budgets, fit verdicts, lever tables,
capacity rows, card sizes) into output; nothing here computes a figure of its
own or calls ``estimate``: pages compute, then hand the results over.

Used by ``gpulesson budget``. The lessons' Markdown tables of the same results live in
:mod:`gpulesson.course.memory`, :mod:`gpulesson.course.budget` and
:mod:`gpulesson.course.capacity`.

>>> from gpulesson.memory.budget import estimate
>>> to_text(estimate(7e9, preset="bf16")).splitlines()[0]
'preset bf16: 7,000,000,000 parameters (7,000,000,000 trainable)'
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from gpulesson.memory.budget import HEADROOM, Budget
from gpulesson.memory.comm import StepComm, formula
from gpulesson.units import format_gb, format_gib


def to_dict(budget: Budget) -> dict[str, Any]:
    """A JSON-ready dict; the ledger terms and ``total_bytes`` sit at the top level."""
    data = asdict(budget)
    data["phases"] = [
        {
            "name": p.name,
            "total_bytes": p.total_bytes,
            "alive_bytes": p.alive_bytes,
            "point": p.point,
        }
        for p in budget.phases
    ]
    data["with_headroom_bytes"] = budget.with_headroom_bytes
    data["headroom_rule"] = HEADROOM
    return data


def to_json(budget: Budget) -> str:
    """The budget as one JSON object."""
    return json.dumps(to_dict(budget), indent=2)


def _ledger_rows(budget: Budget) -> list[tuple[str, int]]:
    rows = [
        ("weights", budget.weights_bytes),
        ("gradients", budget.gradients_bytes),
        ("optimizer state", budget.optimizer_bytes),
        ("fp32 master weights", budget.master_bytes),
        ("activations (saved for backward)", budget.activations_bytes),
        ("temporaries (largest short-lived)", budget.temporaries_bytes),
        ("KV cache", budget.kv_cache_bytes),
    ]
    return [(name, value) for name, value in rows if value or name in ("weights",)]


def _impl_lines(budget: Budget, width: int) -> list[str]:
    """The terms an implementation adds, each with its share of the peak."""
    if not budget.impl_terms:
        return []
    lines = [f"  of the peak, impl {budget.impl} adds:"]
    for term in budget.impl_terms:
        lines.append(
            f"    {term.name:<{width - 2}}{format_gb(term.peak_bytes, 2):>12}   {term.meaning}"
        )
    return lines


def to_text(budget: Budget) -> str:
    """A plain-text ledger, peak and headroom lines, for the terminal."""
    peak_label = f"peak ({budget.peak_phase})"
    width = max(len(n) for n, _ in [*_ledger_rows(budget), (peak_label, 0)]) + 2
    lines = [
        f"preset {budget.preset}: {budget.parameters:,} parameters "
        f"({budget.trainable_parameters:,} trainable)"
    ]
    for name, value in _ledger_rows(budget):
        lines.append(f"  {name:<{width}}{format_gb(value, 2):>12}")
    lines += _impl_lines(budget, width)
    lines.append(
        f"  {peak_label:<{width}}{format_gb(budget.total_bytes, 2):>12}"
        f"   = {format_gib(budget.total_bytes, 2)}"
    )
    lines.append(
        f"  headroom, not in the total: CUDA context {format_gb(budget.cuda_context_bytes, 2)}, "
        f"allocator slack {format_gb(budget.allocator_slack_bytes, 2)}"
    )
    lines.append(
        f"  a card needs {format_gb(budget.with_headroom_bytes, 2)} "
        f"({format_gib(budget.with_headroom_bytes, 2)})"
    )
    lines += [f"  note: {note}" for note in budget.notes]
    return "\n".join(lines)


# --- communication per step (``gpulesson budget --gpus N``; lessons/multi-gpu.md) ---------


def comm_to_dict(comm: StepComm) -> dict[str, Any]:
    """The step's communication for ``--json``: ``comm_bytes_per_step`` and its parts.

    >>> from gpulesson.memory.comm import step_comm
    >>> d = comm_to_dict(step_comm(gpus=8, zero=3, gradient_bytes=8, parameter_bytes=8))
    >>> d["comm_bytes_per_step"], d["comm_formula"], len(d["comm_collectives"])
    (21, 'A x (N-1)/N x (2P + G)', 3)
    """
    return {
        "comm_bytes_per_step": comm.sent_bytes,
        "comm_data_parallel_bytes": comm.data_parallel_bytes,
        "comm_formula": formula(comm.zero_stage),
        "comm_collectives": [asdict(c) for c in comm.collectives],
    }


def comm_to_text(comm: StepComm) -> str:
    """Lines for the terminal: bytes each GPU sends per optimizer step, then each collective.

    >>> from gpulesson.memory.comm import step_comm
    >>> c = step_comm(gpus=8, zero=3, gradient_bytes=14e9, parameter_bytes=14e9)
    >>> print(comm_to_text(c).splitlines()[0])
    communication per optimizer step, each GPU sends 36.75 GB (ZeRO-3 over 8 GPUs: \
A x (N-1)/N x (2P + G); 1.50x plain data parallel's 24.50 GB)
    """
    stage = f"ZeRO-{comm.zero_stage}" if comm.zero_stage else "data parallel"
    lines = [
        f"communication per optimizer step, each GPU sends {format_gb(comm.sent_bytes, 2)} "
        f"({stage} over {comm.gpus} GPUs: {formula(comm.zero_stage)}; "
        f"{comm.ratio_to_data_parallel:.2f}x plain data parallel's "
        f"{format_gb(comm.data_parallel_bytes, 2)})"
    ]
    for c in comm.collectives:
        lines.append(
            f"  {c.collective} of the {c.tensor} ({c.phase}) x{c.times}: "
            f"{format_gb(c.message_bytes, 2)} each, sends {format_gb(c.sent_bytes, 2)}"
        )
    return "\n".join(lines)
