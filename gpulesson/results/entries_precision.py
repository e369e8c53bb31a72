"""Suite entries for mixed precision: a training step per precision, TF32's accuracy, a trace.

TF32's and bf16's matmul speed are already rows of the ``matmul`` and ``matmul_peak``
entries (:mod:`gpulesson.results.entries_matmul`; the lesson's GPU speed rows are
``matmul_peak``'s). The lesson "Mixed precision in practice" needs three more, each
calling the lesson's own function:

* ``amp_step``: one GPT-2 training step (forward, backward, AdamW) in each precision the
  device runs: fp32, TF32, bf16 autocast, fp16 autocast with a GradScaler
  (:func:`gpulesson.precision.step.time_step`). Seconds per step, with the scaler's
  skipped steps in the params.
* ``tf32_accuracy``: one n x n matmul's error against fp64 in fp32, TF32 on the tensor
  cores, TF32 emulated, bf16 and fp16 (:func:`gpulesson.precision.tf32.matmul_errors`).
  On a CPU (the lesson's 512 x 512 table: TF32 emulated, no tensor cores) and on CUDA GPUs
  of compute capability 8.0 and later (TF32 on the tensor cores beside the emulation).
  :func:`errors_from_measurements` gives the lesson its ``MatmulErrors`` back.
* ``autocast_trace``: the dtype of every op of one forward pass of a one-block GPT-2 under
  ``torch.autocast`` (fp16 on CUDA, bf16 on a CPU), from
  :func:`gpulesson.precision.trace.trace_gpt2`. One measurement per op: the bytes per
  element of the dtype the op returned (2 for a 16-bit output, 4 for fp32), with the op,
  its module and its input dtypes in the params; :func:`trace_from_measurements` gives
  the lesson its trace rows back.

The plans (model, batch, time budget per device kind) and the precisions each device
runs are :data:`gpulesson.precision.step.STEP_PLANS` and
:func:`gpulesson.precision.step.precisions_for`.

>>> [e.name for e in ENTRIES]
['amp_step', 'tf32_accuracy', 'autocast_trace']
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import torch

from gpulesson.memory.budget import estimate
from gpulesson.memory.gpt2 import GPT2Config
from gpulesson.memory.shape import TransformerShape
from gpulesson.precision.step import STEP_PLANS, StepPlan, precisions_for, time_step
from gpulesson.precision.tf32 import METHOD_LABELS, MatmulError, MatmulErrors, matmul_errors
from gpulesson.precision.trace import TraceRow, trace_gpt2
from gpulesson.results.bundle import Measurement, Skipped
from gpulesson.results.measurements import seconds, single
from gpulesson.results.suite import Context, Device, SuiteEntry
from gpulesson.timing import plans

# n of the accuracy matmul, by device kind and --quick (gpulesson/timing/plans.json): the
# lesson's 512 x 512 on a CPU
TF32_SIZES = {key: sizes["matmul_n"] for key, sizes in plans.by_run("tf32").items()}
# The dtype autocast runs 16-bit ops in, by device kind: what the lesson traces
TRACE_DTYPES = {"cuda": torch.float16, "cpu": torch.bfloat16}


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
            params={
                "n": n,
                "seed": errors.seed,
                "device": device,
                "method": row.method,
                "max_abs_error": row.max_abs_error,
                "mean_abs_reference": row.mean_abs_reference,
            },
            note="largest absolute error over the mean absolute value of the fp64 product "
            "(PyTorch's CUDA semantics notes use the same measure)",
        )
        for row in errors.rows
    ]


def errors_from_measurements(measurements: Sequence[Measurement]) -> MatmulErrors | None:
    """The ``tf32_accuracy`` rows of ``measurements`` as the lesson's ``MatmulErrors``.

    None when there are none. Rows keep the order the entry measured them in.

    >>> e = errors_from_measurements(accuracy_rows("cpu", 32))
    >>> e.n, e.device, [r.method for r in e.rows]
    (32, 'cpu', ['fp32', 'tf32_emulated', 'bf16', 'fp16'])
    """
    rows = [m for m in measurements if m.entry == "tf32_accuracy"]
    if not rows:
        return None
    first = rows[0].params
    return MatmulErrors(
        n=int(first["n"]),
        device=str(first["device"]),
        seed=int(first["seed"]),
        rows=tuple(
            MatmulError(
                method=(method := str(m.params["method"])),
                label=METHOD_LABELS[method],
                max_abs_error=float(m.params["max_abs_error"]),
                mean_abs_reference=float(m.params["mean_abs_reference"]),
            )
            for m in rows
        ),
    )


_DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}  # the bundle's names


def trace_rows(device: str) -> list[Measurement]:
    """Trace one forward pass under autocast on ``device``: one measurement per op."""
    autocast = TRACE_DTYPES[device]
    rows = trace_gpt2(device, autocast)
    autocast_name = str(autocast).removeprefix("torch.")
    return [
        replace(
            single(
                getattr(torch, row.output_dtype).itemsize,
                name=f"autocast_trace.op{row.index:03d}",
                entry="autocast_trace",
                unit="bytes",
                label=f"{row.op} in {row.module}: bytes per element of its output",
                params={
                    "index": row.index,
                    "op": row.op,
                    "module": row.module,
                    "inputs": ",".join(row.input_dtypes),
                    "output": row.output_dtype,
                    "device": device,
                    "autocast_dtype": autocast_name,
                },
                note="one forward pass (with the loss) of a one-block GPT-2 with eager "
                "attention under torch.autocast; the value is the element size of the "
                "dtype the op returned",
            ),
            dtype=_DTYPES.get(row.output_dtype),
        )
        for row in rows
    ]


def trace_from_measurements(measurements: Sequence[Measurement]) -> tuple[TraceRow, ...]:
    """The ``autocast_trace`` rows of ``measurements`` as the lesson's trace, in op order.

    >>> rows = trace_from_measurements(trace_rows("cpu"))
    >>> [(r.op, r.output_dtype) for r in rows if r.op == "cross_entropy"]
    [('cross_entropy', 'float32')]
    """
    found = sorted(
        (m for m in measurements if m.entry == "autocast_trace"),
        key=lambda m: int(m.params["index"]),
    )
    return tuple(
        TraceRow(
            index=int(m.params["index"]),
            op=str(m.params["op"]),
            module=str(m.params["module"]),
            input_dtypes=tuple(d for d in str(m.params["inputs"]).split(",") if d),
            output_dtype=str(m.params["output"]),
        )
        for m in found
    )


def run_autocast_trace(context: Context) -> list[Measurement]:
    """The ``autocast_trace`` entry (the same one-block model with or without ``--quick``)."""
    return trace_rows(context.device.type)


def _has_tf32_arithmetic(device: Device) -> bool:
    """A CPU (emulated TF32 only) or a CUDA GPU with TF32 tensor cores (8.0 and later)."""
    if device.type == "cpu":
        return True
    return device.type == "cuda" and (device.capability or (0, 0)) >= (8, 0)


def run_amp_step(context: Context) -> list[Measurement | Skipped]:
    """The ``amp_step`` entry."""
    return step_rows(context)


def run_tf32_accuracy(context: Context) -> list[Measurement]:
    """The ``tf32_accuracy`` entry, sized by ``--quick`` and the memory budget."""
    n = TF32_SIZES[(context.device.type, context.quick)]
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
        applies=lambda device: _has_tf32_arithmetic(device),
        needs="a CPU (TF32 emulated) or a CUDA GPU of compute capability 8.0 or later "
        "(TF32 tensor cores)",
        run=run_tf32_accuracy,
    ),
    SuiteEntry(
        name="autocast_trace",
        description="the dtype each op of a GPT-2 forward pass returns under torch.autocast",
        applies=lambda device: device.type in TRACE_DTYPES,
        needs="a CPU or a CUDA GPU (torch.autocast with bf16 or fp16)",
        run=run_autocast_trace,
    ),
)
