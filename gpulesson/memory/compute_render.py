"""Text and JSON for training compute (``gpulesson budget --tokens``): FLOPs, hours, cost.

Renders the results of :mod:`gpulesson.memory.compute` and
:mod:`gpulesson.memory.compute_step`; computes no figure of its own (ratios and sums are
the results' own properties). Used by ``gpulesson budget --tokens``; the lesson's Markdown
lives in :mod:`gpulesson.course.compute_budget`. Torch-free: the step results are only read.

>>> from gpulesson.memory.compute import training_flops
>>> print(to_text(training_flops(7e9, 1.4e11), None).splitlines()[0])
training compute: 7e+09 parameters x 1.4e+11 tokens
"""

from __future__ import annotations

from typing import Any

from gpulesson.memory.compute import TrainingFlops, TrainingPlan


def flops_text(flops: float) -> str:
    """A FLOP count in scientific notation, three figures.

    >>> flops_text(5.88e21), flops_text(12079595520)
    ('5.88e+21', '1.21e+10')
    """
    return f"{flops:.3g}" if flops >= 1e5 else f"{flops:,.0f}"


# --- the CLI ----------------------------------------------------------------------------


def to_dict(flops: TrainingFlops, plan: TrainingPlan | None) -> dict[str, Any]:
    """The compute side of ``gpulesson budget --json``: FLOPs, and with a GPU hours and cost.

    >>> from gpulesson.memory.compute import training_flops
    >>> to_dict(training_flops(7e9, 1.4e11), None)["train_flops"]
    5.88e+21
    """
    data: dict[str, Any] = {
        "tokens": flops.tokens,
        "train_flops": flops.train_flops,
        "six_nd_flops": flops.six_nd_flops,
        "forward_flops": flops.forward_flops,
        "backward_flops": flops.backward_flops,
        "attention_flops": flops.attention_flops,
        "recompute_flops": flops.recompute_flops,
        "hardware_flops": flops.hardware_flops,
    }
    if plan is not None:
        data.update(
            {
                "gpu": plan.gpu,
                "gpu_name": plan.gpu_name,
                "peak_dtype": plan.peak_dtype,
                "peak_flop_per_s": plan.peak_flop_per_s,
                "peak_source": plan.peak_source,
                "mfu": plan.mfu,
                "seconds": plan.seconds,
                "hours": plan.hours,
                "gpu_hours": plan.gpu_hours,
                "price_usd_per_gpu_hour": plan.price_usd_per_gpu_hour,
                "price_source": plan.price_source,
                "cost_usd": plan.cost_usd,
            }
        )
    return data


def to_text(flops: TrainingFlops, plan: TrainingPlan | None) -> str:
    """The compute side of ``gpulesson budget`` for the terminal.

    >>> from gpulesson.memory.compute import plan_training, training_flops
    >>> f = training_flops(7e9, 1.4e11)
    >>> print(to_text(f, plan_training(f, gpu="h100-sxm", gpus=8, mfu=0.4)).splitlines()[-1])
      cost: no example rate for h100-sxm: give --price-per-gpu-hour
    """
    lines = [
        f"training compute: {flops.parameters:.3g} parameters x {flops.tokens:.3g} tokens",
        f"  forward (2ND)                     {flops_text(flops.forward_flops):>10} FLOPs",
        f"  backward (both gradients)         {flops_text(flops.backward_flops):>10} FLOPs",
    ]
    if flops.attention_flops:
        lines.append(
            f"  attention (12 x layers x seq x hidden x D) "
            f"{flops_text(flops.attention_flops)} FLOPs"
        )
    lines.append(f"  model FLOPs                       {flops_text(flops.train_flops):>10} FLOPs")
    if flops.recompute_flops:
        lines.append(
            f"  + recompute (checkpointing): hardware runs {flops_text(flops.hardware_flops)} "
            "FLOPs; MFU counts only the model FLOPs, so expect a lower MFU"
        )
    if plan is None:
        return "\n".join(lines)
    lines += [
        f"  GPUs: {plan.gpus} x {plan.gpu} ({plan.gpu_name}), dense {plan.peak_dtype} peak "
        f"{plan.peak_flop_per_s / 1e12:,.1f} TFLOP/s each, MFU {plan.mfu:.2f}",
        f"  time: {plan.hours:,.1f} hours ({plan.days:,.1f} days), {plan.gpu_hours:,.0f} GPU-hours",
    ]
    if plan.cost_usd is None or plan.price_usd_per_gpu_hour is None:
        lines.append(f"  cost: no example rate for {plan.gpu}: give --price-per-gpu-hour")
    else:
        lines += [
            f"  cost: ${plan.cost_usd:,.0f} at ${plan.price_usd_per_gpu_hour:.2f} per GPU-hour",
            f"  price: {plan.price_source}",
        ]
    return "\n".join(lines)
