"""A small GPT-2: the model the memory lessons measure and the budget estimates.

The architecture is GPT-2's: token plus learned position embeddings, pre-LayerNorm
blocks with biases, causal self-attention, an MLP 4x as wide as the residual stream
with GELU, a final LayerNorm, and an output head tied to the token embedding. There
is no dropout, so a training step keeps only the tensors the architecture needs.

Two switches matter for memory. ``attention="eager"`` writes the attention scores
out as a (batch, heads, seq, seq) tensor and keeps its softmax for the backward
pass; ``attention="sdpa"`` calls ``scaled_dot_product_attention``, which keeps no
seq x seq tensor when a fused kernel serves it. ``checkpointing=True`` keeps only
each block's input and recomputes the block during the backward pass.
``loss="chunked"`` computes the cross-entropy ``loss_chunks`` slices of tokens at a
time and recomputes each slice's logits in the backward pass, so the full
(batch, seq, vocab) logits, their log-softmax and their gradient never exist at
once (what fused "linear cross-entropy" kernels achieve without the recompute).

Used by ``gpulesson.memory.measure``, the accuracy benchmark and the lesson
``lessons/memory.md``.

>>> config = GPT2Config(vocab_size=64, seq_len=8, hidden=16, heads=2, layers=1)
>>> model = GPT2(config)
>>> model.num_parameters()
4464
>>> model.num_parameters() == parameter_count(config)
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

ATTENTIONS = ("eager", "sdpa")
LOSSES = ("standard", "chunked")


@dataclass(frozen=True)
class GPT2Config:
    """The shape of a GPT-2 model and how it runs attention.

    ``seq_len`` is the longest sequence the position embedding holds.
    """

    vocab_size: int = 50257
    seq_len: int = 1024
    hidden: int = 768
    heads: int = 12
    layers: int = 12
    attention: str = "sdpa"
    checkpointing: bool = False
    loss: str = "standard"
    loss_chunks: int = 8

    def __post_init__(self) -> None:
        for name in ("vocab_size", "seq_len", "hidden", "heads", "layers", "loss_chunks"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{name}={value!r} must be a positive whole number")
        if self.hidden % self.heads:
            raise ValueError(
                f"hidden={self.hidden} is not divisible by heads={self.heads}: "
                "pick a head count that divides the hidden size"
            )
        if self.attention not in ATTENTIONS:
            raise ValueError(f"attention={self.attention!r} is not one of {', '.join(ATTENTIONS)}")
        if self.loss not in LOSSES:
            raise ValueError(f"loss={self.loss!r} is not one of {', '.join(LOSSES)}")


def parameter_count(config: GPT2Config) -> int:
    """Count the parameters of ``GPT2(config)`` without building it (tied head counted once).

    Per block: two LayerNorms (4C), the QKV projection (3C^2 + 3C), the output
    projection (C^2 + C), and the MLP (8C^2 + 5C): 12C^2 + 13C.

    >>> parameter_count(GPT2Config())  # GPT-2 small
    124439808
    """
    c = config.hidden
    per_block = 12 * c * c + 13 * c
    return config.vocab_size * c + config.seq_len * c + config.layers * per_block + 2 * c


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention, eager or through SDPA."""

    def __init__(self, config: GPT2Config) -> None:
        super().__init__()
        self.heads = config.heads
        self.attention = config.attention
        self.c_attn = nn.Linear(config.hidden, 3 * config.hidden)
        self.c_proj = nn.Linear(config.hidden, config.hidden)
        mask = torch.tril(torch.ones(config.seq_len, config.seq_len, dtype=torch.bool))
        # Not persistent: the mask is rebuilt from the config, never saved.
        self.register_buffer("mask", mask.view(1, 1, config.seq_len, config.seq_len), False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        # (b, t, c) -> (b, heads, t, head_size)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        if self.attention == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))  # (b, h, t, t)
            att = att.masked_fill(~self.mask[:, :, :t, :t], float("-inf"))
            att = F.softmax(att, dim=-1)
            y = att @ v  # (b, h, t, head_size)
        y = y.transpose(1, 2).contiguous().view(b, t, c)
        return self.c_proj(y)


class MLP(nn.Module):
    """The 4x-wide feed-forward layer with GELU."""

    def __init__(self, config: GPT2Config) -> None:
        super().__init__()
        self.c_fc = nn.Linear(config.hidden, 4 * config.hidden)
        self.c_proj = nn.Linear(4 * config.hidden, config.hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(F.gelu(self.c_fc(x)))


class Block(nn.Module):
    """A pre-LayerNorm transformer block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, config: GPT2Config) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.hidden)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.hidden)
        self.mlp = MLP(config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


def _chunk_cross_entropy_sum(
    h: torch.Tensor, weight: torch.Tensor, y: torch.Tensor
) -> torch.Tensor:
    return F.cross_entropy(F.linear(h, weight), y, reduction="sum")


def chunked_cross_entropy(
    hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, chunks: int
) -> torch.Tensor:
    """Mean cross-entropy of ``hidden @ weight.T`` against ``targets``, a slice of tokens at a time.

    Each slice's logits and log-softmax exist only while that slice runs: the
    forward pass keeps nothing of them (``checkpoint``), and the backward pass
    recomputes one slice, takes its gradient and frees it before the next.
    ``chunks`` slices of ``ceil(tokens / chunks)`` tokens (``Tensor.chunk``).

    >>> h, w = torch.randn(2, 5, 4), torch.randn(7, 4)
    >>> y = torch.randint(0, 7, (2, 5))
    >>> full = F.cross_entropy((h @ w.T).view(-1, 7), y.view(-1))
    >>> bool(torch.allclose(chunked_cross_entropy(h, w, y, 3), full))
    True
    """
    h = hidden.reshape(-1, hidden.size(-1))  # (tokens, hidden), a view
    y = targets.reshape(-1)
    total = None
    for h_slice, y_slice in zip(h.chunk(chunks), y.chunk(chunks), strict=True):
        part = checkpoint(_chunk_cross_entropy_sum, h_slice, weight, y_slice, use_reentrant=False)
        total = part if total is None else total + part
    assert total is not None
    return total / y.numel()


class GPT2(nn.Module):
    """GPT-2 with a tied output head; ``forward(idx, targets)`` returns the mean loss."""

    def __init__(self, config: GPT2Config) -> None:
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.hidden)
        self.wpe = nn.Embedding(config.seq_len, config.hidden)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.layers))
        self.ln_f = nn.LayerNorm(config.hidden)
        self.lm_head = nn.Linear(config.hidden, config.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # tied: one (vocab, hidden) matrix

    def num_parameters(self) -> int:
        """Parameters, the tied matrix counted once."""
        return sum(p.numel() for p in self.parameters())

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> torch.Tensor:
        """Logits (batch, seq, vocab) without targets; the mean cross-entropy with them."""
        _, t = idx.shape
        if t > self.config.seq_len:
            raise ValueError(f"sequence of {t} tokens is longer than seq_len={self.config.seq_len}")
        pos = torch.arange(t, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            if self.config.checkpointing and self.training:
                x = checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        x = self.ln_f(x)
        if targets is not None and self.config.loss == "chunked":
            return chunked_cross_entropy(x, self.lm_head.weight, targets, self.config.loss_chunks)
        logits = self.lm_head(x)  # (b, t, vocab)
        if targets is None:
            return logits
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
