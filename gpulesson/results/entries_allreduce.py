"""Suite entry ``all_reduce_gloo``, and reading any all-reduce sweep back from its rows.

``all_reduce_gloo`` runs the multi-GPU lesson's CPU sweep: an all-reduce of each message
size between two processes over loopback with the gloo backend
(:func:`gpulesson.timing.allreduce.measure_gloo_sweep`), one thread each. Each size is one
measurement ``all_reduce_gloo.<size>`` in B/s of bus bandwidth: its samples the seconds per
all-reduce (each the slower rank's), its ``bytes`` what each rank sends (2(N-1)/N x the
message), as the NCCL entry ``all_reduce`` writes its rows
(:mod:`gpulesson.results.entries_device`). :func:`sweep_from_measurements` reads either
back into the :class:`~gpulesson.timing.allreduce.AllReduceSweep` the lesson renders.

>>> [e.name for e in ENTRIES]
['all_reduce_gloo']
"""

from __future__ import annotations

from collections.abc import Sequence

from gpulesson.results.bundle import Measurement
from gpulesson.results.measurements import throughput
from gpulesson.results.suite import Context, SuiteEntry
from gpulesson.timing.allreduce import (
    DEFAULT_SIZES_BYTES,
    AllReduceSweep,
    AllReduceTiming,
    measure_gloo_sweep,
    size_label,
    size_name,
)
from gpulesson.timing.results import OpResult

ENTRY = "all_reduce_gloo"
#: By ``context.quick``: (sizes, warm-up calls, samples per size, seconds before the ranks
#: are stopped). The full plan is the lesson's.
PLANS = {
    False: (DEFAULT_SIZES_BYTES, 2, 5, 60.0),
    True: (DEFAULT_SIZES_BYTES[::2], 1, 3, 60.0),
}


def sweep_measurements(sweep: AllReduceSweep, *, entry: str, prefix: str) -> list[Measurement]:
    """One bus-bandwidth measurement ``<prefix>.<size>`` per message size of ``sweep``."""
    out = []
    for t in sweep.timings:
        op = OpResult(
            name="all-reduce",
            device=sweep.device,
            dtype=sweep.dtype,
            threads=sweep.threads_per_rank,
            samples_s=t.samples_s,
            flops=0,
            bytes_moved=round(t.sent_bytes),
            calls_per_sample=t.calls_per_sample,
        )
        out.append(
            throughput(
                op,
                name=f"{prefix}.{size_name(t.message_bytes)}",
                entry=entry,
                unit="B/s",
                label=f"all-reduce bus bandwidth over {sweep.ranks} ranks, "
                f"{size_label(t.message_bytes)}",
                params={
                    "gpus": sweep.ranks,
                    "message_bytes": t.message_bytes,
                    "backend": sweep.backend,
                    "sum_checked": sweep.check_ok,
                    "device": sweep.device,
                    "threads": sweep.threads_per_rank,
                    "link": sweep.link,
                    "calls_per_sample": t.calls_per_sample,
                },
            )
        )
    return out


def sweep_from_measurements(
    measurements: Sequence[Measurement], prefix: str, link: str
) -> AllReduceSweep | None:
    """The sweep whose rows are ``<prefix>.<size>`` in ``measurements``; None without any.

    ``link`` says what carried the bytes when the rows do not (bundles made before they
    recorded it).
    """
    rows = [
        m for m in measurements if m.name.startswith(prefix + ".") and "message_bytes" in m.params
    ]
    if not rows:
        return None
    timings = tuple(
        AllReduceTiming(
            message_bytes=int(m.params["message_bytes"]),
            ranks=int(m.params["gpus"]),
            samples_s=tuple(m.samples),
            calls_per_sample=int(m.params.get("calls_per_sample") or 1),
        )
        for m in rows
    )
    first = rows[0]
    return AllReduceSweep(
        backend=str(first.params.get("backend", "nccl")),
        device=str(first.params.get("device", "cuda")),
        ranks=timings[0].ranks,
        dtype=first.dtype or "fp32",
        threads_per_rank=int(first.params.get("threads") or 1),
        link=str(first.params.get("link") or link),
        timings=tuple(sorted(timings, key=lambda t: t.message_bytes)),
        check_ok=all(bool(m.params.get("sum_checked", True)) for m in rows),
        wall_s=None,
    )


def run_all_reduce_gloo(context: Context) -> list[Measurement]:
    """The lesson's gloo sweep on two CPU processes over loopback."""
    sizes, warmup, repeats, timeout_s = PLANS[context.quick]
    sweep = measure_gloo_sweep(sizes, warmup=warmup, repeats=repeats, timeout_s=timeout_s)
    return sweep_measurements(sweep, entry=ENTRY, prefix=ENTRY)


ENTRIES = (
    SuiteEntry(
        name=ENTRY,
        description="all-reduce bus bandwidth by message size between two CPU processes "
        "(gloo over loopback)",
        applies=lambda device: device.type == "cpu",
        needs="the CPU (gloo over loopback; GPUs have the all_reduce entry)",
        run=run_all_reduce_gloo,
    ),
)
