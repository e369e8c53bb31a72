"""Each implementation's estimate against transformers' measured GPT-2, case by case.

A reader who trains a Hugging Face model and trusts an estimate fitted to
another implementation underestimates. This module measures transformers'
``GPT2LMHeadModel`` (:func:`gpulesson.memory.measure.measure_transformers_gpt2`)
and sets beside each measurement the estimate with ``impl="gpulesson"`` (the
default, fitted to the course's own GPT-2) and with ``impl="transformers"``:
the error a reader gets on a model the default was not fitted to, and what the
transformers terms recover.

Used by ``tests/benchmarks/bench_budget_accuracy.py``,
``tests/test_transformers_memory.py`` and ``lessons/memory.md``.

>>> [c.label() for c in issue_cases()][2]
'V50257 s1024 h768 H12 L12 b2 sdpa no-ckpt fp32 adamw'
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from gpulesson.memory.budget import IMPLS
from gpulesson.memory.gpt2 import GPT2Config
from gpulesson.memory.measure import (
    TARGET_MAX_ERROR,
    TUNED_SHAPES,
    UNTUNED_SHAPES,
    AccuracyCase,
    MeasuredStep,
    estimate_case,
    grid,
    measure_case,
)
from gpulesson.memory.shape import TransformerShape


@dataclass(frozen=True, kw_only=True)
class ImplRow:
    """One measured transformers step and the estimate of every implementation for it.

    ``estimates_bytes`` maps an ``impl`` (``gpulesson``, ``transformers``) to its
    estimate of the peak; :meth:`error` is relative to the measured peak.
    """

    case: AccuracyCase
    measured: MeasuredStep
    estimates_bytes: dict[str, int]

    def error(self, impl: str) -> float:
        """Signed relative error of ``impl``'s estimate (negative: it underestimates)."""
        return (self.estimates_bytes[impl] - self.measured.peak_bytes) / self.measured.peak_bytes


@dataclass(frozen=True, kw_only=True)
class ImplSummary:
    """Errors of one implementation's estimate over a set of rows, as fractions."""

    impl: str
    cases: int
    median_abs_error: float
    max_abs_error: float
    lowest_error: float  # the most negative signed error (the worst underestimate)
    highest_error: float  # the most positive signed error

    @property
    def meets_target(self) -> bool:
        """Every case within ``TARGET_MAX_ERROR`` (10%) of the measured peak."""
        return self.max_abs_error <= TARGET_MAX_ERROR


def _transformers_case(
    shape: TransformerShape, *, attention: str, dtype: str, optimizer: str
) -> AccuracyCase:
    config = GPT2Config(
        vocab_size=shape.vocab,
        seq_len=shape.seq,
        hidden=shape.hidden,
        heads=shape.heads,
        layers=shape.layers,
        attention=attention,
    )
    return AccuracyCase(
        config=config, batch=shape.batch, dtype=dtype, optimizer=optimizer, impl="transformers"
    )


# The three steps of the issue that found the gap (vocab, seq, hidden, heads, layers, batch).
ISSUE_SHAPES = (
    TransformerShape(vocab=8192, seq=512, hidden=384, heads=6, layers=6, batch=4),
    TransformerShape(vocab=8192, seq=512, hidden=384, heads=6, layers=6, batch=4),
    TransformerShape(vocab=50257, seq=1024, hidden=768, heads=12, layers=12, batch=2),
)


def issue_cases() -> list[AccuracyCase]:
    """The issue's three fp32 AdamW steps: SDPA, eager, and GPT-2 small with SDPA."""
    return [
        _transformers_case(shape, attention=attention, dtype="fp32", optimizer="adamw")
        for shape, attention in zip(ISSUE_SHAPES, ("sdpa", "eager", "sdpa"), strict=True)
    ]


def build_cases() -> list[AccuracyCase]:
    """The lesson's build-time cases: both attentions, dtypes and optimizers, two small shapes.

    The shapes of :func:`gpulesson.memory.measure.build_cases`; about a second each.
    The full grid is :func:`grid_cases`.
    """
    cases = []
    for shape, attention, dtype, optimizer in (
        (TUNED_SHAPES[0], "eager", "fp32", "adamw"),
        (TUNED_SHAPES[0], "sdpa", "bf16", "sgd"),
        (TUNED_SHAPES[1], "sdpa", "fp32", "adamw"),
    ):
        cases.append(
            _transformers_case(shape, attention=attention, dtype=dtype, optimizer=optimizer)
        )
    return cases


# Shapes chosen to stress one term each: a tiny vocabulary with a long sequence
# (attention), a tiny vocabulary with a wide model (the blocks and the last
# block's output), GPT-2's vocabulary on a tiny model (the loss), and a model
# whose largest weight is an MLP matrix (the optimizer step).
STRESS_SHAPES = [
    TransformerShape(vocab=64, seq=512, hidden=64, heads=8, layers=2, batch=2),
    TransformerShape(vocab=64, seq=64, hidden=256, heads=4, layers=2, batch=4),
    TransformerShape(vocab=50257, seq=64, hidden=64, heads=2, layers=1, batch=1),
    TransformerShape(vocab=128, seq=128, hidden=512, heads=8, layers=3, batch=1),
]


def grid_cases() -> list[AccuracyCase]:
    """The benchmark's grid: every shape of the course's grid and the stress shapes.

    Each with eager and SDPA attention, fp32 and bf16, SGD and AdamW.
    """
    shapes = [*TUNED_SHAPES, *UNTUNED_SHAPES, *STRESS_SHAPES]
    return grid(shapes, impl="transformers")


def run_impl_comparison(cases: list[AccuracyCase], mode: str = "auto") -> tuple[ImplRow, ...]:
    """Measure each case once; estimate it with every implementation's terms."""
    rows = []
    for case in cases:
        measured = measure_case(case, mode)
        foreach = measured.reserved_bytes is not None  # CUDA's optimizers default to foreach
        estimates = {}
        for impl in IMPLS:
            as_impl = AccuracyCase(
                config=case.config,
                batch=case.batch,
                dtype=case.dtype,
                optimizer=case.optimizer,
                tuned=case.tuned,
                impl=impl,
            )
            estimates[impl] = estimate_case(as_impl, foreach=foreach).total_bytes
        rows.append(ImplRow(case=case, measured=measured, estimates_bytes=estimates))
    return tuple(rows)


def impl_summary(rows: tuple[ImplRow, ...], impl: str) -> ImplSummary:
    """Median and largest absolute error of ``impl``'s estimate, and its signed extremes.

    >>> impl_summary((), "transformers")
    Traceback (most recent call last):
    ...
    ValueError: no rows to summarise: measure at least one case
    """
    if not rows:
        raise ValueError("no rows to summarise: measure at least one case")
    errors = [r.error(impl) for r in rows]
    absolute = [abs(e) for e in errors]
    return ImplSummary(
        impl=impl,
        cases=len(rows),
        median_abs_error=statistics.median(absolute),
        max_abs_error=max(absolute),
        lowest_error=min(errors),
        highest_error=max(errors),
    )
