"""The mixed-precision lesson's rows below 16 bits: fp8, MXFP8 and FP4, as a Markdown table.

Layouts and scaling from :data:`gpulesson.precision.formats.LOW_PRECISION_FORMATS`; the
largest value from ``torch.finfo`` where this torch has the dtype; the GPUs that run fp8 at
full rate, with their dense fp8 peak, from the course's datasheet table.

>>> print(low_precision_markdown().splitlines()[2][:40])
| fp8 E4M3 | 4 | 3 | 448 (torch.finfo) |
"""

from __future__ import annotations

from gpulesson.precision.formats import (
    BLACKWELL,
    LOW_PRECISION_FORMATS,
    LowPrecisionFormat,
    low_precision_max,
)
from gpulesson.results import datasheets
from gpulesson.text import inert

FP8_GPUS = ("rtx-4090", "h100-sxm", "h200", "b200")


def fp8_gpus_cell(dtype: str, ids: tuple[str, ...] = FP8_GPUS) -> str:
    """The GPUs among ``ids`` whose datasheet gives a ``dtype`` peak, with the dense figure.

    >>> fp8_gpus_cell("fp8", ("h100-sxm", "a100-80gb"))
    'NVIDIA H100 SXM5 80GB [1,979](https://www.nvidia.com/en-us/data-center/h100/)'
    """
    cells = []
    for i in ids:
        row = datasheets.get(i)
        peak = row.dense_flop_per_s(dtype)
        if peak is not None:
            cells.append(f"{inert(row.name)} [{peak / 1e12:,.0f}]({row.sources[0].url})")
    return ", ".join(cells) if cells else "—"


def _runs_on(fmt: LowPrecisionFormat) -> str:
    if fmt.full_rate_dtype:
        return f"{inert(fmt.full_rate_note)}: {fp8_gpus_cell(fmt.full_rate_dtype)}"
    return f"[{inert(fmt.full_rate_note)}]({BLACKWELL})"


def low_precision_markdown() -> str:
    """One row per format below 16 bits: bits, largest value, scaling, where it runs."""
    lines = [
        "| format | exponent bits | mantissa bits | largest value | scale | runs at full rate "
        "on (dense TFLOP/s from the datasheets) | source |",
        "|---|---:|---:|---|---|---|---|",
    ]
    for fmt in LOW_PRECISION_FORMATS:
        value, where = low_precision_max(fmt)
        lines.append(
            f"| {inert(fmt.name)} | {fmt.exponent_bits} | {fmt.mantissa_bits} "
            f"| {value:,.0f} ({where}) | {inert(fmt.scale)} | {_runs_on(fmt)} "
            f"| [spec]({fmt.source}) |"
        )
    return "\n".join(lines)
