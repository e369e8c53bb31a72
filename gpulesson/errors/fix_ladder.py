"""The fix ladder for an out-of-memory error, and the steps to try for every kind of error.

One job: what to do about a failure. The words are data, ``fix_ladder.json`` beside
this module, checked by ``fix_ladder.schema.json`` and read once (:func:`load_ladder`).
:data:`FIX_LADDER` lists the rungs in the order to try them, cheapest first;
:func:`oom_steps`, :func:`nccl_steps` and :func:`other_steps` turn a kind and verdict
from :mod:`gpulesson.errors.diagnose` into :class:`Step` lists;
:func:`ladder_budget_rows` prices the rungs on one example run with
:mod:`gpulesson.memory.budget`. The fixes for a broken driver, wheel or
container come from :mod:`gpulesson.probe`, their one home.

Used by the lesson ``lessons/fix-ladder.md`` (and, through ``diagnose()``, by
``lessons/oom.md``, ``lessons/cuda-errors.md`` and ``gpulesson diagnose``).

>>> FIX_LADDER[0].key, FIX_LADDER[0].free
('release', True)
>>> oom_steps("cuda_oom", "fragmentation")[0].action
'Restart with expandable segments'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gpulesson import schema_check
from gpulesson.probe import FIX_CONTAINER, FIX_DRIVER, FIX_WHEEL, Fix, fix_driver_too_old


@dataclass(frozen=True)
class Step:
    """One thing to try; ``free`` when it costs nothing but time."""

    action: str
    detail: str
    free: bool


@dataclass(frozen=True)
class Rung:
    """One rung of the fix ladder."""

    key: str
    name: str
    what_it_cuts: str
    cost: str
    free: bool


TABLE = Path(__file__).with_name("fix_ladder.json")
SCHEMA = Path(__file__).with_name("fix_ladder.schema.json")


@dataclass(frozen=True)
class Ladder:
    """The fix ladder's table: the rungs, the restart note and the named steps of each case."""

    rungs: tuple[Rung, ...]
    restart_note: str
    lists: Mapping[str, tuple[Step, ...]]


def load_ladder(path: Path = TABLE) -> Ladder:
    """The table of a file like ``fix_ladder.json``, checked; ValueError naming entry and field.

    The schema checks the fields; this checks what it cannot: rung keys come once, and
    every name in a list is a step under ``steps``.

    >>> load_ladder().lists["unknown"][0].action
    'Paste the whole traceback'
    """
    data = schema_check.load_json(path, SCHEMA)
    rungs: list[Rung] = []
    for i, row in enumerate(data["rungs"]):
        if row["key"] in {r.key for r in rungs}:
            where = schema_check.where(path.name, ("rungs", i), "key")
            raise ValueError(f"{where}: {row['key']!r} is already a rung: give each its own key")
        rungs.append(Rung(**row))
    steps = {name: Step(**row) for name, row in data["steps"].items()}
    lists: dict[str, tuple[Step, ...]] = {}
    for case, names in data["lists"].items():
        for k, name in enumerate(names):
            if name not in steps:
                where = schema_check.where(path.name, ("lists", case), None)
                raise ValueError(
                    f"{where}: {k + 1}: no step {name!r}: name one under steps "
                    f"({', '.join(sorted(steps))})"
                )
        lists[case] = tuple(steps[name] for name in names)
    return Ladder(rungs=tuple(rungs), restart_note=data["restart_note"], lists=lists)


# The table: gpulesson/errors/fix_ladder.json, read once. The fix ladder, in the order to try it.
_TABLE = load_ladder()
FIX_LADDER: tuple[Rung, ...] = _TABLE.rungs
_RUNG = {rung.key: rung for rung in FIX_LADDER}
_STEPS = _TABLE.lists


def _ladder_steps(start: int = 0) -> list[Step]:
    return [
        Step(
            action=rung.name,
            detail=f"Cuts {rung.what_it_cuts}; costs {rung.cost}.",
            free=rung.free,
        )
        for rung in FIX_LADDER[start:]
    ]


def _step(fix: Fix) -> Step:
    return Step(action=fix.action, detail=fix.detail, free=True)


def oom_steps(kind: str, verdict: str) -> tuple[Step, ...]:
    """The steps for an out-of-memory error of ``kind``, in order, given its verdict."""
    if kind == "cpu_oom":
        return _STEPS["cpu_oom"]
    if kind == "mps_oom":
        if verdict == "too_large_for_device":
            return (*_STEPS["mps_too_large_for_device"], *_ladder_steps(1))
        return (*_STEPS["mps_oom"], *_ladder_steps(1))
    if verdict in ("fragmentation", "outside_allocator", "too_large_for_device"):
        return (*_STEPS[verdict], *_ladder_steps(1))
    release = Step(action=FIX_LADDER[0].name, detail=_TABLE.restart_note, free=True)
    return (release, *_ladder_steps(1))


def nccl_steps(kind: str) -> tuple[Step, ...]:
    """The steps for an NCCL timeout (``nccl_timeout``) or error (``nccl_error``), in order.

    >>> nccl_steps("nccl_timeout")[0].action
    'Find the first failure across all ranks'
    """
    if kind in ("nccl_timeout", "nccl_error"):
        return _STEPS[kind]
    raise ValueError(f"not an NCCL kind: {kind!r}; use 'nccl_timeout' or 'nccl_error'")


def other_steps(
    kind: str, *, capability: str | None = None, driver_cuda: str | None = None
) -> tuple[Step, ...]:
    """The steps for an error that is neither out-of-memory nor NCCL, in order.

    >>> other_steps("no_driver")[1].detail.startswith("In a container")
    True
    >>> "sm_86" in other_steps("no_kernel_image", capability="8.6")[0].detail
    True
    """
    if kind in ("device_assert", "illegal_memory_access"):
        return _STEPS[kind]
    if kind == "no_kernel_image":
        cc = (
            f"compute capability {capability} (sm_{capability.replace('.', '')})"
            if capability
            else "this GPU's compute capability"
        )
        return tuple(
            replace(step, detail=step.detail.replace("{cc}", cc))
            for step in _STEPS["no_kernel_image"]
        )
    if kind == "driver_too_old":
        return (_step(fix_driver_too_old(driver_cuda)),)
    if kind == "no_driver":
        return (_step(FIX_DRIVER), _step(FIX_CONTAINER))
    if kind == "cpu_only_wheel":
        check, *rest = _STEPS["cpu_only_wheel"]
        return (check, _step(FIX_WHEEL), *rest)
    return _STEPS["unknown"]


# --- the ladder priced on one example run -------------------------------------------


# The example run the ladder is priced on: GPT-2 small, batch 16, sequence 1,024, fp32.
EXAMPLE_PRESET = "fp32"


def example_shape() -> Any:
    """The example run's shape: GPT-2 small (124M parameters), batch 16, sequence 1,024."""
    from gpulesson.memory.budget import TransformerShape

    return TransformerShape(vocab=50257, seq=1024, hidden=768, heads=12, layers=12, batch=16)


@dataclass(frozen=True)
class LadderRow:
    """One rung applied alone to the example run, priced by the budget calculator."""

    rung: str
    change: str
    peak_bytes: int
    effective_batch: int | None
    vs_run_fraction: float | None  # (peak - the run's peak) / the run's peak; None for the run


def ladder_budget_rows() -> tuple[LadderRow, ...]:
    """Each rung applied alone to one example run, priced by ``gpulesson.memory.budget``.

    The example run: GPT-2 small (124M parameters), batch 16, sequence 1,024,
    everything in fp32 with AdamW, one GPU. The first row is the run itself
    (its rung is ``"—"``). Rung 1 is not a row: releasing dead references frees
    memory the budget never counts.
    """
    from gpulesson.memory import budget

    shape = example_shape()
    runs: list[tuple[str, str, dict[str, Any]]] = [
        ("—", "the example run: fp32, AdamW, batch 16, sequence 1,024", {}),
        (_RUNG["batch"].name, "batch 16 → 8", {"shape": replace(shape, batch=8)}),
        (_RUNG["sequence"].name, "sequence 1,024 → 512", {"shape": replace(shape, seq=512)}),
        (
            _RUNG["accumulation"].name,
            "batch 8, two micro-steps per update",
            {"shape": replace(shape, batch=8), "accumulation_steps": 2},
        ),
        (
            _RUNG["mixed_precision"].name,
            "bf16 compute, fp32 master weights",
            {"preset": "mixed-fp32-master"},
        ),
        (
            _RUNG["checkpointing"].name,
            "full checkpointing of every block",
            {"checkpointing": "full"},
        ),
        (
            _RUNG["chunked_loss"].name,
            f"cross-entropy in {budget.DEFAULT_LOSS_CHUNKS} slices of tokens",
            {"loss": "chunked"},
        ),
        (
            _RUNG["peft"].name,
            "LoRA rank 8 on attention, bf16 base",
            {"preset": "lora", "lora_rank": 8},
        ),
        (
            _RUNG["quantization"].name,
            "QLoRA: 4-bit base, LoRA rank 8",
            {"preset": "qlora", "lora_rank": 8},
        ),
        (
            _RUNG["hardware"].name,
            "4 GPUs, ZeRO stage 3 (FSDP full sharding)",
            {"gpus": 4, "zero": 3},
        ),
    ]
    rows = []
    base = None
    for name, change, overrides in runs:
        kwargs: dict[str, Any] = {"preset": EXAMPLE_PRESET, "shape": shape, **overrides}
        result = budget.estimate(**kwargs)
        base = result.total_bytes if base is None else base
        rows.append(
            LadderRow(
                rung=name,
                change=change,
                peak_bytes=result.total_bytes,
                effective_batch=result.effective_batch,
                vs_run_fraction=None if not rows else (result.total_bytes - base) / base,
            )
        )
    return tuple(rows)


@dataclass(frozen=True)
class CheckpointingLeftover:
    """What full checkpointing leaves of the example run's peak, and how much is the loss's.

    ``logits_tensors`` are the vocabulary-wide tensors alive while the loss's
    backward pass runs (the peak of this run); checkpointing does not touch them,
    because they belong to the loss, not to the blocks. ``both_peak_bytes`` is the
    peak with checkpointing and a chunked loss together.
    """

    run_peak_bytes: int
    checkpointed_peak_bytes: int
    checkpointing_saving_fraction: float
    logits_tensors: tuple[Any, ...]  # gpulesson.memory.budget.LogitsTensor
    logits_bytes: int
    logits_fraction_of_checkpointed: float
    loss_chunks: int
    both_peak_bytes: int
    both_saving_fraction: float


def checkpointing_leftover() -> CheckpointingLeftover:
    """Why full checkpointing saves so little on the example run: the logits stay.

    Priced by ``gpulesson.memory.budget``: the run, the run with full
    checkpointing, and with checkpointing plus a chunked cross-entropy.

    >>> x = checkpointing_leftover()
    >>> x.both_peak_bytes < x.checkpointed_peak_bytes < x.run_peak_bytes
    True
    >>> [t.name for t in x.logits_tensors][0]
    'log-softmax of the logits'
    """
    from gpulesson.memory import budget

    shape = example_shape()
    run = budget.estimate(shape=shape, preset=EXAMPLE_PRESET)
    checkpointed = budget.estimate(shape=shape, preset=EXAMPLE_PRESET, checkpointing="full")
    both = budget.estimate(shape=shape, preset=EXAMPLE_PRESET, checkpointing="full", loss="chunked")
    alive = tuple(t for t in budget.logits_terms(checkpointed) if t.at_loss_backward)
    logits = sum(t.total_bytes for t in alive)
    return CheckpointingLeftover(
        run_peak_bytes=run.total_bytes,
        checkpointed_peak_bytes=checkpointed.total_bytes,
        checkpointing_saving_fraction=1 - checkpointed.total_bytes / run.total_bytes,
        logits_tensors=alive,
        logits_bytes=logits,
        logits_fraction_of_checkpointed=logits / checkpointed.total_bytes,
        loss_chunks=both.loss_chunks or 1,
        both_peak_bytes=both.total_bytes,
        both_saving_fraction=1 - both.total_bytes / run.total_bytes,
    )
