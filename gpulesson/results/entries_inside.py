"""Suite entries for the lesson "Inside the GPU": cache sweep, strided reads, attention, fp8.

Each entry calls the function the lesson calls and keeps its samples:

* ``cache_sweep``: read bandwidth per working-set size
  (:func:`gpulesson.inside.cache_sweep.measure_sweep`): ``cache_sweep.ws<bytes>`` in B/s,
  and ``cache_sweep.fastest``, the fastest size's row again, carrying the whole curve as
  its ``series`` (working set in bytes against B/s);
* ``strided``: useful bandwidth of ``x[::s].sum()`` per stride
  (:func:`gpulesson.inside.strided.measure_strided`): ``strided.s<stride>`` in B/s;
* ``attention``: traced peak bytes of explicit attention and SDPA per sequence length
  (:func:`gpulesson.inside.attention_io.measure_peaks`, ``attention.peak.<impl>.n<N>``)
  and their median time on the device (``attention.time.<impl>.n<N>``, seconds);
* ``fp8_matmul``: an fp8 E4M3 matmul through ``torch._scaled_mm`` on CUDA GPUs of compute
  capability 8.9 or more (Ada, Hopper, Blackwell): ``fp8_matmul.n<size>`` in FLOP/s.

The full-size run (``quick=False``) measures exactly what the lesson ``inside-gpu.md``
shows; ``--quick`` sweeps a CPU only to 16 MiB, with fewer rounds, and times attention at
the CPU's lengths. The sizes are the ``cache_sweep``, ``strided`` and ``attention`` rows
(``_quick`` with ``--quick``) of ``gpulesson/timing/plans.json``. The
``*_from_measurements`` functions rebuild the frozen results the lesson's renderers take
(:mod:`gpulesson.course.inside_gpu`) from the rows, so a page renders a bundle's rows as it
rendered a measurement of its own.

>>> [e.name for e in ENTRIES]
['cache_sweep', 'strided', 'attention', 'fp8_matmul']
"""

from __future__ import annotations

import dataclasses
import re
import statistics
import time
from collections.abc import Sequence

import torch

from gpulesson.inside.attention_io import (
    AttentionPeak,
    AttentionTime,
    measure_peaks,
    time_attention,
)
from gpulesson.inside.cache_sweep import Sweep, SweepPoint, measure_sweep, sweep_sizes
from gpulesson.inside.strided import StridePoint, StrideSweep, measure_strided
from gpulesson.results.bundle import Measurement, Series, Skipped
from gpulesson.results.suite import Context, Device, SuiteEntry
from gpulesson.timing import plans

_SIZE_ROW = re.compile(r"^cache_sweep\.ws\d+$")


def _rate(
    name: str, entry: str, n_bytes: int, samples: tuple[float, ...], label: str, params: dict
) -> Measurement:
    median = statistics.median(samples)
    return Measurement(
        name=name,
        entry=entry,
        unit="B/s",
        value=n_bytes / median,
        samples=samples,
        samples_unit="s",
        label=label,
        params={"bytes": n_bytes, **params},
    )


def sweep_measurements(sweep: Sweep) -> list[Measurement]:
    """One B/s row per working-set size, then the fastest size's row with the whole curve.

    Each row keeps its samples (seconds per read of ``bytes`` bytes), the device and the
    number of rounds, so :func:`sweep_from_measurements` gives the same :class:`Sweep` back.
    """
    params = {"device": sweep.device, "rounds": sweep.rounds}
    rows = [
        _rate(
            f"cache_sweep.ws{p.working_set_bytes}",
            "cache_sweep",
            p.bytes_read,
            p.samples_s,
            f"read bandwidth, working set {p.working_set_bytes} bytes",
            {"working_set_bytes": p.working_set_bytes, **params},
        )
        for p in sweep.points
    ]
    if not rows:
        return rows
    fastest = max(rows, key=lambda m: m.value)
    curve = Series(
        x_label="working set",
        x_unit="bytes",
        y_unit="B/s",
        points=tuple((float(p.working_set_bytes), p.bytes_per_s) for p in sweep.points),
    )
    rows.append(
        dataclasses.replace(
            fastest,
            name="cache_sweep.fastest",
            label="the fastest working set's read bandwidth; the series is the whole sweep",
            series=curve,
        )
    )
    return rows


def sweep_from_measurements(measurements: Sequence[Measurement]) -> Sweep | None:
    """The :class:`Sweep` that ``cache_sweep`` rows came from; None without any.

    >>> sweep = Sweep(device="cpu", rounds=1, points=(SweepPoint(working_set_bytes=8192,
    ...     bytes_per_s=8192.0, bytes_read=4096, samples_s=(0.5,)),))
    >>> sweep_from_measurements(sweep_measurements(sweep)) == sweep
    True
    """
    rows = sorted(
        (m for m in measurements if m.entry == "cache_sweep" and _SIZE_ROW.match(m.name)),
        key=lambda m: int(m.params["working_set_bytes"]),
    )
    if not rows:
        return None
    return Sweep(
        device=str(rows[0].params["device"]),
        rounds=int(rows[0].params["rounds"]),
        points=tuple(
            SweepPoint(
                working_set_bytes=int(m.params["working_set_bytes"]),
                bytes_per_s=m.value,
                bytes_read=int(m.params["bytes"]),
                samples_s=tuple(m.samples),
            )
            for m in rows
        ),
    )


def run_cache_sweep(context: Context) -> list[Measurement]:
    """One row per working-set size: the lesson's sweep in full, a shorter one with --quick."""
    plan = plans.for_run(context.device.type, "cache_sweep", context.quick)
    sweep = measure_sweep(
        context.device.type,
        sizes=sweep_sizes(plan["smallest_bytes"], plan["largest_bytes"]),
        rounds=plan["rounds"],
        bytes_per_sample=plan["sample_bytes"],
    )
    return sweep_measurements(sweep)


def strided_measurements(sweep: StrideSweep) -> list[Measurement]:
    """One useful-bandwidth row per stride, with its samples and the tensor's size."""
    return [
        _rate(
            f"strided.s{p.stride}",
            "strided",
            p.elements * 4,
            p.samples_s,
            f"useful bandwidth, x[::{p.stride}].sum()",
            {
                "stride": p.stride,
                "elements": p.elements,
                "tensor_bytes": sweep.tensor_bytes,
                "device": sweep.device,
            },
        )
        for p in sweep.points
    ]


def strided_from_measurements(measurements: Sequence[Measurement]) -> StrideSweep | None:
    """The :class:`StrideSweep` that ``strided`` rows came from; None without any.

    >>> s = StrideSweep(device="cpu", tensor_bytes=64, points=(StridePoint(stride=2,
    ...     elements=8, median_s=2e-6, samples_s=(1e-6, 2e-6, 3e-6)),))
    >>> strided_from_measurements(strided_measurements(s)) == s
    True
    """
    rows = sorted(
        (m for m in measurements if m.entry == "strided" and m.name.startswith("strided.s")),
        key=lambda m: int(m.params["stride"]),
    )
    if not rows:
        return None
    return StrideSweep(
        device=str(rows[0].params["device"]),
        tensor_bytes=int(rows[0].params["tensor_bytes"]),
        points=tuple(
            StridePoint(
                stride=int(m.params["stride"]),
                elements=int(m.params["elements"]),
                median_s=statistics.median(m.samples),
                samples_s=tuple(m.samples),
            )
            for m in rows
        ),
    )


def run_strided(context: Context) -> list[Measurement]:
    """One row per stride."""
    plan = plans.for_run(context.device.type, "strided", context.quick)
    if not context.fits(plan["tensor_bytes"]):
        return []
    sweep = measure_strided(
        context.device.type, tensor_bytes=plan["tensor_bytes"], rounds=plan["rounds"]
    )
    return strided_measurements(sweep)


PEAK_LENGTHS = (256, 512, 1024, 2048)  # the lesson's traced lengths


def attention_measurements(
    peaks: Sequence[AttentionPeak], times: Sequence[AttentionTime], device: str
) -> list[Measurement]:
    """Traced peak bytes per implementation and length, then the timed calls' seconds."""
    out = []
    for p in peaks:
        for impl, value in (("standard", p.standard_peak_bytes), ("sdpa", p.sdpa_peak_bytes)):
            out.append(
                Measurement(
                    name=f"attention.peak.{impl}.n{p.seq_len}",
                    entry="attention",
                    unit="bytes",
                    value=float(value),
                    samples=(float(value),),
                    samples_unit="bytes",
                    label=f"traced peak, {impl} attention, N = {p.seq_len}",
                    params={"seq_len": p.seq_len, "head_dim": p.head_dim, "heads": p.heads},
                )
            )
    for t in times:
        for impl, samples in (("standard", t.standard_samples_s), ("sdpa", t.sdpa_samples_s)):
            out.append(
                Measurement(
                    name=f"attention.time.{impl}.n{t.seq_len}",
                    entry="attention",
                    unit="s",
                    value=statistics.median(samples),
                    samples=samples,
                    samples_unit="s",
                    label=f"{impl} attention, N = {t.seq_len}, fp32",
                    params={"seq_len": t.seq_len, "head_dim": 64, "heads": 1, "device": device},
                )
            )
    return out


def _by_length(measurements: Sequence[Measurement], kind: str) -> dict[int, dict[str, Measurement]]:
    found: dict[int, dict[str, Measurement]] = {}
    for m in measurements:
        parts = m.name.split(".")
        if m.entry == "attention" and len(parts) == 4 and parts[1] == kind:
            found.setdefault(int(m.params["seq_len"]), {})[parts[2]] = m
    return {n: found[n] for n in sorted(found) if set(found[n]) == {"standard", "sdpa"}}


def peaks_from_measurements(measurements: Sequence[Measurement]) -> tuple[AttentionPeak, ...]:
    """The traced peaks that ``attention`` rows came from, by sequence length.

    >>> peak = AttentionPeak(seq_len=4, head_dim=2, heads=1, standard_peak_bytes=96,
    ...                      sdpa_peak_bytes=64)
    >>> peaks_from_measurements(attention_measurements([peak], [], "cpu")) == (peak,)
    True
    """
    return tuple(
        AttentionPeak(
            seq_len=n,
            head_dim=int(row["standard"].params["head_dim"]),
            heads=int(row["standard"].params["heads"]),
            standard_peak_bytes=int(row["standard"].value),
            sdpa_peak_bytes=int(row["sdpa"].value),
        )
        for n, row in _by_length(measurements, "peak").items()
    )


def times_from_measurements(measurements: Sequence[Measurement]) -> tuple[AttentionTime, ...]:
    """The timings that ``attention`` rows came from, by sequence length (medians of samples).

    >>> t = AttentionTime(seq_len=8, standard_s=2.0, sdpa_s=1.0,
    ...                   standard_samples_s=(1.0, 2.0, 3.0), sdpa_samples_s=(1.0,))
    >>> times_from_measurements(attention_measurements([], [t], "cpu")) == (t,)
    True
    """
    return tuple(
        AttentionTime(
            seq_len=n,
            standard_s=statistics.median(row["standard"].samples),
            sdpa_s=statistics.median(row["sdpa"].samples),
            standard_samples_s=tuple(row["standard"].samples),
            sdpa_samples_s=tuple(row["sdpa"].samples),
        )
        for n, row in _by_length(measurements, "time").items()
    )


def run_attention(context: Context) -> list[Measurement]:
    """Traced peaks at four lengths, then times at three on the device (the lesson's plan)."""
    device = context.device.type
    lengths = plans.for_run(device, "attention", context.quick)["time_lengths"]
    return attention_measurements(
        measure_peaks(PEAK_LENGTHS), time_attention(device, lengths), device
    )


def fp8_supported(device: Device) -> bool:
    """A CUDA GPU of compute capability 8.9 or more, and a torch with E4M3 and _scaled_mm."""
    return (
        device.type == "cuda"
        and device.capability is not None
        and device.capability >= (8, 9)
        and hasattr(torch, "float8_e4m3fn")
        and hasattr(torch, "_scaled_mm")
    )


def run_fp8_matmul(context: Context) -> list[Measurement | Skipped]:
    """An n x n fp8 E4M3 matmul with unit scales, bf16 output, median of timed calls."""
    n = 2048 if context.quick else 8192
    a = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn).t()  # column-major
    one = torch.ones((), device="cuda")
    try:
        torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    except (RuntimeError, TypeError) as exc:
        return [Skipped(entry="fp8_matmul", reason=f"torch._scaled_mm refused: {exc}"[:300])]
    samples = []
    calls = 10
    for _ in range(7):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - start) / calls)
    flop = 2 * n**3
    return [
        Measurement(
            name=f"fp8_matmul.n{n}",
            entry="fp8_matmul",
            unit="FLOP/s",
            value=flop / statistics.median(samples),
            samples=tuple(samples),
            samples_unit="s",
            label=f"fp8 E4M3 matmul, n = {n}, bf16 output",
            dtype="fp8",
            limit="peak_flops",
            params={"flop": flop, "n": n},
        )
    ]


ENTRIES = (
    SuiteEntry(
        name="cache_sweep",
        description="read bandwidth against working-set size (the memory hierarchy)",
        applies=lambda d: True,
        needs="nothing",
        run=run_cache_sweep,
    ),
    SuiteEntry(
        name="strided",
        description="useful bandwidth of a strided read against stride",
        applies=lambda d: True,
        needs="nothing",
        run=run_strided,
    ),
    SuiteEntry(
        name="attention",
        description="peak memory and time of explicit attention against SDPA",
        applies=lambda d: True,
        needs="nothing",
        run=run_attention,
    ),
    SuiteEntry(
        name="fp8_matmul",
        description="an fp8 E4M3 matmul through torch._scaled_mm",
        applies=fp8_supported,
        needs="a CUDA GPU of compute capability 8.9 or more (Ada, Hopper, Blackwell)",
        run=run_fp8_matmul,
    ),
)
