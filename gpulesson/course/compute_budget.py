"""The lesson ``compute-budget.md``: its renderers and texts.

Its pictures and tables: FLOP counts, step timing, MFU, plans and the Chinchilla table.

Renderers take the frozen results of the topic packages and return Markdown, HTML or chart
markup; nothing here measures. See :mod:`gpulesson.course`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from gpulesson.course.common import about
from gpulesson.memory.compute import MfuReading, TrainingPlan

if TYPE_CHECKING:  # torch-free at run time: these are only read
    from gpulesson.memory.compute_step import (
        GpuMfu,
        LinearCount,
        RecomputeCount,
        SdpaGap,
        StepCount,
        StepTiming,
    )
from gpulesson.memory.compute_render import flops_text
from gpulesson.tables import markdown_table
from gpulesson.text import inert


def _rate_unit(values: Sequence[float]) -> tuple[str, float]:
    """TFLOP/s when the largest value is at least 10^12 FLOP/s, else GFLOP/s."""
    return ("TFLOP/s", 1e12) if max(values, default=0) >= 1e12 else ("GFLOP/s", 1e9)


def linear_markdown(count: LinearCount) -> str:
    """One linear layer's forward and backward FLOPs: the formula beside FlopCounterMode."""
    f = count.formula
    t, i, o = f.tokens, f.in_features, f.out_features
    header = ("pass", "matmuls (shapes)", "formula", "FLOPs (formula)", "FLOPs (FlopCounterMode)")
    rows = [
        (
            "forward",
            f"Y = X W: ({t} × {i}) @ ({i} × {o})",
            "2 × tokens × in × out",
            flops_text(f.forward_flops),
            flops_text(count.counted_forward_flops),
        ),
        (
            "backward",
            f"dX = dY Wᵀ: ({t} × {o}) @ ({o} × {i}); dW = Xᵀ dY: ({i} × {t}) @ ({t} × {o})",
            "4 × tokens × in × out",
            flops_text(f.backward_flops),
            flops_text(count.counted_backward_flops),
        ),
    ]
    return markdown_table(header, rows, align="lllrr")


def _model_text(step: StepCount) -> str:
    c = step.config
    return (
        f"GPT-2 shape: {c.layers} layers, hidden {c.hidden}, {c.heads} heads, "
        f"vocabulary {c.vocab_size:,}, {c.attention} attention"
        + (", checkpointed" if c.checkpointing else "")
    )


def step_count_markdown(step: StepCount) -> str:
    """One GPT-2 step: N, D, 6ND, the counter's total, their ratio, and the count by operator."""
    ops = ", ".join(f"`{op}` {flops_text(n)}" for op, n in step.by_operator) or "none"
    rows = [
        ("model", _model_text(step)),
        ("parameters N", f"{step.parameters:,}"),
        ("tokens D (batch × sequence)", f"{step.batch} × {step.seq} = {step.tokens:,}"),
        ("6ND (FLOPs)", flops_text(step.six_nd_flops)),
        ("counted by FlopCounterMode (FLOPs)", flops_text(step.counted_flops)),
        ("counted / 6ND", f"{step.ratio_to_six_nd:.3f}"),
    ]
    table = markdown_table(("quantity", "value"), rows)
    return f"{table}\n\nThe count by operator: {ops}."


def sequence_sweep_markdown(steps: Sequence[StepCount]) -> str:
    """6ND, the attention term and the counter's total for the same model at several lengths."""
    header = (
        "sequence × batch",
        "attention term (FLOPs)",
        "6·N_matmul·D + attention (FLOPs)",
        "counted (FLOPs)",
        "counted / 6ND",
    )
    rows = [
        (
            f"{s.seq:,} × {s.batch}",
            flops_text(s.attention_flops),
            flops_text(s.formula_flops),
            flops_text(s.counted_flops),
            f"{s.ratio_to_six_nd:.2f}",
        )
        for s in steps
    ]
    lines = [markdown_table(header, rows, align="rrrrr")]
    if steps:
        s = steps[0]
        lines += [
            "",
            f"One model ({_model_text(s)}), {s.tokens:,} tokens (D) in every row, so "
            f"6ND = {flops_text(s.six_nd_flops)} in every row. N = {s.parameters:,} "
            f"parameters, of which N_matmul = {s.matmul_parameters:,} are weights of linear "
            "layers; the attention term is 12 × layers × sequence × hidden × D.",
        ]
    return "\n".join(lines)


def recompute_markdown(pair: RecomputeCount) -> str:
    """The same step counted with and without full activation checkpointing."""
    header = ("step", "counted (FLOPs)", "counted / 6ND", "over the step without checkpointing")
    rows = [
        (
            "no checkpointing",
            flops_text(pair.plain.counted_flops),
            f"{pair.plain.ratio_to_six_nd:.2f}",
            "1",
        ),
        (
            "every block checkpointed",
            flops_text(pair.checkpointed.counted_flops),
            f"{pair.checkpointed.ratio_to_six_nd:.2f}",
            f"{pair.ratio:.3f}",
        ),
    ]
    return markdown_table(header, rows)


def sdpa_gap_markdown(gap: SdpaGap) -> str:
    """The same CPU step counted with eager attention and with SDPA, and what SDPA hid."""
    rows = [
        (
            "eager (two matmuls)",
            flops_text(gap.eager.counted_flops),
            f"{gap.eager.ratio_to_six_nd:.3f}",
        ),
        (
            "`scaled_dot_product_attention` on the CPU",
            flops_text(gap.sdpa.counted_flops),
            f"{gap.sdpa.ratio_to_six_nd:.3f}",
        ),
    ]
    return "\n".join(
        [
            markdown_table(("attention", "counted (FLOPs)", "counted / 6ND"), rows),
            "",
            f"The counter missed {flops_text(gap.missing_flops)} FLOPs with SDPA; attention's "
            f"term, 12 × layers × seq × hidden × D, is {flops_text(gap.eager.attention_flops)}.",
        ]
    )


def step_timing_markdown(step: StepTiming) -> str:
    """The timed training step: tokens, counted FLOPs, median time, achieved FLOP/s."""
    t = step.timing
    unit, scale = _rate_unit([step.flop_per_s])
    rows = [
        ("model", _model_text(step.count)),
        ("device, dtype, threads", f"{t.device}, {step.dtype}, {t.threads}"),
        ("tokens per step", f"{step.count.tokens:,}"),
        ("model FLOPs per step (counted)", flops_text(step.count.counted_flops)),
        (f"step time, median of {t.repeats} (s)", f"{t.median_s:.4f}"),
        ("step time, IQR (s)", f"{t.iqr_s:.4f}"),
        (f"achieved ({unit})", f"{step.flop_per_s / scale:,.1f}"),
        ("tokens per second", f"{step.tokens_per_s:,.0f}"),
    ]
    lines = [markdown_table(("quantity", "value"), rows)]
    if t.spread_warning:
        lines += ["", f'!!! warning "Noisy timing"\n    {t.spread_warning}']
    return "\n".join(lines)


def mfu_markdown(readings: Sequence[MfuReading]) -> str:
    """Each reading's peak and the share of it the step reached: one row per peak.

    >>> r = MfuReading(device="cpu", dtype="fp32", achieved_flop_per_s=40e9,
    ...                peak_flop_per_s=100e9, peak_kind="matmul", peak_label="best matmul",
    ...                peak_source="here")
    >>> print(mfu_markdown([r]).splitlines()[2])
    | best matmul | 100.0 | 40% | here |
    """
    unit, scale = _rate_unit([r.peak_flop_per_s for r in readings])
    # A datasheet's label and quote are contributed text (a quote may hold a '|'): escaped.
    table = [
        (
            inert(r.peak_label),
            f"{r.peak_flop_per_s / scale:,.1f}",
            f"{r.mfu:.0%}",
            inert(r.peak_source),
        )
        for r in readings
    ]
    header = (
        "peak the step is set against",
        f"peak ({unit})",
        "share the step reached",
        "where the peak comes from",
    )
    rows = [markdown_table(header, table, align="lrrl")]
    if readings:
        r = readings[0]
        rows += [
            "",
            f"The step on {r.device} ({r.dtype}): {r.achieved_flop_per_s / scale:,.1f} {unit} "
            "of model FLOPs.",
        ]
    return "\n".join(rows)


def ruled_out_markdown(ruled_out: Sequence[tuple[int, float]], matmul_flop_per_s: float) -> str:
    """The sentence naming the peak model's bounds a measured matmul beat; empty if none.

    >>> text = ruled_out_markdown([(1, 83.2e9)], 180e9)
    >>> text.startswith("The CPU peak model's bound for 1 FMA unit per core (83.2 GFLOP/s) is")
    True
    >>> text.endswith("below the matmul measured here (180.0 GFLOP/s), so this core has more than "
    ...               "that bound assumes: it is left out of the table.")
    True
    >>> ruled_out_markdown([], 180e9)
    ''
    """
    if not ruled_out:
        return ""
    bounds = " and ".join(
        f"{units} FMA unit{'s' if units > 1 else ''} per core ({rate / 1e9:,.1f} GFLOP/s)"
        for units, rate in ruled_out
    )
    plural = len(ruled_out) > 1
    return (
        f"The CPU peak model's bound{'s' if plural else ''} for {bounds} "
        f"{'are' if plural else 'is'} below the matmul measured here "
        f"({matmul_flop_per_s / 1e9:,.1f} GFLOP/s), so this core has more than that bound "
        f"assume{'' if plural else 's'}: {'they are' if plural else 'it is'} left out of the table."
    )


def gpu_mfu_markdown(gpu: GpuMfu) -> str:
    """The GPU rows: a table with where they come from, or the sentence that says why none."""
    if not gpu.readings:
        return (
            f"GPU rows {gpu.source}. They need a CUDA GPU: a build on one measures them, and "
            "`gpulesson measure` on one records them (`train_step`, `matmul_peak`) for the "
            "next CPU build."
        )
    return f"GPU rows, {gpu.source}:\n\n" + mfu_markdown(gpu.readings)


def _price_cells(plan: TrainingPlan) -> tuple[str, str]:
    if plan.price_usd_per_gpu_hour is None or plan.cost_usd is None:
        return "no example rate", "—"
    return f"{plan.price_usd_per_gpu_hour:.2f}", f"{plan.cost_usd:,.0f}"


def plans_markdown(plans: Sequence[TrainingPlan]) -> str:
    """The same training run on several GPUs: peak, hours, GPU-hours and the example bill."""
    header = (
        "GPU (datasheet id)",
        "dense peak (TFLOP/s)",
        "wall-clock hours",
        "GPU-hours",
        "example rate ($/GPU-hour)",
        "cost ($)",
    )
    rows = [
        (
            f"`{p.gpu}`",
            f"{p.peak_flop_per_s / 1e12:,.1f} {p.peak_dtype}",
            f"{p.hours:,.0f}",
            f"{p.gpu_hours:,.0f}",
            *_price_cells(p),
        )
        for p in plans
    ]
    lines = [markdown_table(header, rows)]
    if plans:
        p = plans[0]
        f = p.flops
        lines += [
            "",
            f"The run: {f.parameters:.3g} parameters × {f.tokens:.3g} tokens = "
            f"{flops_text(f.train_flops)} FLOPs, on {p.gpus} GPUs at MFU {p.mfu:.2f}. Rates "
            "are the where-to-run lesson's example on-demand rates, not quotes; a GPU without "
            "one gets no cost.",
        ]
    return "\n".join(lines)


def chinchilla_markdown(plans: Sequence[TrainingPlan]) -> str:
    """Model sizes trained on 20 tokens per parameter: tokens, FLOPs, hours and the bill."""
    header = (
        "parameters",
        "tokens (20 per parameter)",
        "FLOPs (6ND)",
        "wall-clock hours",
        "GPU-hours",
        "cost at the example rate ($)",
    )
    rows = [
        (
            f"{p.flops.parameters:.3g}",
            f"{p.flops.tokens:.3g}",
            flops_text(p.flops.train_flops),
            f"{p.hours:,.0f}",
            f"{p.gpu_hours:,.0f}",
            _price_cells(p)[1],
        )
        for p in plans
    ]
    lines = [markdown_table(header, rows, align="rrrrrr")]
    if plans:
        p = plans[0]
        lines += [
            "",
            f"On {p.gpus} × {p.gpu_name} (`{p.gpu}`, dense {p.peak_dtype} peak "
            f"{p.peak_flop_per_s / 1e12:,.1f} TFLOP/s) at MFU {p.mfu:.2f}.",
        ]
    return "\n".join(lines)


def training_hours_readings(facts: Mapping[str, Any]) -> dict[str, str]:
    """A training run's wall-clock hours, and the hours three common slips give instead.

    Reads ``compute.plan_hours`` (6ND over GPUs x dense peak x MFU, in hours) and
    ``compute.plan_mfu``. ``forward_only`` counts 2ND instead of 6ND (a third of the
    hours); ``sparse_peak`` divides by the datasheet's 2:4 sparsity figure, twice the
    dense one (half); ``full_peak`` leaves MFU out, as if the GPUs ran at their peak (MFU
    times the hours). Refuses an MFU that would make two of the four read the same.

    >>> training_hours_readings({"compute.plan_hours": 1636.0, "compute.plan_mfu": 0.4})
    {'hours': '1,600', 'forward_only': '550', 'sparse_peak': '820', 'full_peak': '650'}
    >>> training_hours_readings({"compute.plan_hours": 1636.0, "compute.plan_mfu": 0.5})
    Traceback (most recent call last):
    ...
    ValueError: training_hours_readings: at MFU 0.5 two options read the same (820 hours)
    """
    hours, mfu = float(facts["compute.plan_hours"]), float(facts["compute.plan_mfu"])
    values = {
        "hours": about(hours),
        "forward_only": about(hours / 3),
        "sparse_peak": about(hours / 2),
        "full_peak": about(hours * mfu),
    }
    seen: dict[str, str] = {}
    for name, text in values.items():
        if text in seen.values():
            raise ValueError(
                f"training_hours_readings: at MFU {mfu:g} two options read the same ({text} hours)"
            )
        seen[name] = text
    return values
