"""Suite entries for the lesson "Inside the GPU": cache sweep, strided reads, attention, fp8.

Each entry calls the function the lesson calls and keeps its samples:

* ``cache_sweep``: read bandwidth per working-set size
  (:func:`gpulesson.inside.cache_sweep.measure_sweep`): ``cache_sweep.ws<bytes>`` in B/s;
* ``strided``: useful bandwidth of ``x[::s].sum()`` per stride
  (:func:`gpulesson.inside.strided.measure_strided`): ``strided.s<stride>`` in B/s;
* ``attention``: traced peak bytes of explicit attention and SDPA per sequence length
  (:func:`gpulesson.inside.attention_io.measure_peaks`, ``attention.peak.<impl>.n<N>``)
  and their median time on the device (``attention.time.<impl>.n<N>``, seconds);
* ``fp8_matmul``: an fp8 E4M3 matmul through ``torch._scaled_mm`` on CUDA GPUs of compute
  capability 8.9 or more (Ada, Hopper, Blackwell): ``fp8_matmul.n<size>`` in FLOP/s.

>>> [e.name for e in ENTRIES]
['cache_sweep', 'strided', 'attention', 'fp8_matmul']
"""

from __future__ import annotations

import statistics
import time

import torch

from gpulesson.inside.attention_io import measure_peaks, time_attention
from gpulesson.inside.cache_sweep import measure_sweep, sweep_sizes
from gpulesson.inside.strided import measure_strided
from gpulesson.results.bundle import Measurement, Skipped
from gpulesson.results.suite import Context, Device, SuiteEntry


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


def run_cache_sweep(context: Context) -> list[Measurement]:
    """One row per working-set size."""
    device = context.device.type
    largest = (16 if context.quick else 128) * 2**20 if device == "cpu" else 2**30
    sizes = sweep_sizes(8 * 1024, largest)
    sweep = measure_sweep(device, sizes=sizes, rounds=3 if context.quick else 7)
    return [
        _rate(
            f"cache_sweep.ws{p.working_set_bytes}",
            "cache_sweep",
            p.bytes_read,
            p.samples_s,
            f"read bandwidth, working set {p.working_set_bytes} bytes",
            {"working_set_bytes": p.working_set_bytes},
        )
        for p in sweep.points
    ]


def run_strided(context: Context) -> list[Measurement]:
    """One row per stride."""
    device = context.device.type
    size = (16 if context.quick else 64) * 2**20 if device == "cpu" else 2**30
    if not context.fits(size):
        return []
    sweep = measure_strided(device, tensor_bytes=size, rounds=3 if context.quick else 5)
    return [
        _rate(
            f"strided.s{p.stride}",
            "strided",
            p.elements * 4,
            p.samples_s,
            f"useful bandwidth, x[::{p.stride}].sum()",
            {"stride": p.stride, "tensor_bytes": size},
        )
        for p in sweep.points
    ]


def run_attention(context: Context) -> list[Measurement]:
    """Traced peaks at four lengths, then times at three on the device."""
    out = []
    for p in measure_peaks((256, 512, 1024, 2048)):
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
    device = context.device.type
    lengths = (256, 512, 1024) if device == "cpu" or context.quick else (1024, 4096, 8192)
    for t in time_attention(device, lengths):
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
                    params={"seq_len": t.seq_len, "head_dim": 64, "heads": 1},
                )
            )
    return out


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
