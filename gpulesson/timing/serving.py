"""Serving arithmetic: decode bounds from bandwidth, KV cache sizes and what a server reserves.

Generating a token reads every weight once (and every cached key and value of its
sequence), so a decode step cannot finish faster than those bytes over the memory
bandwidth. This module turns that sentence into numbers, with no measuring and no torch:

* :func:`weight_bound_tokens_per_s`: tokens/s at batch 1, weights only, for a weight
  format (fp16, int8, int4) and a bandwidth; :func:`gpu_bounds` does it for datasheet
  GPUs (:mod:`gpulesson.results.datasheets`), with each GPU's ridge point and the batch
  from which compute binds;
* :func:`kv_cache_bytes`: 2 x layers x kv_heads x head_dim x tokens x batch x bytes;
  :class:`KVLayout` says how many values per token per layer a kind of attention keeps
  (MHA, GQA, MQA, MLA) and whether a sliding window caps the tokens; :func:`kv_growth`
  tabulates the cache against context length; :func:`overtake_tokens` finds where the
  cache outgrows the weights;
* :func:`reservation`: what a serving engine that takes a fixed share of the card
  (vLLM's ``gpu_memory_utilization``) leaves for KV blocks, and how many tokens that holds.

Used by the lesson ``decoding.md``; rendered by :mod:`gpulesson.course.decoding`.

>>> kv_cache_bytes(layers=32, kv_heads=8, head_dim=128, tokens=8192) == 2**30
True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from gpulesson.results import datasheets


def _positive(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name}={value!r} is not a number: give a positive number")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name}={value!r} must be a positive, finite number")
    return float(value)


def _count(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name}={value!r} must be a whole number of at least 1")
    return value


# --- weights: the batch-1 bound ------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class WeightFormat:
    """How weights are stored: a name and bytes per weight (scales of quantized formats aside)."""

    name: str
    bytes_per_weight: float


WEIGHT_FORMATS = (
    WeightFormat(name="fp16", bytes_per_weight=2.0),
    WeightFormat(name="int8", bytes_per_weight=1.0),
    WeightFormat(name="int4", bytes_per_weight=0.5),
)


def weight_bound_tokens_per_s(
    parameters: float, bytes_per_weight: float, bandwidth_bytes_per_s: float
) -> float:
    """The most tokens/s one sequence can decode when reading the weights is all it does.

    >>> round(weight_bound_tokens_per_s(8e9, 2, 3.35e12), 1)  # 8B fp16 on an H100 SXM
    209.4
    """
    weight_bytes = _positive("parameters", parameters) * _positive(
        "bytes_per_weight", bytes_per_weight
    )
    return _positive("bandwidth_bytes_per_s", bandwidth_bytes_per_s) / weight_bytes


@dataclass(frozen=True, kw_only=True)
class GpuBound:
    """One datasheet GPU: its bandwidth, batch-1 bounds per weight format, ridge and crossover.

    ``tokens_per_s`` pairs each format's name with its weights-only bound at batch 1.
    ``ridge_flop_per_byte`` is the dense fp16 peak over the bandwidth; a decode step with
    fp16 weights does 2 x batch FLOPs per 2 bytes of weight, so compute binds from a
    batch equal to the ridge (``crossover_batch``).
    """

    id: str
    name: str
    bandwidth_bytes_per_s: float
    fp16_flop_per_s: float
    parameters: float
    tokens_per_s: tuple[tuple[str, float], ...]
    ridge_flop_per_byte: float
    crossover_batch: float

    @property
    def compute_bound_tokens_per_s(self) -> float:
        """What the arithmetic alone would allow at batch 1: fp16 peak / (2 x parameters)."""
        return self.fp16_flop_per_s / (2 * self.parameters)

    @property
    def int4_crossover_batch(self) -> float:
        """The crossover batch for int4 weights (0.5 bytes each), computed in fp16."""
        return crossover_batch(self.ridge_flop_per_byte, INT4_BYTES)

    def format_tokens_per_s(self, name: str) -> float:
        """The batch-1 bound for the weight format called ``name``."""
        return dict(self.tokens_per_s)[name]


INT4_BYTES = 0.5
FP16_BYTES = 2.0  # the ridge's weights: a step does 2 FLOPs per weight of this many bytes
DEFAULT_GPUS = ("t4", "l4", "rtx-4090", "a100-80gb", "h100-sxm", "h200")


def gpu_bounds(
    parameters: float,
    gpu_ids: Sequence[str] = DEFAULT_GPUS,
    formats: Sequence[WeightFormat] = WEIGHT_FORMATS,
) -> tuple[GpuBound, ...]:
    """Batch-1 decode bounds of a model with ``parameters`` weights on datasheet GPUs.

    >>> h100 = gpu_bounds(8e9, ("h100-sxm",))[0]
    >>> [(name, round(v)) for name, v in h100.tokens_per_s], round(h100.crossover_batch)
    ([('fp16', 209), ('int8', 419), ('int4', 838)], 295)
    """
    rows = []
    for gpu_id in gpu_ids:
        sheet = datasheets.get(gpu_id)
        peak = sheet.dense_flop_per_s("fp16")
        if peak is None:
            raise ValueError(f"{gpu_id} has no fp16 peak in the datasheet table: pick an NVIDIA id")
        bandwidth = sheet.memory_bandwidth_bytes_per_s
        ridge = peak / bandwidth
        rows.append(
            GpuBound(
                id=sheet.id,
                name=sheet.name,
                bandwidth_bytes_per_s=bandwidth,
                fp16_flop_per_s=peak,
                parameters=parameters,
                tokens_per_s=tuple(
                    (f.name, weight_bound_tokens_per_s(parameters, f.bytes_per_weight, bandwidth))
                    for f in formats
                ),
                ridge_flop_per_byte=ridge,
                crossover_batch=crossover_batch(ridge, FP16_BYTES),
            )
        )
    return tuple(rows)


def crossover_batch(ridge_flop_per_byte: float, bytes_per_weight: float) -> float:
    """The batch from which a decode step's weight reads stop being the limit.

    A step does 2 FLOPs per weight per sequence and reads each weight once, so its
    intensity is 2 x batch / bytes per weight; it reaches the ridge at ridge x bytes / 2.

    >>> crossover_batch(295.0, 2)  # an H100's fp16 ridge, fp16 weights
    295.0
    """
    return (
        _positive("ridge_flop_per_byte", ridge_flop_per_byte)
        * _positive("bytes_per_weight", bytes_per_weight)
        / 2
    )


# --- the KV cache --------------------------------------------------------------------


def kv_cache_bytes(
    *,
    layers: int,
    kv_heads: int,
    head_dim: int,
    tokens: int,
    batch: int = 1,
    bytes_per_value: float = 2,
) -> int:
    """2 (K and V) x layers x kv_heads x head_dim x tokens x batch x bytes per value.

    >>> kv_cache_bytes(layers=32, kv_heads=32, head_dim=128, tokens=4096, batch=8) / 1e9
    17.179869184
    """
    for name, value in (
        ("layers", layers),
        ("kv_heads", kv_heads),
        ("head_dim", head_dim),
        ("tokens", tokens),
        ("batch", batch),
    ):
        _count(name, value)
    _positive("bytes_per_value", bytes_per_value)
    return int(2 * layers * kv_heads * head_dim * tokens * batch * bytes_per_value)


@dataclass(frozen=True, kw_only=True)
class KVLayout:
    """What one kind of attention caches per token per layer, and a window if it has one.

    ``values_per_token_per_layer`` is 2 x kv_heads x head_dim for MHA, GQA and MQA, and
    the latent plus the decoupled RoPE key for MLA. ``window_tokens`` caps the tokens kept
    (sliding-window attention); None keeps them all.
    """

    name: str
    values_per_token_per_layer: int
    formula: str
    window_tokens: int | None = None

    def tokens_kept(self, context_tokens: int) -> int:
        """Tokens the cache holds at ``context_tokens`` of context.

        >>> KVLayout(name="w", values_per_token_per_layer=1, formula="", window_tokens=4096
        ...          ).tokens_kept(10_000)
        4096
        """
        if self.window_tokens is None:
            return context_tokens
        return min(context_tokens, self.window_tokens)


def attention_layouts(
    *, heads: int, kv_heads: int, head_dim: int, window_tokens: int
) -> tuple[KVLayout, ...]:
    """MHA, GQA, MQA, GQA with a sliding window, and MLA, for one attention shape.

    MLA is sized as DeepSeek-V2 sizes it against its head dimension: a latent of
    4 x head_dim values and a decoupled RoPE key of head_dim / 2, shared by all heads.

    >>> [(x.name, x.values_per_token_per_layer) for x in attention_layouts(
    ...     heads=32, kv_heads=8, head_dim=128, window_tokens=4096)]
    [('MHA', 8192), ('GQA', 2048), ('MQA', 256), ('GQA + window', 2048), ('MLA', 576)]
    """
    for name, value in (("heads", heads), ("kv_heads", kv_heads), ("head_dim", head_dim)):
        _count(name, value)
    if heads % kv_heads:
        raise ValueError(f"kv_heads={kv_heads} does not divide heads={heads}: pick a divisor")
    latent, rope = 4 * head_dim, head_dim // 2
    return (
        KVLayout(
            name="MHA",
            values_per_token_per_layer=2 * heads * head_dim,
            formula=f"2 x {heads} heads x {head_dim}",
        ),
        KVLayout(
            name="GQA",
            values_per_token_per_layer=2 * kv_heads * head_dim,
            formula=f"2 x {kv_heads} KV heads x {head_dim}",
        ),
        KVLayout(
            name="MQA",
            values_per_token_per_layer=2 * head_dim,
            formula=f"2 x 1 KV head x {head_dim}",
        ),
        KVLayout(
            name="GQA + window",
            values_per_token_per_layer=2 * kv_heads * head_dim,
            formula=f"2 x {kv_heads} x {head_dim}, last {window_tokens:,} tokens",
            window_tokens=_count("window_tokens", window_tokens),
        ),
        KVLayout(
            name="MLA",
            values_per_token_per_layer=latent + rope,
            formula=f"latent {latent} + RoPE key {rope}",
        ),
    )


@dataclass(frozen=True, kw_only=True)
class KVGrowthRow:
    """The cache of each layout at one context length, beside the weights."""

    context_tokens: int
    cache_bytes: tuple[tuple[str, int], ...]
    weight_bytes: int


@dataclass(frozen=True, kw_only=True)
class KVGrowth:
    """KV cache bytes against context for several layouts of one model, and its weights."""

    layers: int
    batch: int
    bytes_per_value: float
    layouts: tuple[KVLayout, ...]
    rows: tuple[KVGrowthRow, ...]

    def per_token_bytes(self, layout: KVLayout) -> int:
        """Bytes one token adds to one sequence's cache (before any window fills)."""
        return int(self.layers * layout.values_per_token_per_layer * self.bytes_per_value)


def kv_growth(
    layouts: Sequence[KVLayout],
    *,
    layers: int,
    contexts: Sequence[int],
    weight_bytes: int,
    batch: int = 1,
    bytes_per_value: float = 2,
) -> KVGrowth:
    """The cache of each layout at each context length (``batch`` sequences).

    >>> g = kv_growth(attention_layouts(heads=32, kv_heads=8, head_dim=128, window_tokens=4096),
    ...               layers=32, contexts=(8192,), weight_bytes=16 * 10**9)
    >>> dict(g.rows[0].cache_bytes)["GQA"] == 2**30, dict(g.rows[0].cache_bytes)["GQA + window"]
    (True, 536870912)
    """
    _count("layers", layers)
    _count("batch", batch)
    if not contexts:
        raise ValueError("no context lengths given: pass e.g. (1024, 8192, 131072)")
    rows = tuple(
        KVGrowthRow(
            context_tokens=_count("context", n),
            cache_bytes=tuple(
                (
                    x.name,
                    int(
                        layers
                        * x.values_per_token_per_layer
                        * x.tokens_kept(n)
                        * batch
                        * bytes_per_value
                    ),
                )
                for x in layouts
            ),
            weight_bytes=weight_bytes,
        )
        for n in contexts
    )
    return KVGrowth(
        layers=layers,
        batch=batch,
        bytes_per_value=bytes_per_value,
        layouts=tuple(layouts),
        rows=rows,
    )


def overtake_tokens(weight_bytes: float, per_token_bytes: float) -> int:
    """Tokens of cache (summed over every sequence) whose bytes first exceed the weights.

    >>> overtake_tokens(16e9, 131072)  # 8B fp16 weights, GQA's 128 KiB a token
    122071
    """
    return (
        math.floor(
            _positive("weight_bytes", weight_bytes) / _positive("per_token_bytes", per_token_bytes)
        )
        + 1
    )


# --- what a serving engine reserves ----------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Reservation:
    """A card's memory under a serving engine that takes a fixed share of it up front."""

    card_bytes: int
    utilization: float
    weight_bytes: int
    per_token_bytes: int

    @property
    def reserved_bytes(self) -> int:
        """What the engine takes: utilization x card (what nvidia-smi then shows as used)."""
        return int(self.utilization * self.card_bytes)

    @property
    def kv_pool_bytes(self) -> int:
        """What is left for KV blocks after the weights (activations and graphs not counted)."""
        return self.reserved_bytes - self.weight_bytes

    @property
    def kv_tokens(self) -> int:
        """Tokens of context the pool holds, summed over every request in flight."""
        return self.kv_pool_bytes // self.per_token_bytes


def reservation(
    card_bytes: int, weight_bytes: int, per_token_bytes: int, utilization: float = 0.9
) -> Reservation:
    """The engine's share of a card, the KV pool it leaves and the tokens that pool holds.

    >>> r = reservation(80 * 2**30, 16 * 10**9, 131072)
    >>> round(r.reserved_bytes / 2**30), r.kv_tokens
    (72, 467753)
    """
    if not 0 < utilization <= 1:
        raise ValueError(f"utilization={utilization!r} must be in (0, 1], e.g. 0.9")
    r = Reservation(
        card_bytes=card_bytes,
        utilization=utilization,
        weight_bytes=weight_bytes,
        per_token_bytes=per_token_bytes,
    )
    if r.kv_pool_bytes <= 0:
        raise ValueError(
            f"the weights ({weight_bytes} bytes) do not fit in {utilization:.0%} of a "
            f"{card_bytes}-byte card: quantize them or use a larger card"
        )
    return r
