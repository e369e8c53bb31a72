"""Turn the timing module's results into bundle measurements, keeping every sample.

The suite never times anything itself: entries call the functions the lessons and
``gpulesson bench`` call (:mod:`gpulesson.timing.bench`, :mod:`gpulesson.timing.roofline`)
and hand the result here. A throughput keeps the seconds-per-call samples it was derived
from and the work per call in ``params`` (``flop`` or ``bytes``), so a reader of the
bundle can recompute it; :mod:`gpulesson.results.bundle` checks that it does.

>>> from gpulesson.timing.bench import OpResult
>>> op = OpResult(name="copy", device="cpu", dtype="fp32", threads=2,
...               samples_s=(0.5, 0.25, 0.25), flops=0, bytes_moved=10**9)
>>> m = throughput(op, name="memory_bandwidth", entry="memory_bandwidth", unit="B/s",
...                label="copy")
>>> m.value, m.params["bytes"], m.samples_unit
(4000000000.0, 1000000000, 's')
"""

from __future__ import annotations

from collections.abc import Mapping

from gpulesson.results.bundle import Measurement, Scalar
from gpulesson.timing.results import LaunchTiming, MatmulResult, OpResult

Timing = MatmulResult | OpResult | LaunchTiming


def _base_params(result: Timing) -> dict[str, Scalar]:
    return {
        "device": result.device,
        "threads": result.threads,
        "calls_per_sample": result.calls_per_sample,
    }


def throughput(
    result: MatmulResult | OpResult,
    *,
    name: str,
    entry: str,
    unit: str,
    label: str,
    dtype: str | None = None,
    limit: str | None = None,
    headline: bool = False,
    params: Mapping[str, Scalar] | None = None,
    note: str = "",
) -> Measurement:
    """A FLOP/s (``unit="FLOP/s"``) or bytes/s (``unit="B/s"``) figure from a timing.

    The value is the work per call over the median seconds per call, exactly as
    ``result.flop_per_s`` / ``result.bytes_per_s`` compute it.
    """
    if unit == "FLOP/s":
        work: dict[str, Scalar] = {"flop": result.flops}
        value = result.flop_per_s
    elif unit == "B/s":
        if not isinstance(result, OpResult):
            raise ValueError("a B/s figure needs an OpResult, which counts bytes moved")
        work = {"bytes": result.bytes_moved}
        value = result.bytes_per_s
    else:
        raise ValueError(f"throughput unit {unit!r} must be FLOP/s or B/s")
    return Measurement(
        name=name,
        entry=entry,
        unit=unit,
        value=value,
        samples=tuple(result.samples_s),
        samples_unit="s",
        label=label,
        dtype=dtype,
        limit=limit,
        headline=headline,
        params={**_base_params(result), **work, **(params or {})},
        warning=result.spread_warning,
        note=note,
    )


def seconds(
    result: Timing,
    *,
    name: str,
    entry: str,
    label: str,
    dtype: str | None = None,
    headline: bool = False,
    params: Mapping[str, Scalar] | None = None,
    note: str = "",
) -> Measurement:
    """The median seconds per call of a timing, with its samples.

    >>> from gpulesson.timing.results import MatmulResult
    >>> r = MatmulResult(device="cpu", dtype="fp32", n=64, threads=1, samples_s=(3.0, 1.0, 2.0))
    >>> seconds(r, name="t", entry="t", label="t").value
    2.0
    """
    return Measurement(
        name=name,
        entry=entry,
        unit="s",
        value=result.median_s,
        samples=tuple(result.samples_s),
        samples_unit="s",
        label=label,
        dtype=dtype,
        headline=headline,
        params={**_base_params(result), **(params or {})},
        warning=result.spread_warning,
        note=note,
    )


def single(
    value: float,
    *,
    name: str,
    entry: str,
    unit: str,
    label: str,
    limit: str | None = None,
    headline: bool = False,
    params: Mapping[str, Scalar] | None = None,
    note: str = "",
) -> Measurement:
    """A figure read once (a peak memory, a byte count): its one sample is itself.

    >>> single(123, name="x", entry="x", unit="bytes", label="x").samples
    (123.0,)
    """
    return Measurement(
        name=name,
        entry=entry,
        unit=unit,
        value=float(value),
        samples=(float(value),),
        samples_unit=unit,
        label=label,
        limit=limit,
        headline=headline,
        params=dict(params or {}),
        note=note,
    )


# --- and back: the timing a measurement was made from, for a page's renderer ------------


def matmul_result(m: Measurement, *, closing_barrier: bool = True) -> MatmulResult:
    """The matmul timing behind ``m`` (its samples, ``n``, device and threads from params).

    >>> r = MatmulResult(device="cpu", dtype="fp32", n=64, threads=2, samples_s=(0.5, 0.25))
    >>> m = throughput(r, name="x", entry="x", unit="FLOP/s", label="x", params={"n": 64})
    >>> back = matmul_result(m)
    >>> back == r
    True
    """
    return MatmulResult(
        device=str(m.params["device"]),
        dtype=m.dtype or "fp32",
        n=int(m.params["n"]),
        threads=int(m.params["threads"]),
        samples_s=tuple(m.samples),
        calls_per_sample=int(m.params.get("calls_per_sample") or 1),
        closing_barrier=closing_barrier,
    )


def op_result(
    m: Measurement, name: str, *, flops: int | None = None, bytes_moved: int | None = None
) -> OpResult:
    """The operation timing behind ``m``; its work from params (``flop``, ``bytes``) unless given.

    >>> op = OpResult(name="copy", device="cpu", dtype="fp32", threads=2,
    ...               samples_s=(0.5, 0.25, 0.25), flops=0, bytes_moved=10**9)
    >>> m = throughput(op, name="b", entry="b", unit="B/s", label="copy")
    >>> op_result(m, "copy") == op
    True
    """
    return OpResult(
        name=name,
        device=str(m.params["device"]),
        dtype=m.dtype or "fp32",
        threads=int(m.params["threads"]),
        samples_s=tuple(m.samples),
        flops=int(m.params.get("flop") or 0) if flops is None else flops,
        bytes_moved=int(m.params.get("bytes") or 0) if bytes_moved is None else bytes_moved,
        calls_per_sample=int(m.params.get("calls_per_sample") or 1),
    )
