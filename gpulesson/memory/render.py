"""Render a memory budget: JSON, the terminal ledger, and the lessons' Markdown tables.

One job: turn what :mod:`gpulesson.memory.budget` and
:mod:`gpulesson.memory.capacity` compute (budgets, fit verdicts, lever tables,
capacity rows, card sizes) into output; nothing here computes a figure of its
own or calls ``estimate``: pages compute, then hand the results over.

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

from gpulesson.memory.budget import HEADROOM, Budget, CardVerdict, LeverTable, LogitsTensor
from gpulesson.memory.capacity import CapacityRow, CardUnits
from gpulesson.memory.comm import StepComm, formula
from gpulesson.memory.recipes import DTYPE_BYTES, Recipe
from gpulesson.units import GB, GIB, format_gb, format_gib


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


def to_markdown(budget: Budget) -> str:
    """The ledger as a Markdown table (GB = 10^9 bytes), then the phases."""
    out = ["| term | GB |", "|---|---:|"]
    out += [f"| {name} | {value / GB:,.3f} |" for name, value in _ledger_rows(budget)]
    out += [
        f"| of the peak, impl {budget.impl}: {t.name} | {t.peak_bytes / GB:,.3f} |"
        for t in budget.impl_terms
    ]
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
    return " + ".join(parts) + f" = {recipe.total_bytes_per_param:g}"


def recipes_markdown(budgets: dict[str, Budget]) -> str:
    """Named recipes side by side, with their per-parameter sums and totals in GB.

    >>> from gpulesson.memory.budget import estimate
    >>> "| bf16 |" in recipes_markdown({"bf16": estimate(7e9, preset="bf16")})
    True
    """
    out = [
        "| preset | weights | gradients | optimizer state | master "
        "| bytes per parameter | total GB |",
        "|---|---|---|---|---|---|---:|",
    ]
    for name, b in budgets.items():
        r = b.recipe
        states = r.optimizer_states
        opt = f"{states} x {r.state_dtype}" if states else "none"
        out.append(
            f"| {name} | {r.weight_dtype} | {r.grad_dtype or 'none'} | {opt} | "
            f"{r.master_dtype or 'none'} | {_per_param_arithmetic(r)} | {b.total_bytes / GB:,.1f} |"
        )
    return "\n".join(out)


def tradeoffs_markdown(recipes: dict[str, Recipe]) -> str:
    """Each recipe's bytes per parameter and what it gives up for them.

    >>> from gpulesson.memory.recipes import PRESETS
    >>> print(tradeoffs_markdown({"amp": PRESETS["amp"]}).splitlines()[-1])
    | amp | 16 | nothing in the update's precision: the norm for training, 16 bytes per parameter |
    """
    out = ["| preset | bytes per parameter | what it gives up |", "|---|---:|---|"]
    for name, r in recipes.items():
        out.append(f"| {name} | {r.total_bytes_per_param:g} | {r.gives_up} |")
    return "\n".join(out)


def capacity_markdown(rows: tuple[CapacityRow, ...], headroom: bool = False) -> str:
    """The capacity table in billions of parameters; cards in GB (10^9 bytes) and GiB.

    The column headers come from the rows' entries: their label and bytes per parameter.

    >>> from gpulesson.memory.capacity import capacity
    >>> print(capacity_markdown(capacity((24 * GB,))).splitlines()[-1])
    | 24 | 22.35 | 12.0 | 4.0 | 1.5 |
    """
    suffix = " with headroom" if headroom else ""
    heads = "".join(
        f" {e.label}, {e.bytes_per_param:g} B/param{suffix} (billion params) |"
        for e in (rows[0].entries if rows else ())
    )
    out = [
        f"| card (GB) | card (GiB) |{heads}",
        "|---:|---:|" + "---:|" * (len(rows[0].entries) if rows else 0),
    ]
    for r in rows:
        values = [e.params_with_headroom if headroom else e.params for e in r.entries]
        cells = " | ".join(f"{v / 1e9:.1f}" for v in values)
        out.append(f"| {r.card_bytes / GB:.3g} | {r.card_bytes / GIB:.2f} | {cells} |")
    return "\n".join(out)


def verdicts_markdown(verdicts: tuple[CardVerdict, ...]) -> str:
    """Fits / does not fit for each card, with the headroom rule applied.

    >>> from gpulesson.memory.budget import estimate, fits
    >>> print(verdicts_markdown((fits(estimate(7e9, preset="infer-fp16"), 24 * GIB),))[-18:])
    | fits | +9.1 GB |
    """
    out = ["| card | needs (peak + headroom) | verdict | spare |", "|---|---:|---|---:|"]
    for v in verdicts:
        out.append(
            f"| {format_gb(v.card_bytes)} ({format_gib(v.card_bytes)}) | "
            f"{format_gb(v.needed_bytes)} | {'fits' if v.fits else 'does not fit'} | "
            f"{v.spare_bytes / GB:+,.1f} GB |"
        )
    return "\n".join(out)


def levers_markdown(table: LeverTable) -> str:
    """Each lever's budget beside the base run's, in GB, with the change of the peak.

    >>> from gpulesson.memory.budget import lever_effects
    >>> t = lever_effects({"params": 7e9, "preset": "bf16"}, {"SGD": {"optimizer": "sgd"}})
    >>> print(levers_markdown(t).splitlines()[-1])
    | SGD | 14.00 | 14.00 | 0.00 | 0.00 | 28.00 | -67% |
    """
    start = table.base
    out = [
        "| lever | weights | gradients | optimizer | activations | peak GB | change |",
        "|---|---:|---:|---:|---:|---:|---:|",
        f"| none | {start.weights_bytes / GB:.2f} | {start.gradients_bytes / GB:.2f} | "
        f"{start.optimizer_bytes / GB:.2f} | {start.activations_bytes / GB:.2f} | "
        f"{start.total_bytes / GB:.2f} | |",
    ]
    for e in table.effects:
        b = e.budget
        out.append(
            f"| {e.label} | {b.weights_bytes / GB:.2f} | {b.gradients_bytes / GB:.2f} | "
            f"{b.optimizer_bytes / GB:.2f} | {b.activations_bytes / GB:.2f} | "
            f"{b.total_bytes / GB:.2f} | {e.peak_change:+.0%} |"
        )
    return "\n".join(out)


def ledgers_markdown(budgets: dict[str, Budget]) -> str:
    """The four ledgers of several budgets side by side, in GB (10^9 bytes).

    >>> from gpulesson.memory.budget import estimate
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


def card_units_markdown(rows: tuple[CardUnits, ...]) -> str:
    """What the same number means as GiB and as GB: card bytes and the model that fits.

    >>> from gpulesson.memory.capacity import card_units
    >>> print(card_units_markdown(card_units((24,), "fp16-fp32-grads")).splitlines()[-1])
    | 24 | 25.8 GB | 1.84 | 24.0 GB | 1.71 |
    """
    preset = rows[0].preset if rows else ""
    out = [
        f"| card size N | N GiB in GB | largest model, {preset} (billions) "
        f"| N GB in GB | largest model, {preset} (billions) |",
        "|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        out.append(
            f"| {r.size} | {format_gb(r.gib_card_bytes)} | {r.gib_card_params / 1e9:.2f} "
            f"| {format_gb(r.gb_card_bytes)} | {r.gb_card_params / 1e9:.2f} |"
        )
    return "\n".join(out)


def dtype_bytes_markdown(table: dict[str, float] = DTYPE_BYTES) -> str:
    """The bytes per number the calculator uses for each dtype.

    >>> print(dtype_bytes_markdown().splitlines()[2])
    | fp32 | 4 |
    """
    out = ["| dtype | bytes per number |", "|---|---:|"]
    out += [f"| {name} | {size:.4g} |" for name, size in table.items()]
    return "\n".join(out)


def weights_markdown(budgets: dict[str, Budget]) -> str:
    """One line per budget: its weights in GB (10^9 bytes).

    >>> from gpulesson.memory.budget import estimate
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


def logits_markdown(tensors: tuple[LogitsTensor, ...]) -> str:
    """The loss's vocabulary-wide tensors: role, shape with its bytes per value, and GB.

    >>> from gpulesson.memory.budget import TransformerShape, estimate, logits_terms
    >>> shape = TransformerShape(vocab=50257, seq=1024, hidden=768, heads=12, layers=12, batch=16)
    >>> print(logits_markdown(logits_terms(estimate(shape=shape, preset="fp32"))).splitlines()[2])
    | logits | forward transient | 16 x 1024 x 50257 x 4 B | 3.29 |
    """
    out = ["| tensor | role | shape x bytes per value | GB |", "|---|---|---|---:|"]
    for t in tensors:
        dims = " x ".join(f"{n}" for _, n in t.dims)
        out.append(
            f"| {t.name} | {t.role} | {dims} x {t.bytes_per_value:g} B | {t.total_bytes / GB:.2f} |"
        )
    return "\n".join(out)


def kv_cache_markdown(budgets: dict[str, Budget]) -> str:
    """KV caches of inference budgets in GiB, one row per attention variant, with KV heads.

    The first column is the caller's label for the variant (MHA, GQA, MQA, ...), then
    the KV heads against the attention heads, the tokens and requests the cache holds, and
    the cache in GiB (2^30 bytes): KV caches are powers of two, so GiB reads them exactly.

    >>> from gpulesson.memory.budget import TransformerShape, estimate
    >>> shape = TransformerShape(vocab=128256, seq=8192, hidden=4096, heads=32, layers=32,
    ...                          batch=1, kv_heads=8)
    >>> print(kv_cache_markdown({"GQA": estimate(8e9, shape=shape, preset="infer-fp16")}))
    | attention | KV heads / heads | context (tokens) | batch | KV cache (GiB) |
    |---|---:|---:|---:|---:|
    | GQA | 8 / 32 | 8,192 | 1 | 1.000 |
    """
    out = [
        "| attention | KV heads / heads | context (tokens) | batch | KV cache (GiB) |",
        "|---|---:|---:|---:|---:|",
    ]
    for label, b in budgets.items():
        if b.shape is None:
            raise ValueError(f"budget {label!r} has no shape, so no KV cache: give a shape")
        s = b.shape
        out.append(
            f"| {label} | {s.kv_head_count} / {s.heads} | {s.seq:,} | {s.batch:,} | "
            f"{b.kv_cache_bytes / GIB:,.3f} |"
        )
    return "\n".join(out)


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
