"""Render an all-reduce sweep: bandwidths by message size beside the ring formula's time.

One job: format what :mod:`gpulesson.timing.allreduce` measured and predicted as Markdown;
nothing here computes a figure of its own. Units are in the column headers: message sizes
in KiB or MiB (2^10, 2^20 bytes), times in microseconds, bandwidths in GB/s (10^9 bytes
per second). Used by the lesson ``multi-gpu.md``.

>>> from gpulesson.timing.allreduce import AllReduceSweep, AllReduceTiming, ring_predictions
>>> sweep = AllReduceSweep(backend="gloo", device="cpu", ranks=2, dtype="fp32",
...     threads_per_rank=1, link="loopback", check_ok=True, wall_s=1.0, timings=(
...     AllReduceTiming(message_bytes=2**20, ranks=2, samples_s=(0.002,)),))
>>> print(sweep_markdown(sweep, ring_predictions(sweep)).splitlines()[-1])
| 1 MiB | 1 | 2,000 | 0.524 | 0.524 | 2,000 | 1.0 |
"""

from __future__ import annotations

from collections.abc import Sequence

from gpulesson.timing.allreduce import AllReduceSweep, RingPrediction, size_label


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
        f"{sweep.backend} all-reduce of {sweep.dtype} tensors, {sweep.ranks} ranks on "
        f"{sweep.device}{threads}, over {sweep.link}; the sum was "
        f"{'checked and right' if sweep.check_ok else 'WRONG'}. Each time is the median of "
        f"{samples} samples, each sample the slowest rank's. The formula's column is "
        f"2(N-1)/N x size / {bus:,.3f} GB/s, the bus bandwidth of the largest size.",
        "",
        "| message | calls per sample | time (µs) | algorithm bandwidth (GB/s) "
        "| bus bandwidth (GB/s) | ring formula (µs) | measured / formula |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for t in sorted(sweep.timings, key=lambda t: t.message_bytes):
        p = by_size[t.message_bytes]
        lines.append(
            f"| {size_label(t.message_bytes)} | {t.calls_per_sample} | {t.median_s * 1e6:,.0f} "
            f"| {t.algorithm_bytes_per_s / 1e9:,.3f} | {t.bus_bytes_per_s / 1e9:,.3f} "
            f"| {p.predicted_s * 1e6:,.0f} | {p.measured_over_predicted:,.1f} |"
        )
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
