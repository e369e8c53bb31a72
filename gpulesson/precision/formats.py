"""The range and resolution of fp32, tf32, bf16 and fp16, from torch.finfo and real casts.

A floating-point format spends its bits on an exponent (range) and a mantissa
(resolution). fp16 has 5 exponent bits and 10 mantissa bits: fine steps, small range.
bf16 has fp32's 8 exponent bits and only 7 mantissa bits: fp32's range, coarse steps.
TF32 is what NVIDIA's tensor cores (Ampere on) compute fp32 matmuls in when allowed: fp32's
8 exponent bits and fp16's 10 mantissa bits; it has no torch dtype, because tensors stay
fp32 in memory and only the tensor core rounds them.

* :func:`format_ranges` reads each format's largest value, smallest normal and subnormal
  value and epsilon from ``torch.finfo`` (TF32 from its bit layout, :func:`layout_range`,
  which the tests check against ``torch.finfo`` for the other three).
* :func:`round_to_mantissa` rounds fp32 values to fewer mantissa bits (nearest, ties to
  even): ``bits=7`` is exactly torch's fp32 -> bf16 cast, ``bits=10`` emulates TF32.
* :func:`cast_probes` casts chosen values to each format and says what happened (exact,
  rounded, subnormal, overflow to inf, underflow to 0); :func:`scaling_probes` does the
  same for gradients with and without loss scaling, which is why fp16 training needs a
  ``GradScaler`` and bf16 training does not.

Used by the lesson ``lessons/mixed-precision.md``; rendered by
:mod:`gpulesson.course.mixed_precision`.

>>> r = {f.name: f for f in format_ranges()}
>>> r["fp16"].max_value, r["bf16"].max_value == r["fp32"].max_value
(65504.0, False)
>>> [c.outcome for c in cast(70000.0)]
['exact', 'rounded', 'rounded', 'overflow to inf']
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

FORMATS = ("fp32", "tf32", "bf16", "fp16")

# (exponent bits, mantissa bits) of each format. TF32: NVIDIA's Ampere whitepaper.
BITS: dict[str, tuple[int, int]] = {
    "fp32": (8, 23),
    "tf32": (8, 10),
    "bf16": (8, 7),
    "fp16": (5, 10),
}

TORCH_DTYPES: dict[str, torch.dtype] = {
    "fp32": torch.float32,
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
}

FP32_MANTISSA_BITS = 23
DEFAULT_LOSS_SCALE = 2.0**16  # torch.amp.GradScaler's init_scale


@dataclass(frozen=True, kw_only=True)
class FormatRange:
    """One format's bits, range and resolution.

    ``eps`` is the gap between 1 and the next larger number (2^-mantissa_bits): the
    relative step size. ``smallest_subnormal`` is None for tf32, which exists only inside
    the tensor core. ``source`` says where the figures come from.
    """

    name: str
    exponent_bits: int
    mantissa_bits: int
    max_value: float
    smallest_normal: float
    smallest_subnormal: float | None
    eps: float
    source: str

    @property
    def decimal_digits(self) -> float:
        """Significant decimal digits: log10 of 2^(mantissa bits + 1).

        >>> round(layout_format("fp16").decimal_digits, 1)
        3.3
        """
        return (self.mantissa_bits + 1) * math.log10(2)


def layout_range(exponent_bits: int, mantissa_bits: int) -> tuple[float, float, float, float]:
    """(largest, smallest normal, smallest subnormal, eps) of an IEEE-style binary format.

    The exponent bias is 2^(e-1) - 1; the largest exponent is reserved for inf and NaN.

    >>> layout_range(5, 10)
    (65504.0, 6.103515625e-05, 5.960464477539063e-08, 0.0009765625)
    """
    bias = 2 ** (exponent_bits - 1) - 1
    largest = (2 - 2.0**-mantissa_bits) * 2.0**bias
    smallest_normal = 2.0 ** (1 - bias)
    return largest, smallest_normal, 2.0 ** (1 - bias - mantissa_bits), 2.0**-mantissa_bits


def layout_format(name: str) -> FormatRange:
    """A format's range computed from its bit layout alone.

    >>> layout_format("bf16").smallest_normal == torch.finfo(torch.bfloat16).tiny
    True
    """
    check_format(name)
    exponent_bits, mantissa_bits = BITS[name]
    largest, normal, subnormal, eps = layout_range(exponent_bits, mantissa_bits)
    return FormatRange(
        name=name,
        exponent_bits=exponent_bits,
        mantissa_bits=mantissa_bits,
        max_value=largest,
        smallest_normal=normal,
        smallest_subnormal=None if name == "tf32" else subnormal,
        eps=eps,
        source="bit layout",
    )


def check_format(name: str) -> str:
    """The format name, or ``ValueError`` naming the known ones.

    >>> check_format("fp8")
    Traceback (most recent call last):
    ...
    ValueError: unknown format 'fp8': use one of fp32, tf32, bf16, fp16
    """
    if name not in BITS:
        raise ValueError(f"unknown format {name!r}: use one of {', '.join(FORMATS)}")
    return name


def smallest_positive(dtype: torch.dtype) -> float:
    """The smallest positive number of ``dtype``: the next one after 0 (a subnormal).

    >>> smallest_positive(torch.float16)
    5.960464477539063e-08
    """
    zero = torch.zeros((), dtype=dtype)
    return float(torch.nextafter(zero, torch.ones((), dtype=dtype)).item())


def format_ranges() -> tuple[FormatRange, ...]:
    """fp32, tf32, bf16 and fp16: torch for the three torch dtypes, tf32 from its layout.

    Largest, smallest normal and eps from ``torch.finfo``; the smallest subnormal from
    :func:`smallest_positive`.

    >>> [f.source for f in format_ranges()]
    ['torch.finfo', 'bit layout', 'torch.finfo', 'torch.finfo']
    """
    rows = []
    for name in FORMATS:
        if name == "tf32":
            rows.append(layout_format(name))
            continue
        info = torch.finfo(TORCH_DTYPES[name])
        exponent_bits, mantissa_bits = BITS[name]
        rows.append(
            FormatRange(
                name=name,
                exponent_bits=exponent_bits,
                mantissa_bits=mantissa_bits,
                max_value=float(info.max),
                smallest_normal=float(info.tiny),
                smallest_subnormal=smallest_positive(TORCH_DTYPES[name]),
                eps=float(info.eps),
                source="torch.finfo",
            )
        )
    return tuple(rows)


def round_to_mantissa(x: torch.Tensor, bits: int) -> torch.Tensor:
    """Round fp32 values to ``bits`` mantissa bits, to nearest with ties to even; fp32 out.

    Works on the bit pattern: add half of the dropped part (plus one when the kept
    part is odd, for ties to even), then clear the dropped bits. A carry moves into
    the exponent as it should, so a value past the narrower format's largest becomes
    inf. Inputs must be finite fp32 (a NaN's payload would be rounded too).

    >>> x = torch.tensor([1.0 + 2**-9, 257.0, 65520.0])
    >>> round_to_mantissa(x, 7).tolist() == x.to(torch.bfloat16).float().tolist()
    True
    >>> round_to_mantissa(torch.tensor([1.0 + 2**-11]), 10).item()  # a tie: to even (1.0)
    1.0
    """
    if x.dtype != torch.float32:
        raise ValueError(f"round_to_mantissa takes fp32 tensors, got {x.dtype}: call .float()")
    if not 0 <= bits <= FP32_MANTISSA_BITS:
        raise ValueError(f"bits={bits!r} must be between 0 and 23 (fp32 keeps 23)")
    drop = FP32_MANTISSA_BITS - bits
    if drop == 0:
        return x.clone()
    as_int = x.contiguous().view(torch.int32)
    kept_lsb = (as_int >> drop) & 1
    rounded = (as_int + (1 << (drop - 1)) - 1 + kept_lsb) & ~((1 << drop) - 1)
    return rounded.view(torch.float32)


def to_format(values: torch.Tensor, name: str) -> torch.Tensor:
    """``values`` as ``name`` stores them, returned as float64 for exact comparison.

    >>> to_format(torch.tensor([65520.0]), "fp16").item()
    inf
    """
    check_format(name)
    x32 = values.to(torch.float32)
    if name == "tf32":
        return round_to_mantissa(x32, BITS["tf32"][1]).double()
    if name == "fp32":
        return values.to(torch.float32).double()
    return values.to(torch.float64).to(TORCH_DTYPES[name]).double()


@dataclass(frozen=True, kw_only=True)
class CastResult:
    """One value stored in one format: what it became, and how.

    ``outcome`` is one of "exact", "rounded", "subnormal", "overflow to inf" and
    "underflow to 0"; ``relative_error`` is None when the value became inf or 0 (nothing of
    it is left to compare).
    """

    format: str
    stored: float
    outcome: str
    relative_error: float | None


def outcome(value: float, stored: float, smallest_normal: float) -> CastResult:
    """Classify a cast: ``value`` became ``stored`` in a format with that smallest normal.

    >>> outcome(1e-8, 0.0, 6.1e-05).outcome
    'underflow to 0'
    """
    if math.isinf(stored) and math.isfinite(value):
        return CastResult(format="", stored=stored, outcome="overflow to inf", relative_error=None)
    if stored == 0.0 and value != 0.0:
        return CastResult(format="", stored=stored, outcome="underflow to 0", relative_error=None)
    error = abs(stored - value) / abs(value) if value else 0.0
    if stored != 0.0 and abs(stored) < smallest_normal:
        kind = "subnormal"
    else:
        kind = "exact" if stored == value else "rounded"
    return CastResult(format="", stored=stored, outcome=kind, relative_error=error)


def _result(value: float, stored: float, name: str) -> CastResult:
    r = outcome(value, stored, layout_format(name).smallest_normal)
    return CastResult(
        format=name, stored=r.stored, outcome=r.outcome, relative_error=r.relative_error
    )


def cast(value: float, formats: Sequence[str] = FORMATS) -> tuple[CastResult, ...]:
    """``value`` stored in each of ``formats``.

    >>> [(c.format, c.outcome) for c in cast(1e-8, ("bf16", "fp16"))]
    [('bf16', 'rounded'), ('fp16', 'underflow to 0')]
    """
    x = torch.tensor([value], dtype=torch.float64)
    return tuple(_result(value, float(to_format(x, name).item()), name) for name in formats)


@dataclass(frozen=True, kw_only=True)
class CastProbe:
    """A value, why it was chosen, and what each format made of it."""

    value: float
    why: str
    results: tuple[CastResult, ...]

    def result(self, name: str) -> CastResult:
        """The result in format ``name``."""
        return next(r for r in self.results if r.format == name)


# Values that show the edges of fp16's range and bf16's resolution.
PROBES: tuple[tuple[float, str], ...] = (
    (70000.0, "a large activation"),
    (65504.0, "fp16's largest number"),
    (65520.0, "halfway to the next fp16 step: rounds up, past the largest"),
    (1e-4, "a small gradient"),
    (1e-6, "a smaller gradient"),
    (1e-8, "below half of fp16's smallest subnormal"),
    (1.0 + 2.0**-9, "1 plus 1/512"),
    (257.0, "an integer"),
)


def cast_probes(
    probes: Sequence[tuple[float, str]] = PROBES, formats: Sequence[str] = FORMATS
) -> tuple[CastProbe, ...]:
    """Each probe value cast to each format.

    >>> p = cast_probes(((257.0, "int"),), ("bf16", "fp16"))[0]
    >>> p.result("bf16").stored, p.result("fp16").outcome
    (256.0, 'exact')
    """
    return tuple(CastProbe(value=v, why=why, results=cast(v, formats)) for v, why in probes)


@dataclass(frozen=True, kw_only=True)
class ScalingProbe:
    """A gradient value in fp16 as is, in fp16 after loss scaling (unscaled in fp32), in bf16."""

    value: float
    scale: float
    fp16: CastResult
    fp16_scaled: CastResult
    bf16: CastResult


GRADIENTS = (1.0, 1e-3, 1e-5, 1e-7, 1e-8, 1e-9)


def scaling_probes(
    gradients: Sequence[float] = GRADIENTS, scale: float = DEFAULT_LOSS_SCALE
) -> tuple[ScalingProbe, ...]:
    """What fp16 keeps of each gradient, with and without ``scale``, and what bf16 keeps.

    With scaling the gradient is multiplied by ``scale`` before it is stored in fp16
    (as the backward pass of a scaled loss does), then divided by it in fp32 (as
    ``GradScaler.unscale_`` does).

    >>> p = scaling_probes((1e-8,))[0]
    >>> p.fp16.outcome, p.fp16_scaled.outcome, p.bf16.outcome
    ('underflow to 0', 'rounded', 'rounded')
    >>> scaling_probes((1.0,))[0].fp16_scaled.outcome
    'overflow to inf'
    """
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"scale={scale!r} must be a positive, finite number, e.g. 65536")
    rows = []
    for value in gradients:
        x = torch.tensor([value], dtype=torch.float64)
        stored_scaled = to_format(x * scale, "fp16")
        # What fp16 did to the scaled gradient; reported unscaled (in fp32, as unscale_ does).
        scaled = _result(value * scale, float(stored_scaled.item()), "fp16")
        unscaled = float((stored_scaled.to(torch.float32) / scale).item())
        rows.append(
            ScalingProbe(
                value=value,
                scale=scale,
                fp16=_result(value, float(to_format(x, "fp16").item()), "fp16"),
                fp16_scaled=CastResult(
                    format="fp16",
                    stored=unscaled,
                    outcome=scaled.outcome,
                    relative_error=scaled.relative_error,
                ),
                bf16=_result(value, float(to_format(x, "bf16").item()), "bf16"),
            )
        )
    return tuple(rows)


@dataclass(frozen=True, kw_only=True)
class ScalingSummary:
    """How many of the probed gradients each way of storing them lost (inf or 0)."""

    gradients: int
    lost_fp16: int
    lost_fp16_scaled: int
    lost_bf16: int


def _lost(r: CastResult) -> bool:
    return r.outcome in ("overflow to inf", "underflow to 0")


def summarize_scaling(probes: Sequence[ScalingProbe]) -> ScalingSummary:
    """Count the gradients that became inf or 0 in fp16, fp16 with scaling, and bf16.

    >>> s = summarize_scaling(scaling_probes((1.0, 1e-8)))
    >>> s.lost_fp16, s.lost_fp16_scaled, s.lost_bf16
    (1, 1, 0)
    """
    return ScalingSummary(
        gradients=len(probes),
        lost_fp16=sum(_lost(p.fp16) for p in probes),
        lost_fp16_scaled=sum(_lost(p.fp16_scaled) for p in probes),
        lost_bf16=sum(_lost(p.bf16) for p in probes),
    )


@dataclass(frozen=True, kw_only=True)
class CastSummary:
    """How many probe values one format turned into inf, and into 0."""

    format: str
    overflows: int
    underflows: int


def summarize_casts(probes: Sequence[CastProbe]) -> dict[str, CastSummary]:
    """Per format, the probes that overflowed to inf and underflowed to 0.

    >>> s = summarize_casts(cast_probes())
    >>> (s["fp16"].overflows, s["fp16"].underflows), (s["bf16"].overflows, s["bf16"].underflows)
    ((2, 1), (0, 0))
    """
    formats = [r.format for r in probes[0].results] if probes else []
    return {
        name: CastSummary(
            format=name,
            overflows=sum(p.result(name).outcome == "overflow to inf" for p in probes),
            underflows=sum(p.result(name).outcome == "underflow to 0" for p in probes),
        )
        for name in formats
    }


# Below 16 bits: the formats of current tensor cores (fp8 on Hopper and Ada, MX and FP4 on
# Blackwell). Their bit layouts and largest values are from the sources each row names.
OCP_MX = "https://www.opencompute.org/documents/ocp-microscaling-formats-mx-v1-0-spec-final-pdf"
FP8_PAPER = "https://arxiv.org/abs/2209.05433"
NVFP4_BLOG = "https://developer.nvidia.com/blog/introducing-nvfp4-for-efficient-and-accurate-low-precision-inference/"
BLACKWELL = "https://www.nvidia.com/en-us/data-center/technologies/blackwell-architecture/"


@dataclass(frozen=True, kw_only=True)
class LowPrecisionFormat:
    """One sub-16-bit format: its element layout, its scaling, and where it runs fast.

    ``torch_dtype`` names the torch dtype that stores it (None when torch has none);
    ``full_rate_dtype`` is the datasheet key (``gpulesson/results/datasheets.json``) whose
    tensor-core peak runs it, or None where the datasheets give no figure.
    """

    name: str
    exponent_bits: int
    mantissa_bits: int
    max_value: float
    block_size: int | None
    scale: str
    torch_dtype: str | None
    full_rate_dtype: str | None
    full_rate_note: str
    source: str


LOW_PRECISION_FORMATS = (
    LowPrecisionFormat(
        name="fp8 E4M3",
        exponent_bits=4,
        mantissa_bits=3,
        max_value=448.0,
        block_size=None,
        scale="one per tensor (fp32), chosen by the recipe",
        torch_dtype="float8_e4m3fn",
        full_rate_dtype="fp8",
        full_rate_note="Hopper (H100, H200) and Ada tensor cores; the forward pass",
        source=FP8_PAPER,
    ),
    LowPrecisionFormat(
        name="fp8 E5M2",
        exponent_bits=5,
        mantissa_bits=2,
        max_value=57344.0,
        block_size=None,
        scale="one per tensor (fp32), chosen by the recipe",
        torch_dtype="float8_e5m2",
        full_rate_dtype="fp8",
        full_rate_note="same tensor cores as E4M3; gradients, which need the range",
        source=FP8_PAPER,
    ),
    LowPrecisionFormat(
        name="MXFP8 (E4M3 elements)",
        exponent_bits=4,
        mantissa_bits=3,
        max_value=448.0,
        block_size=32,
        scale="one power of two (E8M0) per 32 values",
        torch_dtype="float8_e4m3fn",
        full_rate_dtype=None,
        full_rate_note="Blackwell (B200) tensor cores scale MX blocks in hardware",
        source=OCP_MX,
    ),
    LowPrecisionFormat(
        name="MXFP4 (E2M1 elements)",
        exponent_bits=2,
        mantissa_bits=1,
        max_value=6.0,
        block_size=32,
        scale="one power of two (E8M0) per 32 values",
        torch_dtype="float4_e2m1fn_x2",
        full_rate_dtype=None,
        full_rate_note="Blackwell (B200) FP4 tensor cores",
        source=OCP_MX,
    ),
    LowPrecisionFormat(
        name="NVFP4 (E2M1 elements)",
        exponent_bits=2,
        mantissa_bits=1,
        max_value=6.0,
        block_size=16,
        scale="one E4M3 value per 16, and one fp32 per tensor",
        torch_dtype="float4_e2m1fn_x2",
        full_rate_dtype=None,
        full_rate_note="Blackwell (B200) FP4 tensor cores",
        source=NVFP4_BLOG,
    ),
)


def low_precision_max(fmt: LowPrecisionFormat) -> tuple[float, str]:
    """A format's largest value from ``torch.finfo`` where this torch has its dtype
    (fp8), else from its specification (E2M1 has no finfo), and which it was.

    >>> low_precision_max(LOW_PRECISION_FORMATS[1])
    (57344.0, 'torch.finfo')
    """
    name = fmt.torch_dtype or ""
    if name.startswith("float8_") and hasattr(torch, name):  # torch 2.1 on
        return float(torch.finfo(getattr(torch, name)).max), "torch.finfo"
    return fmt.max_value, "specification"
