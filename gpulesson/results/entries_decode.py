"""Suite entry ``decode``: decode tokens/s by batch size, with the ceilings they sit under.

It runs :func:`gpulesson.timing.decode.measure_decode_sweep`, the function the lesson
"Serving: why generating text is memory-bound" runs, with the plan for the device
(:data:`gpulesson.timing.decode.PLANS`; ``--quick`` takes the smaller one), dropping the
batch sizes whose weights and KV cache would not fit ``context.memory_budget_bytes``.
Each batch becomes one measurement ``decode.b<batch>`` in tokens/s, its samples the
seconds of each decode step, its params the counts a bound needs (weight bytes, KV bytes
per token, context, FLOPs per token); the copy bandwidth and the matmul rate the sweep was
set against become ``decode.bandwidth`` (B/s, the faster of the readings taken before and
after the sweep; the other is ``decode.bandwidth_reading<i>``) and ``decode.matmul``
(FLOP/s).
:func:`sweep_from_measurements` reads them back into the same
:class:`~gpulesson.timing.decode.DecodeSweep`, so a page renders a bundle's rows with the
renderers it uses for its own.

>>> [e.name for e in ENTRIES]
['decode']
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from gpulesson.memory.gpt2 import GPT2Config
from gpulesson.results.bundle import Measurement, Skipped
from gpulesson.results.measurements import op_result, throughput
from gpulesson.results.suite import Context, SuiteEntry
from gpulesson.timing.decode import (
    DecodePlan,
    DecodeSweep,
    DecodeTiming,
    measure_decode_sweep,
    plan_for,
)
from gpulesson.timing.results import quantile

ENTRY = "decode"
ROW_NAME = re.compile(r"decode\.b\d+")
CONFIG_FIELDS = ("vocab_size", "seq_len", "hidden", "heads", "layers")


def fitting_plan(plan: DecodePlan, budget_bytes: int) -> DecodePlan | None:
    """``plan`` with only the batches whose weights and cache fit ``budget_bytes``; None if none.

    >>> plan = plan_for("cpu")
    >>> fitting_plan(plan, plan.weight_bytes() + plan.cache_bytes(4)).batches
    (1, 4)
    >>> fitting_plan(plan, 1) is None
    True
    """
    batches = tuple(
        b for b in plan.batches if plan.weight_bytes() + plan.cache_bytes(b) <= budget_bytes
    )
    return dataclasses.replace(plan, batches=batches) if batches else None


def sweep_measurements(sweep: DecodeSweep) -> list[Measurement]:
    """The sweep as bundle measurements: the two ceilings, then one row per batch size."""
    c = sweep.config
    model = {f"model_{name}": getattr(c, name) for name in CONFIG_FIELDS}
    fastest = max(range(len(sweep.bandwidths)), key=lambda i: sweep.bandwidths[i].bytes_per_s)
    out = [
        throughput(
            sweep.bandwidths[fastest],
            name="decode.bandwidth",
            entry=ENTRY,
            unit="B/s",
            label="copy: the bandwidth the decode rows are set against",
            limit="memory_bandwidth",
            params={"reading": fastest},
        ),
        *(
            throughput(
                other,
                name=f"decode.bandwidth_reading{i}",
                entry=ENTRY,
                unit="B/s",
                label="copy: a slower reading of the same bandwidth, taken "
                + ("before" if i == 0 else "after")
                + " the sweep",
                limit="memory_bandwidth",
                params={"reading": i},
            )
            for i, other in enumerate(sweep.bandwidths)
            if i != fastest
        ),
        throughput(
            sweep.peak,
            name="decode.matmul",
            entry=ENTRY,
            unit="FLOP/s",
            label=f"{sweep.peak.name}, {sweep.dtype}: the rate the decode rows are set against",
            dtype=sweep.dtype,
            limit="peak_flops",
        ),
    ]
    for r in sweep.rows:
        out.append(
            Measurement(
                name=f"decode.b{r.batch}",
                entry=ENTRY,
                unit="tokens/s",
                value=r.tokens_per_s,
                samples=tuple(r.samples_s),
                samples_unit="s",
                label=f"greedy decode, batch {r.batch}: tokens/s of all sequences",
                dtype=r.dtype,
                params={
                    **model,
                    "device": r.device,
                    "threads": r.threads,
                    "batch": r.batch,
                    "parameters": sweep.parameters,
                    "prompt_tokens": r.prompt_tokens,
                    "prefill_s": quantile(r.prefill_samples_s, 0.5),
                    "weight_bytes": r.weight_bytes,
                    "kv_bytes_per_token": r.kv_bytes_per_token,
                    "mean_context_tokens": r.mean_context_tokens,
                    "flops_per_token": r.flops_per_token,
                },
                warning=r.spread_warning,
                note="Each sample is one decode step (one new token for every sequence); "
                "value = batch / median step time.",
            )
        )
    return out


def sweep_from_measurements(measurements: Sequence[Measurement]) -> DecodeSweep | None:
    """The :class:`DecodeSweep` a bundle's ``decode`` measurements describe; None without rows."""
    by_name = {m.name: m for m in measurements if m.entry == ENTRY}
    rows_m = sorted(
        (m for name, m in by_name.items() if ROW_NAME.fullmatch(name)),
        key=lambda m: int(m.params["batch"]),
    )
    if not rows_m or "decode.bandwidth" not in by_name or "decode.matmul" not in by_name:
        return None
    mm = by_name["decode.matmul"]
    readings = sorted(
        (m for m in by_name.values() if m.unit == "B/s" and m.name.startswith("decode.bandwidth")),
        key=lambda m: int(m.params.get("reading", 0)),
    )
    first = rows_m[0].params
    config = GPT2Config(**{name: int(first[f"model_{name}"]) for name in CONFIG_FIELDS})
    rows = tuple(
        DecodeTiming(
            device=str(m.params["device"]),
            dtype=m.dtype or "fp32",
            batch=int(m.params["batch"]),
            threads=int(m.params["threads"]),
            samples_s=tuple(m.samples),
            prefill_samples_s=(float(m.params["prefill_s"]),),
            prompt_tokens=int(m.params["prompt_tokens"]),
            weight_bytes=int(m.params["weight_bytes"]),
            kv_bytes_per_token=int(m.params["kv_bytes_per_token"]),
            mean_context_tokens=float(m.params["mean_context_tokens"]),
            flops_per_token=float(m.params["flops_per_token"]),
        )
        for m in rows_m
    )
    return DecodeSweep(
        device=rows[0].device,
        dtype=rows[0].dtype,
        parameters=int(first["parameters"]),
        config=config,
        rows=rows,
        bandwidths=tuple(op_result(m, "copy", flops=0) for m in readings),
        peak=op_result(mm, mm.label.split(",")[0], bytes_moved=0),
    )


def run_decode(context: Context) -> list[Measurement | Skipped]:
    """The lesson's decode sweep on this device, sized by ``--quick`` and the memory budget."""
    device = context.device.type
    plan = fitting_plan(plan_for(device, context.quick), context.memory_budget_bytes)
    if plan is None:
        return [
            Skipped(
                ENTRY,
                f"the {device} decode model and its smallest KV cache do not fit the memory "
                f"budget of {context.memory_budget_bytes} bytes",
            )
        ]
    return list(sweep_measurements(measure_decode_sweep(device, plan)))


ENTRIES = (
    SuiteEntry(
        name=ENTRY,
        description="greedy decode tokens/s by batch size of a GPT with a KV cache, "
        "with the copy bandwidth and matmul rate it is bounded by",
        applies=lambda device: True,
        needs="nothing",
        run=run_decode,
    ),
)
