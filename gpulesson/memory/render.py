"""Render a memory budget: JSON, the terminal ledger, and the lessons' Markdown tables.

One job: turn what :mod:`gpulesson.memory.budget` computes (a :class:`Budget`,
capacity rows, the named recipes, fit verdicts) into output; nothing here
computes a figure of its own.

Used by the lessons ``lessons/memory.md``, ``lessons/budget.md`` and
``lessons/capacity.md``, and by ``gpulesson budget``.

>>> from gpulesson.memory.budget import estimate
>>> to_text(estimate(7e9, preset="bf16")).splitlines()[0]
'preset bf16: 7,000,000,000 parameters (7,000,000,000 trainable)'
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from gpulesson.memory.budget import (
    DTYPE_BYTES,
    HEADROOM,
    OPTIMIZER_STATES,
    Budget,
    CapacityRow,
    Recipe,
    estimate,
    fits,
    max_params,
)
from gpulesson.units import GB, GIB, format_gb, format_gib


def to_dict(budget: Budget) -> dict[str, Any]:
    """A JSON-ready dict; the ledger terms and ``total_bytes`` sit at the top level."""
    data = asdict(budget)
    data["phases"] = [
        {"name": p.name, "total_bytes": p.total_bytes, "alive_bytes": p.alive_bytes}
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
    return "\n".join(lines)


def to_markdown(budget: Budget) -> str:
    """The ledger as a Markdown table (GB = 10^9 bytes), then the phases."""
    out = ["| term | GB |", "|---|---:|"]
    out += [f"| {name} | {value / GB:,.3f} |" for name, value in _ledger_rows(budget)]
    out.append(
        f"| **peak of the step ({budget.peak_phase})** | **{budget.total_bytes / GB:,.3f}** |"
    )
    out += ["", "| phase | alive at its peak | GB |", "|---|---|---:|"]
    for phase in budget.phases:
        alive = ", ".join(f"{k} {v / GB:,.3f}" for k, v in phase.alive_bytes.items() if v)
        mark = " (peak)" if phase.name == budget.peak_phase else ""
        out.append(f"| {phase.name}{mark} | {alive} | {phase.total_bytes / GB:,.3f} |")
    return "\n".join(out)


def _per_param_arithmetic(recipe: Recipe) -> str:
    bpp = recipe.bytes_per_param()
    parts = []
    for key, label in (
        ("weights", "w"),
        ("gradients", "g"),
        ("optimizer", "opt"),
        ("master", "master"),
    ):
        if bpp[key]:
            parts.append(f"{bpp[key]:g} ({label})")
    return " + ".join(parts) + f" = {sum(bpp.values()):g}"


def recipes_markdown(params: float, presets: tuple[str, ...]) -> str:
    """The named recipes side by side for one model size, with their per-parameter sums.

    >>> "| bf16 |" in recipes_markdown(7e9, ("bf16",))
    True
    """
    out = [
        "| preset | weights | gradients | optimizer state | master "
        "| bytes per parameter | total GB |",
        "|---|---|---|---|---|---|---:|",
    ]
    for name in presets:
        b = estimate(params, preset=name)
        r = b.recipe
        states = OPTIMIZER_STATES.get(r.optimizer or "", 0)
        opt = f"{states} x {r.state_dtype}" if states else "none"
        out.append(
            f"| {name} | {r.weight_dtype} | {r.grad_dtype or 'none'} | {opt} | "
            f"{r.master_dtype or 'none'} | {_per_param_arithmetic(r)} | {b.total_bytes / GB:,.1f} |"
        )
    return "\n".join(out)


def capacity_markdown(rows: tuple[CapacityRow, ...], headroom: bool = False) -> str:
    """The capacity table in billions of parameters; cards in GB (10^9 bytes) and GiB."""
    suffix = " with headroom" if headroom else ""
    out = [
        f"| card (GB) | card (GiB) | inference fp16, 2 B/param{suffix} (billion params) "
        f"| SGD training, 6 B/param{suffix} (billion params) "
        f"| Adam training, 14 B/param{suffix} (billion params) |",
        "|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        values = (
            (r.inference_params_headroom, r.sgd_params_headroom, r.adam_params_headroom)
            if headroom
            else (r.inference_params, r.sgd_params, r.adam_params)
        )
        cells = " | ".join(f"{v / 1e9:.1f}" for v in values)
        out.append(f"| {r.card_bytes / GB:g} | {r.card_bytes / GIB:.2f} | {cells} |")
    return "\n".join(out)


def verdicts_markdown(budget: Budget, cards_bytes: tuple[int, ...]) -> str:
    """Fits / does not fit for each card, with the headroom rule applied."""
    out = ["| card | needs (peak + headroom) | verdict | spare |", "|---|---:|---|---:|"]
    for card in cards_bytes:
        v = fits(budget, card)
        out.append(
            f"| {format_gb(card)} ({format_gib(card)}) | {format_gb(v.needed_bytes)} | "
            f"{'fits' if v.fits else 'does not fit'} | {v.spare_bytes / GB:+,.1f} GB |"
        )
    return "\n".join(out)


def levers_markdown(base: dict[str, Any], levers: list[tuple[str, dict[str, Any]]]) -> str:
    """Each fix lever as a change to one budget: ``estimate(**base, **change)`` vs the base."""
    start = estimate(**base)
    out = [
        "| lever | weights | gradients | optimizer | activations | peak GB | change |",
        "|---|---:|---:|---:|---:|---:|---:|",
        f"| none | {start.weights_bytes / GB:.2f} | {start.gradients_bytes / GB:.2f} | "
        f"{start.optimizer_bytes / GB:.2f} | {start.activations_bytes / GB:.2f} | "
        f"{start.total_bytes / GB:.2f} | |",
    ]
    for label, change in levers:
        b = estimate(**{**base, **change})
        out.append(
            f"| {label} | {b.weights_bytes / GB:.2f} | {b.gradients_bytes / GB:.2f} | "
            f"{b.optimizer_bytes / GB:.2f} | {b.activations_bytes / GB:.2f} | "
            f"{b.total_bytes / GB:.2f} | {b.total_bytes / start.total_bytes - 1:+.0%} |"
        )
    return "\n".join(out)


def ledgers_markdown(budgets: dict[str, Budget]) -> str:
    """The four ledgers of several budgets side by side, in GB (10^9 bytes).

    >>> print(ledgers_markdown({"bf16": estimate(7e9, preset="bf16")}).splitlines()[-1])
    | bf16 | 14.000 | 14.000 | 56.000 | 84.00 |
    """
    out = [
        "| preset | weights (GB) | gradients (GB) | optimizer state (GB) | total (GB) |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, b in budgets.items():
        out.append(
            f"| {name} | {b.weights_bytes / GB:.3f} | {b.gradients_bytes / GB:.3f} | "
            f"{b.optimizer_bytes / GB:.3f} | {b.total_bytes / GB:.2f} |"
        )
    return "\n".join(out)


def card_units_markdown(sizes: tuple[int, ...], preset: str) -> str:
    """What the same number means as GiB and as GB: card bytes and the model that fits.

    >>> print(card_units_markdown((24,), "fp16-fp32-grads").splitlines()[-1])
    | 24 | 25.8 GB | 1.84 | 24.0 GB | 1.71 |
    """
    out = [
        f"| card size N | N GiB in GB | largest model, {preset} (billions) "
        f"| N GB in GB | largest model, {preset} (billions) |",
        "|---:|---:|---:|---:|---:|",
    ]
    for n in sizes:
        gib_card, gb_card = n * GIB, n * GB
        out.append(
            f"| {n} | {format_gb(gib_card)} | {max_params(gib_card, preset) / 1e9:.2f} "
            f"| {format_gb(gb_card)} | {max_params(gb_card, preset) / 1e9:.2f} |"
        )
    return "\n".join(out)


def dtype_bytes_markdown() -> str:
    """The bytes per number the calculator uses for each dtype.

    >>> print(dtype_bytes_markdown().splitlines()[2])
    | fp32 | 4 |
    """
    out = ["| dtype | bytes per number |", "|---|---:|"]
    out += [f"| {name} | {size:.4g} |" for name, size in DTYPE_BYTES.items()]
    return "\n".join(out)


def weights_markdown(budgets: dict[str, Budget]) -> str:
    """One line per budget: its weights in GB (10^9 bytes).

    >>> weights_markdown({"infer-int8": estimate(7e9, preset="infer-int8")})
    '- `infer-int8`: 7.0 GB of weights'
    """
    return "\n".join(
        f"- `{name}`: {b.weights_bytes / GB:.1f} GB of weights" for name, b in budgets.items()
    )


def accumulation_markdown(budgets: dict[int, Budget]) -> str:
    """Peak memory per micro-batch size, with the effective batch each gives.

    ``budgets`` maps accumulation steps to the budget of that run.
    """
    out = []
    for steps, b in budgets.items():
        micro = b.shape.batch if b.shape else "?"
        out.append(
            f"- micro-batch {micro} x {steps} steps: effective batch {b.effective_batch}, "
            f"peak {b.total_bytes / GB:.1f} GB ({b.peak_phase})"
        )
    return "\n".join(out)


def inference_markdown(budgets: dict[str, Budget]) -> str:
    """Inference budgets: weights, KV cache and peak, in GB (10^9 bytes)."""
    out = ["| preset | weights (GB) | KV cache (GB) | peak (GB) |", "|---|---:|---:|---:|"]
    for name, b in budgets.items():
        out.append(
            f"| {name} | {b.weights_bytes / GB:.1f} | {b.kv_cache_bytes / GB:.1f} | "
            f"{b.total_bytes / GB:.1f} |"
        )
    return "\n".join(out)
