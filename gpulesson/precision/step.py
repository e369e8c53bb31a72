"""One GPT-2 training step in each precision, timed with the course's timer.

A training step (zero the gradients, forward, backward, AdamW step) in four precisions:

* ``fp32``: no autocast, TF32 off (``torch.set_float32_matmul_precision("highest")``);
* ``tf32``: no autocast, TF32 allowed (``"high"``); CUDA GPUs of compute capability 8.0
  and later only, elsewhere it would time plain fp32 under another name;
* ``bf16``: ``torch.autocast(device, dtype=torch.bfloat16)``, no scaler;
* ``fp16``: ``torch.autocast(device, dtype=torch.float16)`` with ``torch.amp.GradScaler``.

Parameters, gradients and AdamW's moments stay fp32 in all four (the ``amp`` recipe).
Each step is timed by :func:`gpulesson.timing.roofline.measure_op` (warm-up, a barrier
before every clock reading, the median of many samples): the same code path for this
build's page and for the suite entry ``amp_step`` (:mod:`gpulesson.results.entries_precision`).

Used by the lesson ``lessons/mixed-precision.md``.

>>> config = GPT2Config(vocab_size=64, seq_len=16, hidden=32, heads=2, layers=1)
>>> t = time_step(config, batch=2, device="cpu", precision="bf16", min_run_time_s=0.01)
>>> t.precision, t.result.median_s > 0, t.skipped_steps
('bf16', True, 0)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from gpulesson.memory.gpt2 import GPT2, GPT2Config
from gpulesson.timing import plans
from gpulesson.timing.bench import matmul_precision
from gpulesson.timing.results import OpResult
from gpulesson.timing.roofline import measure_op

PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
AUTOCAST_DTYPES: dict[str, torch.dtype] = {"bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass(frozen=True)
class StepPlan:
    """The model, batch and timing budget of a timed step for one kind of device and run."""

    config: GPT2Config
    batch: int
    min_run_time_s: float


# (device type, quick) -> plan, from the one plan table (gpulesson/timing/plans.json). The
# quick CUDA plan is also what a CUDA build's page times.
STEP_PLANS: dict[tuple[str, bool], StepPlan] = {
    key: StepPlan(**{**sizes, "config": GPT2Config(**sizes["config"])})
    for key, sizes in plans.by_run("step").items()
}


def precisions_for(
    device_type: str, capability: tuple[int, int] | None, quick: bool
) -> tuple[str, ...]:
    """The precisions worth timing: TF32 and bf16 only where tensor cores take them.

    A CPU emulates fp16 slowly, so ``quick`` keeps fp32 and bf16 there.

    >>> precisions_for("cuda", (7, 5), quick=False)
    ('fp32', 'fp16')
    >>> precisions_for("cuda", (9, 0), quick=True)
    ('fp32', 'tf32', 'bf16', 'fp16')
    >>> precisions_for("cpu", None, quick=True)
    ('fp32', 'bf16')
    """
    if device_type == "cuda":
        if (capability or (0, 0)) >= (8, 0):
            return ("fp32", "tf32", "bf16", "fp16")
        return ("fp32", "fp16")
    if device_type == "cpu" and quick:
        return ("fp32", "bf16")
    return ("fp32", "bf16", "fp16")


def check_precision(precision: str, device: str) -> str:
    """The precision, or ``ValueError`` when it is unknown or meaningless on ``device``.

    >>> check_precision("tf32", "cpu")
    Traceback (most recent call last):
    ...
    ValueError: precision 'tf32' needs a CUDA GPU of compute capability 8.0 or later \
(this is cpu): use fp32, bf16 or fp16
    """
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}: use one of {', '.join(PRECISIONS)}")
    if precision == "tf32":
        ok = device == "cuda" and torch.cuda.get_device_capability() >= (8, 0)
        if not ok:
            where = device if device != "cuda" else "a GPU before Ampere"
            raise ValueError(
                f"precision 'tf32' needs a CUDA GPU of compute capability 8.0 or later "
                f"(this is {where}): use fp32, bf16 or fp16"
            )
    return precision


@dataclass(frozen=True, kw_only=True)
class StepTiming:
    """The timing of one training step in one precision, and what its scaler did.

    ``skipped_steps`` counts the steps (warm-up and timed) whose optimizer step the
    GradScaler skipped; ``final_scale`` is its scale at the end (None without a scaler).
    """

    precision: str
    device: str
    tokens: int
    result: OpResult
    steps: int
    skipped_steps: int
    final_scale: float | None

    @property
    def tokens_per_s(self) -> float:
        """Training tokens per second at the median step time."""
        return self.tokens / self.result.median_s


def make_step(
    model: GPT2, idx: torch.Tensor, device: str, precision: str
) -> tuple[Callable[[], None], Callable[[], tuple[int, int, float | None]]]:
    """A zero-argument training step, and a function reporting (steps, skipped, scale)."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    scaler = torch.amp.GradScaler(device) if precision == "fp16" else None
    autocast_dtype = AUTOCAST_DTYPES.get(precision)
    counts = {"steps": 0, "skipped": 0}

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(
            device, dtype=autocast_dtype or torch.float32, enabled=autocast_dtype is not None
        ):
            loss = model(idx, idx)
        if scaler is None:
            loss.backward()
            optimizer.step()
        else:
            scale = scaler.get_scale()
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            counts["skipped"] += int(scaler.get_scale() < scale)  # the scale drops on a skip
        counts["steps"] += 1

    def report() -> tuple[int, int, float | None]:
        return counts["steps"], counts["skipped"], None if scaler is None else scaler.get_scale()

    return step, report


def time_step(
    config: GPT2Config,
    batch: int,
    device: str,
    precision: str,
    min_run_time_s: float = 0.2,
    seed: int = 0,
) -> StepTiming:
    """Time one training step of ``GPT2(config)`` on ``batch`` sequences in ``precision``."""
    check_precision(precision, device)
    if not isinstance(batch, int) or isinstance(batch, bool) or batch < 1:
        raise ValueError(f"batch={batch!r} must be a positive whole number, e.g. 8")
    torch.manual_seed(seed)
    model = GPT2(config).to(device)
    idx = torch.randint(0, config.vocab_size, (batch, config.seq_len), device=device)
    step, report = make_step(model, idx, device, precision)
    with matmul_precision("tf32" if precision == "tf32" else "fp32"):
        result = measure_op(
            f"training step ({precision})", step, device, precision, 0, 0, min_run_time_s
        )
    steps, skipped, scale = report()
    return StepTiming(
        precision=precision,
        device=device,
        tokens=batch * config.seq_len,
        result=result,
        steps=steps,
        skipped_steps=skipped,
        final_scale=scale,
    )
