"""Hugging Face transformers' GPT-2, built from a config and measured like the course's GPT-2.

Readers train Hugging Face models, so the estimate is checked against one:
``transformers.GPT2LMHeadModel``, built from a ``GPT2Config`` with random
weights (nothing is downloaded: the hub is switched off before transformers is
imported), no dropout, the head tied to the token embedding, GPT-2's default
activation ``gelu_new`` (the tanh approximation, written as Python tensor ops).
A step calls ``model(input_ids=ids, labels=ids).loss`` and keeps only the loss,
as the ``Trainer``'s ``compute_loss`` does; a loop that keeps the whole output
alive through ``backward()`` also keeps the logits.

The model runs under :func:`gpulesson.memory.measure.measure`, so fake tensors
on a CPU (or CUDA) measure it exactly as they measure the course's GPT-2. One
decision in transformers reads tensor *values*: whether a batch packs several
sequences into one row (``masking_utils.find_packed_sequence_indices``, from the
position ids). A real run finds none here (each row's positions are 0..seq-1)
and lets SDPA apply the causal mask itself; fake tensors have no values, so
transformers would build and keep a (batch x seq x seq) mask per layer that a
real run never makes. :func:`real_run_masks` answers that one question as the
real run does, for fake tensors only; ``tests/test_transformers_memory.py``
checks that a fake measurement then equals a measurement on real CPU tensors.
Everything used from transformers' internals goes through this module and fails
loudly, naming the version, when it moves.

Used by :mod:`gpulesson.memory.measure`, the accuracy benchmark and
``lessons/memory.md``.

>>> from gpulesson.memory.gpt2 import GPT2Config
>>> model = build_model(GPT2Config(vocab_size=64, seq_len=8, hidden=16, heads=2, layers=1))
>>> type(model.model).__name__, model.num_parameters()
('GPT2LMHeadModel', 4464)
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from gpulesson.memory.gpt2 import GPT2Config

KNOWN_WORKING_TRANSFORMERS = "5.24"
PACKED_SEQUENCES = "transformers.masking_utils.find_packed_sequence_indices"
INSTALL = "pip install 'transformers>=5.24,<6'"


class TransformersAPIError(RuntimeError):
    """A piece of transformers that gpulesson's measurement relies on has moved."""


def _transformers() -> Any:
    """Import transformers with the hub switched off: models are built from configs only."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    try:
        return importlib.import_module("transformers")
    except ImportError as exc:
        raise ModuleNotFoundError(
            f"measuring transformers' GPT-2 needs the transformers package ({exc}): {INSTALL}"
        ) from exc


def _moved(what: str, detail: str) -> TransformersAPIError:
    version = getattr(_transformers(), "__version__", "?")
    return TransformersAPIError(
        f"transformers {version}: {what} has moved or changed ({detail}); "
        "gpulesson.memory.transformers_gpt2 relies on it, known to work with transformers "
        f"{KNOWN_WORKING_TRANSFORMERS}. Measure with {INSTALL}, or update "
        "gpulesson/memory/transformers_gpt2.py for this version."
    )


def hf_config(config: GPT2Config) -> Any:
    """The ``transformers.GPT2Config`` of ``config``'s shape: no dropout, tied head, no cache.

    ``config.seq_len`` is the position table's length (``n_positions``).

    >>> c = hf_config(GPT2Config(vocab_size=64, seq_len=8, hidden=16, heads=2, layers=1))
    >>> c.n_embd, c.activation_function, c.resid_pdrop, c.tie_word_embeddings
    (16, 'gelu_new', 0.0, True)
    """
    if config.checkpointing or config.loss != "standard":
        raise ValueError(
            "transformers' GPT-2 is measured with the standard loss and without "
            f"checkpointing (got checkpointing={config.checkpointing}, loss={config.loss!r})"
        )
    transformers = _transformers()
    return transformers.GPT2Config(
        vocab_size=config.vocab_size,
        n_positions=config.seq_len,
        n_embd=config.hidden,
        n_head=config.heads,
        n_layer=config.layers,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        tie_word_embeddings=True,
        use_cache=False,
        bos_token_id=None,
        eos_token_id=None,
        attn_implementation=config.attention,
    )


class LossOnly(nn.Module):
    """``GPT2LMHeadModel`` whose ``forward(ids, labels)`` returns the loss and drops the rest."""

    def __init__(self, config: GPT2Config) -> None:
        super().__init__()
        self.model = _transformers().GPT2LMHeadModel(hf_config(config))
        # The loss GPT2LMHeadModel uses anyway; named so transformers does not warn.
        self.model.loss_type = "ForCausalLM"

    def num_parameters(self) -> int:
        """Parameters, the tied matrix counted once."""
        return sum(p.numel() for p in self.parameters())

    def forward(self, ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """The mean next-token cross-entropy (transformers shifts the labels itself)."""
        return self.model(input_ids=ids, labels=labels).loss


def build_model(config: GPT2Config) -> LossOnly:
    """transformers' ``GPT2LMHeadModel`` of ``config``'s shape: random weights, loss-only."""
    return LossOnly(config)


def _is_fake(tensor: torch.Tensor) -> bool:
    from torch._subclasses.fake_tensor import is_fake

    return bool(is_fake(tensor))


@contextlib.contextmanager
def real_run_masks() -> Iterator[None]:
    """Let transformers decide its attention mask for fake tensors as it does for real ones.

    Inside, ``find_packed_sequence_indices`` answers "no packed sequences" for
    fake position ids (the model makes them with ``arange``: one sequence per
    row, what a real run finds) and runs unchanged for real tensors.
    """
    module_name, _, name = PACKED_SEQUENCES.rpartition(".")
    _transformers()
    module = importlib.import_module(module_name)
    original = getattr(module, name, None)
    if not callable(original):
        raise _moved(PACKED_SEQUENCES, f"{module_name} has no function {name}")

    def packed_sequences(position_ids: torch.Tensor) -> torch.Tensor | None:
        if _is_fake(position_ids):
            return None
        return original(position_ids)

    setattr(module, name, packed_sequences)
    try:
        yield
    finally:
        setattr(module, name, original)
