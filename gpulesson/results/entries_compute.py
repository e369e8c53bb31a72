"""Suite entry for the compute lesson: a training step's achieved model FLOP/s, for MFU.

``train_step`` times a whole GPT-2 training step (forward, backward, AdamW) with
:func:`gpulesson.memory.compute_step.measure_gpt_step`, the function the lesson "How long
will training take, and what will it cost?" calls, and records the model FLOPs
``torch.utils.flop_counter.FlopCounterMode`` counted in the step over its median time.
With ``limit="peak_flops"`` and the step's dtype, the results pages set it against the
datasheet's dense peak: that fraction is the GPU's MFU, and the same bundle's
``matmul_peak`` gives the share of the best achievable matmul.

Sizes, by device: on CUDA GPT-2 small (124 million parameters, 1,024 tokens a sequence,
SDPA attention, whose CUDA kernels the counter counts) in the GPU's 16-bit dtype under
autocast, at the largest batch up to 8 whose budget estimate fits the entry's memory
budget; on an Apple GPU a 6-layer GPT with eager attention in fp32; on a CPU the lesson's
own small step.

>>> from gpulesson.results.suite import Device
>>> [e.name for e in ENTRIES]
['train_step']
>>> plan_for(Context(Device("cpu", "cpu", 2**33, 2**32, 0, None), quick=True)).batch
2
"""

from __future__ import annotations

from dataclasses import dataclass

from gpulesson.memory.compute_step import (
    GPU_BATCH,
    GPU_CONFIG,
    PAGE_BATCH,
    PAGE_CONFIG,
    fitting_batch,
    gpu_dtype,
    measure_gpt_step,
)
from gpulesson.memory.gpt2 import GPT2Config
from gpulesson.results.bundle import Measurement
from gpulesson.results.measurements import throughput
from gpulesson.results.suite import Context, SuiteEntry

MPS_CONFIG = GPT2Config(
    vocab_size=8192, seq_len=512, hidden=512, heads=8, layers=6, attention="eager"
)
MPS_BATCH = 4


@dataclass(frozen=True)
class StepPlan:
    """The model, batch, dtype and timing budget of the step on one device."""

    config: GPT2Config
    batch: int
    dtype: str
    min_run_time_s: float


def plan_for(context: Context) -> StepPlan:
    """The step to time on ``context.device``; ``--quick`` keeps the model, times less.

    >>> from gpulesson.results.suite import Device
    >>> h100 = Device("cuda", "H100", 80 * 2**30, 79 * 2**30, 1, (9, 0))
    >>> p = plan_for(Context(h100, quick=False))
    >>> p.config.hidden, p.batch, p.dtype
    (768, 8, 'bf16')
    """
    device, quick = context.device, context.quick
    if device.type == "cuda":
        batch = fitting_batch(GPU_CONFIG, GPU_BATCH, context.memory_budget_bytes)
        dtype = gpu_dtype(device.capability or (0, 0))
        return StepPlan(GPU_CONFIG, batch, dtype, 0.5 if quick else 2.0)
    if device.type == "mps":
        return StepPlan(MPS_CONFIG, MPS_BATCH, "fp32", 0.5 if quick else 1.0)
    return StepPlan(PAGE_CONFIG, PAGE_BATCH, "fp32", 0.1 if quick else 0.5)


def run_train_step(context: Context) -> list[Measurement]:
    """One training step's achieved model FLOP/s (counted FLOPs over the median step time)."""
    plan = plan_for(context)
    step = measure_gpt_step(
        plan.config, plan.batch, context.device.type, plan.dtype, plan.min_run_time_s
    )
    c, count = plan.config, step.count
    return [
        throughput(
            step.timing,
            name=f"train_step.{plan.dtype}",
            entry="train_step",
            unit="FLOP/s",
            label=f"GPT-2 training step, {count.parameters / 1e6:.0f}M parameters, "
            f"{count.tokens:,} tokens ({plan.dtype}): model FLOPs per second",
            dtype=plan.dtype,
            limit="peak_flops",
            headline=True,
            params={
                "parameters": count.parameters,
                "matmul_parameters": count.matmul_parameters,
                "batch": plan.batch,
                "seq": count.seq,
                "tokens_per_step": count.tokens,
                "tokens_per_s": round(step.tokens_per_s, 3),
                "six_nd_flop": count.six_nd_flops,
                "vocab": c.vocab_size,
                "hidden": c.hidden,
                "heads": c.heads,
                "layers": c.layers,
                "attention": c.attention,
                "optimizer": "AdamW",
            },
            note="FLOPs from torch.utils.flop_counter.FlopCounterMode over one forward and "
            "backward pass; the time is the whole step (zero_grad, forward, backward, "
            "optimizer). Over the datasheet's dense peak this is the step's MFU.",
        )
    ]


ENTRIES = (
    SuiteEntry(
        name="train_step",
        description="a GPT-2 training step's achieved model FLOP/s (counted FLOPs, for MFU)",
        applies=lambda device: True,
        needs="nothing",
        run=run_train_step,
    ),
)
