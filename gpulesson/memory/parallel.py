"""Tensor and pipeline parallelism, priced: all-reduce bytes per layer, and the pipeline bubble.

Two arithmetic models, each from the paper that introduced the schedule:

* **Tensor parallelism** (Megatron-LM, Shoeybi et al., arXiv:1909.08053, section 3):
  each transformer layer's attention and MLP are split across t GPUs, and every layer
  all-reduces its activations twice in the forward pass and twice in the backward pass
  (their Figure 4: four collectives per layer). Each all-reduce moves the layer's output,
  batch x sequence x hidden values, so one GPU sends
  ``4 x layers x 2(t-1)/t x batch x seq x hidden x bytes`` per micro-batch, on the
  critical path: the next matmul waits for it (:func:`tensor_parallel_step`).
* **Pipeline parallelism** (GPipe, Huang et al., arXiv:1811.06965, section 2.3): p stages
  each hold a slice of the layers; a batch split into m micro-batches flows through them,
  and each stage idles while the pipeline fills and drains. The idle share of the step,
  the **bubble**, is ``(p-1) / (m+p-1)``; the 1F1B schedule (Narayanan et al.,
  arXiv:2104.04473, section 2.2) keeps the same bubble with fewer micro-batches in flight
  (:func:`bubble_fraction`).

The trade-off: both price volume and idle time from the shapes alone; kernel overlap,
sequence parallelism and interleaved schedules change them and are left out. Used by the
lesson ``lessons/multi-gpu.md``.

>>> round(bubble_fraction(stages=4, microbatches=8), 3)
0.273
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpulesson.memory.comm import ring_all_reduce_bytes

# Megatron-LM's layer: two all-reduces in the forward pass, two in the backward pass.
ALL_REDUCES_PER_LAYER = 4


def _whole(name: str, value: int, least: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{name}={value!r} must be a whole number, at least {least}")
    return value


@dataclass(frozen=True, kw_only=True)
class TensorParallelStep:
    """One micro-batch of a tensor-parallel transformer: its all-reduces and bytes per GPU."""

    tensor_parallel: int
    layers: int
    message_bytes: int  # one all-reduce: batch x seq x hidden x bytes per value
    all_reduces: int  # per micro-batch, forward and backward
    sent_bytes: int  # one GPU, per micro-batch


def tensor_parallel_step(
    *, batch: int, seq: int, hidden: int, layers: int, tensor_parallel: int, bytes_per_value: int
) -> TensorParallelStep:
    """The activation all-reduces of one micro-batch under Megatron-style tensor parallelism.

    >>> s = tensor_parallel_step(batch=1, seq=4096, hidden=4096, layers=32, tensor_parallel=8,
    ...                          bytes_per_value=2)
    >>> s.message_bytes / 2**20, s.all_reduces, s.sent_bytes / 2**30
    (32.0, 128, 7.0)
    """
    for name, value in (("batch", batch), ("seq", seq), ("hidden", hidden), ("layers", layers)):
        _whole(name, value)
    t = _whole("tensor_parallel", tensor_parallel, 2)
    _whole("bytes_per_value", bytes_per_value)
    message = batch * seq * hidden * bytes_per_value
    calls = ALL_REDUCES_PER_LAYER * layers
    return TensorParallelStep(
        tensor_parallel=t,
        layers=layers,
        message_bytes=message,
        all_reduces=calls,
        sent_bytes=round(calls * ring_all_reduce_bytes(message, t)),
    )


def bubble_fraction(*, stages: int, microbatches: int) -> float:
    """The idle share of a pipeline step: (p-1) / (m+p-1) for p stages and m micro-batches.

    >>> bubble_fraction(stages=1, microbatches=1), bubble_fraction(stages=8, microbatches=1)
    (0.0, 0.875)
    >>> bubble_fraction(stages=0, microbatches=4)
    Traceback (most recent call last):
    ...
    ValueError: stages=0 must be a whole number, at least 1
    """
    p = _whole("stages", stages)
    m = _whole("microbatches", microbatches)
    return (p - 1) / (m + p - 1)


@dataclass(frozen=True, kw_only=True)
class BubbleRow:
    """The bubble of one pipeline depth at several micro-batch counts."""

    stages: int
    fractions: tuple[tuple[int, float], ...]  # (micro-batches, idle share)


def bubble_table(stages: Sequence[int], microbatches: Sequence[int]) -> tuple[BubbleRow, ...]:
    """The bubble for each pipeline depth (a row) and micro-batch count (a column).

    >>> [round(f, 2) for _, f in bubble_table((4,), (1, 4, 16))[0].fractions]
    [0.75, 0.43, 0.16]
    """
    if not stages or not microbatches:
        raise ValueError("give at least one stage count and one micro-batch count")
    return tuple(
        BubbleRow(
            stages=p,
            fractions=tuple((m, bubble_fraction(stages=p, microbatches=m)) for m in microbatches),
        )
        for p in stages
    )


def microbatches_for(bubble: float, stages: int) -> int:
    """The fewest micro-batches that keep the bubble at or below ``bubble``: m >= (p-1)(1/b - 1).

    >>> microbatches_for(0.1, 8), round(bubble_fraction(stages=8, microbatches=63), 3)
    (63, 0.1)
    """
    if not 0 < bubble < 1:
        raise ValueError(f"bubble={bubble!r} must be a share above 0 and below 1, e.g. 0.1")
    p = _whole("stages", stages)
    m = 1
    while bubble_fraction(stages=p, microbatches=m) > bubble + 1e-12:
        m += 1
    return m
