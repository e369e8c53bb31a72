"""GradScaler's steps, taken and skipped, and the tools that find a NaN or an inf.

fp16 cannot hold gradients much below 6e-8, so fp16 training multiplies the loss by a
large scale before the backward pass and divides the gradients by it before the
optimizer step (``torch.amp.GradScaler``). A scale too large overflows instead: the
scaler then finds an inf or NaN among the gradients, **skips** that optimizer step
(the parameters stay as they were), and halves the scale. After ``growth_interval``
(2000) steps in a row without one, it doubles the scale again. PyTorch's AMP docs give
these defaults; this module runs them, on any device ``torch.autocast`` supports.

* :func:`scaler_run` trains a small network for a few steps under fp16 autocast with a
  ``GradScaler`` and records, per step, the scale before and after, whether the
  gradients were finite and whether the parameters changed. A batch marked
  ``"overflow"`` has inputs 10^4 times larger, so its scaled gradients pass fp16's
  65,504: an occasional skip, which the scaler absorbs.
* ``buggy=True`` adds a classic NaN source, ``torch.where(x > 0, x.sqrt(), 0)``: the
  forward pass is finite, but the gradient of ``sqrt`` at the negative entries is NaN,
  and ``where`` multiplies it by 0, which stays NaN. Every step is skipped and the
  scale halves each time: a bug, not noise.
* :func:`find_nonfinite` runs that bug once without autocast and shows what each tool
  sees: the loss (finite), ``torch.isfinite`` on each gradient (which parameters), and
  ``torch.autograd.detect_anomaly`` (the backward function that made the NaN).

Used by the lesson ``lessons/mixed-precision.md``.

>>> run = scaler_run(("normal", "overflow", "normal"))
>>> [(s.step_taken, s.scale_before, s.scale_after) for s in run.steps]
[(True, 65536.0, 65536.0), (False, 65536.0, 32768.0), (True, 32768.0, 32768.0)]
>>> scaler_run(("normal",) * 3, buggy=True).skipped
3
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

BATCHES = ("normal", "overflow")
OVERFLOW_FACTOR = 1e4  # inputs this much larger push the scaled gradients past 65,504
IN_FEATURES, HIDDEN, OUT_FEATURES, BATCH = 16, 32, 4, 8


class SqrtFeature(nn.Module):
    """``where(x > 0, sqrt(x), 0)``: finite forward, NaN gradient wherever x < 0."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.where(x > 0, x.sqrt(), torch.zeros_like(x))


def small_model(buggy: bool = False, seed: int = 0) -> nn.Sequential:
    """Linear, GELU, Linear (and the NaN-making feature when ``buggy``), seeded.

    >>> [type(m).__name__ for m in small_model(buggy=True)]
    ['Linear', 'GELU', 'Linear', 'SqrtFeature']
    """
    torch.manual_seed(seed)
    layers: list[nn.Module] = [
        nn.Linear(IN_FEATURES, HIDDEN),
        nn.GELU(),
        nn.Linear(HIDDEN, OUT_FEATURES),
    ]
    if buggy:
        layers.append(SqrtFeature())
    return nn.Sequential(*layers)


@dataclass(frozen=True, kw_only=True)
class ScalerStep:
    """One training step under a GradScaler: the scale around it and what happened."""

    step: int
    batch: str
    loss: float
    grads_finite: bool
    scale_before: float
    scale_after: float
    step_taken: bool  # the optimizer changed the parameters


@dataclass(frozen=True, kw_only=True)
class ScalerRun:
    """A few steps of one model under fp16 autocast and a GradScaler."""

    device: str
    buggy: bool
    steps: tuple[ScalerStep, ...]

    @property
    def skipped(self) -> int:
        """Steps the scaler skipped (parameters unchanged)."""
        return sum(not s.step_taken for s in self.steps)


def _batch(kind: str, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(BATCH, IN_FEATURES, generator=generator)
    y = torch.randn(BATCH, OUT_FEATURES, generator=generator)
    return (x * OVERFLOW_FACTOR if kind == "overflow" else x), y


def scaler_run(
    batches: Sequence[str], *, buggy: bool = False, device: str = "cpu", seed: int = 0
) -> ScalerRun:
    """Train ``small_model`` one step per entry of ``batches`` with fp16 autocast + GradScaler.

    Each step: zero the gradients, forward under ``torch.autocast(device, float16)``,
    ``scaler.scale(loss).backward()``, ``scaler.unscale_`` (to inspect the true
    gradients), ``scaler.step``, ``scaler.update`` (the order PyTorch's AMP examples use).
    """
    for kind in batches:
        if kind not in BATCHES:
            raise ValueError(f"batch kind {kind!r} is not one of {', '.join(BATCHES)}")
    if not batches:
        raise ValueError("give at least one batch, e.g. ('normal', 'overflow')")
    model = small_model(buggy, seed).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(device)
    generator = torch.Generator().manual_seed(seed)
    steps = []
    for number, kind in enumerate(batches, start=1):
        x, y = (t.to(device) for t in _batch(kind, generator))
        before = [p.detach().clone() for p in model.parameters()]
        scale_before = float(scaler.get_scale())
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device, dtype=torch.float16):
            loss = F.mse_loss(model(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        finite = all(bool(torch.isfinite(p.grad).all()) for p in model.parameters())
        scaler.step(optimizer)
        scaler.update()
        after = list(model.parameters())
        changed = any(not torch.equal(b, p) for b, p in zip(before, after, strict=True))
        steps.append(
            ScalerStep(
                step=number,
                batch=kind,
                loss=float(loss.item()),
                grads_finite=finite,
                scale_before=scale_before,
                scale_after=float(scaler.get_scale()),
                step_taken=changed,
            )
        )
    return ScalerRun(device=device, buggy=buggy, steps=tuple(steps))


@dataclass(frozen=True, kw_only=True)
class NonFiniteCheck:
    """What each detection tool reports for one backward pass of the buggy model.

    ``nonfinite_grads`` names the parameters whose gradient has a NaN or inf
    (``torch.isfinite``); ``anomaly`` is the first line of the error
    ``torch.autograd.detect_anomaly`` raised, or None when it raised nothing.
    """

    loss: float
    loss_finite: bool
    nonfinite_grads: tuple[str, ...]
    parameters: int
    anomaly: str | None


def find_nonfinite(seed: int = 0) -> NonFiniteCheck:
    """Run the buggy model once in fp32 and collect what each NaN/inf check sees.

    >>> check = find_nonfinite()
    >>> check.loss_finite, len(check.nonfinite_grads) > 0
    (True, True)
    >>> check.anomaly
    "Function 'SqrtBackward0' returned nan values in its 0th output."
    """
    model = small_model(buggy=True, seed=seed)
    generator = torch.Generator().manual_seed(seed)
    x, y = _batch("normal", generator)
    loss = F.mse_loss(model(x), y)
    loss.backward()
    bad = tuple(n for n, p in model.named_parameters() if not bool(torch.isfinite(p.grad).all()))
    model.zero_grad(set_to_none=True)
    anomaly = None
    # detect_anomaly warns that it slows everything down and prints the forward trace of
    # the failing op as a warning; both are expected here, the error is what we read.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            with torch.autograd.detect_anomaly():
                F.mse_loss(model(x), y).backward()
        except RuntimeError as exc:
            anomaly = str(exc).strip().splitlines()[0]
    return NonFiniteCheck(
        loss=float(loss.item()),
        loss_finite=bool(torch.isfinite(loss)),
        nonfinite_grads=bad,
        parameters=len(list(model.parameters())),
        anomaly=anomaly,
    )
