"""What autograd keeps for the backward pass, tensor by tensor, and which module made it.

The activation terms of the estimate are the tensors a model's forward pass
saves for its backward pass. :func:`saved_tensors` lists them for one forward
pass of a real model on real (small) CPU tensors, through
``torch.autograd.graph.saved_tensors_hooks``: each storage once (views of one
tensor share it), parameters left out, each with the module that was running
and the operation that produced it. Comparing two implementations' lists shows
where one keeps more (``lessons/memory.md`` compares the course's GPT-2 and
transformers').

>>> from gpulesson.memory.gpt2 import GPT2, GPT2Config
>>> model = GPT2(GPT2Config(vocab_size=64, seq_len=8, hidden=16, heads=2, layers=1))
>>> ids = torch.randint(0, 64, (2, 8))
>>> saved = saved_tensors(model, lambda: model(ids, ids))
>>> [(s.module, s.made_by) for s in saved if s.module == "blocks.0.mlp"]
[('blocks.0.mlp', 'ViewBackward0')]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
from torch import nn

from gpulesson.memory.gpt2 import GPT2Config


@dataclass(frozen=True, kw_only=True)
class SavedTensor:
    """One storage autograd keeps for the backward pass.

    ``module`` is the innermost module running when it was saved (``""`` for
    code outside any submodule, such as the loss); ``made_by`` the autograd node
    that produced it (``"-"`` for a tensor made without gradient, such as a
    LayerNorm statistic or the token ids).
    """

    module: str
    shape: tuple[int, ...]
    dtype: str
    storage_bytes: int
    made_by: str


def saved_tensors(model: nn.Module, run: Callable[[], torch.Tensor]) -> tuple[SavedTensor, ...]:
    """The tensors one call of ``run()`` (a forward pass of ``model``) saves for backward.

    Each storage is listed once, the first time it is saved; the parameters are
    left out. Runs on real tensors: keep the model and its inputs small.
    """
    stack = [""]
    handles = []
    for name, module in model.named_modules():
        if not name:
            continue

        def enter(_m: nn.Module, _args: object, name: str = name) -> None:
            stack.append(name)

        def leave(_m: nn.Module, _args: object, _out: object) -> None:
            stack.pop()

        handles.append(module.register_forward_pre_hook(enter))
        handles.append(module.register_forward_hook(leave))
    parameters = {p.untyped_storage().data_ptr() for p in model.parameters()}
    found: dict[int, SavedTensor] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        key = storage.data_ptr()
        if key not in parameters and key not in found:
            node = tensor.grad_fn
            found[key] = SavedTensor(
                module=stack[-1],
                shape=tuple(tensor.shape),
                dtype=str(tensor.dtype).removeprefix("torch."),
                storage_bytes=storage.nbytes(),
                made_by=type(node).__name__ if node is not None else "-",
            )
        return tensor

    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
            run()
    finally:
        for handle in handles:
            handle.remove()
    return tuple(found.values())


def in_module(saved: tuple[SavedTensor, ...], prefix: str) -> tuple[SavedTensor, ...]:
    """The saved tensors of module ``prefix`` and its submodules, named relative to it.

    >>> t = SavedTensor(module="h.0.mlp", shape=(1,), dtype="float32", storage_bytes=4,
    ...                 made_by="-")
    >>> [s.module for s in in_module((t,), "h.0")], in_module((t,), "h.1")
    (['mlp'], ())
    """
    out = []
    for s in saved:
        if s.module == prefix or s.module.startswith(prefix + "."):
            relative = s.module[len(prefix) :].lstrip(".") or "(the block)"
            out.append(replace(s, module=relative))
    return tuple(out)


# The tiny fp32 model (and batch) whose first block the memory lesson lists, both ways.
SAVED_CONFIG = GPT2Config(vocab_size=64, seq_len=24, hidden=32, heads=2, layers=1)
SAVED_BATCH = 2

# Where each implementation's first block sits in the module tree.
FIRST_BLOCK = {"gpulesson": "blocks.0", "transformers": "model.transformer.h.0"}


def first_block_saved(config: GPT2Config, batch: int) -> dict[str, tuple[SavedTensor, ...]]:
    """What the first block keeps for backward, in the course's GPT-2 and in transformers'.

    One forward pass of each, built from ``config`` in fp32 on real CPU tensors
    (keep it small), on the same random tokens.
    """
    from gpulesson.memory.gpt2 import GPT2
    from gpulesson.memory.transformers_gpt2 import build_model

    ids = torch.randint(0, config.vocab_size, (batch, config.seq_len))
    models: dict[str, nn.Module] = {"gpulesson": GPT2(config), "transformers": build_model(config)}
    out = {}
    for impl, model in models.items():
        model.train()
        saved = saved_tensors(model, lambda model=model: model(ids, ids))
        out[impl] = in_module(saved, FIRST_BLOCK[impl])
    return out
