"""The lesson ``multi-gpu.md``: its renderers and texts.

Its pictures and tables: the ring, the links, the all-reduce sweep, ZeRO, tensor parallelism
and the pipeline bubble. They format what :mod:`gpulesson.timing.allreduce` measured and
predicted, and what :mod:`gpulesson.memory.comm` and :mod:`gpulesson.memory.parallel`
compute; nothing here computes a figure of its own. Units are in the column headers.

The all-reduce sweep: bandwidths by message size beside the ring formula's time, message
sizes in KiB or MiB (2^10, 2^20 bytes), times in microseconds, bandwidths in GB/s (10^9
bytes per second).

>>> from gpulesson.timing.allreduce import AllReduceSweep, AllReduceTiming, ring_predictions
>>> sweep = AllReduceSweep(backend="gloo", device="cpu", ranks=2, dtype="fp32",
...     threads_per_rank=1, link="loopback", check_ok=True, wall_s=1.0, timings=(
...     AllReduceTiming(message_bytes=2**20, ranks=2, samples_s=(0.002,)),))
>>> print(sweep_markdown(sweep, ring_predictions(sweep)).splitlines()[-1])
| 1 MiB | 1 | 2,000 | 0.524 | 0.524 | 2,000 | 1.0 |

The lesson's arithmetic (ring shares, link times, ZeRO stages, TP, bubbles): bytes in GB
(10^9) or, for activations that are powers of two, MiB and GiB (2^20, 2^30); bandwidths
in GB/s (10^9 bytes per second); times in milliseconds.

>>> from gpulesson.memory.comm import ring_rows
>>> print(ring_markdown(ring_rows(14e9, (2, 8))).splitlines()[-1])
| 8 | 1.750 | 14.0 | 24.5 |
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpulesson.course.common import about, figure
from gpulesson.memory.comm import BRIDGE_GPUS, LinkTime, RingRow, ZeroRow, formula
from gpulesson.memory.parallel import BubbleRow, TensorParallelStep
from gpulesson.tables import markdown_table
from gpulesson.text import inert
from gpulesson.timing.allreduce import AllReduceSweep, RingPrediction, size_label
from gpulesson.units import GB, GIB, MIB


def _spread_lines(sweep: AllReduceSweep) -> list[str]:
    found = [
        f"    - {size_label(t.message_bytes)}: {t.spread_warning}."
        for t in sweep.timings
        if t.spread_warning
    ]
    return ["", '!!! warning "Spread warning"', *found] if found else []


def sweep_markdown(sweep: AllReduceSweep, predictions: Sequence[RingPrediction]) -> str:
    """The sweep as a table: per size, time, algorithm and bus bandwidth, and the formula.

    The formula's column is ``predictions`` (computed by
    :func:`gpulesson.timing.allreduce.ring_predictions`), one per size, in size order.
    """
    by_size = {p.message_bytes: p for p in predictions}
    threads = f", {sweep.threads_per_rank} thread each" if sweep.device == "cpu" else ""
    samples = sweep.timings[0].repeats
    bus = predictions[0].bus_bytes_per_s / 1e9 if predictions else 0.0
    lines = [
        f"{inert(sweep.backend)} all-reduce of {inert(sweep.dtype)} tensors, {sweep.ranks} "
        f"ranks on {inert(sweep.device)}{threads}, over {inert(sweep.link)}; the sum was "
        f"{'checked and right' if sweep.check_ok else 'WRONG'}. Each time is the median of "
        f"{samples} samples, each sample the slowest rank's. The formula's column is "
        f"2(N-1)/N x size / {bus:,.3f} GB/s, the bus bandwidth of the largest size.",
        "",
    ]
    header = (
        "message",
        "calls per sample",
        "time (µs)",
        "algorithm bandwidth (GB/s)",
        "bus bandwidth (GB/s)",
        "ring formula (µs)",
        "measured / formula",
    )
    rows = []
    for t in sorted(sweep.timings, key=lambda t: t.message_bytes):
        p = by_size[t.message_bytes]
        rows.append(
            (
                size_label(t.message_bytes),
                str(t.calls_per_sample),
                f"{t.median_s * 1e6:,.0f}",
                f"{t.algorithm_bytes_per_s / 1e9:,.3f}",
                f"{t.bus_bytes_per_s / 1e9:,.3f}",
                f"{p.predicted_s * 1e6:,.0f}",
                f"{p.measured_over_predicted:,.1f}",
            )
        )
    lines.append(markdown_table(header, rows, align="r" * len(header)))
    return "\n".join(lines + _spread_lines(sweep))


def gpu_needed_markdown() -> str:
    """What a build without two CUDA GPUs and without a reference bundle says instead.

    >>> gpu_needed_markdown().splitlines()[0]
    '!!! note "These rows need more than one GPU"'
    """
    return (
        '!!! note "These rows need more than one GPU"\n'
        "    This build has fewer than two CUDA GPUs, and no reference result bundle it may show "
        "has the `all_reduce` rows, so NCCL's bus bandwidth by message size is not shown. On a "
        "machine with two or more GPUs, `gpulesson measure --only all_reduce` records it, and "
        "the snippet below prints it."
    )


def ring_markdown(rows: Sequence[RingRow]) -> str:
    """Each GPU count's share 2(N-1)/N and what each GPU sends, in GB."""
    return markdown_table(
        ("GPUs (N)", "2(N-1)/N", "gradients (GB)", "each GPU sends (GB)"),
        [
            (
                str(r.gpus),
                f"{r.share:.3f}",
                f"{r.message_bytes / GB:,.1f}",
                f"{r.sent_bytes / GB:,.1f}",
            )
            for r in rows
        ],
        align="rrrr",
    )


def links_markdown(rows: Sequence[LinkTime]) -> str:
    """Each GPU's links as stated, one direction's share, and the time to send the bytes.

    >>> from gpulesson.memory.comm import link_times
    >>> print(links_markdown(link_times(24.5e9, ("h100-sxm",))).splitlines()[2])
    | NVIDIA H100 SXM5 80GB | NVLink | 900 | 450 | 54.4 |
    """
    return markdown_table(
        ("GPU", "link", "stated, both directions (GB/s)", "one direction (GB/s)", "time (ms)"),
        [
            (
                r.gpu_name,
                r.link,
                f"{r.stated_gb_per_s:,.0f}",
                f"{r.one_way_bytes_per_s / GB:,.0f}",
                f"{r.seconds * 1e3:,.1f}",
            )
            for r in rows
        ],
        align="llrrr",
    )


def bridged_note(gpu_names: Sequence[str], gpus: int) -> str:
    """The sentence saying why PCIe cards have no NVLink row for a ring of ``gpus``.

    >>> bridged_note(["NVIDIA H100 PCIe 80GB"], 8).endswith("joins 2 cards and a ring of 8 runs "
    ...                                                   "over PCIe.")
    True
    >>> bridged_note([], 8)
    ''
    """
    if not gpu_names:
        return ""
    return (
        f"{', '.join(gpu_names)}: no NVLink row, because a PCIe card's NVLink Bridge joins "
        f"{BRIDGE_GPUS} cards and a ring of {gpus} runs over PCIe."
    )


def zero_markdown(rows: Sequence[ZeroRow]) -> str:
    """Each ZeRO stage: memory per GPU, the formula, bytes each GPU sends, and (when the rows
    carry a link time) the time at that link's one-direction peak.

    >>> from gpulesson.memory.comm import zero_tradeoffs
    >>> rows = zero_tradeoffs({"params": 7e9, "preset": "mixed-fp32-master"}, 8, "h100-sxm")
    >>> print(zero_markdown(rows).splitlines()[-1])
    | 3 (FSDP full shard) | 14.00 | A x (N-1)/N x (2P + G) | 36.75 | 1.50 | 82 |
    """
    names = {0: "0 (plain data parallel)", 3: "3 (FSDP full shard)"}
    link = rows[0].link_time if rows else None
    header = [
        "stage",
        "memory per GPU (GB)",
        "bytes each GPU sends",
        "sent per step (GB)",
        "x stage 0",
    ]
    align = "lrlrr"
    if link is not None:
        header.append(f"time on {link.link}, {link.one_way_bytes_per_s / GB:,.0f} GB/s (ms)")
        align += "r"
    cells = []
    for r in rows:
        row = [
            names.get(r.stage, str(r.stage)),
            f"{r.budget.total_bytes / GB:,.2f}",
            formula(r.stage),
            f"{r.comm.sent_bytes / GB:,.2f}",
            f"{r.comm.ratio_to_data_parallel:.2f}",
        ]
        if r.link_time is not None:
            row.append(f"{r.link_time.seconds * 1e3:,.0f}")
        cells.append(row)
    return markdown_table(header, cells, align=align)


def tensor_parallel_markdown(
    step: TensorParallelStep, links: Sequence[LinkTime], compute_s: float
) -> str:
    """A tensor-parallel micro-batch's all-reduces, their time on each link, and its compute.

    ``links`` are :func:`gpulesson.memory.comm.link_times` of ``step.sent_bytes``;
    ``compute_s`` is the micro-batch's arithmetic time it is set against (the caller says
    at which rate).

    >>> from gpulesson.memory.comm import link_times
    >>> from gpulesson.memory.parallel import tensor_parallel_step
    >>> s = tensor_parallel_step(batch=1, seq=1024, hidden=1024, layers=2, tensor_parallel=2,
    ...                          bytes_per_value=2)
    >>> print(tensor_parallel_markdown(s, link_times(s.sent_bytes, ("h100-sxm",)), 0.5))
    | quantity | value |
    |---|---:|
    | all-reduces per micro-batch (4 per layer x 2 layers) | 8 |
    | one all-reduce: batch x seq x hidden x bytes | 2 MiB |
    | each GPU sends per micro-batch (t = 2) | 0.02 GiB |
    | time on NVIDIA H100 SXM5 80GB's NVLink, 450 GB/s one way | 0 ms |
    | time on NVIDIA H100 SXM5 80GB's PCIe Gen5 x16, 64 GB/s one way | 0 ms |
    | arithmetic of the micro-batch | 500 ms |
    """
    rows = [
        (
            f"all-reduces per micro-batch (4 per layer x {step.layers} layers)",
            f"{step.all_reduces:,}",
        ),
        ("one all-reduce: batch x seq x hidden x bytes", f"{step.message_bytes / MIB:,.0f} MiB"),
        (
            f"each GPU sends per micro-batch (t = {step.tensor_parallel})",
            f"{step.sent_bytes / GIB:,.2f} GiB",
        ),
    ]
    rows += [
        (
            f"time on {t.gpu_name}'s {t.link}, {t.one_way_bytes_per_s / GB:,.0f} GB/s one way",
            f"{t.seconds * 1e3:,.0f} ms",
        )
        for t in links
    ]
    rows.append(("arithmetic of the micro-batch", f"{compute_s * 1e3:,.0f} ms"))
    return markdown_table(("quantity", "value"), rows)


def bubble_markdown(rows: Sequence[BubbleRow]) -> str:
    """The idle share of a pipeline step, one row per depth, one column per micro-batch count.

    >>> from gpulesson.memory.parallel import bubble_table
    >>> print(bubble_markdown(bubble_table((4,), (1, 8))).splitlines()[-1])
    | 4 | 75% | 27% |
    """
    counts = [m for m, _ in rows[0].fractions] if rows else []
    header = ["stages (p)", *(f"m = {m}" for m in counts)]
    cells = [[str(r.stages), *(f"{f:.0%}" for _, f in r.fractions)] for r in rows]
    return markdown_table(header, cells, align="r" * len(header))


def allreduce_time_readings(facts: Mapping[str, Any]) -> dict[str, str]:
    """An all-reduce four times the largest measured size on two ranks (ms), and three slips.

    Reads ``multigpu.gloo_largest_bus_gbs`` (bus bandwidth at the largest size, GB/s) and
    ``multigpu.gloo_largest_bytes``. With two ranks 2(N-1)/N is 1, so the ring formula gives
    4 x size / bus bandwidth (``ring``). ``factor_two`` doubles it (2(N-1)/N read as 2);
    ``eight_gpus`` uses eight GPUs' factor, 1.75; ``bits`` divides bytes by a rate in bits
    (8 times too long). Refuses readings that would make two options read the same.
    ``bus_gbs`` and ``largest_mib`` are the measured inputs, for the prompt.

    >>> allreduce_time_readings({"multigpu.gloo_largest_bus_gbs": 0.8,
    ...                          "multigpu.gloo_largest_bytes": 67108864})
    ... # doctest: +NORMALIZE_WHITESPACE
    {'ring': '340', 'factor_two': '670', 'eight_gpus': '590', 'bits': '2,700', 'size_mib': '256',
     'bus_gbs': '0.80', 'largest_mib': '64'}
    """
    bus = float(facts["multigpu.gloo_largest_bus_gbs"]) * 1e9
    size = 4 * float(facts["multigpu.gloo_largest_bytes"])
    ms = size / bus * 1e3
    values = {
        "ring": about(ms),
        "factor_two": about(2 * ms),
        "eight_gpus": about(1.75 * ms),
        "bits": about(8 * ms),
    }
    if len(set(values.values())) != len(values):
        raise ValueError(f"allreduce_time_readings: two options read the same: {values}")
    return {
        **values,
        "size_mib": f"{size / 2**20:,.0f}",
        "bus_gbs": about(bus / 1e9),
        "largest_mib": f"{size / 4 / 2**20:,.0f}",
    }


def ring_send_readings(facts: Mapping[str, Any]) -> dict[str, str]:
    """What each GPU sends in an 8-GPU ring all-reduce (GB), and three ways to miscount it.

    Reads ``multigpu.grad_gb`` (the gradients all-reduced, GB) and ``multigpu.ring_8_gb``
    (what the page's ring block computed each GPU sends: 2(N-1)/N x the gradients).
    ``naive`` sends a copy to each of the 7 others; ``shard`` counts one eighth, sent once;
    ``whole`` sums the whole ring's traffic, 2 x the gradients x 8. The four always differ
    (1.75, 7, 1/8 and 16 times the gradients).

    >>> ring_send_readings({"multigpu.grad_gb": 28.0, "multigpu.ring_8_gb": 49.0})
    {'grad': '28', 'ring': '49', 'naive': '196', 'shard': '3.5', 'whole': '448'}
    """
    grad, ring = float(facts["multigpu.grad_gb"]), float(facts["multigpu.ring_8_gb"])
    return {
        "grad": figure(grad),
        "ring": figure(ring),
        "naive": figure(7 * grad),
        "shard": figure(grad / 8),
        "whole": figure(2 * grad * 8),
    }
