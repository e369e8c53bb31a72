"""The error of one matmul in fp32, TF32, bf16 and fp16, against an fp64 reference.

TF32 tensor cores (Ampere and later) round each fp32 input to 10 mantissa bits, multiply,
and accumulate in fp32 (PyTorch's CUDA semantics notes). That rounding can be emulated
on any CPU: :func:`gpulesson.precision.formats.round_to_mantissa` rounds the inputs, then
an fp32 matmul accumulates. So the accuracy side of TF32 is computed on every build; its
speed needs the GPU.

The steps of :func:`matmul_errors`:

1. draw ``a`` and ``b`` (n x n, standard normal, seeded on the CPU) in fp64 and take
   ``a @ b`` in fp64 on the device as the reference;
2. compute the product in each precision: fp32 (TF32 off); TF32 emulated (inputs
   rounded to 10 mantissa bits, fp32 matmul); on a CUDA GPU of compute capability 8.0 or
   later also TF32 on the tensor cores; bf16 and fp16 (inputs and output in that dtype,
   as ``torch.matmul`` computes them on this device);
3. report each as PyTorch's notes do: the largest absolute error over the mean absolute
   value of the reference.

The trade-off: random normal inputs; real weights and activations have other
distributions, and the error grows with the inner dimension n.

>>> e = matmul_errors(64, seed=0)
>>> [r.method for r in e.rows]
['fp32', 'tf32_emulated', 'bf16', 'fp16']
>>> e.relative_error("fp32") < e.relative_error("tf32_emulated") < e.relative_error("bf16")
True
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gpulesson.precision.formats import BITS, round_to_mantissa
from gpulesson.timing.bench import matmul_precision

METHOD_LABELS: dict[str, str] = {
    "fp32": "fp32 (TF32 off)",
    "tf32": "TF32 on the tensor cores",
    "tf32_emulated": "TF32, emulated: inputs rounded to 10 mantissa bits, fp32 matmul",
    "bf16": "bf16 inputs and output",
    "fp16": "fp16 inputs and output",
}


@dataclass(frozen=True, kw_only=True)
class MatmulError:
    """One precision's error: the largest absolute error and the reference's mean magnitude."""

    method: str
    label: str
    max_abs_error: float
    mean_abs_reference: float

    @property
    def relative_error(self) -> float:
        """Largest absolute error over the mean absolute value of the exact product."""
        return self.max_abs_error / self.mean_abs_reference


@dataclass(frozen=True, kw_only=True)
class MatmulErrors:
    """The errors of one n x n matmul in each precision, on one device."""

    n: int
    device: str
    seed: int
    rows: tuple[MatmulError, ...]

    def relative_error(self, method: str) -> float:
        """The relative error of ``method``; ``ValueError`` naming the methods measured."""
        for row in self.rows:
            if row.method == method:
                return row.relative_error
        measured = ", ".join(r.method for r in self.rows)
        raise ValueError(f"no {method!r} row on {self.device} (measured: {measured})")

    def ratio(self, method: str, baseline: str) -> float:
        """How many times ``baseline``'s relative error ``method``'s is."""
        return self.relative_error(method) / self.relative_error(baseline)


def has_tf32_tensor_cores(device: str) -> bool:
    """True on a CUDA GPU of compute capability 8.0 (Ampere) or later.

    >>> has_tf32_tensor_cores("cpu")
    False
    """
    if device != "cuda" or not torch.cuda.is_available():
        return False
    return torch.cuda.get_device_capability() >= (8, 0)


def _row(method: str, product: torch.Tensor, reference: torch.Tensor) -> MatmulError:
    error = (product.double() - reference).abs().max()
    return MatmulError(
        method=method,
        label=METHOD_LABELS[method],
        max_abs_error=float(error),
        mean_abs_reference=float(reference.abs().mean()),
    )


def matmul_errors(n: int = 512, device: str = "cpu", seed: int = 0) -> MatmulErrors:
    """Compare one n x n matmul in each precision with its fp64 product (see the module)."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"n={n!r} must be a positive whole number, e.g. 512")
    generator = torch.Generator().manual_seed(seed)
    a64 = torch.randn(n, n, dtype=torch.float64, generator=generator).to(device)
    b64 = torch.randn(n, n, dtype=torch.float64, generator=generator).to(device)
    reference = a64 @ b64
    a, b = a64.float(), b64.float()
    rows = []
    with matmul_precision("fp32"):
        rows.append(_row("fp32", a @ b, reference))
    if has_tf32_tensor_cores(device):
        with matmul_precision("tf32"):
            rows.append(_row("tf32", a @ b, reference))
    bits = BITS["tf32"][1]
    with matmul_precision("fp32"):
        emulated = round_to_mantissa(a, bits) @ round_to_mantissa(b, bits)
    rows.append(_row("tf32_emulated", emulated, reference))
    for name, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
        rows.append(_row(name, a.to(dtype) @ b.to(dtype), reference))
    return MatmulErrors(n=n, device=device, seed=seed, rows=tuple(rows))


@dataclass(frozen=True, kw_only=True)
class Tf32Settings:
    """This torch's TF32 switches as they stand (the defaults, unless something changed them).

    The ``*_fp32_precision`` fields are the finer API of torch 2.9 and later (``"ieee"``
    or ``"tf32"``; ``"none"`` defers to the general setting); None on an older torch.
    """

    torch_version: str
    float32_matmul_precision: str
    cuda_matmul_allow_tf32: bool
    cudnn_allow_tf32: bool
    cuda_matmul_fp32_precision: str | None
    cudnn_conv_fp32_precision: str | None


def tf32_settings() -> Tf32Settings:
    """Read the TF32 switches of the running torch.

    >>> s = tf32_settings()
    >>> s.float32_matmul_precision in ("highest", "high", "medium")
    True
    """
    backends = torch.backends
    matmul = getattr(backends.cuda.matmul, "fp32_precision", None)
    conv = getattr(getattr(backends.cudnn, "conv", None), "fp32_precision", None)
    return Tf32Settings(
        torch_version=torch.__version__,
        float32_matmul_precision=torch.get_float32_matmul_precision(),
        cuda_matmul_allow_tf32=bool(backends.cuda.matmul.allow_tf32),
        cudnn_allow_tf32=bool(backends.cudnn.allow_tf32),
        cuda_matmul_fp32_precision=None if matmul is None else str(matmul),
        cudnn_conv_fp32_precision=None if conv is None else str(conv),
    )
