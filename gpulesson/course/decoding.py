"""The lesson ``decoding.md``: its renderers and texts.

Its pictures and tables: the decode sweep and its ceilings, GPU bounds, KV-cache growth and
the serving reservation, from the results of :mod:`gpulesson.timing.decode` (measured) and
:mod:`gpulesson.timing.serving` (arithmetic). The functions format those results' fields
and properties and compute no figure of their own. Units are in every column header:
tokens/s, MB (10^6 bytes) for bytes per step, GB/s (10^9) for bandwidths, KiB and GiB
(2^10, 2^30) for cache sizes.

>>> from gpulesson.timing.serving import reservation
>>> print(reservation_markdown(reservation(80 * 2**30, 16 * 10**9, 131072)).splitlines()[2])
| card | 80.0 |
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpulesson.course.common import about
from gpulesson.tables import markdown_table
from gpulesson.timing import charts
from gpulesson.timing.decode import DecodePlan, DecodeSweep
from gpulesson.timing.results import Spread
from gpulesson.timing.serving import GpuBound, KVGrowth, Reservation
from gpulesson.units import GB, GIB, MB, MIB

KIB = 2**10


def _rate(x: float) -> str:
    """A rate to three significant figures, with thousands separators."""
    if x >= 100:
        return f"{x:,.0f}"
    return f"{x:,.3g}"


def _spread_warnings(named: Sequence[tuple[str, Spread]]) -> list[str]:
    found = [f"    - {label}: {r.spread_warning}." for label, r in named if r.spread_warning]
    return ["", '!!! warning "Spread warning"', *found] if found else []


def ceilings_markdown(sweep: DecodeSweep) -> str:
    """The two ceilings the sweep is set against, the ridge and the crossover batch."""
    bw = max(sweep.bandwidths, key=lambda b: b.bytes_per_s)
    readings = ", ".join(f"{b.bytes_per_s / GB:,.1f}" for b in sweep.bandwidths)
    rows = [
        (
            "memory bandwidth",
            f"{sweep.bandwidth_bytes_per_s / GB:,.1f} GB/s",
            f"copy of {bw.bytes_moved / 2 / MIB:,.0f} MiB, bytes read + written / median time; "
            f"the faster of the readings before and after the sweep ({readings} GB/s)",
        ),
        (
            f"matmul rate, {sweep.dtype}",
            f"{sweep.peak_flop_per_s / 1e9:,.1f} GFLOP/s",
            f"{sweep.peak.name}: 2n^3 / median time",
        ),
        (
            "ridge point",
            f"{sweep.ridge_flop_per_byte:,.2f} FLOP/byte",
            "matmul rate / bandwidth",
        ),
        (
            "crossover batch",
            f"{sweep.crossover_batch:,.1f}",
            f"ridge x {sweep.bytes_per_weight} bytes per {sweep.dtype} weight / 2 FLOPs per weight",
        ),
    ]
    return markdown_table(("quantity", f"measured on {sweep.device}", "how"), rows, align="lrl")


def decode_markdown(sweep: DecodeSweep) -> str:
    """Decode tokens/s by batch beside its bandwidth and compute bounds, with the model it ran."""
    c = sweep.config
    first = sweep.rows[0]
    where = sweep.device
    if where == "cpu":
        where += f" ({first.threads} thread{'s' if first.threads > 1 else ''})"
    lines = [
        f"GPT with {sweep.parameters / 1e6:,.1f} M parameters ({c.layers} layers, hidden "
        f"{c.hidden}, {c.heads} heads, vocabulary {c.vocab_size}), random weights in "
        f"{sweep.dtype}, on {where}: {first.weight_bytes / MB:,.1f} MB of weights read "
        f"per step; prompt of {first.prompt_tokens} tokens, then {first.repeats} timed decode "
        "steps after a warm-up (one sample per step).",
        "",
    ]
    bounds = sweep.bounds()
    header = (
        "batch",
        "decode tokens/s (all sequences)",
        "tokens/s per sequence",
        "prefill tokens/s",
        "measured / lower bound",
        "limit",
    )
    rows = [
        (
            b.batch,
            _rate(b.tokens_per_s),
            _rate(b.sequence_tokens_per_s),
            _rate(b.prefill_tokens_per_s),
            f"{b.share_of_bound:.0%}",
            b.limit,
        )
        for b in bounds
    ]
    lines += [markdown_table(header, rows, align="rrrrrl"), ""]
    header = (
        "batch",
        "MB read per step",
        "KV cache share of bytes",
        "FLOP/byte",
        "bandwidth bound (tokens/s)",
        "compute bound (tokens/s)",
    )
    rows = [
        (
            b.batch,
            f"{b.bytes_per_step / MB:,.1f}",
            f"{b.kv_share_of_bytes:.1%}",
            f"{b.intensity_flop_per_byte:.2f}",
            _rate(b.bandwidth_bound_tokens_per_s),
            _rate(b.compute_bound_tokens_per_s),
        )
        for b in bounds
    ]
    lines.append(markdown_table(header, rows, align="rrrrrr"))
    named: list[tuple[str, Spread]] = [(f"batch {r.batch}", r) for r in sweep.rows]
    named += [(f"{op.name} ({op.device})", op) for op in (*sweep.bandwidths, sweep.peak)]
    lines += _spread_warnings(named)
    return "\n".join(lines)


def decode_chart(sweep: DecodeSweep) -> str:
    """Measured decode tokens/s against batch, under the bandwidth and compute bounds."""
    bounds = sweep.bounds()
    series = [
        charts.Series("measured", tuple((float(b.batch), b.tokens_per_s) for b in bounds)),
        charts.Series(
            "bandwidth bound",
            tuple((float(b.batch), b.bandwidth_bound_tokens_per_s) for b in bounds),
        ),
        charts.Series(
            "compute bound", tuple((float(b.batch), b.compute_bound_tokens_per_s) for b in bounds)
        ),
    ]
    spec = charts.line_chart(
        series,
        x_label="batch (sequences decoded together, log scale)",
        y_label="tokens/s, all sequences (log scale)",
        title=f"Decode tokens/s by batch on {sweep.device}",
        x_base=2,
        y_format=",.0f",
    )
    return charts.to_html(spec, caption="Decode tokens/s by batch: every value is in the table.")


def gpu_needed_markdown(plan: DecodePlan) -> str:
    """What a CPU build without a reference bundle says in place of the GPU rows.

    >>> from gpulesson.timing.decode import plan_for
    >>> print(gpu_needed_markdown(plan_for("cuda")).splitlines()[0])
    !!! note "GPU rows not measured on this build"
    """
    c = plan.config
    batches = ", ".join(str(b) for b in plan.batches)
    return (
        '!!! note "GPU rows not measured on this build"\n'
        "    This build has no CUDA GPU, and no reference result bundle with decode rows "
        f"exists yet. The rows need a CUDA GPU: the same sweep on a GPT of "
        f"{plan.parameters() / 1e9:,.2f} x 10^9 parameters ({c.layers} layers, hidden "
        f"{c.hidden}) in {plan.dtype}, batches {batches}. `gpulesson measure --only decode` "
        "on a GPU makes them; a site built with that bundle shows them here."
    )


def gpu_bounds_markdown(rows: Sequence[GpuBound]) -> str:
    """Datasheet GPUs: batch-1 bounds from bandwidth and from arithmetic, ridge, crossover."""
    if not rows:
        raise ValueError("no GPUs to show: pass at least one datasheet id")
    header = (
        "GPU",
        "memory bandwidth (GB/s)",
        "fp16 peak (TFLOP/s, dense)",
        "bandwidth bound, batch 1 (tokens/s)",
        "compute bound, batch 1 (tokens/s)",
        "ridge (FLOP/byte)",
        "batch where compute binds",
    )
    cells = [
        (
            r.name,
            f"{r.bandwidth_bytes_per_s / GB:,.0f}",
            f"{r.fp16_flop_per_s / 1e12:,.1f}",
            _rate(r.format_tokens_per_s("fp16")),
            _rate(r.compute_bound_tokens_per_s),
            f"{r.ridge_flop_per_byte:,.0f}",
            f"{r.crossover_batch:,.0f}",
        )
        for r in rows
    ]
    lines = [
        markdown_table(header, cells),
        "",
        f"A model of {rows[0].parameters / 1e9:g} x 10^9 parameters in fp16, weights only: the KV "
        "cache and every other byte make the real bandwidth bound lower. Bandwidths and peaks "
        "are the datasheets' (see Sources).",
    ]
    return "\n".join(lines)


def quantized_bounds_markdown(rows: Sequence[GpuBound]) -> str:
    """Batch-1 bandwidth bounds of the same model with fp16, int8 and int4 weights."""
    if not rows:
        raise ValueError("no GPUs to show: pass at least one datasheet id")
    names = [name for name, _ in rows[0].tokens_per_s]
    header = (
        "GPU",
        *(f"{n} weights: tokens/s at batch 1" for n in names),
        "int4 weights: batch where compute binds",
    )
    cells = [
        (r.name, *(_rate(v) for _, v in r.tokens_per_s), f"{r.int4_crossover_batch:,.0f}")
        for r in rows
    ]
    lines = [
        markdown_table(header, cells),
        "",
        "Weights only; the scales a quantized format stores beside its weights add a few "
        "per cent to the bytes and are left out.",
    ]
    return "\n".join(lines)


def attention_layouts_markdown(growth: KVGrowth) -> str:
    """Per-token cache of each attention layout: values per layer, formula, KiB per token."""
    header = (
        "attention",
        "values per token per layer",
        "formula",
        f"KiB per token ({growth.layers} layers, {growth.bytes_per_value:g} B per value)",
        "window",
    )
    rows = [
        (
            x.name,
            f"{x.values_per_token_per_layer:,}",
            x.formula,
            f"{growth.per_token_bytes(x) / KIB:,.1f}",
            "none" if x.window_tokens is None else f"{x.window_tokens:,} tokens",
        )
        for x in growth.layouts
    ]
    return markdown_table(header, rows, align="lrlrl")


def kv_growth_markdown(growth: KVGrowth) -> str:
    """The cache of each layout by context length, in GiB, beside the weights."""
    names = [x.name for x in growth.layouts]
    header = [
        f"context (tokens, batch {growth.batch})",
        *(f"{n} (GiB)" for n in names),
        "weights (GiB)",
    ]
    rows = [
        [
            f"{row.context_tokens:,}",
            *(f"{b / GIB:,.3g}" for _, b in row.cache_bytes),
            f"{row.weight_bytes / GIB:,.1f}",
        ]
        for row in growth.rows
    ]
    return markdown_table(header, rows, align="r" * len(header))


def kv_growth_chart(growth: KVGrowth, names: Sequence[str] | None = None) -> str:
    """The cache of the layouts ``names`` (all by default) against context, and the weights.

    Log-log axes; the charts' palette has ``charts.PALETTE_SIZE`` colours, so at most one
    fewer layouts than that can be told apart from the weights' line.
    """
    chosen = list(names) if names is not None else [x.name for x in growth.layouts]
    known = {x.name for x in growth.layouts}
    unknown = [n for n in chosen if n not in known]
    if unknown:
        raise ValueError(f"no layout named {unknown[0]!r}: use one of {sorted(known)}")
    if len(chosen) >= charts.PALETTE_SIZE:
        raise ValueError(
            f"{len(chosen)} layouts and the weights need more than the "
            f"{charts.PALETTE_SIZE} chart colours: pass at most {charts.PALETTE_SIZE - 1} names"
        )
    series = [
        charts.Series(
            name,
            tuple(
                (float(row.context_tokens), dict(row.cache_bytes)[name] / GIB)
                for row in growth.rows
            ),
        )
        for name in chosen
    ]
    series.append(
        charts.Series(
            "weights", tuple((float(r.context_tokens), r.weight_bytes / GIB) for r in growth.rows)
        )
    )
    spec = charts.line_chart(
        series,
        x_label="context (tokens, log scale)",
        y_label="GiB (log scale)",
        title="KV cache by context length",
        x_base=2,
        y_format=",.3g",
    )
    return charts.to_html(spec, caption="KV cache by context length: every value is in the table.")


def reservation_markdown(r: Reservation) -> str:
    """A card under a serving engine's up-front reservation, in GiB, and the tokens it holds."""
    rows = [
        ("card", r.card_bytes),
        (
            f"reserved up front ({r.utilization:.0%} of the card: what nvidia-smi shows as used)",
            r.reserved_bytes,
        ),
        ("weights", r.weight_bytes),
        ("left for KV blocks", r.kv_pool_bytes),
    ]
    return "\n".join(
        [
            markdown_table(("quantity", "GiB"), [(q, f"{b / GIB:,.1f}") for q, b in rows]),
            "",
            f"At {r.per_token_bytes / KIB:,.0f} KiB per token that pool holds "
            f"{r.kv_tokens:,} tokens of context, shared by every request in flight.",
        ]
    )


def decode_bound_readings(facts: Mapping[str, Any]) -> dict[str, str]:
    """The decode loop's batch-1 bandwidth bound in tokens/s, and three misreadings of it.

    Reads ``decoding.bandwidth_gbs`` (the copy bandwidth, GB/s), ``decoding.weight_mb``
    (MB of fp32 weights a step reads) and ``decoding.b1_tokens_per_s`` (what batch 1
    measured). ``bound`` is bandwidth / weight bytes; ``params`` divides by parameters
    instead of bytes (4 bytes each: four times too high); ``copy`` counts each weight as
    read and written, like the copy (half); ``bits`` divides bytes per second by bits.
    ``bandwidth`` and ``weight_mb`` are the two inputs, for the prompt.

    >>> decode_bound_readings({"decoding.bandwidth_gbs": 30.0, "decoding.weight_mb": 110.0,
    ...                        "decoding.b1_tokens_per_s": 80.0})
    ... # doctest: +NORMALIZE_WHITESPACE
    {'bound': '270', 'params': '1,100', 'copy': '140', 'bits': '34', 'measured': '80',
     'bandwidth': '30', 'weight_mb': '110'}
    """
    bandwidth = float(facts["decoding.bandwidth_gbs"]) * 1e9
    bound = bandwidth / (float(facts["decoding.weight_mb"]) * 1e6)
    return {
        "bound": about(bound),
        "params": about(bound * 4),
        "copy": about(bound / 2),
        "bits": about(bound / 8),
        "measured": about(float(facts["decoding.b1_tokens_per_s"])),
        "bandwidth": about(float(facts["decoding.bandwidth_gbs"])),
        "weight_mb": about(float(facts["decoding.weight_mb"])),
    }
