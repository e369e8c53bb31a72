"""Quantization error of bf16, fp8 (per-tensor and per-block scaled) and FP4 against fp32.

Each format is applied to the same fp32 tensor and cast back; the error is the relative
RMS error ``||q(x) - x|| / ||x||``. The casts:

* **bf16**: torch's cast (round to nearest even).
* **fp8 E4M3 / E5M2, per-tensor scale**: divide by ``amax / fp8 max`` (Transformer Engine's
  delayed or current scaling, here with the tensor's own amax), saturate, cast with torch's
  ``float8_e4m3fn`` / ``float8_e5m2`` (torch 2.1 on), multiply back.
* **MXFP8 E4M3**: one power-of-two scale per block of 32 values,
  ``2^(floor(log2 amax) - 8)`` (8 is E4M3's largest exponent), as the OCP Microscaling
  (MX) specification v1.0 defines it; values then saturate at 448.
* **FP4 E2M1** is *emulated*: torch has a packed ``float4_e2m1fn_x2`` dtype (2.8 on) but
  no cast to it, so values are rounded to the nearest point of the E2M1 grid
  ``{0, 0.5, 1, 1.5, 2, 3, 4, 6}`` here, with MXFP4's per-32 power-of-two scale
  (``2^(floor(log2 amax) - 2)``) or NVFP4's per-16 scale ``amax / 6`` stored in E4M3.

A dtype this torch lacks gives a row with ``available=False`` instead of an error.

>>> x = torch.linspace(-1, 1, 64)
>>> r = {e.name: e.relative_error for e in quantization_errors(x)}
>>> r["bf16"] < r["fp8 E4M3 (per tensor)"] < r["MXFP4 E2M1 (emulated)"]
True
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

E2M1_GRID = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
E4M3_MAX = 448.0  # OCP 8-bit floating point specification (OFP8), E4M3: S.1111.110
E5M2_MAX = 57344.0  # OFP8, E5M2: S.11110.11
E2M1_MAX = 6.0
E4M3_EMAX, E2M1_EMAX = 8, 2


@dataclass(frozen=True, kw_only=True)
class QuantError:
    """One format's relative RMS error on one tensor, or why it was not run."""

    name: str
    bits: int
    available: bool
    relative_error: float | None
    how: str


def has_dtype(name: str) -> bool:
    """Whether this torch has the dtype ``torch.<name>``.

    >>> has_dtype("bfloat16")
    True
    """
    return hasattr(torch, name)


def relative_error(q: torch.Tensor, x: torch.Tensor) -> float:
    """``||q - x|| / ||x||`` in fp64.

    >>> relative_error(torch.tensor([1.0, 1.0]), torch.tensor([1.0, 0.0]))
    1.0
    """
    x64 = x.double()
    return float((q.double() - x64).norm() / x64.norm())


def fp8_per_tensor(x: torch.Tensor, dtype_name: str, fmax: float) -> torch.Tensor:
    """Scale by the tensor's amax to the format's max, saturate, cast, scale back."""
    dtype = getattr(torch, dtype_name)
    scale = x.abs().max().clamp(min=1e-30) / fmax
    return (x / scale).clamp(-fmax, fmax).to(dtype).float() * scale


def _blocks(x: torch.Tensor, block: int) -> torch.Tensor:
    flat = x.reshape(-1)
    if flat.numel() % block:
        raise ValueError(f"tensor of {flat.numel()} values: give a multiple of the block {block}")
    return flat.reshape(-1, block)


def pow2_scales(blocks: torch.Tensor, emax: int) -> torch.Tensor:
    """MX scales: ``2^(floor(log2 amax) - emax)`` per block (the OCP MX spec's E8M0 scale).

    >>> pow2_scales(torch.tensor([[3.0, -1.0]]), 2).item()
    0.5
    """
    amax = blocks.abs().amax(dim=1, keepdim=True).clamp(min=2.0**-126)
    return torch.exp2(torch.floor(torch.log2(amax)) - emax)


def mxfp8(x: torch.Tensor, block: int = 32) -> torch.Tensor:
    """MXFP8 E4M3: per-``block`` power-of-two scales, saturate at 448, torch's E4M3 cast."""
    b = _blocks(x, block)
    scale = pow2_scales(b, E4M3_EMAX)
    q = (b / scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn).float() * scale
    return q.reshape(x.shape)


def round_e2m1(x: torch.Tensor) -> torch.Tensor:
    """Round to the nearest E2M1 value (saturating at ±6), emulated in fp32.

    A value exactly halfway goes to the smaller magnitude (hardware rounds ties to even).

    >>> round_e2m1(torch.tensor([0.2, 0.3, 2.4, 2.6, 5.0, 7.0, -1.3])).tolist()
    [0.0, 0.5, 2.0, 3.0, 4.0, 6.0, -1.5]
    """
    grid = torch.tensor(E2M1_GRID, dtype=x.dtype)
    midpoints = (grid[1:] + grid[:-1]) / 2
    nearest = torch.bucketize(x.abs().clamp(max=E2M1_MAX), midpoints)
    return torch.sign(x) * grid[nearest]


def mxfp4(x: torch.Tensor, block: int = 32) -> torch.Tensor:
    """MXFP4: per-``block`` power-of-two scales, E2M1 values (emulated)."""
    b = _blocks(x, block)
    scale = pow2_scales(b, E2M1_EMAX)
    return (round_e2m1(b / scale) * scale).reshape(x.shape)


def nvfp4(x: torch.Tensor, block: int = 16) -> torch.Tensor:
    """NVFP4: per-16 scales ``amax / 6`` stored in E4M3, E2M1 values (emulated)."""
    b = _blocks(x, block)
    scale = (b.abs().amax(dim=1, keepdim=True) / E2M1_MAX).clamp(min=2.0**-9)
    scale = scale.to(torch.float8_e4m3fn).float()
    return (round_e2m1(b / scale) * scale).reshape(x.shape)


def _row(
    name: str,
    bits: int,
    needs: str,
    how: str,
    fn: Callable[[torch.Tensor], torch.Tensor],
    x: torch.Tensor,
) -> QuantError:
    if not has_dtype(needs):
        return QuantError(
            name=name,
            bits=bits,
            available=False,
            relative_error=None,
            how=f"needs torch.{needs}, which torch {torch.__version__} lacks",
        )
    return QuantError(
        name=name, bits=bits, available=True, relative_error=relative_error(fn(x), x), how=how
    )


def quantization_errors(x: torch.Tensor) -> tuple[QuantError, ...]:
    """Every format's relative RMS error on the fp32 tensor ``x`` (its size a multiple of 32)."""
    x = x.float()
    return (
        _row("bf16", 16, "bfloat16", "torch cast", lambda t: t.bfloat16().float(), x),
        _row(
            "fp8 E4M3 (per tensor)",
            8,
            "float8_e4m3fn",
            "amax scale, torch cast",
            lambda t: fp8_per_tensor(t, "float8_e4m3fn", E4M3_MAX),
            x,
        ),
        _row(
            "fp8 E5M2 (per tensor)",
            8,
            "float8_e5m2",
            "amax scale, torch cast",
            lambda t: fp8_per_tensor(t, "float8_e5m2", E5M2_MAX),
            x,
        ),
        _row("MXFP8 E4M3 (per 32)", 8, "float8_e4m3fn", "2^k scale per 32, torch cast", mxfp8, x),
        _row(
            "MXFP4 E2M1 (emulated)", 4, "float32", "2^k scale per 32, emulated rounding", mxfp4, x
        ),
        _row(
            "NVFP4 E2M1 (emulated)",
            4,
            "float8_e4m3fn",
            "E4M3 scale per 16, emulated rounding",
            nvfp4,
            x,
        ),
    )


@dataclass(frozen=True, kw_only=True)
class Tensors:
    """The weight and the activation the lesson quantizes, and where they come from."""

    weight: torch.Tensor
    activation: torch.Tensor
    outlier_activation: torch.Tensor
    note: str


def gpt2_mlp_tensors(seed: int = 0, tokens: int = 256, outliers: int = 4) -> Tensors:
    """A GPT-2-small MLP layer's weight and its GELU activation on a batch of tokens.

    The weight is the ``768 x 3072`` first MLP matrix at GPT-2's initialisation (normal,
    std 0.02; the build downloads no trained weights), the activation its GELU output on
    layer-normed random embeddings. ``outlier_activation`` is the same activation with
    ``outliers`` channels multiplied by 50, the way trained LLMs have a few outlier feature
    dimensions (Dettmers et al. 2022, LLM.int8()): it is labelled as constructed.

    >>> t = gpt2_mlp_tensors(tokens=8)
    >>> tuple(t.weight.shape), tuple(t.activation.shape)
    ((768, 3072), (8, 3072))
    """
    g = torch.Generator().manual_seed(seed)
    weight = torch.randn(768, 3072, generator=g) * 0.02
    x = torch.nn.functional.layer_norm(torch.randn(tokens, 768, generator=g), (768,))
    activation = torch.nn.functional.gelu(x @ weight, approximate="tanh")
    boosted = activation.clone()
    boosted[:, torch.randperm(3072, generator=g)[:outliers]] *= 50
    return Tensors(
        weight=weight,
        activation=activation,
        outlier_activation=boosted,
        note=f"GPT-2-small MLP weight at initialisation; GELU activation of {tokens} tokens",
    )
