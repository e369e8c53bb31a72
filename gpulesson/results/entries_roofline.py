"""Suite entry ``roofline``: the roofline lesson's six operations, from which its roofs come.

It runs :func:`gpulesson.timing.roofline.measure_roofline` (a copy, an fp32 add, a softmax,
an n = 64 and a large matmul) and :func:`gpulesson.timing.roofline.measure_add` in bf16 on
the same element count, with the lesson's plan for the device
(:func:`gpulesson.timing.bench.plan_for`; ``--quick`` takes smaller tensors). Each
operation becomes one measurement ``roofline.<op>``: the streaming ones (copy, adds,
softmax) in B/s, the matmuls in FLOP/s, each with its samples (seconds per call) and both
work counts in its params (``flop`` and ``bytes``), so the roofline's intensities,
ceilings and shares follow from the bundle alone.
:func:`roofline_from_measurements` reads them back into the
:class:`~gpulesson.timing.results.Roofline` the lesson renders, and the bf16 add.

>>> [e.name for e in ENTRIES], OPS
(['roofline'], ('copy', 'add', 'softmax', 'small_mm', 'large_mm', 'bf16_add'))
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from gpulesson.results.bundle import Measurement
from gpulesson.results.measurements import op_result, throughput
from gpulesson.results.suite import Context, SuiteEntry
from gpulesson.timing import plans
from gpulesson.timing.bench import DevicePlan, plan_for
from gpulesson.timing.results import OpResult, Roofline
from gpulesson.timing.roofline import measure_add, measure_roofline
from gpulesson.units import MIB

ENTRY = "roofline"
#: The measurements, by short name, in the order the lesson's table lists them after the copy.
OPS = ("copy", "add", "softmax", "small_mm", "large_mm", "bf16_add")
_MATMULS = ("small_mm", "large_mm")
_QUICK_FIELDS = ("stream_bytes", "large_matmul_n", "min_run_time_s")
#: ``--quick`` sizes by device, from the plan table: (bytes per streamed tensor, large
#: matmul n, min run time s). A full run takes the lesson's (``bench``).
QUICK = {
    device: tuple(plans.sizes(device, "roofline_quick")[k] for k in _QUICK_FIELDS)
    for device in plans.DEVICE_KINDS
}


def plan(context: Context) -> DevicePlan:
    """The lesson's plan here (smaller with ``--quick``), its tensors within the memory budget.

    An add holds three tensors of ``stream_bytes``; the size is halved until they fit.

    >>> from gpulesson.results.suite import Device
    >>> cpu = Device("cpu", "cpu", 8 * 2**30, 4 * 2**30, 0, None)
    >>> p = plan(Context(cpu, quick=False))
    >>> p.stream_bytes // MIB, p.small_matmul_n, p.large_matmul_n
    (64, 64, 1024)
    """
    device = context.device.type
    sizes = plan_for(device)
    if context.quick:
        stream, large, run = QUICK[device]
        sizes = dataclasses.replace(
            sizes, stream_bytes=stream, large_matmul_n=large, min_run_time_s=run
        )
    stream = sizes.stream_bytes
    while stream > 16 * MIB and not context.fits(3 * stream):
        stream //= 2
    return dataclasses.replace(sizes, stream_bytes=stream)


def roofline_measurements(roof: Roofline, bf16_add: OpResult) -> list[Measurement]:
    """The copy, the four operations of ``roof`` and the bf16 add as bundle measurements."""
    ops = (roof.bandwidth, *roof.ops, bf16_add)
    out = []
    for short, op in zip(OPS, ops, strict=True):
        matmul = short in _MATMULS
        other = {"bytes": op.bytes_moved} if matmul else {"flop": op.flops}
        out.append(
            throughput(
                op,
                name=f"{ENTRY}.{short}",
                entry=ENTRY,
                unit="FLOP/s" if matmul else "B/s",
                label=f"{op.name}, {op.dtype}: a point under the roofline",
                dtype=op.dtype,
                limit="peak_flops" if matmul else "memory_bandwidth",
                # the other work count too, so intensity = flop / bytes comes from the bundle
                params={"op": op.name, **other},
                note="Samples: seconds per call; value = the unit's work count in params "
                "over the median sample.",
            )
        )
    return out


def roofline_from_measurements(
    measurements: Sequence[Measurement],
) -> tuple[Roofline, OpResult] | None:
    """The measured :class:`Roofline` (copy and large matmul as its roofs, the add, softmax
    and both matmuls as its operations) and the bf16 add; None without every operation."""
    by_name = {m.name: m for m in measurements if m.entry == ENTRY}
    if any(f"{ENTRY}.{short}" not in by_name for short in OPS):
        return None
    ops = {
        short: op_result(m, str(m.params["op"]))
        for short, m in ((s, by_name[f"{ENTRY}.{s}"]) for s in OPS)
    }
    roof = Roofline(
        device=ops["copy"].device,
        bandwidth=ops["copy"],
        peak=ops["large_mm"],
        ops=(ops["add"], ops["softmax"], ops["small_mm"], ops["large_mm"]),
    )
    return roof, ops["bf16_add"]


def run_roofline(context: Context) -> list[Measurement]:
    """The lesson's roofline on this device: copy, add, softmax, two matmuls, the bf16 add."""
    device = context.device.type
    sizes = plan(context)
    roof = measure_roofline(device, sizes)
    # The same element count as the fp32 add, in half the bytes.
    bf16_add = measure_add(device, sizes.stream_bytes // 2, "bf16", sizes.min_run_time_s)
    return roofline_measurements(roof, bf16_add)


ENTRIES = (
    SuiteEntry(
        name=ENTRY,
        description="the roofline lesson's copy, adds (fp32, bf16), softmax and two matmuls, "
        "with their FLOP and byte counts",
        applies=lambda device: True,
        needs="nothing",
        run=run_roofline,
    ),
)
