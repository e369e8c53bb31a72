"""The lesson ``inside-gpu.md``: its renderers and texts.

Its pictures and tables, from the results of :mod:`gpulesson.inside`: the GPU limits, the
cache sweep, strides, occupancy (and the occupancy lab's container), waves, attention
traffic, quantization error, the low-precision tables and the matmul shapes (also used by
``feeding.md``). Every data field goes through :func:`gpulesson.text.inert`; URLs come
from package data.

>>> from gpulesson.inside.occupancy import occupancy
>>> o = occupancy("8.0", threads_per_block=256, registers_per_thread=32)
>>> print(occupancy_markdown([o]).splitlines()[2])
| 8.0 | 256 | 32 | 0.0 | 8 | 8 | 164 | 8 | 64 | 100% | warps |
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence

from gpulesson.inside import limits
from gpulesson.inside.attention_io import AttentionPeak, AttentionTime
from gpulesson.inside.cache_sweep import CacheLevel, Step, Sweep, nearest_edge
from gpulesson.inside.occupancy import Occupancy
from gpulesson.inside.strided import StrideSweep
from gpulesson.inside.waves import Waves
from gpulesson.precision.quantize_error import QuantError
from gpulesson.results import datasheets
from gpulesson.tables import markdown_table
from gpulesson.text import inert
from gpulesson.timing.alignment import ShapeComparison
from gpulesson.timing.results import Spread
from gpulesson.units import GIB, MIB


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g}"


def _spread_warnings(named: Sequence[tuple[str, Spread]]) -> list[str]:
    found = [f"    - {label}: {r.spread_warning}." for label, r in named if r.spread_warning]
    return ["", '!!! warning "Spread warning"', *found] if found else []


def shapes_markdown(c: ShapeComparison) -> str:
    """One row per GEMM shape: time per call, rate, and share of the aligned shape's rate.

    >>> from gpulesson.timing.alignment import GemmShape, ShapeTiming
    >>> a = ShapeTiming(shape=GemmShape(label="n=4", m=4, k=4, n=4, aligned=True),
    ...                 samples_s=(1e-6,))
    >>> c = ShapeComparison(device="cpu", dtype="fp32", calls_per_sample=1, timings=(a,))
    >>> print(shapes_markdown(c).splitlines()[2])
    | n=4 (aligned) | 4 x 4 x 4 | 0.001 | 0.128 | 100% |
    """
    rate_unit, scale = ("TFLOP/s", 1e12) if c.device == "cuda" else ("GFLOP/s", 1e9)
    header = (
        f"shape ({c.dtype}, {c.device})",
        "m x k x n",
        "median per call (ms)",
        rate_unit,
        "share of the aligned rate",
    )
    rows = []
    for t in c.timings:
        s = t.shape
        rows.append(
            (
                f"{s.label} (aligned)" if s.aligned else s.label,
                f"{s.m:,} x {s.k:,} x {s.n:,}",
                _ms(t.median_s),
                f"{t.flop_per_s / scale:.3g}",
                f"{c.relative(t):.0%}",
            )
        )
    lines = [markdown_table(header, rows, align="llrrr")]
    lines += _spread_warnings([(t.shape.label, t) for t in c.timings])
    return "\n".join(lines)


def _size(n_bytes: float) -> str:
    if n_bytes >= GIB:
        return f"{n_bytes / GIB:.3g} GiB"
    if n_bytes >= MIB:
        return f"{n_bytes / MIB:.3g} MiB"
    return f"{n_bytes / 1024:.3g} KiB"


def gpus_markdown(rows: Sequence[limits.GpuLimits]) -> str:
    """SMs, per-SM limits, L2 and memory bandwidth of the reference GPUs, with sources.

    >>> print(gpus_markdown([limits.gpu("t4")]).splitlines()[2][:41])
    | NVIDIA T4 | 7.5 | 40 | 32 | 32 | 65,536
    """
    header = (
        "GPU",
        "compute capability",
        "SMs",
        "warp size",
        "warps/SM",
        "registers/SM",
        "shared memory/SM (KiB)",
        "L2 (MiB)",
        "memory bandwidth (GB/s)",
        "sources",
    )
    cells = []
    for g in rows:
        cc = limits.compute_capability(g.compute_capability)
        sheet = datasheets.get(g.id)
        cells.append(
            (
                inert(g.name),
                inert(cc.name),
                g.sm_count,
                cc.granularity.warp_size,
                cc.max_warps_per_sm,
                f"{cc.registers_per_sm:,}",
                cc.shared_per_sm_bytes // 1024,
                f"{g.l2_bytes / MIB:.0f}",
                f"{sheet.memory_bandwidth_stated_gb_per_s:,.0f}",
                f"[whitepaper]({limits.source_url(g.source)}), "
                f"[limits]({limits.source_url(cc.source)}), "
                f"[datasheet]({sheet.sources[0].url})",
            )
        )
    return markdown_table(header, cells, align="ll" + "r" * 7 + "l")


def device_markdown(
    name: str, sm_count: int, cc: str, shared_per_sm_bytes: int, l2_bytes: int
) -> str:
    """This build's own GPU as ``torch.cuda.get_device_properties`` reports it.

    >>> print(device_markdown("X", 2, "9.0", 1024, 2048).splitlines()[2])
    | X | 9.0 | 2 | 1 | 0.00195 |
    """
    header = ("this build's GPU", "compute capability", "SMs", "shared memory/SM (KiB)", "L2 (MiB)")
    row = (inert(name), inert(cc), sm_count, shared_per_sm_bytes // 1024, f"{l2_bytes / MIB:.3g}")
    return markdown_table(header, [row], align="llrrr")


def sweep_markdown(sweep: Sweep, caches: Sequence[CacheLevel]) -> str:
    """The working-set sweep as a table, the steps found, and the caches the kernel reports.

    >>> from gpulesson.inside.cache_sweep import SweepPoint
    >>> s = Sweep(device="cpu", rounds=1, points=(SweepPoint(working_set_bytes=8192,
    ...     bytes_per_s=5e10),))
    >>> print(sweep_markdown(s, []).splitlines()[2])
    | 8 KiB | 50.0 |
    """
    rows = [(_size(p.working_set_bytes), f"{p.bytes_per_s / 1e9:.1f}") for p in sweep.points]
    lines = [markdown_table(("working set", "read bandwidth (GB/s)"), rows, align="rr"), ""]
    lines.append(
        f"Measured on {inert(sweep.device)} in one thread, each size the median of "
        f"{sweep.rounds} interleaved rounds."
    )
    if sweep.steps:
        found = "; ".join(
            f"{_size(s.before_bytes)} to {_size(s.after_bytes)} "
            f"({s.before_bytes_per_s / 1e9:.0f} to {s.after_bytes_per_s / 1e9:.0f} GB/s, "
            f"{s.ratio:.1f}x), its edge at {_size(s.edge_bytes)}"
            for s in sweep.steps
        )
        lines.append(f"Steps found: {found}.")
    else:
        lines.append("Steps found: none.")
    if caches:
        reported = ", ".join(f"L{c.level} {_size(c.size_bytes)}" for c in caches)
        lines.append(f"Caches the kernel reports for cpu0: {reported}.")
        lines.append("")
        lines.append(levels_sentences(sweep.steps, caches, sweep.points[-1].working_set_bytes))
    return "\n".join(lines)


def levels_sentences(
    steps: Sequence[Step], caches: Sequence[CacheLevel], largest_bytes: int
) -> str:
    """What the sweep shows of L1 and L3, the levels the page does not claim: a step whose
    edge lies within a factor of two of the level's reported size, or none.

    >>> l1 = CacheLevel(level=1, kind="Data", size_bytes=48 * 1024)
    >>> edge = Step(before_bytes=32 * 1024, after_bytes=64 * 1024, before_bytes_per_s=1.8e11,
    ...             after_bytes_per_s=1.2e11, edge_bytes=53 * 1024)
    >>> levels_sentences([edge], [l1], 2**27)[:61]
    'L1 shows up too: the sweep has a step with its edge at 53 KiB'
    >>> levels_sentences([], [l1], 2**27)[:45]
    'L1 (48 KiB) shows no step of its own here: no'
    """
    out = []
    l1 = next((c for c in caches if c.level == 1), None)
    if l1 is not None:
        step = nearest_edge(steps, l1.size_bytes)
        factor = _factor(step, l1.size_bytes)
        if step is not None and factor <= 2:
            out.append(
                f"L1 shows up too: the sweep has a step with its edge at {_size(step.edge_bytes)}, "
                f"{factor:.2f}x from the {_size(l1.size_bytes)} L1 data cache the kernel reports, "
                f"where the bandwidth falls from {step.before_bytes_per_s / 1e9:.0f} to "
                f"{step.after_bytes_per_s / 1e9:.0f} GB/s."
            )
        else:
            nearest = (
                f"the nearest step edge is {factor:.1f}x from it" if step else "no step was found"
            )
            out.append(
                f"L1 ({_size(l1.size_bytes)}) shows no step of its own here: {nearest}; reads "
                "that fit it are hidden under each call's fixed overhead on this machine."
            )
    l3 = next((c for c in caches if c.level == 3), None)
    if l3 is not None:
        step = nearest_edge(steps, l3.size_bytes)
        factor = _factor(step, l3.size_bytes)
        beyond = (
            f" (the largest size swept is {_size(largest_bytes)})"
            if largest_bytes < l3.size_bytes
            else ""
        )
        if step is not None and factor <= 2:
            out.append(
                f"A step's edge, at {_size(step.edge_bytes)}, also lies {factor:.2f}x from the "
                f"{_size(l3.size_bytes)} L3 the kernel reports; the page still does not claim "
                "L3: the whole host shares it, and other tenants' work fills it."
            )
        else:
            nearest = f"the nearest step edge lies {factor:.0f}x from it" if step else "no step"
            out.append(
                f"L3 is not claimed: the kernel reports {_size(l3.size_bytes)}, shared by the "
                f"whole host and filled by other tenants' work, and {nearest}{beyond}."
            )
    return " ".join(out)


def _factor(step: Step | None, size_bytes: int) -> float:
    if step is None:
        return float("inf")
    return max(step.edge_bytes / size_bytes, size_bytes / step.edge_bytes)


def tensor_cores_markdown() -> str:
    """The dimension multiples for tensor cores per dtype, and cuBLAS's tiles, from the
    cited guide (``gpu_limits.json``), in elements and in bytes.

    >>> print(tensor_cores_markdown().splitlines()[3])
    | FP16 | 2 | 8 | 16 | 64 | 128 |
    """
    header = (
        "data type",
        "bytes per element",
        "most efficient multiple of M, N, K (elements)",
        "(bytes)",
        "on the A100 (elements)",
        "(bytes)",
    )
    rows = limits.tensor_core_multiples()
    cells = [
        (inert(m.dtype), m.bytes_per_element, m.elements, m.bytes, m.a100_elements, m.a100_bytes)
        for m in rows
    ]
    tiles = ", ".join(f"{a} x {b}" for a, b in limits.cublas_tiles())
    lines = [markdown_table(header, cells), ""]
    if len({m.bytes for m in rows}) == 1 and len({m.a100_bytes for m in rows}) == 1:
        lines.append(
            f"In bytes every data type's multiple is the same, {rows[0].bytes} bytes "
            f"({rows[0].a100_bytes} on the A100): the requirement is a width in bytes."
        )
    lines.append(
        f"cuBLAS's thread-block tiles (output rows x columns), most efficient first: {tiles}. "
        f"Source: [NVIDIA, Matrix Multiplication Background]({limits.tensor_core_source()}) "
        "(tensor core requirements; typical tile dimensions in cuBLAS)."
    )
    return "\n".join(lines)


def strided_markdown(sweep: StrideSweep) -> str:
    """Useful bandwidth per stride.

    >>> from gpulesson.inside.strided import StridePoint
    >>> s = StrideSweep(device="cpu", tensor_bytes=2**20,
    ...                 points=(StridePoint(stride=1, elements=1000, median_s=1e-6),))
    >>> print(strided_markdown(s).splitlines()[2])
    | 1 | 4 | 4.00 | 1 |
    """
    header = ("stride (floats)", "stride (bytes)", "useful bandwidth (GB/s)", "ns per element")
    rows = [
        (
            p.stride,
            4 * p.stride,
            f"{p.useful_bytes_per_s / 1e9:.2f}",
            f"{p.median_s / p.elements * 1e9:.2g}",
        )
        for p in sweep.points
    ]
    lines = [markdown_table(header, rows, align="rrrr"), ""]
    lines.append(
        f"`x[::stride].sum()` over one {_size(sweep.tensor_bytes)} fp32 tensor on "
        f"{inert(sweep.device)}, median of interleaved rounds."
    )
    return "\n".join(lines)


def occupancy_markdown(rows: Sequence[Occupancy]) -> str:
    """Occupancy configurations as a table: every limit, and the one that binds."""
    header = (
        "compute capability",
        "threads/block",
        "registers/thread",
        "shared/block (KiB)",
        "blocks by warps",
        "blocks by registers",
        "blocks by shared",
        "blocks/SM",
        "warps/SM",
        "occupancy",
        "limited by",
    )
    cells = [
        (
            inert(o.compute_capability),
            o.threads_per_block,
            o.registers_per_thread,
            f"{o.shared_per_block_bytes / 1024:.1f}",
            o.blocks_by_warps,
            o.blocks_by_registers,
            o.blocks_by_shared,
            o.blocks_per_sm,
            o.warps_per_sm,
            f"{o.occupancy:.0%}",
            o.limited_by,
        )
        for o in rows
    ]
    return markdown_table(header, cells, align="l" + "r" * 9 + "l")


def occupancy_lab_html() -> str:
    """The occupancy lab's container, with the cited per-SM limits as a data attribute.

    ``docs/javascripts/occupancy.js`` fills it; without JavaScript the table beside it stays.

    >>> occupancy_lab_html().startswith('<div class="gl-occupancy" data-limits="{')
    True
    """
    table = {}
    for name in limits.raw()["compute_capabilities"]:
        cc = limits.compute_capability(name)
        g = cc.granularity
        table[name] = {
            "maxWarps": cc.max_warps_per_sm,
            "maxBlocks": cc.max_blocks_per_sm,
            "regsPerSm": cc.registers_per_sm,
            "maxRegsPerThread": cc.max_registers_per_thread,
            "maxThreadsPerBlock": cc.max_threads_per_block,
            "sharedPerSm": cc.shared_per_sm_bytes,
            "reservedShared": cc.reserved_shared_per_block_bytes,
            "warpSize": g.warp_size,
            "regUnit": g.register_allocation_unit_per_warp,
            "subPartitions": g.register_sub_partitions,
            "sharedUnit": g.shared_allocation_unit_bytes,
        }
    data = html.escape(json.dumps(table, sort_keys=True), quote=True)
    return f'<div class="gl-occupancy" data-limits="{data}"></div>'


def waves_markdown(rows: Sequence[tuple[str, Waves, Waves]]) -> str:
    """Tiles, waves and efficiency of an aligned and an odd matmul per GPU.

    >>> from gpulesson.inside.waves import waves
    >>> a = waves(256, 256, tile_m=128, tile_n=128, sm_count=4)
    >>> b = waves(257, 257, tile_m=128, tile_n=128, sm_count=4)
    >>> print(waves_markdown([("G", a, b)]).splitlines()[2])
    | G | 4 | 4 | 1 | 100% | 9 | 3 | 34% |
    """
    first = rows[0][1] if rows else None
    size_a = f"{first.m}" if first else "n"
    size_b = f"{rows[0][2].m}" if rows else "n + 1"
    header = (
        "GPU",
        "SMs",
        f"tiles at {size_a}",
        "waves",
        "efficiency",
        f"tiles at {size_b}",
        "waves",
        "efficiency",
    )
    cells = [
        (
            inert(name),
            a.sm_count,
            a.tiles,
            a.waves,
            f"{a.efficiency:.0%}",
            b.tiles,
            b.waves,
            f"{b.efficiency:.0%}",
        )
        for name, a, b in rows
    ]
    return markdown_table(header, cells)


def attention_bytes_markdown(rows: Sequence[tuple[int, int, int]], d: int, sram: int) -> str:
    """Predicted elements moved by standard and tiled attention per sequence length.

    >>> print(attention_bytes_markdown([(128, 10, 5)], 64, 100).splitlines()[2])
    | 128 | 10 | 5 | 2.0 |
    """
    header = ("N", "standard (elements)", "FlashAttention (elements)", "standard / flash")
    cells = [(f"{n:,}", f"{s:,}", f"{f:,}", f"{s / f:.1f}") for n, s, f in rows]
    lines = [markdown_table(header, cells, align="rrrr"), ""]
    lines.append(
        f"Per head, head dimension d = {d}, on-chip memory M = {sram:,} elements: standard "
        "4Nd + 4N², FlashAttention 2Nd + 3Nd·ceil(N / ceil(M / 4d)) (a model of the papers' "
        "counts, not a measurement)."
    )
    return "\n".join(lines)


def attention_peaks_markdown(rows: Sequence[AttentionPeak]) -> str:
    """Traced peak memory of explicit attention and SDPA per sequence length.

    >>> print(attention_peaks_markdown([AttentionPeak(seq_len=4, head_dim=2, heads=1,
    ...     standard_peak_bytes=2048, sdpa_peak_bytes=1024)]).splitlines()[2])
    | 4 | 2 KiB | 1 KiB | 2.0 |
    """
    header = ("N", "explicit softmax(QKᵀ)V peak", "SDPA peak", "explicit / SDPA")
    cells = [
        (
            f"{r.seq_len:,}",
            _size(r.standard_peak_bytes),
            _size(r.sdpa_peak_bytes),
            f"{r.standard_peak_bytes / r.sdpa_peak_bytes:.1f}",
        )
        for r in rows
    ]
    return markdown_table(header, cells, align="rrrr")


def attention_time_markdown(rows: Sequence[AttentionTime], device: str) -> str:
    """Median time of explicit attention and SDPA per sequence length on ``device``.

    >>> print(attention_time_markdown([AttentionTime(seq_len=8, standard_s=2e-3,
    ...     sdpa_s=1e-3)], "cpu").splitlines()[2])
    | 8 | 2 | 1 | 2.0 |
    """
    header = ("N", "explicit (ms)", "SDPA (ms)", "explicit / SDPA")
    cells = [
        (
            f"{r.seq_len:,}",
            f"{r.standard_s * 1e3:.3g}",
            f"{r.sdpa_s * 1e3:.3g}",
            f"{r.standard_s / r.sdpa_s:.1f}",
        )
        for r in rows
    ]
    lines = [markdown_table(header, cells, align="rrrr"), ""]
    lines.append(f"Median wall time on {inert(device)}, fp32, one head of dimension 64.")
    return "\n".join(lines)


def resident_sentence(g: limits.GpuLimits) -> str:
    """How many warps and threads one reference GPU keeps resident at once.

    >>> resident_sentence(limits.gpu("t4"))[:40]
    'The NVIDIA T4 keeps up to 1,280 warps (4'
    """
    cc = limits.compute_capability(g.compute_capability)
    return (
        f"The {inert(g.name)} keeps up to {g.sm_count * cc.max_warps_per_sm:,} warps "
        f"({g.sm_count * cc.max_threads_per_sm:,} threads) resident at once: {g.sm_count} SMs "
        f"x {cc.max_warps_per_sm} warp slots (x 32 threads)."
    )


def quant_markdown(tables: dict[str, Sequence[QuantError]]) -> str:
    """Relative RMS error of each format (rows) on each tensor (columns).

    >>> e = QuantError(name="bf16", bits=16, available=True, relative_error=0.0017, how="cast")
    >>> print(quant_markdown({"w": [e]}).splitlines()[2])
    | bf16 | 16 | 0.170% | cast |
    """
    names = list(tables)
    first = next(iter(tables.values()), [])
    header = ("format", "bits", *(f"error on {inert(n)}" for n in names), "how")
    rows = []
    for i, row in enumerate(first):
        errors = []
        for n in names:
            r = tables[n][i]
            errors.append(f"{r.relative_error:.3%}" if r.available else "—")
        rows.append((inert(row.name), row.bits, *errors, inert(row.how)))
    return markdown_table(header, rows, align="lr" + "r" * len(names) + "l")
