"""What autocast does to the memory a training step keeps for its backward pass.

Under autocast a linear layer's output is 16-bit, so the tensors the backward pass
needs shrink; the parameters, their gradients and AdamW's moments stay fp32 (the
``amp`` recipe's 16 bytes per parameter, :mod:`gpulesson.memory.recipes`). The
budget estimate (:func:`gpulesson.memory.budget.estimate`) prices every saved
activation at the recipe's ``compute_dtype``: 2 bytes under ``amp``, 4 under ``fp32``.

:func:`saved_for_backward` measures what a real forward pass keeps, with
``torch.autograd.graph.saved_tensors_hooks``: every tensor autograd saves passes
through a hook, which files its storage (counted once however many views share it)
as one of

* a **parameter** (the model's own fp32 weights: no extra memory);
* a **16-bit weight copy**: autocast's cast of a parameter, found by walking the
  tensor's ``grad_fn`` through views to a ``ToCopyBackward0`` whose input is the
  parameter's ``AccumulateGrad``; these copies live until the backward pass ends;
* an **activation**: everything else.

:func:`compare` runs the estimate and the measurement for one GPT-2 shape, without
and with autocast. The measured autocast activations are more than half the fp32
ones, because autocast leaves some tensors in fp32 (the residual stream, the loss,
and on CUDA the norms' and softmax's outputs), and the weight copies are extra.

Used by the lesson ``lessons/mixed-precision.md``.

>>> from gpulesson.memory.shape import TransformerShape
>>> c = compare(TransformerShape(vocab=64, seq=8, hidden=16, heads=2, layers=1, batch=2))
>>> c.measured_fp32.weight_copies_bytes, c.measured_autocast.weight_copies_bytes > 0
(0, True)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from gpulesson.memory.budget import Budget, estimate
from gpulesson.memory.gpt2 import GPT2, GPT2Config
from gpulesson.memory.shape import TransformerShape

VIEW_NODES = ("View", "Transpose", "T", "Permute", "Expand", "Unsqueeze", "Squeeze", "Alias")
KINDS = ("parameter", "weight copy", "activation")


def _walks_to_parameter_cast(tensor: torch.Tensor) -> bool:
    """True when ``tensor`` is (a view of) a cast of a leaf parameter."""
    node = tensor.grad_fn
    while node is not None:
        name = type(node).__name__
        parents = [f for f, _ in node.next_functions if f is not None]
        if name.startswith("ToCopyBackward"):
            return len(parents) == 1 and type(parents[0]).__name__ == "AccumulateGrad"
        if not name.removesuffix("Backward0").startswith(VIEW_NODES) or len(parents) != 1:
            return False
        node = parents[0]
    return False


@dataclass(frozen=True, kw_only=True)
class SavedBytes:
    """Bytes autograd kept for the backward pass of one forward pass, by kind and dtype.

    ``by_dtype`` covers activations only (dtype name -> bytes).
    """

    autocast_dtype: str | None
    parameters_bytes: int
    weight_copies_bytes: int
    activations_bytes: int
    by_dtype: dict[str, int]


def saved_for_backward(
    model: nn.Module, inputs: tuple[Any, ...], device: str, dtype: torch.dtype | None
) -> SavedBytes:
    """Run ``model(*inputs)``, under autocast unless ``dtype`` is None; file what autograd saves."""
    parameters = {p.untyped_storage().data_ptr() for p in model.parameters()}
    storages: dict[int, tuple[str, int, str]] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        key = storage.data_ptr()
        if key in parameters:
            kind = "parameter"
        elif _walks_to_parameter_cast(tensor):
            kind = "weight copy"
        else:
            kind = "activation"
        storages[key] = (kind, storage.nbytes(), str(tensor.dtype).removeprefix("torch."))
        return tensor

    unpack: Callable[[torch.Tensor], torch.Tensor] = lambda tensor: tensor  # noqa: E731
    autocast = torch.autocast(device, dtype=dtype or torch.float32, enabled=dtype is not None)
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack), autocast:
        model(*inputs)
    totals = dict.fromkeys(KINDS, 0)
    by_dtype: dict[str, int] = {}
    for kind, n_bytes, dtype_name in storages.values():
        totals[kind] += n_bytes
        if kind == "activation":
            by_dtype[dtype_name] = by_dtype.get(dtype_name, 0) + n_bytes
    return SavedBytes(
        autocast_dtype=None if dtype is None else str(dtype).removeprefix("torch."),
        parameters_bytes=totals["parameter"],
        weight_copies_bytes=totals["weight copy"],
        activations_bytes=totals["activation"],
        by_dtype=dict(sorted(by_dtype.items())),
    )


@dataclass(frozen=True, kw_only=True)
class ActivationComparison:
    """One GPT-2 shape: the budget's fp32 and amp estimates beside the measured saved bytes."""

    shape: TransformerShape
    device: str
    estimate_fp32: Budget
    estimate_amp: Budget
    measured_fp32: SavedBytes
    measured_autocast: SavedBytes

    @property
    def estimated_ratio(self) -> float:
        """The estimate's amp activations over its fp32 activations."""
        return self.estimate_amp.activations_bytes / self.estimate_fp32.activations_bytes

    @property
    def measured_ratio(self) -> float:
        """Measured autocast activations over measured fp32 activations."""
        return self.measured_autocast.activations_bytes / self.measured_fp32.activations_bytes


def compare(
    shape: TransformerShape,
    device: str = "cpu",
    dtype: torch.dtype = torch.bfloat16,
    seed: int = 0,
) -> ActivationComparison:
    """Estimate (``fp32`` and ``amp`` presets) and measure (without and with autocast) one shape."""
    torch.manual_seed(seed)
    config = GPT2Config(
        vocab_size=shape.vocab,
        seq_len=shape.seq,
        hidden=shape.hidden,
        heads=shape.heads,
        layers=shape.layers,
    )
    model = GPT2(config).to(device)
    idx = torch.randint(0, shape.vocab, (shape.batch, shape.seq), device=device)
    return ActivationComparison(
        shape=shape,
        device=device,
        estimate_fp32=estimate(shape=shape, preset="fp32"),
        estimate_amp=estimate(shape=shape, preset="amp"),
        measured_fp32=saved_for_backward(model, (idx, idx), device, None),
        measured_autocast=saved_for_backward(model, (idx, idx), device, dtype),
    )
