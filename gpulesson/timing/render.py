"""Rendering of matmul sweep results for ``gpulesson bench``: terminal text and JSON.

``gpulesson.timing.bench`` returns the result objects of ``gpulesson.timing.results``; the
functions here only turn those results into what the terminal shows: they never measure,
and every figure they print is a field or property of a result. This module needs no
torch. The lessons' renderers of the same results live in :mod:`gpulesson.course.why_gpus`,
:mod:`gpulesson.course.timing` and :mod:`gpulesson.course.roofline`, which import the
formatting helpers below.

>>> from gpulesson.timing.results import MatmulResult
>>> r = MatmulResult(device="cpu", dtype="fp32", n=64, threads=1, samples_s=(0.001,))
>>> to_text([r]).splitlines()[3].split()
['64', '1', '0', '1', '1', '1', '5.24e+05', '0.5']
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from gpulesson.timing.inputs import barrier_name
from gpulesson.timing.results import (
    SPREAD_WARNING_IQR_SHARE,
    LaunchTiming,
    MatmulResult,
    OpResult,
    Spread,
)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g}"


def _gflops(flop_per_s: float) -> str:
    return f"{flop_per_s / 1e9:,.1f}"


def result_dict(result: MatmulResult) -> dict[str, Any]:
    """One measurement as plain data: every field the JSON output promises."""
    return {
        "device": result.device,
        "dtype": result.dtype,
        "n": result.n,
        "threads": result.threads,
        "median_s": result.median_s,
        "iqr_s": result.iqr_s,
        "min_s": result.min_s,
        "max_s": result.max_s,
        "repeats": result.repeats,
        "calls_per_sample": result.calls_per_sample,
        "closing_barrier": result.closing_barrier,
        "flops": result.flops,
        "flop_per_s": result.flop_per_s,
        "spread_warning": result.spread_warning,
        "samples_s": list(result.samples_s),
    }


COMPARE_HINT = (
    "To compare with the published GPU figures, open the course page 'Why GPUs win at "
    "training' (lessons/why-gpus/): its sweep table was measured on the CUDA GPU named in "
    "the page's stamp and its build-record.json. Compare rows with the same n and dtype, "
    "and the GFLOP/s column rather than raw times."
)


def to_json(results: Sequence[MatmulResult], device: str, dtype: str) -> str:
    """All measurements as one JSON object."""
    return json.dumps(
        {
            "device": device,
            "dtype": dtype,
            "barrier": barrier_name(device),
            "spread_warning_iqr_share": SPREAD_WARNING_IQR_SHARE,
            "measurements": [result_dict(r) for r in results],
            "how_to_compare": COMPARE_HINT,
        },
        indent=2,
    )


_TABLE_HEADER = (
    "n",
    "median (ms)",
    "IQR (ms)",
    "min (ms)",
    "max (ms)",
    "repeats",
    "FLOPs",
    "GFLOP/s",
)


def _table_row(r: MatmulResult) -> tuple[str, ...]:
    return (
        str(r.n),
        _ms(r.median_s),
        _ms(r.iqr_s),
        _ms(r.min_s),
        _ms(r.max_s),
        str(r.repeats),
        f"{r.flops:.3g}",
        _gflops(r.flop_per_s),
    )


def _label(r: Spread) -> str:
    if isinstance(r, MatmulResult):
        return f"{r.device} n={r.n}"
    if isinstance(r, OpResult):
        return f"{r.device} {r.name}"
    if isinstance(r, LaunchTiming):
        return f"{r.device} tiny op, {r.mode}"
    return "timing"


def to_text(results: Sequence[MatmulResult]) -> str:
    """Matmul results as an aligned plain-text table for the terminal."""
    if not results:
        return "no measurements"
    first = results[0]
    rows = [_TABLE_HEADER] + [_table_row(r) for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_TABLE_HEADER))]
    lines = [
        f"device {first.device}, dtype {first.dtype}, {first.threads} threads, "
        f"barrier: {barrier_name(first.device)}",
        "",
    ]
    lines += ["  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    lines += [f"warning, {_label(r)}: {r.spread_warning}" for r in results if r.spread_warning]
    lines += ["", COMPARE_HINT]
    return "\n".join(lines)
