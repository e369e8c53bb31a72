"""The lesson ``roofline.md``: its renderers and texts.

Its pictures and tables: the roofline table and chart, the host-link table and the
datasheet table.

Renderers take the frozen results of the topic packages and return Markdown, HTML or chart
markup; nothing here measures. See :mod:`gpulesson.course`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from gpulesson.tables import markdown_table
from gpulesson.text import inert
from gpulesson.timing import charts
from gpulesson.timing.results import (
    LinkBandwidth,
    Placement,
    Roofline,
)
from gpulesson.timing.teaching import (
    SOURCE_ON_DEVICE_TB_PER_S,
    SOURCE_PCIE_GB_PER_S,
)
from gpulesson.units import GB, MIB

if TYPE_CHECKING:
    from gpulesson.results.datasheets import Datasheet
from gpulesson.course.why_gpus import NO_CUDA_TEXT, _sources, _tflops_cell, _warnings
from gpulesson.timing.render import _gflops, _ms

# An op right of the ridge is called compute-bound only once it reaches half its roof;
# below that the table says the roof is above it and how much of it the op reached.
HALF_OF_ROOF = 0.5


def _regime(p: Placement) -> str:
    """The regime, with the share: a compute-side op well short of the peak is not "bound".

    >>> from types import SimpleNamespace as NS
    >>> _regime(NS(regime="compute-bound", share_of_ceiling=0.3))
    'compute roof above it, reached 30%'
    >>> _regime(NS(regime="memory-bound", share_of_ceiling=0.72))
    'memory-bound'
    """
    if p.regime == "compute-bound" and p.share_of_ceiling < HALF_OF_ROOF:
        return f"compute roof above it, reached {p.share_of_ceiling:.0%}"
    return p.regime


def roofline_markdown(roof: Roofline) -> str:
    """Bandwidth, peak, ridge, and each operation's place under the roof."""
    gbps = roof.bandwidth_bytes_per_s / GB
    roofs = [
        (
            "memory bandwidth",
            f"{gbps:,.1f} GB/s",
            f"{roof.bandwidth.name}, "
            f"{roof.bandwidth.bytes_moved / MIB:,.0f} MiB read + written / median time",
        ),
        (
            "matmul peak",
            f"{_gflops(roof.peak_flop_per_s)} GFLOP/s",
            f"{roof.peak.name}, fp32: 2n^3 / median time",
        ),
        ("ridge point", f"{roof.ridge_flop_per_byte:,.1f} FLOP/byte", "peak / bandwidth"),
    ]
    header = (
        "operation",
        "FLOP/byte",
        "achieved GFLOP/s",
        "ceiling at that intensity (GFLOP/s)",
        "share of ceiling",
        "regime",
    )
    ops = [
        (
            p.op.name,
            f"{p.op.intensity_flop_per_byte:.3g}",
            _gflops(p.op.flop_per_s),
            _gflops(p.ceiling_flop_per_s),
            f"{p.share_of_ceiling:.0%}",
            _regime(p),
        )
        for p in roof.placements
    ]
    lines = [
        markdown_table(("quantity", "measured on " + roof.device, "how"), roofs, align="lrl"),
        "",
        markdown_table(header, ops, align="lrrrrl"),
    ]
    lines += _warnings([roof.bandwidth, *(op for op in roof.ops if op is not roof.bandwidth)])
    return "\n".join(lines)


def roofline_chart(roof: Roofline) -> str:
    """The measured roofline with the operations placed on it: a chart (Vega-Lite) in a figure."""
    spec = charts.roofline_chart(
        peak_flop_per_s=roof.peak_flop_per_s,
        bandwidth_bytes_per_s=roof.bandwidth_bytes_per_s,
        points=tuple(
            charts.Point(op.name, op.intensity_flop_per_byte, op.flop_per_s) for op in roof.ops
        ),
        title=f"Roofline measured on {roof.device}",
    )
    return charts.to_html(
        spec,
        caption="The roofline and the operations under it: every value is in the tables above.",
    )


def link_markdown(link: LinkBandwidth | None) -> str:
    """The link table, or a plain statement that no GPU was present, with the source's ranges."""
    quoted = (
        f"The source lesson's ranges (quoted, not measured here): PCIe about "
        f"{SOURCE_PCIE_GB_PER_S[0]}-{SOURCE_PCIE_GB_PER_S[1]} GB/s, on-device memory about "
        f"{SOURCE_ON_DEVICE_TB_PER_S[0]}-{SOURCE_ON_DEVICE_TB_PER_S[1]} TB/s."
    )
    if link is None:
        return (
            f"Host-to-device copies: {NO_CUDA_TEXT}, so there is no PCIe link to measure; "
            f"this build's on-device figure is the CPU's memory bandwidth above. {quoted}"
        )
    rows = [("host to device, pageable", link.pageable)]
    if link.pinned is not None:
        rows.append(("host to device, pinned", link.pinned))
    rows.append((f"on {link.device}, device to device", link.on_device))
    cells = [
        (label, f"{op.bytes_moved / MIB:,.0f}", _ms(op.median_s), f"{op.bytes_per_s / GB:,.1f}")
        for label, op in rows
    ]
    lines = [
        markdown_table(("copy", "bytes moved (MiB)", "median (ms)", "GB/s"), cells),
        "",
        f"On-device copies run {link.on_device_over_link:.0f}x faster than the host link here. "
        f"{quoted}",
    ]
    lines += _warnings([op for _, op in rows])
    return "\n".join(lines)


def datasheets_markdown(
    rows: Sequence[Datasheet], dtypes: Sequence[str] = ("fp32", "bf16", "fp16")
) -> str:
    """Memory bandwidth and dense peaks of some GPUs, as their datasheets print them.

    A dash means the datasheet gives no figure (a dtype the card has no tensor cores for).
    Used by ``roofline.md``.

    >>> from gpulesson.results import datasheets
    >>> print(datasheets_markdown([datasheets.get("t4")]).splitlines()[2][:36])
    | NVIDIA T4 | 320 | 8.1 | — | 65.0 |
    """
    header = ("GPU", "memory bandwidth (GB/s)", *(f"dense {d} (TFLOP/s)" for d in dtypes), "source")
    cells = [
        (
            f"{inert(r.name)}",  # an f-string field: tests/test_inert.py's check reads those
            f"{r.memory_bandwidth_stated_gb_per_s:,.0f}",
            *(_tflops_cell(r.dense_flop_per_s(d)) for d in dtypes),
            _sources(r),
        )
        for r in rows
    ]
    return markdown_table(header, cells, align="lr" + "r" * len(dtypes) + "l")
