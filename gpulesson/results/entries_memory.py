"""Suite entries about memory: measured GPT training-step peaks beside the estimate, and an OOM.

``gpt_memory`` runs the GPT-2 cases the lesson "What fills GPU memory" measures
(:func:`gpulesson.memory.measure.build_cases`) through
:func:`gpulesson.memory.measure.run_accuracy`: on CUDA the peak is
``torch.cuda.max_memory_allocated()``, elsewhere fake tensors (nothing allocated); beside
each, ``gpulesson.memory``'s estimate and its error.

``oom`` provokes one out-of-memory error on purpose, catches it and diagnoses it with
:func:`gpulesson.errors.diagnose.diagnose`: on CUDA it asks for twice the card's memory,
which fails at once without touching what is allocated; on a CPU or Apple GPU it asks for
``HOST_OOM_BYTES`` (1 PiB, more than any machine's address space, so the allocator refuses
it without the operating system doing anything).

>>> [e.name for e in ENTRIES]
['gpt_memory', 'oom']
"""

from __future__ import annotations

import re

import torch

from gpulesson.errors.diagnose import diagnose
from gpulesson.memory.measure import build_cases, run_accuracy
from gpulesson.results.bundle import Measurement
from gpulesson.results.measurements import single
from gpulesson.results.suite import Context, SuiteEntry

QUICK_CASES = 1  # --quick measures the first cases of the lesson's grid only
HOST_OOM_BYTES = 2**50


def case_slug(label: str) -> str:
    """A measurement-name part from a case label.

    >>> case_slug("V512 s64 h64 L2 b4 eager no-ckpt fp32 adamw")
    'v512_s64_h64_l2_b4_eager_no_ckpt_fp32_adamw'
    """
    return re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_")


def run_gpt_memory(context: Context) -> list[Measurement]:
    """Measured peak of each GPT-2 training step beside the estimate."""
    cases = build_cases()
    if context.quick:
        cases = cases[:QUICK_CASES]
    mode = "cuda" if context.device.type == "cuda" else "fake"
    out = []
    for row in run_accuracy(cases, mode=mode):
        measured = row.measured
        out.append(
            single(
                measured.peak_bytes,
                name=f"gpt_memory.{case_slug(row.case.label())}",
                entry="gpt_memory",
                unit="bytes",
                label=f"GPT-2 step peak: {row.case.label()}",
                limit="device_memory" if mode == "cuda" else None,
                params={
                    "method": measured.method,
                    "peak_phase": measured.peak_phase,
                    "estimate_bytes": row.estimate_bytes,
                    "estimate_phase": row.estimate_phase,
                    "estimate_error": round(row.error, 6),
                },
            )
        )
    return out


def provoke_oom(device: str, total_bytes: int | None) -> tuple[int, BaseException]:
    """Ask ``device`` for more memory than it has; return the request and the error raised."""
    if device == "cuda":
        request = 2 * int(total_bytes or torch.cuda.get_device_properties(0).total_memory)
    else:
        request = HOST_OOM_BYTES
    try:
        torch.empty(request, dtype=torch.uint8, device=device)
    except (torch.OutOfMemoryError, RuntimeError) as exc:
        return request, exc
    raise ValueError(  # pragma: no cover - no machine holds 1 PiB
        f"asking {device} for {request} bytes did not fail: cannot provoke an OOM here"
    )


def run_oom(context: Context) -> list[Measurement]:
    """The request that failed, as the diagnosis read it from the error message."""
    device = context.device.type
    request, exc = provoke_oom(device, context.device.total_bytes)
    d = diagnose(exc)
    read = d.requested_bytes if d.requested_bytes is not None else request
    return [
        single(
            read,
            name="oom.requested",
            entry="oom",
            unit="bytes",
            label="an out-of-memory error provoked on purpose: the request, as diagnosed",
            params={
                "asked_bytes": request,
                "error_type": type(exc).__name__,
                "kind": d.kind,
                "verdict": d.verdict,
                "diagnosed_total_bytes": d.total_bytes,
                "diagnosed_free_bytes": d.free_bytes,
                "read_from_message": d.requested_bytes is not None,
            },
            note=d.summary,
        )
    ]


ENTRIES = (
    SuiteEntry(
        name="gpt_memory",
        description="measured peak memory of the memory lesson's GPT-2 steps beside the estimate",
        applies=lambda device: True,
        needs="nothing",
        run=run_gpt_memory,
    ),
    SuiteEntry(
        name="oom",
        description="one out-of-memory error provoked on purpose, caught and diagnosed",
        applies=lambda device: True,
        needs="nothing",
        run=run_oom,
    ),
)
