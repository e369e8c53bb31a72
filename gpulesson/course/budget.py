"""The lesson ``budget.md``: its renderers and texts.

Its pictures and tables: recipes, trade-offs, ledgers, levers, accumulation, inference,
the KV cache and the VRAM planner's cases.

Renderers take the frozen results of the topic packages and return Markdown, HTML or chart
markup; nothing here measures. See :mod:`gpulesson.course`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpulesson.course.common import figure
from gpulesson.memory.budget import Budget, LeverTable, LogitsTensor
from gpulesson.memory.planner import PlannerResult
from gpulesson.memory.recipes import Recipe
from gpulesson.tables import markdown_table
from gpulesson.units import GB, GIB


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
    header = (
        "preset",
        "weights",
        "gradients",
        "optimizer state",
        "master",
        "bytes per parameter",
        "total GB",
    )
    rows = []
    for name, b in budgets.items():
        r = b.recipe
        states = r.optimizer_states
        opt = f"{states} x {r.state_dtype}" if states else "none"
        rows.append(
            (
                name,
                r.weight_dtype,
                r.grad_dtype or "none",
                opt,
                r.master_dtype or "none",
                _per_param_arithmetic(r),
                f"{b.total_bytes / GB:,.1f}",
            )
        )
    return markdown_table(header, rows, align="llllllr")


def tradeoffs_markdown(recipes: dict[str, Recipe]) -> str:
    """Each recipe's bytes per parameter and what it gives up for them.

    >>> from gpulesson.memory.recipes import PRESETS
    >>> print(tradeoffs_markdown({"amp": PRESETS["amp"]}).splitlines()[-1])
    | amp | 16 | nothing in the update's precision: the norm for training, 16 bytes per parameter |
    """
    rows = [(name, f"{r.total_bytes_per_param:g}", r.gives_up) for name, r in recipes.items()]
    return markdown_table(("preset", "bytes per parameter", "what it gives up"), rows, align="lrl")


def levers_markdown(table: LeverTable) -> str:
    """Each lever's budget beside the base run's, in GB, with the change of the peak.

    >>> from gpulesson.memory.budget import lever_effects
    >>> t = lever_effects({"params": 7e9, "preset": "bf16"}, {"SGD": {"optimizer": "sgd"}})
    >>> print(levers_markdown(t).splitlines()[-1])
    | SGD | 14.00 | 14.00 | 0.00 | 0.00 | 28.00 | -67% |
    """
    budgets = [("none", table.base, "")]
    budgets += [(e.label, e.budget, f"{e.peak_change:+.0%}") for e in table.effects]
    rows = [
        (
            label,
            f"{b.weights_bytes / GB:.2f}",
            f"{b.gradients_bytes / GB:.2f}",
            f"{b.optimizer_bytes / GB:.2f}",
            f"{b.activations_bytes / GB:.2f}",
            f"{b.total_bytes / GB:.2f}",
            change,
        )
        for label, b, change in budgets
    ]
    return markdown_table(
        ("lever", "weights", "gradients", "optimizer", "activations", "peak GB", "change"), rows
    )


def ledgers_markdown(budgets: dict[str, Budget]) -> str:
    """The four ledgers of several budgets side by side, in GB (10^9 bytes).

    >>> from gpulesson.memory.budget import estimate
    >>> print(ledgers_markdown({"bf16": estimate(7e9, preset="bf16")}).splitlines()[-1])
    | bf16 | 14.000 | 14.000 | 56.000 | 84.00 |
    """
    header = ("preset", "weights (GB)", "gradients (GB)", "optimizer state (GB)", "total (GB)")
    rows = [
        (
            name,
            f"{b.weights_bytes / GB:.3f}",
            f"{b.gradients_bytes / GB:.3f}",
            f"{b.optimizer_bytes / GB:.3f}",
            f"{b.total_bytes / GB:.2f}",
        )
        for name, b in budgets.items()
    ]
    return markdown_table(header, rows)


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
    rows = [
        (
            name,
            f"{b.weights_bytes / GB:.1f}",
            f"{b.kv_cache_bytes / GB:.1f}",
            f"{b.total_bytes / GB:.1f}",
        )
        for name, b in budgets.items()
    ]
    return markdown_table(("preset", "weights (GB)", "KV cache (GB)", "peak (GB)"), rows)


def logits_markdown(tensors: tuple[LogitsTensor, ...]) -> str:
    """The loss's vocabulary-wide tensors: role, shape with its bytes per value, and GB.

    >>> from gpulesson.memory.budget import TransformerShape, estimate, logits_terms
    >>> shape = TransformerShape(vocab=50257, seq=1024, hidden=768, heads=12, layers=12, batch=16)
    >>> print(logits_markdown(logits_terms(estimate(shape=shape, preset="fp32"))).splitlines()[2])
    | logits | forward transient | 16 x 1024 x 50257 x 4 B | 3.29 |
    """
    rows = []
    for t in tensors:
        dims = " x ".join(f"{n}" for _, n in t.dims)
        rows.append(
            (t.name, t.role, f"{dims} x {t.bytes_per_value:g} B", f"{t.total_bytes / GB:.2f}")
        )
    header = ("tensor", "role", "shape x bytes per value", "GB")
    return markdown_table(header, rows, align="lllr")


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
    rows = []
    for label, b in budgets.items():
        if b.shape is None:
            raise ValueError(f"budget {label!r} has no shape, so no KV cache: give a shape")
        s = b.shape
        rows.append(
            (
                label,
                f"{s.kv_head_count} / {s.heads}",
                f"{s.seq:,}",
                f"{s.batch:,}",
                f"{b.kv_cache_bytes / GIB:,.3f}",
            )
        )
    header = ("attention", "KV heads / heads", "context (tokens)", "batch", "KV cache (GiB)")
    return markdown_table(header, rows)


def planner_markdown(results: tuple[PlannerResult, ...]) -> str:
    """The planner's numbers for a few cases, as the table shown without JavaScript.

    Columns are in GB (10**9 bytes): what is alive at the step's peak, then the
    peak; a card fits when the peak plus the CUDA context and allocator slack is
    at most its size.
    """
    cards = [c.card_bytes for c in results[0].fits] if results else []
    header = [
        "case",
        "peak phase",
        "weights (GB)",
        "master (GB)",
        "optimizer state (GB)",
        "gradients (GB)",
        "activations (GB)",
        "temporaries (GB)",
        "KV cache (GB)",
        "peak (GB)",
        *(f"{c / 1e9:g} GB" for c in cards),
    ]
    rows = []
    for p in results:
        x = p.inputs
        label = f"{x.params / 1e9:g}B, {x.recipe}, batch {x.batch}×{x.sequence}"
        if x.checkpointing == "full":
            label += ", checkpointed"
        terms = (
            p.weights_bytes,
            p.master_bytes,
            p.optimizer_bytes,
            p.gradients_bytes,
            p.activations_bytes,
            p.temporaries_bytes,
            p.kv_cache_bytes,
            p.total_bytes,
        )
        cells = [f"{t / 1e9:.1f}" for t in terms]
        verdicts = ["fits" if c.fits else "no" for c in p.fits]
        rows.append([label, p.peak_phase, *cells, *verdicts])
    return markdown_table(header, rows, align="ll" + "r" * 8 + "l" * len(cards))


def kv_cache_sizes(facts: Mapping[str, Any]) -> dict[str, str]:
    """A GQA KV cache (GiB), and what three misreadings of the formula give instead.

    Reads ``budget.kv_gqa_gib`` (the page's cache with grouped-query attention)
    and ``budget.kv_mha_gib`` (every head keeping K and V). ``k_only`` forgets
    the factor 2 for keys and values; ``fp32`` counts 4 bytes per value instead
    of fp16's 2; ``mha`` forgets that KV heads are shared.

    >>> kv_cache_sizes({"budget.kv_gqa_gib": 1.0, "budget.kv_mha_gib": 4.0})
    {'gqa': '1', 'mha': '4', 'k_only': '0.5', 'fp32': '2'}
    >>> kv_cache_sizes({"budget.kv_gqa_gib": 1.0, "budget.kv_mha_gib": 2.0})
    Traceback (most recent call last):
    ...
    ValueError: kv_cache_sizes: the MHA cache (2) is twice the GQA one, so two options read alike
    """
    gqa, mha = float(facts["budget.kv_gqa_gib"]), float(facts["budget.kv_mha_gib"])
    if mha in (gqa, 2 * gqa):
        raise ValueError(
            f"kv_cache_sizes: the MHA cache ({mha:g}) is "
            f"{'equal to' if mha == gqa else 'twice'} the GQA one, so two options read alike"
        )
    return {
        "gqa": figure(gqa),
        "mha": figure(mha),
        "k_only": figure(gqa / 2),
        "fp32": figure(2 * gqa),
    }
