"""Suite entries for mixed precision: a training step per precision, and TF32's accuracy.

TF32's and bf16's matmul speed are already rows of the ``matmul`` and ``matmul_peak``
entries (:mod:`gpulesson.results.entries_matmul`). The lesson "Mixed precision in
practice" needs two more, each calling the lesson's own function:

* ``amp_step``: one GPT-2 training step (forward, backward, AdamW) in each precision the
  device runs: fp32, TF32, bf16 autocast, fp16 autocast with a GradScaler
  (:func:`gpulesson.precision.step.time_step`). Seconds per step, with the scaler's
  skipped steps in the params.
* ``tf32_accuracy``: one n x n matmul's error against fp64 in fp32, TF32 on the tensor
  cores, TF32 emulated, bf16 and fp16 (:func:`gpulesson.precision.tf32.matmul_errors`).
  CUDA GPUs of compute capability 8.0 and later: elsewhere there are no TF32 tensor
  cores to measure.

The plans (model, batch, time budget per device kind) and the precisions each device
runs are :data:`gpulesson.precision.step.STEP_PLANS` and
:func:`gpulesson.precision.step.precisions_for`.

>>> [e.name for e in ENTRIES]
['amp_step', 'tf32_accuracy']
"""

from __future__ import annotations

from gpulesson.memory.budget import estimate
from gpulesson.memory.gpt2 import GPT2Config
from gpulesson.memory.shape import TransformerShape
from gpulesson.precision.step import STEP_PLANS, StepPlan, precisions_for, time_step
from gpulesson.precision.tf32 import matmul_errors
from gpulesson.results.bundle import Measurement, Skipped
from gpulesson.results.measurements import seconds, single
from gpulesson.results.suite import Context, SuiteEntry

TF32_SIZES = {True: 2048, False: 8192}  # n of the accuracy matmul, by --quick


def _shape(config: GPT2Config, batch: int) -> TransformerShape:
    return TransformerShape(
        vocab=config.vocab_size,
        seq=config.seq_len,
        hidden=config.hidden,
        heads=config.heads,
        layers=config.layers,
        batch=batch,
    )


def fitting_batch(context: Context, plan: StepPlan) -> int:
    """The plan's batch, halved until the fp32 step's estimated peak fits the memory budget.

    The ``fp32`` preset prices the largest of the four precisions (fp32 activations).
    """
    batch = plan.batch
    while batch > 1 and not context.fits(
        estimate(shape=_shape(plan.config, batch), preset="fp32").total_bytes
    ):
        batch //= 2
    return batch


def step_rows(context: Context) -> list[Measurement | Skipped]:
    """Time one training step per precision; a precision the device refuses is a Skipped."""
    plan = STEP_PLANS[(context.device.type, context.quick)]
    batch = fitting_batch(context, plan)
    config = plan.config
    out: list[Measurement | Skipped] = []
    device = context.device
    for precision in precisions_for(device.type, device.capability, context.quick):
        try:
            timing = time_step(config, batch, context.device.type, precision, plan.min_run_time_s)
        except RuntimeError as exc:  # e.g. bf16 on an older macOS, or out of memory
            out.append(Skipped(f"amp_step.{precision}", f"failed: {type(exc).__name__}: {exc}"))
            continue
        out.append(
            seconds(
                timing.result,
                name=f"amp_step.{precision}",
                entry="amp_step",
                label=f"GPT-2 training step, {precision}",
                dtype=precision,
                params={
                    "layers": config.layers,
                    "hidden": config.hidden,
                    "seq": config.seq_len,
                    "vocab": config.vocab_size,
                    "batch": batch,
                    "tokens": timing.tokens,
                    "steps": timing.steps,
                    "skipped_steps": timing.skipped_steps,
                },
                note="forward, backward and AdamW step; parameters, gradients and moments "
                "in fp32; bf16/fp16 under torch.autocast, fp16 with a GradScaler",
            )
        )
    return out


def accuracy_rows(device: str, n: int) -> list[Measurement]:
    """One n x n matmul's relative error per precision, as ratio measurements."""
    errors = matmul_errors(n, device)
    return [
        single(
            row.relative_error,
            name=f"tf32_accuracy.{row.method}",
            entry="tf32_accuracy",
            unit="ratio",
            label=f"matmul error vs fp64: {row.label}",
            params={"n": n, "seed": errors.seed, "max_abs_error": row.max_abs_error},
            note="largest absolute error over the mean absolute value of the fp64 product "
            "(PyTorch's CUDA semantics notes use the same measure)",
        )
        for row in errors.rows
    ]


def run_amp_step(context: Context) -> list[Measurement | Skipped]:
    """The ``amp_step`` entry."""
    return step_rows(context)


def run_tf32_accuracy(context: Context) -> list[Measurement]:
    """The ``tf32_accuracy`` entry, sized by ``--quick`` and the memory budget."""
    n = TF32_SIZES[context.quick]
    while n > 256 and not context.fits(8 * 3 * n * n + 4 * 6 * n * n):  # fp64 and fp32 copies
        n //= 2
    return accuracy_rows(context.device.type, n)


ENTRIES = (
    SuiteEntry(
        name="amp_step",
        description="GPT-2 training step time per precision (fp32, tf32, bf16 and fp16 autocast)",
        applies=lambda device: True,
        needs="nothing",
        run=run_amp_step,
    ),
    SuiteEntry(
        name="tf32_accuracy",
        description="matmul error vs fp64 in fp32, TF32 (tensor cores and emulated), bf16, fp16",
        applies=lambda device: device.type == "cuda" and (device.capability or (0, 0)) >= (8, 0),
        needs="a CUDA GPU of compute capability 8.0 or later (TF32 tensor cores)",
        run=run_tf32_accuracy,
    ),
)
