"""Predicted GPU figures: the lessons' models over the cited datasheets, with their arithmetic.

Every GPU figure is **predicted**, **published** (:mod:`gpulesson.results.published`) or
**measured** (a result bundle). This module makes the predicted ones. A :class:`Prediction`
is frozen data: the value, its unit (a bundle unit), the model in words, the inputs (each
with its datasheet or published source) and the arithmetic as a string, so a page can show
how the number came about. The models:

* matmul time = max(FLOPs / dense peak, bytes / bandwidth) (the roofline), and the TFLOP/s
  it implies (:func:`matmul_time`, :func:`matmul_rate`);
* copy bandwidth = the datasheet memory bandwidth (:func:`copy_bandwidth`);
* host copy time = bytes / one direction of PCIe x16 (:func:`host_copy_time`);
* batch-1 decode tokens/s <= bandwidth / bytes read per token (:func:`decode_tokens_per_s`);
* ring all-reduce time = 2(N-1)/N x bytes / one direction of the link
  (:func:`all_reduce_time`, through :mod:`gpulesson.memory.comm`);
* training-step time = 6ND / (dense peak x MFU) (:func:`train_step_time`);
* launch overhead: the published range (:func:`launch_overhead`).

:func:`predict_for` looks a figure up by the suite's measurement name;
:func:`predict_measurement` does it for a bundle's measurement (using its params), and
answers :class:`NoModel` with the reason where the course has no model (a profiler table).
Three figures need a lesson's numbers as well as a name (:data:`PARAMETERISED`):
``decode.b1`` (``bytes_per_token``), ``all_reduce.time`` (``message_bytes``, ``gpus``) and
``train_step.time`` (``flops``, or ``parameters`` and ``tokens``; ``mfu``; ``dtype``, bf16 by
default); :func:`predict_for` takes them as ``params``.
:func:`compare` is measured over predicted; :func:`table_rows` gives one row per reference
GPU (predicted, published, measured, measured / predicted) as frozen data: rendering is
elsewhere.

>>> p = copy_bandwidth("h100-sxm")
>>> p.value / 1e9, p.unit
(3350.0, 'B/s')
>>> p.arithmetic
'3350 GB/s x 1e9 = 3.35e+12 B/s'
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gpulesson.memory import comm, compute
from gpulesson.results import datasheets, published
from gpulesson.results.bundle import Bundle, Measurement
from gpulesson.results.datasheets import Datasheet

# Bytes per element of each matmul dtype (fp8 matmuls read fp8 operands; the model writes
# the output in the same width, a lower bound on the bytes moved).
ELEMENT_BYTES = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1}


@dataclass(frozen=True, kw_only=True)
class Input:
    """One input of a prediction: what it is, its value and unit, and where it comes from."""

    name: str
    value: float
    unit: str
    source: str  # "datasheet h100-sxm: ..." or "published: <url>" or "given"
    url: str | None = None


@dataclass(frozen=True, kw_only=True)
class Prediction:
    """A predicted figure: value, unit, the model, the inputs and the arithmetic.

    ``low`` and ``high`` are the range a published model gives (launch overhead); both are
    None for a formula's single value. ``kind`` is ``estimate`` or ``upper bound``.
    """

    figure: str
    device: str
    value: float
    unit: str
    model: str
    inputs: tuple[Input, ...]
    arithmetic: str
    kind: str = "estimate"
    low: float | None = None
    high: float | None = None


@dataclass(frozen=True, kw_only=True)
class NoModel:
    """No prediction for ``figure``: the reason (no model, or an input the row lacks)."""

    figure: str
    reason: str


def _g(x: float) -> str:
    """A number in 4 significant digits, as the arithmetic strings show them.

    >>> _g(989500000000000.0), _g(0.5), _g(3350)
    ('9.895e+14', '0.5', '3350')
    """
    return f"{x:.4g}"


def _sheet(device_id: str) -> Datasheet:
    return datasheets.get(device_id)  # unknown id: ValueError naming the known ones


def _source(sheet: Datasheet) -> tuple[str, str | None]:
    first = sheet.sources[0] if sheet.sources else None
    return f"datasheet {sheet.id}: {first.title if first else sheet.name}", (
        first.url if first else None
    )


def _peak_input(sheet: Datasheet, dtype: str) -> Input:
    peak = sheet.peaks.get(dtype)
    if peak is None:
        fix = (
            f"use one of {', '.join(sheet.peaks)}"
            if sheet.peaks
            else "it states no peak FLOP/s for any dtype"
        )
        raise ValueError(
            f"{sheet.name} ({sheet.id}): the datasheet row gives no {dtype} peak; {fix}"
        )
    title, url = _source(sheet)
    halved = " (the 2:4 sparsity figure, halved)" if peak.with_sparsity else ""
    return Input(
        name=f"dense {dtype} peak",
        value=peak.dense_flop_per_s,
        unit="FLOP/s",
        source=f"{title}: {peak.stated!r}{halved}",
        url=url,
    )


def _bandwidth_input(sheet: Datasheet) -> Input:
    title, url = _source(sheet)
    return Input(
        name="memory bandwidth",
        value=sheet.memory_bandwidth_bytes_per_s,
        unit="B/s",
        source=f"{title}: {_g(sheet.memory_bandwidth_stated_gb_per_s)} GB/s",
        url=url,
    )


def _positive(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"{name}={value!r} must be a positive number")
    return float(value)


# --- the formulas ---------------------------------------------------------------------


def copy_bandwidth(device_id: str) -> Prediction:
    """Copy bandwidth = the datasheet's memory bandwidth (an upper bound for a copy)."""
    sheet = _sheet(device_id)
    bw = _bandwidth_input(sheet)
    return Prediction(
        figure="memory_bandwidth",
        device=sheet.id,
        value=bw.value,
        unit="B/s",
        model="copy bandwidth = the datasheet memory bandwidth",
        inputs=(bw,),
        arithmetic=f"{_g(sheet.memory_bandwidth_stated_gb_per_s)} GB/s x 1e9 = {_g(bw.value)} B/s",
        kind="upper bound",
    )


def peak_rate(device_id: str, dtype: str, figure: str | None = None) -> Prediction:
    """A matmul rate's ceiling: the dense peak (what a best-shape search approaches).

    >>> peak_rate("a100-80gb", "bf16").value / 1e12
    312.0
    """
    sheet = _sheet(device_id)
    peak = _peak_input(sheet, dtype)
    return Prediction(
        figure=figure or f"matmul_peak.{dtype}",
        device=sheet.id,
        value=peak.value,
        unit="FLOP/s",
        model=f"achieved {dtype} FLOP/s <= the dense {dtype} peak",
        inputs=(peak,),
        arithmetic=f"dense {dtype} peak = {_g(peak.value)} FLOP/s",
        kind="upper bound",
    )


def matmul_time(device_id: str, m: int, n: int, k: int, dtype: str) -> Prediction:
    """Matmul time = max(FLOPs / dense peak, bytes / bandwidth), FLOPs = 2mnk.

    Bytes are the least a matmul moves: read A (m x k) and B (k x n), write C (m x n).

    >>> t = matmul_time("a100-80gb", 8192, 8192, 8192, "bf16")
    >>> round(t.value * 1e3, 3), t.unit
    (3.524, 's')
    >>> t.arithmetic
    'max(2 x 8192 x 8192 x 8192 = 1.1e+12 FLOP / 3.12e+14 FLOP/s, (8192x8192 + 8192x8192 + \
8192x8192) x 2 B = 4.027e+08 B / 2.039e+12 B/s) = max(0.003524 s, 0.0001975 s) = 0.003524 s \
(compute-bound)'
    """
    for name, value in (("m", m), ("n", n), ("k", k)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}={value!r} must be a whole number of rows or columns, >= 1")
    if dtype not in ELEMENT_BYTES:
        raise ValueError(f"dtype {dtype!r} must be one of {', '.join(ELEMENT_BYTES)}")
    sheet = _sheet(device_id)
    peak, bw = _peak_input(sheet, dtype), _bandwidth_input(sheet)
    flop = 2.0 * m * n * k
    moved = float((m * k + k * n + m * n) * ELEMENT_BYTES[dtype])
    compute_s, memory_s = flop / peak.value, moved / bw.value
    seconds = max(compute_s, memory_s)
    bound = "compute-bound" if compute_s >= memory_s else "memory-bound"
    return Prediction(
        figure=f"matmul.{dtype}.n{n}" if m == n == k else f"matmul.{dtype}",
        device=sheet.id,
        value=seconds,
        unit="s",
        model="matmul time = max(FLOPs / dense peak, bytes / bandwidth) (the roofline)",
        inputs=(
            peak,
            bw,
            Input(name="FLOPs", value=flop, unit="FLOP", source="2 x m x n x k"),
            Input(name="bytes", value=moved, unit="bytes", source="read A and B, write C"),
        ),
        arithmetic=(
            f"max(2 x {m} x {n} x {k} = {_g(flop)} FLOP / {_g(peak.value)} FLOP/s, "
            f"({m}x{k} + {k}x{n} + {m}x{n}) x {ELEMENT_BYTES[dtype]} B = {_g(moved)} B / "
            f"{_g(bw.value)} B/s) = max({_g(compute_s)} s, {_g(memory_s)} s) = {_g(seconds)} s "
            f"({bound})"
        ),
        kind="estimate",
    )


def matmul_rate(device_id: str, n: int, dtype: str) -> Prediction:
    """The TFLOP/s an n x n x n matmul achieves at the roofline time: 2n^3 / time.

    >>> r = matmul_rate("h100-sxm", 256, "bf16")
    >>> round(r.value / 1e12, 1), "memory-bound" in r.arithmetic
    (285.9, True)
    """
    t = matmul_time(device_id, n, n, n, dtype)
    flop = 2.0 * n**3
    return Prediction(
        figure=f"matmul.{dtype}.n{n}",
        device=t.device,
        value=flop / t.value,
        unit="FLOP/s",
        model="matmul rate = 2n^3 / max(FLOPs / dense peak, bytes / bandwidth)",
        inputs=t.inputs,
        arithmetic=f"{_g(flop)} FLOP / ({t.arithmetic}) = {_g(flop / t.value)} FLOP/s",
        kind="upper bound",
    )


def pcie_one_way(device_id: str) -> Input | None:
    """One direction of the row's PCIe x16 link (half the stated figure), or None.

    >>> pcie_one_way("h100-sxm").value / 1e9
    64.0
    >>> pcie_one_way("t4") is None
    True
    """
    sheet = _sheet(device_id)
    link = sheet.interconnect
    if link is None:
        return None
    title, url = _source(sheet)
    return Input(
        name=f"PCIe Gen{link.pcie_generation} x16, one direction",
        value=link.pcie_one_way_bytes_per_s,
        unit="B/s",
        source=f"{title}: {link.stated!r}, both directions added, so one carries half",
        url=url,
    )


def host_copy_time(device_id: str, copy_bytes: float) -> Prediction:
    """Host copy time = bytes / one direction of PCIe x16 (the rate from the datasheet).

    >>> t = host_copy_time("a100-80gb", 2**30)
    >>> round(t.value * 1e3, 2), t.arithmetic
    (33.55, '1.074e+09 B / 3.2e+10 B/s (64 GB/s / 2) = 0.03355 s')
    >>> host_copy_time("t4", 1)
    Traceback (most recent call last):
    ...
    ValueError: NVIDIA T4 (t4): the datasheet row gives no PCIe figure, so no host copy time \
is predicted for it: use a row with an interconnect (a100-80gb, h100-sxm, h200, ...)
    """
    size = _positive("copy_bytes", copy_bytes)
    link = pcie_one_way(device_id)
    sheet = _sheet(device_id)
    if link is None or sheet.interconnect is None:
        raise ValueError(
            f"{sheet.name} ({sheet.id}): the datasheet row gives no PCIe figure, so no host copy "
            "time is predicted for it: use a row with an interconnect (a100-80gb, h100-sxm, "
            "h200, ...)"
        )
    seconds = size / link.value
    stated = _g(sheet.interconnect.pcie_stated_gb_per_s)
    return Prediction(
        figure="h2d",
        device=sheet.id,
        value=seconds,
        unit="s",
        model="host copy time = bytes / one direction of PCIe x16",
        inputs=(link, Input(name="bytes", value=size, unit="bytes", source="given")),
        arithmetic=f"{_g(size)} B / {_g(link.value)} B/s ({stated} GB/s / 2) = {_g(seconds)} s",
        kind="estimate",
    )


def host_copy_rate(device_id: str, figure: str = "h2d.pinned") -> Prediction:
    """A host copy's rate ceiling: one direction of PCIe x16 (B/s)."""
    sheet = _sheet(device_id)
    link = pcie_one_way(device_id)
    if link is None or sheet.interconnect is None:
        raise ValueError(f"{sheet.name} ({sheet.id}): the datasheet row gives no PCIe figure")
    stated = _g(sheet.interconnect.pcie_stated_gb_per_s)
    return Prediction(
        figure=figure,
        device=sheet.id,
        value=link.value,
        unit="B/s",
        model="host copy rate <= one direction of PCIe x16",
        inputs=(link,),
        arithmetic=f"{stated} GB/s / 2 = {_g(link.value)} B/s",
        kind="upper bound",
    )


def decode_tokens_per_s(device_id: str, bytes_per_token: float) -> Prediction:
    """Batch-1 decode tokens/s <= bandwidth / bytes read per token (every weight, once).

    >>> p = decode_tokens_per_s("rtx-4090", 7e9 * 2)
    >>> round(p.value, 1), p.kind
    (72.0, 'upper bound')
    """
    per_token = _positive("bytes_per_token", bytes_per_token)
    sheet = _sheet(device_id)
    bw = _bandwidth_input(sheet)
    value = bw.value / per_token
    return Prediction(
        figure="decode.b1",
        device=sheet.id,
        value=value,
        unit="tokens/s",
        model="batch-1 decode tokens/s <= memory bandwidth / bytes read per token",
        inputs=(bw, Input(name="bytes per token", value=per_token, unit="bytes", source="given")),
        arithmetic=f"{_g(bw.value)} B/s / {_g(per_token)} B = {_g(value)} tokens/s",
        kind="upper bound",
    )


def all_reduce_time(device_id: str, message_bytes: float, gpus: int) -> Prediction:
    """Ring all-reduce time = 2(N-1)/N x bytes / one direction of NVLink (or PCIe).

    Uses :func:`gpulesson.memory.comm.ring_all_reduce_bytes` and ``transfer_s``. A PCIe
    card's NVLink is a bridge that joins pairs (:func:`gpulesson.memory.comm.nvlink_bridged`),
    so a ring of more than two such cards runs over PCIe.

    >>> p = all_reduce_time("h100-sxm", 1e9, 8)
    >>> round(p.value * 1e3, 3), p.arithmetic
    (3.889, '2 x (8-1)/8 x 1e+09 B = 1.75e+09 B / 4.5e+11 B/s (NVLink 900 GB/s / 2) = 0.003889 s')
    >>> all_reduce_time("h100-pcie", 1e9, 8).arithmetic.split("(")[-1]
    'PCIe 128 GB/s / 2) = 0.02734 s'
    >>> all_reduce_time("h100-pcie", 1e9, 2).arithmetic.split("(")[-1]  # the bridged pair
    'NVLink 600 GB/s / 2) = 0.003333 s'
    """
    sheet = _sheet(device_id)
    link = sheet.interconnect
    if link is None:
        raise ValueError(
            f"{sheet.name} ({sheet.id}): the datasheet row gives no interconnect, so no "
            "all-reduce time is predicted for it: use a100-80gb, h100-sxm or h200"
        )
    sent = comm.ring_all_reduce_bytes(message_bytes, gpus)
    bridge_too_small = comm.nvlink_bridged(sheet) and gpus > comm.BRIDGE_GPUS
    if link.nvlink_one_way_bytes_per_s is not None and not bridge_too_small:
        rate, label = link.nvlink_one_way_bytes_per_s, f"NVLink {_g(link.nvlink_stated_gb_per_s)}"
    else:
        rate, label = link.pcie_one_way_bytes_per_s, f"PCIe {_g(link.pcie_stated_gb_per_s)}"
    seconds = comm.transfer_s(sent, rate)
    title, url = _source(sheet)
    return Prediction(
        figure="all_reduce",
        device=sheet.id,
        value=seconds,
        unit="s",
        model="ring all-reduce time = 2(N-1)/N x bytes / one direction of the link",
        inputs=(
            Input(
                name="link, one direction",
                value=rate,
                unit="B/s",
                source=f"{title}: {link.stated!r}, both directions added",
                url=url,
            ),
            Input(name="message bytes", value=float(message_bytes), unit="bytes", source="given"),
            Input(name="GPUs", value=float(gpus), unit="GPUs", source="given"),
        ),
        arithmetic=(
            f"2 x ({gpus}-1)/{gpus} x {_g(message_bytes)} B = {_g(sent)} B / {_g(rate)} B/s "
            f"({label} GB/s / 2) = {_g(seconds)} s"
        ),
    )


def train_step_time(
    device_id: str, parameters: float, tokens: float, dtype: str, mfu: float
) -> Prediction:
    """Training-step time = 6ND / (dense peak x MFU): N parameters, D tokens per step.

    The peak is :func:`gpulesson.memory.compute.peak_for`'s (a 16-bit dtype the row lacks
    falls back to the other one); the MFU is checked by ``compute.check_mfu``.

    >>> p = train_step_time("a100-80gb", 124e6, 8 * 1024, "bf16", 0.4)
    >>> round(p.value * 1e3, 2)
    48.84
    """
    n = _positive("parameters", parameters)
    d = _positive("tokens", tokens)
    return _train_step(
        device_id,
        6 * n * d,
        f"6 x {_g(n)} x {_g(d)} = ",
        (
            Input(name="parameters", value=n, unit="parameters", source="given"),
            Input(name="tokens per step", value=d, unit="tokens", source="given"),
        ),
        dtype,
        mfu,
    )


def train_step_time_for_flops(device_id: str, flops: float, dtype: str, mfu: float) -> Prediction:
    """Training-step time from a step's model FLOPs (6ND, counted once by the lesson).

    >>> train_step_time_for_flops("h100-sxm", 6e15, "bf16", 0.5).arithmetic
    '6ND = 6e+15 FLOP / (dense bf16 peak 9.895e+14 FLOP/s x MFU 0.5) = 12.13 s'
    """
    flop = _positive("flops", flops)
    given = Input(name="model FLOPs per step (6ND)", value=flop, unit="FLOP", source="given")
    return _train_step(device_id, flop, "6ND = ", (given,), dtype, mfu)


def _train_step(
    device_id: str, flop: float, head: str, given: tuple[Input, ...], dtype: str, mfu: float
) -> Prediction:
    sheet = _sheet(device_id)
    share = compute.check_mfu(mfu)
    used, peak = compute.peak_for(sheet, dtype)
    seconds = flop / (peak * share)
    return Prediction(
        figure="train_step",
        device=sheet.id,
        value=seconds,
        unit="s",
        model="training-step time = 6 x parameters x tokens / (dense peak x MFU)",
        inputs=(
            _peak_input(sheet, used),
            *given,
            Input(name="MFU", value=share, unit="ratio", source="given (an assumption)"),
        ),
        arithmetic=(
            f"{head}{_g(flop)} FLOP / (dense {used} peak {_g(peak)} FLOP/s x MFU {_g(share)}) "
            f"= {_g(seconds)} s"
        ),
    )


def launch_overhead(device_id: str, figure: str = "launch_overhead.eager") -> Prediction:
    """Launch overhead from the published rows: the device's own if any, else any GPU's.

    The value is the range's high end; ``low`` and ``high`` give the range. For the eager
    figure the range runs from the host's enqueue cost to a launch with its sync.

    >>> p = launch_overhead("h100-sxm")
    >>> round(p.low * 1e6, 2), round(p.high * 1e6, 2), p.unit
    (2.65, 6.43, 's')
    """
    sheet = _sheet(device_id)
    figures = {
        "launch_overhead.eager": ("launch_overhead.eager", "launch_overhead.enqueue"),
        "launch_overhead.cuda_graph": ("launch_overhead.cuda_graph",),
    }
    if figure not in figures:
        raise ValueError(f"figure {figure!r} must be one of {', '.join(figures)}")
    rows = [r for r in published.load() if r.figure in figures[figure]]
    own = [r for r in rows if r.device == sheet.id]
    rows = own or rows
    if not rows:  # pragma: no cover - published.json has launch rows (a test checks)
        raise ValueError(f"no published rows for {figure}")
    values = sorted(r.value_in_bundle_unit for r in rows)
    low, high = values[0], values[-1]
    where = "this GPU" if own else f"another GPU ({', '.join(sorted({r.device for r in rows}))})"
    return Prediction(
        figure=figure,
        device=sheet.id,
        value=high,
        unit="s",
        model=f"launch overhead: the published range, measured on {where}",
        inputs=tuple(
            Input(
                name=r.figure,
                value=r.value_in_bundle_unit,
                unit="s",
                source=f"published by {r.publisher}: {_g(r.value)} {r.unit} on {r.device}",
                url=r.source,
            )
            for r in rows
        ),
        arithmetic=(
            f"published {_g(low * 1e6)} to {_g(high * 1e6)} µs: the high end, {_g(high)} s"
            if low != high
            else f"published {_g(high * 1e6)} µs = {_g(high)} s"
        ),
        kind="published range",
        low=low,
        high=high,
    )


def link_one_way(device_id: str, figure: str = "all_reduce.bus_bandwidth") -> Prediction:
    """An all-reduce's bus bandwidth ceiling: one direction of the GPU's NVLink (nccl-tests)."""
    sheet = _sheet(device_id)
    link = sheet.interconnect
    if link is None or link.nvlink_one_way_bytes_per_s is None:
        raise ValueError(f"{sheet.name} ({sheet.id}): the datasheet row gives no NVLink figure")
    title, url = _source(sheet)
    rate = link.nvlink_one_way_bytes_per_s
    return Prediction(
        figure=figure,
        device=sheet.id,
        value=rate,
        unit="B/s",
        model="all-reduce bus bandwidth <= one direction of NVLink",
        inputs=(
            Input(name="NVLink, one direction", value=rate, unit="B/s", source=title, url=url),
        ),
        arithmetic=f"{_g(link.nvlink_stated_gb_per_s)} GB/s / 2 = {_g(rate)} B/s",
        kind="upper bound",
    )


# --- lookups by the suite's names ---------------------------------------------------------

NO_MODEL: dict[str, str] = {
    "cuda_context": "no model: the CUDA context's size depends on the driver and the GPU",
    "stopwatch": "no model: the stopwatch rows show a timing mistake, not a hardware figure",
    "oom": "no model: the out-of-memory row is a provoked error",
    "profile_step": "no model: a profiler table (shares of one step's time)",
    "loader": "no model: DataLoader time depends on the host's CPU and the dataset",
    "fusion": "no model: fusion's gain depends on the compiler",
    "alignment": "no model: the alignment rows compare shapes on one GPU",
    "copy_call": "no model: the host time inside a copy call depends on the driver",
    "amp_step": "no model: a whole training step per precision (see train_step for MFU)",
    "tf32_accuracy": "no model: an accuracy measurement, not a rate",
}
_MATMUL = re.compile(r"matmul\.(?P<dtype>[a-z0-9]+)\.n(?P<n>[0-9]+)")

#: Figures whose model needs a lesson's numbers: the params each one requires. Also taken:
#: ``train_step.time`` accepts ``parameters`` and ``tokens`` instead of ``flops`` (6ND is
#: then computed and shown), and ``dtype`` (the peak's dtype, bf16 unless given).
PARAMETERISED: dict[str, tuple[str, ...]] = {
    "decode.b1": ("bytes_per_token",),
    "all_reduce.time": ("message_bytes", "gpus"),
    "train_step.time": ("flops", "mfu"),
}
_OPTIONAL: dict[str, tuple[str, ...]] = {"train_step.time": ("parameters", "tokens", "dtype")}
Params = Mapping[str, float | int | str]


def _number(figure: str, name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"{figure}: params[{name!r}]={value!r} must be a positive number")
    if not math.isfinite(value):
        raise ValueError(f"{figure}: params[{name!r}]={value!r} must be a finite number")
    return float(value)


def check_params(figure: str, params: Params) -> dict[str, float | int | str]:
    """A lesson's params for a :data:`PARAMETERISED` figure, checked; ``ValueError`` with the fix.

    Numbers must be positive, ``gpus`` a whole number >= 2, ``mfu`` a share (at most 1).

    >>> check_params("all_reduce.time", {"message_bytes": 28e9, "gpus": 8.0})
    {'message_bytes': 28000000000.0, 'gpus': 8}
    >>> check_params("train_step.time", {"parameters": 124e6, "tokens": 8192, "mfu": 0.4})
    {'parameters': 124000000.0, 'tokens': 8192.0, 'mfu': 0.4, 'dtype': 'bf16', \
'flops': 6094848000000.0}
    >>> check_params("decode.b1", {"bytes": 16e9})
    Traceback (most recent call last):
    ...
    ValueError: decode.b1: unknown params bytes: give bytes_per_token
    """
    if figure not in PARAMETERISED:
        raise ValueError(
            f"figure {figure!r} takes no params: the figures that do are {', '.join(PARAMETERISED)}"
        )
    required, optional = PARAMETERISED[figure], _OPTIONAL.get(figure, ())
    unknown = sorted(set(params) - {*required, *optional})
    if unknown:
        extra = f" (optional: {', '.join(optional)})" if optional else ""
        raise ValueError(
            f"{figure}: unknown params {', '.join(unknown)}: give {', '.join(required)}{extra}"
        )
    out: dict[str, float | int | str] = {}
    for name, value in params.items():
        if name == "dtype":
            if value not in ELEMENT_BYTES:
                raise ValueError(
                    f"{figure}: params['dtype']={value!r} must be one of {', '.join(ELEMENT_BYTES)}"
                )
            out[name] = value
        elif name == "gpus":
            n = _number(figure, name, value)
            if n != int(n) or n < 2:
                raise ValueError(
                    f"{figure}: params['gpus']={value!r} must be a whole number of GPUs, >= 2"
                )
            out[name] = int(n)
        elif name == "mfu":
            out[name] = compute.check_mfu(_number(figure, name, value), f"{figure}: params['mfu']")
        else:
            out[name] = _number(figure, name, value)
    if figure == "train_step.time":
        out.setdefault("dtype", "bf16")
        if "flops" not in out and {"parameters", "tokens"} <= set(out):
            out["flops"] = 6 * float(out["parameters"]) * float(out["tokens"])
        elif {"parameters", "tokens"} & set(out):
            raise ValueError(
                f"{figure}: give flops, or parameters and tokens (6ND is computed), not a mix"
            )
    missing = [name for name in required if name not in out]
    if missing:
        raise ValueError(f"{figure}: params need {', '.join(missing)} (given: {dict(params)})")
    return out


def workload(figure: str, params: Params) -> dict[str, float]:
    """What a parameterised figure's params say was run: the keys a measurement must match.

    The MFU and the dtype belong to the model, not the run, so a training step matches on its
    FLOPs alone.

    >>> workload("train_step.time", {"flops": 6e15, "mfu": 0.4})
    {'flops': 6000000000000000.0}
    """
    checked = check_params(figure, params)
    keys = {"decode.b1": ("bytes_per_token",), "all_reduce.time": ("message_bytes", "gpus")}
    return {k: float(checked[k]) for k in keys.get(figure, ("flops",))}


def measured_workload(m: Measurement) -> dict[str, float] | None:
    """A bundle measurement's workload in :func:`workload`'s keys, or None if it says none.

    ``decode.b1`` rows give ``bytes_per_token``, or ``parameters`` and a dtype (every
    weight read once, as :func:`predict_measurement` reads them); ``train_step.time`` rows
    ``flops`` or ``six_nd_flop``.
    """
    p = m.params

    def num(*names: str) -> float | None:
        for name in names:
            v = p.get(name)
            if isinstance(v, int | float) and not isinstance(v, bool):
                return float(v)
        return None

    if m.name == "decode.b1":
        per_token = num("bytes_per_token")
        if per_token is None and (n := num("parameters")) is not None and m.dtype in ELEMENT_BYTES:
            per_token = n * ELEMENT_BYTES[m.dtype]
        return None if per_token is None else {"bytes_per_token": per_token}
    if m.name == "all_reduce.time":
        size, gpus = num("message_bytes"), num("gpus")
        return None if size is None or gpus is None else {"message_bytes": size, "gpus": gpus}
    if m.name == "train_step.time":
        flop = num("flops", "six_nd_flop")
        return None if flop is None else {"flops": flop}
    return None


def _no_input(figure: str, exc: ValueError) -> NoModel:
    """The reason a datasheet row gives no prediction: what it lacks, then the message."""
    text = str(exc)
    missing = re.search(
        r"gives no ((?:\S+ or )?\S+ peak|PCIe figure|NVLink figure|interconnect)", text
    )
    head = "no model"
    if missing:
        head = "no NVLink or PCIe figure" if missing[1] == "interconnect" else f"no {missing[1]}"
    return NoModel(figure=figure, reason=f"{head}: {text}")


def _predict_with(sheet: Datasheet, figure: str, params: Params) -> Prediction | NoModel:
    p = check_params(figure, params)  # a lesson's mistake raises; a row's gap is a NoModel
    try:
        if figure == "decode.b1":
            made = decode_tokens_per_s(sheet.id, float(p["bytes_per_token"]))
        elif figure == "all_reduce.time":
            made = all_reduce_time(sheet.id, float(p["message_bytes"]), int(p["gpus"]))
        elif "parameters" in p:
            made = train_step_time(
                sheet.id,
                float(p["parameters"]),
                float(p["tokens"]),
                str(p["dtype"]),
                float(p["mfu"]),
            )
        else:
            made = train_step_time_for_flops(
                sheet.id, float(p["flops"]), str(p["dtype"]), float(p["mfu"])
            )
    except ValueError as exc:
        return _no_input(figure, exc)
    return _renamed(made, figure)


def predict_for(device_id: str, figure: str, params: Params | None = None) -> Prediction | NoModel:
    """The prediction for a suite figure name on a datasheet row, or :class:`NoModel` why not.

    A :data:`PARAMETERISED` figure takes the lesson's ``params`` (checked by
    :func:`check_params`); a GPU whose row lacks an input (no NVLink or PCIe figure, no
    peak) gets a :class:`NoModel` saying which. A GPT's memory ledger is predicted by
    :func:`predict_measurement` from the measurement's params.

    >>> p = predict_for("h100-sxm", "all_reduce.time", {"message_bytes": 28e9, "gpus": 8})
    >>> p.figure, round(p.value * 1e3, 1)
    ('all_reduce.time', 108.9)
    >>> predict_for("t4", "all_reduce.time", {"message_bytes": 28e9, "gpus": 8}).reason[:24]
    'no NVLink or PCIe figure'

    >>> predict_for("h100-sxm", "matmul_peak.bf16").value / 1e12
    989.5
    >>> print(predict_for("h100-sxm", "profile_step.busy_share").reason)
    no model: a profiler table (shares of one step's time)
    >>> predict_for("t4", "matmul_peak.bf16").reason
    'no bf16 peak: NVIDIA T4 (t4): the datasheet row gives no bf16 peak; use one of fp32, fp16'
    >>> predict_for("h300", "memory_bandwidth")
    Traceback (most recent call last):
    ...
    ValueError: unknown GPU id 'h300': use one of t4, l4, a10, a100-40gb, a100-80gb, \
a100-80gb-pcie, h100-sxm, h100-pcie, h200, b200, mi300x, l40s, rtx-3090, rtx-4090, rtx-5090, \
apple-m1-pro, apple-m1-max, apple-m1-ultra, apple-m2, apple-m4, apple-m4-pro, apple-m4-max
    """
    sheet = _sheet(device_id)
    if params is not None or figure in PARAMETERISED:
        if params is None:
            need = ", ".join(PARAMETERISED[figure])
            return NoModel(figure=figure, reason=f"no model without params: {figure} needs {need}")
        return _predict_with(sheet, figure, params)
    entry = figure.split(".")[0]
    if entry in NO_MODEL:
        return NoModel(figure=figure, reason=NO_MODEL[entry])
    try:
        if figure in ("memory_bandwidth", "decode.bandwidth"):
            return _renamed(copy_bandwidth(sheet.id), figure)
        if match := _MATMUL.fullmatch(figure):
            return matmul_rate(sheet.id, int(match["n"]), match["dtype"])
        if entry == "matmul_peak" and "." in figure:
            return peak_rate(sheet.id, figure.split(".", 1)[1], figure)
        if entry == "train_step" and "." in figure:
            dtype = figure.split(".", 1)[1]
            used, _ = compute.peak_for(sheet, dtype)
            p = peak_rate(sheet.id, used, figure)
            return _renamed(p, figure, model=f"model FLOP/s <= the dense {used} peak (MFU <= 1)")
        if entry == "launch_overhead":
            return launch_overhead(sheet.id, figure)
        if entry in ("h2d", "d2h"):
            return host_copy_rate(sheet.id, figure)
        if entry in ("all_reduce", "all-reduce"):
            return link_one_way(sheet.id, figure)
    except ValueError as exc:
        return _no_input(figure, exc)
    return NoModel(figure=figure, reason=f"no model: the course has none for {figure!r}")


def _renamed(p: Prediction, figure: str, model: str | None = None) -> Prediction:
    return Prediction(
        figure=figure,
        device=p.device,
        value=p.value,
        unit=p.unit,
        model=model or p.model,
        inputs=p.inputs,
        arithmetic=p.arithmetic,
        kind=p.kind,
        low=p.low,
        high=p.high,
    )


def predict_measurement(device_id: str, m: Measurement) -> Prediction | NoModel:
    """The prediction for one bundle measurement, using its params where the model needs them.

    ``decode.b1`` uses ``params["parameters"]`` x the dtype's bytes as the bytes read per
    token (weights only: the KV cache adds more, so the bound is loose); ``gpt_memory.*``
    is the memory lesson's own ledger, ``params["estimate_bytes"]``.
    """
    entry = m.name.split(".")[0]
    if entry == "gpt_memory":
        estimate = m.params.get("estimate_bytes")
        if not isinstance(estimate, int | float) or isinstance(estimate, bool):
            return NoModel(figure=m.name, reason="no model: the row carries no estimate_bytes")
        return Prediction(
            figure=m.name,
            device=_sheet(device_id).id,
            value=float(estimate),
            unit="bytes",
            model="the memory lesson's ledger: weights, gradients, optimizer state, activations",
            inputs=(
                Input(name="estimate", value=float(estimate), unit="bytes", source="the bundle"),
            ),
            arithmetic=f"ledger peak = {_g(float(estimate))} B ({m.params.get('estimate_phase')})",
        )
    if m.name == "decode.matmul" and m.dtype:
        try:
            return peak_rate(device_id, m.dtype, m.name)
        except ValueError as exc:
            return NoModel(figure=m.name, reason=f"no {m.dtype} peak: {exc}")
    if entry == "decode" and m.name.startswith("decode.b"):
        if m.name != "decode.b1":
            return NoModel(figure=m.name, reason="no model: the course bounds batch 1 only")
        params = m.params.get("parameters")
        if not isinstance(params, int | float) or m.dtype not in ELEMENT_BYTES:
            return NoModel(figure=m.name, reason="no model: the row gives no parameters or dtype")
        p = decode_tokens_per_s(device_id, float(params) * ELEMENT_BYTES[m.dtype])
        return _renamed(p, m.name)
    if m.name == "all_reduce.time" and (w := measured_workload(m)) is not None:
        return predict_for(
            device_id, m.name, {"message_bytes": w["message_bytes"], "gpus": w["gpus"]}
        )
    return predict_for(device_id, m.name)


# --- measured against predicted -----------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Comparison:
    """Measured over predicted, in one unit."""

    measured: float
    predicted: float
    unit: str
    ratio: float


def compare(measured: float, measured_unit: str, prediction: Prediction) -> Comparison:
    """Measured / predicted; ``ValueError`` when the units differ or a value is not positive.

    >>> compare(2.5e12, "B/s", copy_bandwidth("h100-sxm")).ratio
    0.746268656716418
    >>> compare(1.0, "s", copy_bandwidth("h100-sxm"))
    Traceback (most recent call last):
    ...
    ValueError: measured in 's' but predicted in 'B/s': compare figures in one unit
    """
    if measured_unit != prediction.unit:
        raise ValueError(
            f"measured in {measured_unit!r} but predicted in {prediction.unit!r}: "
            "compare figures in one unit"
        )
    value = _positive("measured", measured)
    return Comparison(
        measured=value,
        predicted=prediction.value,
        unit=prediction.unit,
        ratio=value / prediction.value,
    )


def _bundle_device(b: Bundle) -> str | None:
    sheet = b.datasheet
    return sheet.id if sheet else None


def reference_devices(bundles: Iterable[Bundle] = ()) -> tuple[str, ...]:
    """The reference GPUs, then any device with published rows, then any with a bundle.

    >>> reference_devices()[:6]
    ('t4', 'rtx-4090', 'a100-80gb', 'h100-sxm', 'h200', 'apple-m4-max')
    >>> "b200" in reference_devices()
    True
    """
    found = [*datasheets.reference_ids(), *published.devices()]
    found += [d for b in bundles if (d := _bundle_device(b))]
    return tuple(dict.fromkeys(found))


@dataclass(frozen=True, kw_only=True)
class TableRow:
    """One GPU's figure from the three sources, and measured over predicted.

    ``params`` are the lesson's params of a :data:`PARAMETERISED` figure (sorted pairs), or
    empty.
    """

    device: str
    name: str
    figure: str
    predicted: Prediction | NoModel
    published: tuple[published.Published, ...]
    measured: float | None
    measured_unit: str | None
    ratio: float | None  # measured / predicted, when both exist in one unit
    params: tuple[tuple[str, float | int | str], ...] = ()


def table_rows(
    figure: str, bundles: Iterable[Bundle] = (), params: Params | None = None
) -> tuple[TableRow, ...]:
    """One row per reference GPU for a suite figure: predicted, published, measured, ratio.

    A bundle's measurement counts for the device its bundle names (several bundles of one
    device: the median). With ``params`` (a :data:`PARAMETERISED` figure) the prediction
    uses them, a bundle measurement counts only when its name is ``figure`` and its
    workload equals the params' (:func:`workload`, compared exactly), and published rows
    count only under the same figure name. Frozen data; rendering is elsewhere.

    >>> rows = table_rows("matmul_peak.bf16")
    >>> [(r.device, round(r.predicted.value / 1e12, 1), [p.value for p in r.published])
    ...  for r in rows if r.device in ("h100-sxm", "a100-80gb")]
    [('a100-80gb', 312.0, []), ('h100-sxm', 989.5, [794.5])]
    >>> rows = table_rows("decode.b1", params={"bytes_per_token": 16e9})
    >>> [(r.device, round(r.predicted.value, 1)) for r in rows][:3]
    [('t4', 20.0), ('rtx-4090', 63.0), ('a100-80gb', 127.4)]
    """
    bundles = tuple(bundles)
    wanted = workload(figure, params) if params is not None else None
    checked = tuple(sorted(check_params(figure, params).items())) if params is not None else ()
    rows = []
    for device in reference_devices(bundles):
        sheet = _sheet(device)
        if wanted is None:
            readings = [
                m
                for b in bundles
                if _bundle_device(b) == device
                if (m := b.measurement(figure)) is not None
            ]
        else:
            readings = [
                m
                for b in bundles
                if _bundle_device(b) == device
                for m in b.measurements
                if m.name == figure and measured_workload(m) == wanted
            ]
        m = readings[0] if readings else None
        if params is not None:
            predicted = predict_for(device, figure, params)
        elif m is not None:
            predicted = predict_measurement(device, m)
        else:
            predicted = predict_for(device, figure)
        measured = statistics.median(r.value for r in readings) if readings else None
        unit = m.unit if m is not None else None
        ratio = None
        if measured is not None and isinstance(predicted, Prediction) and unit == predicted.unit:
            ratio = compare(measured, unit, predicted).ratio
        entry = figure.split(".")[0]
        pub = tuple(
            p
            for p in published.rows_for(device)
            if p.figure == figure or (params is None and p.figure == entry and "." in figure)
        )
        rows.append(
            TableRow(
                device=device,
                name=sheet.name,
                figure=figure,
                predicted=predicted,
                published=pub,
                measured=measured,
                measured_unit=unit,
                ratio=ratio,
                params=checked,
            )
        )
    return tuple(rows)
