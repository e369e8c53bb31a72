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
own small step on one thread, timed as the lesson times it
(:func:`gpulesson.memory.compute_step.measure_cpu_mfu`: a 1024 x 1024 matmul on the same
thread before and after the step). The sizes are the ``train_step`` rows of
``gpulesson/timing/plans.json``. On a CPU the two matmul readings are rows too:
``train_step.matmul`` (FLOP/s) the faster, ``train_step.matmul_reading<i>`` the other.
:func:`cpu_mfu_from_measurements` reads the CPU rows back into the lesson's
:class:`~gpulesson.memory.compute_step.CpuMfu`; :func:`gpu_mfu_from_measurements` sets a
GPU's ``train_step`` row against its datasheet and its ``matmul_peak`` row.

>>> from gpulesson.results.suite import Device
>>> [e.name for e in ENTRIES]
['train_step']
>>> plan_for(Context(Device("cpu", "cpu", 2**33, 2**32, 0, None), quick=True)).batch
2
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from gpulesson.memory.compute_step import (
    CpuMfu,
    GpuMfu,
    StepCount,
    StepTiming,
    cpu_mfu,
    fitting_batch,
    gpu_dtype,
    gpu_readings_from_rows,
    measure_cpu_mfu,
    measure_gpt_step,
)
from gpulesson.memory.gpt2 import GPT2Config
from gpulesson.results import datasheets
from gpulesson.results.bundle import Measurement, Scalar
from gpulesson.results.compare import Sourced
from gpulesson.results.measurements import matmul_result, op_result, throughput
from gpulesson.results.suite import Context, SuiteEntry
from gpulesson.timing import plans
from gpulesson.timing.peak import CpuFacts
from gpulesson.timing.results import MatmulResult

ENTRY = "train_step"


@dataclass(frozen=True)
class StepPlan:
    """The model, batch, dtype and timing budget of the step on one device."""

    config: GPT2Config
    batch: int
    min_run_time_s: float
    dtype: str = "fp32"
    threads: int | None = None  # CPU threads (None: torch's setting)


def _step_plan(sizes: Mapping[str, Any]) -> StepPlan:
    """A step plan from its row of the plan table."""
    return StepPlan(
        config=GPT2Config(**sizes["config"]),
        batch=sizes["batch"],
        min_run_time_s=sizes["min_run_time_s"],
        threads=sizes.get("threads"),
    )


# By (device kind, --quick): on CUDA the largest batch tried, in fp32 until plan_for picks
# the GPU's 16-bit dtype. A CPU times one thread, as the lesson does: a step is hundreds
# of small ops, and each op split across threads waits on a busy machine.
PLANS = {key: _step_plan(sizes) for key, sizes in plans.by_run("train_step").items()}


def plan_for(context: Context) -> StepPlan:
    """The step to time on ``context.device``; ``--quick`` keeps the model, times less.

    >>> from gpulesson.results.suite import Device
    >>> h100 = Device("cuda", "H100", 80 * 2**30, 79 * 2**30, 1, (9, 0))
    >>> p = plan_for(Context(h100, quick=False))
    >>> p.config.hidden, p.batch, p.dtype
    (768, 8, 'bf16')
    """
    device = context.device
    plan = PLANS[(device.type, context.quick)]
    if device.type != "cuda":
        return plan
    batch = fitting_batch(plan.config, plan.batch, context.memory_budget_bytes)
    return replace(plan, batch=batch, dtype=gpu_dtype(device.capability or (0, 0)))


def run_train_step(context: Context) -> list[Measurement]:
    """One training step's achieved model FLOP/s (counted FLOPs over the median step time);
    on a CPU, the lesson's measurement with its two matmul readings."""
    plan = plan_for(context)
    if context.device.type == "cpu":
        cpu = measure_cpu_mfu(plan.threads or 1, plan.config, plan.batch, plan.min_run_time_s)
        return [step_measurement(cpu.step, plan), *matmul_measurements(cpu.matmuls)]
    step = measure_gpt_step(
        plan.config, plan.batch, context.device.type, plan.dtype, plan.min_run_time_s
    )
    return [step_measurement(step, plan)]


def step_measurement(step: StepTiming, plan: StepPlan) -> Measurement:
    """The step's row: counted model FLOPs over its median time, its shape in params."""
    c, count = plan.config, step.count
    by_op: dict[str, Scalar] = {f"flop_by_op.{op}": n for op, n in count.by_operator}
    return throughput(
        step.timing,
        name=f"train_step.{plan.dtype}",
        entry=ENTRY,
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
            "checkpointing": c.checkpointing,
            "optimizer": "AdamW",
            **by_op,
        },
        note="FLOPs from torch.utils.flop_counter.FlopCounterMode over one forward and "
        "backward pass; the time is the whole step (zero_grad, forward, backward, "
        "optimizer). Over the datasheet's dense peak this is the step's MFU.",
    )


def matmul_measurements(matmuls: Sequence[MatmulResult]) -> list[Measurement]:
    """The matmul readings the CPU step is set against: the faster, then the others."""
    fastest = max(range(len(matmuls)), key=lambda i: matmuls[i].flop_per_s)
    out = []
    for i, m in enumerate(matmuls):
        when = "before" if i == 0 else "after"
        out.append(
            throughput(
                m,
                name=f"{ENTRY}.matmul" if i == fastest else f"{ENTRY}.matmul_reading{i}",
                entry=ENTRY,
                unit="FLOP/s",
                label=f"{m.n} x {m.n} {m.dtype} matmul on the step's threads, timed {when} it"
                + (
                    ": the faster reading, the rate the step is set against" if i == fastest else ""
                ),
                dtype=m.dtype,
                limit="peak_flops",
                params={"n": m.n, "reading": i},
            )
        )
    return out


def _config(p: Mapping[str, Scalar]) -> GPT2Config:
    return GPT2Config(
        vocab_size=int(p["vocab"]),
        seq_len=int(p["seq"]),
        hidden=int(p["hidden"]),
        heads=int(p["heads"]),
        layers=int(p["layers"]),
        attention=str(p["attention"]),
        checkpointing=bool(p.get("checkpointing", False)),
    )


def step_from_measurement(m: Measurement) -> StepTiming:
    """The :class:`StepTiming` a ``train_step.<dtype>`` row holds."""
    q = m.params
    config = _config(q)
    count = StepCount(
        config=config,
        batch=int(q["batch"]),
        seq=int(q["seq"]),
        parameters=int(q["parameters"]),
        matmul_parameters=int(q["matmul_parameters"]),
        counted_flops=int(q["flop"]),
        by_operator=tuple(
            (key.removeprefix("flop_by_op."), int(n))
            for key, n in q.items()
            if key.startswith("flop_by_op.") and isinstance(n, int | float)
        ),
    )
    timing = op_result(m, "GPT-2 training step", flops=count.counted_flops, bytes_moved=0)
    return StepTiming(count=count, timing=timing, dtype=m.dtype or "fp32")


def _step_row(measurements: Sequence[Measurement]) -> Measurement | None:
    return next(
        (
            m
            for m in measurements
            if m.entry == ENTRY and m.unit == "FLOP/s" and "n" not in m.params
        ),
        None,
    )


def cpu_mfu_from_measurements(
    measurements: Sequence[Measurement], facts: CpuFacts | None = None
) -> CpuMfu | None:
    """The lesson's :class:`CpuMfu` from a CPU run's ``train_step`` rows; None without them.

    The peak model is of ``facts`` (this machine's CPU when None), on the step's threads.
    """
    step = _step_row(measurements)
    readings = sorted(
        (m for m in measurements if m.entry == ENTRY and "n" in m.params),
        key=lambda m: int(m.params["reading"]),
    )
    if step is None or not readings:
        return None
    return cpu_mfu(step_from_measurement(step), tuple(matmul_result(m) for m in readings), facts)


def gpu_mfu_from_measurements(
    step: Sequence[Measurement] | None,
    matmul_peak: Sequence[Measurement] | None,
    ref: Sourced | None,
) -> GpuMfu:
    """The GPU rows of the lesson from a GPU's ``train_step`` and ``matmul_peak`` rows.

    ``ref`` is the reference bundle they were read from, None when this build's GPU
    measured them; ``step`` None means neither has them.

    >>> gpu_mfu_from_measurements(None, None, None).source
    'not measured: this build has no CUDA GPU and there is no reference result bundle'
    """
    row = None if step is None else _step_row(step)
    if row is None:
        if ref is None:
            return GpuMfu(
                readings=(),
                source="not measured: this build has no CUDA GPU and there is no reference "
                "result bundle",
            )
        return GpuMfu(
            readings=(),
            source=f"not measured: the reference bundle {ref.file} has no train_step row "
            "(its suite predates the entry); run gpulesson measure again",
        )
    best = next(
        (m for m in matmul_peak or () if m.name == f"matmul_peak.{row.dtype}"),
        None,
    )
    if ref is not None:
        device, sheet = ref.bundle.provenance.device_name, ref.bundle.datasheet
        source = f"reference bundle {ref.file}"
    else:
        import torch

        device = torch.cuda.get_device_name(0)
        sheet, source = datasheets.lookup(device), "measured on this build's GPU"
    return GpuMfu(readings=gpu_readings_from_rows(row, best, device, sheet), source=source)


ENTRIES = (
    SuiteEntry(
        name=ENTRY,
        description="a GPT-2 training step's achieved model FLOP/s (counted FLOPs, for MFU)",
        applies=lambda device: True,
        needs="nothing",
        run=run_train_step,
    ),
)
