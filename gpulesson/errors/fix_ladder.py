"""The fix ladder for an out-of-memory error, and the steps to try for every kind of error.

One job: what to do about a failure. :data:`FIX_LADDER` lists the rungs in the
order to try them, cheapest first; :func:`oom_steps`, :func:`nccl_steps` and
:func:`other_steps` turn a kind and verdict from
:mod:`gpulesson.errors.diagnose` into :class:`Step` lists;
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

from dataclasses import dataclass, replace
from typing import Any

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


# The fix ladder, in the order to try it.
FIX_LADDER: tuple[Rung, ...] = (
    Rung(
        key="release",
        name="Release references, or restart the runtime",
        what_it_cuts="memory pinned by dead objects: old tensors, outputs kept by a notebook, "
        "a traceback",
        cost="nothing; a restart costs the minutes to reload",
        free=True,
    ),
    Rung(
        key="batch",
        name="Smaller batch",
        what_it_cuts="activations, which grow in proportion to the batch",
        cost="nothing but more steps, when accumulation (rung 4) keeps the effective batch; "
        "alone it makes each update noisier",
        free=True,
    ),
    Rung(
        key="sequence",
        name="Shorter sequence (or smaller images)",
        what_it_cuts="activations, in proportion to length, and attention scores with its square",
        cost="the context the model learns from: free only when the inputs are already that "
        "short; cutting longer inputs changes what the model can learn",
        free=False,
    ),
    Rung(
        key="accumulation",
        name="Gradient accumulation",
        what_it_cuts="activations, by running a small micro-batch while the update still sees "
        "the full batch",
        cost="nothing; the same update from more, smaller steps",
        free=True,
    ),
    Rung(
        key="mixed_precision",
        name="Mixed precision (bf16 or fp16)",
        what_it_cuts="activations roughly by half; weights too when they are stored in 16 bits",
        cost="a little numerical care (loss scaling for fp16)",
        free=False,
    ),
    Rung(
        key="checkpointing",
        name="Activation checkpointing",
        what_it_cuts="most stored activations, recomputed in the backward pass",
        cost="about a third more compute per step",
        free=False,
    ),
    Rung(
        key="chunked_loss",
        name="Chunked or fused cross-entropy",
        what_it_cuts="the loss's vocabulary-wide tensors (the logits, their log-softmax and "
        "gradients), computed a slice of tokens at a time or never materialised",
        cost="a little recomputation, and a loss written for it (a chunked loss, or a fused "
        "linear-cross-entropy kernel)",
        free=False,
    ),
    Rung(
        key="peft",
        name="PEFT / LoRA",
        what_it_cuts="gradients and optimizer state, which then scale with the small adapter",
        cost="a different fine-tune: only the adapter learns",
        free=False,
    ),
    Rung(
        key="quantization",
        name="Quantization (8-bit or 4-bit weights)",
        what_it_cuts="the frozen weights, to a half or a quarter of 16-bit",
        cost="some accuracy; slower or unsupported kernels on some cards",
        free=False,
    ),
    Rung(
        key="hardware",
        name="More or bigger GPUs",
        what_it_cuts="everything, by sharding (FSDP, ZeRO) or by a larger card",
        cost="money and, for sharding, engineering",
        free=False,
    ),
)
_RUNG = {rung.key: rung for rung in FIX_LADDER}


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


_RESTART_NOTE = (
    "Free memory held by dead references: `del` large tensors, run `gc.collect()` and "
    "`torch.cuda.empty_cache()`; in a notebook, restart the runtime (an output cell or a "
    "saved traceback can pin gigabytes)."
)

_CPU_OOM_STEPS: tuple[Step, ...] = (
    Step(
        action="Check the size asked for",
        detail="A request far beyond your RAM is a shape bug (a dimension multiplied by "
        "mistake), not a memory shortage: print the shapes before the failing line.",
        free=True,
    ),
    Step(
        action="Hold less in host RAM",
        detail="Stream the dataset instead of loading it whole; use fewer DataLoader workers "
        "(each is a copy of the process); load checkpoints with "
        "`torch.load(..., mmap=True)` and models with `low_cpu_mem_usage=True`.",
        free=True,
    ),
    Step(
        action="Smaller batch",
        detail="Host RAM holds each batch before it moves to the device.",
        free=True,
    ),
    Step(
        action="Move the work to the GPU, or add RAM",
        detail="Offloading to host RAM is the opposite move: it saves VRAM and costs RAM "
        "and speed. A bigger instance is the last rung.",
        free=False,
    ),
)

_FRAGMENTATION_STEPS: tuple[Step, ...] = (
    Step(
        action="Restart with expandable segments",
        detail="Set `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` in the environment "
        "before the process starts, then restart: segments grow in place instead of "
        "leaving holes between fixed blocks.",
        free=True,
    ),
    Step(
        action="Restart the runtime",
        detail="A fresh process starts with an empty, unfragmented pool; `empty_cache()` "
        "alone cannot move live tensors to close the gaps.",
        free=True,
    ),
    Step(
        action="Keep allocation sizes steady",
        detail="Varying shapes (unpadded sequence lengths, a last short batch) leave holes "
        "of odd sizes: pad or bucket to a few lengths, drop the ragged last batch.",
        free=True,
    ),
)

_OUTSIDE_ALLOCATOR_STEPS: tuple[Step, ...] = (
    Step(
        action="Look for a cap on this process",
        detail="`torch.cuda.set_per_process_memory_fraction`, in your code or in a library "
        "you call, limits what PyTorch may reserve whatever the card has free; torch 2.x "
        "prints the cap as 'X allowed'. Remove or raise it.",
        free=True,
    ),
    Step(
        action="Check who else uses the card",
        detail="`nvidia-smi` lists the processes holding memory. The message reads 'free' "
        "after the allocation failed, so another job that grabbed memory and let it go "
        "leaves a free figure that looks large enough. Expandable segments do not help "
        "here: the allocator's own pool is not the problem.",
        free=True,
    ),
)

_TOO_LARGE_STEPS: tuple[Step, ...] = (
    Step(
        action="Find the single tensor",
        detail="One allocation is larger than the whole card, so freeing anything else "
        "cannot help: find the op that makes it (print shapes: an attention matrix, "
        "logits over a large vocabulary, an accidental outer product or broadcast).",
        free=True,
    ),
    Step(
        action="Shrink or split that tensor",
        detail="If it scales with the batch or the sequence, shrink those (rungs 2 and 3); "
        "otherwise compute it in chunks, or use a fused kernel that never builds it "
        "(scaled_dot_product_attention for attention).",
        free=True,
    ),
)


def oom_steps(kind: str, verdict: str) -> tuple[Step, ...]:
    """The steps for an out-of-memory error of ``kind``, in order, given its verdict."""
    if kind == "cpu_oom":
        return _CPU_OOM_STEPS
    if kind == "mps_oom":
        first = Step(
            action="Release references and the MPS cache",
            detail="`del` what you no longer need, then `gc.collect()` and "
            "`torch.mps.empty_cache()`; close other apps: unified memory is shared with the "
            "whole Mac.",
            free=True,
        )
        watermark = Step(
            action="Leave PYTORCH_MPS_HIGH_WATERMARK_RATIO alone at first",
            detail="The message suggests 0.0 to lift the cap; PyTorch itself warns that this "
            "may cause system failure. Shrink the work first.",
            free=True,
        )
        if verdict == "too_large_for_device":
            one = Step(
                action="Find the one tensor",
                detail="A single tensor larger than the MPS limit: find the op that makes it "
                "(an attention matrix, logits over a large vocabulary, a shape bug) "
                "and shrink or chunk that one tensor.",
                free=True,
            )
            return (one, first, *_ladder_steps(1))
        return (first, watermark, *_ladder_steps(1))
    if verdict == "fragmentation":
        return (*_FRAGMENTATION_STEPS, *_ladder_steps(1))
    if verdict == "outside_allocator":
        return (*_OUTSIDE_ALLOCATOR_STEPS, *_ladder_steps(1))
    if verdict == "too_large_for_device":
        return (*_TOO_LARGE_STEPS, *_ladder_steps(1))
    release = Step(action=FIX_LADDER[0].name, detail=_RESTART_NOTE, free=True)
    return (release, *_ladder_steps(1))


# --- NCCL ---------------------------------------------------------------------------

_FIRST_FAILURE = Step(
    action="Find the first failure across all ranks",
    detail="A collective needs every rank. When one rank fails (an out-of-memory error, an "
    "exception, a killed process), the others wait and then time out or report a broken "
    "connection: read every rank's log from the top and fix the earliest error.",
    free=True,
)
_NCCL_DEBUG = Step(
    action="Rerun with NCCL_DEBUG=INFO",
    detail="NCCL then logs how each communicator was set up (interfaces, transports) and a "
    "WARN line naming the call that failed.",
    free=True,
)

_NCCL_TIMEOUT_STEPS: tuple[Step, ...] = (
    _FIRST_FAILURE,
    Step(
        action="Check that every rank runs the same collectives in the same order",
        detail="A collective inside a branch only some ranks take (logging or evaluation on "
        "rank 0), uneven numbers of batches per rank, or a parameter unused on one rank "
        "leaves the others waiting. `TORCH_DISTRIBUTED_DEBUG=DETAIL` checks that the "
        "collectives match across ranks.",
        free=True,
    ),
    _NCCL_DEBUG,
    Step(
        action="Raise the timeout only for slow, legitimate work",
        detail="If one rank legitimately works for long between collectives (saving a "
        "checkpoint, evaluating), pass `timeout=datetime.timedelta(minutes=30)` to "
        "`torch.distributed.init_process_group`; the NCCL default is 10 minutes, the "
        "600000 ms such messages show.",
        free=True,
    ),
    Step(
        action="Keep the watchdog's error handling on",
        detail="`TORCH_NCCL_ASYNC_ERROR_HANDLING` (default 3) takes the process down after a "
        "timeout, so a hung job ends instead of holding the GPUs; "
        "`TORCH_NCCL_BLOCKING_WAIT=1` makes `wait()` block and raise the timeout in your "
        "Python code instead.",
        free=True,
    ),
)

_NCCL_ERROR_STEPS: tuple[Step, ...] = (
    _FIRST_FAILURE,
    _NCCL_DEBUG,
    Step(
        action="Check what NCCL needs from the machine",
        detail="One GPU per rank (`torch.cuda.set_device(local_rank)` before "
        "`init_process_group`; 'Duplicate GPU detected' means two ranks share a card); the "
        "network interface the nodes share (`NCCL_SOCKET_IFNAME`); in a container, enough "
        "shared memory (`--shm-size=1g --ulimit memlock=-1`, or `--ipc=host`).",
        free=True,
    ),
    Step(
        action="Isolate the transport",
        detail="For one test run, `NCCL_P2P_DISABLE=1` (GPU peer-to-peer) or "
        "`NCCL_IB_DISABLE=1` (InfiniBand): if the error goes away, that link is "
        "misconfigured. It is a diagnosis, not a fix: the fallback is slower.",
        free=True,
    ),
    Step(
        action="Run the same software on every node",
        detail="The same torch build (and so the same NCCL version, which the message "
        "names) and a driver that supports it on every node.",
        free=True,
    ),
)


def nccl_steps(kind: str) -> tuple[Step, ...]:
    """The steps for an NCCL timeout (``nccl_timeout``) or error (``nccl_error``), in order.

    >>> nccl_steps("nccl_timeout")[0].action
    'Find the first failure across all ranks'
    """
    if kind == "nccl_timeout":
        return _NCCL_TIMEOUT_STEPS
    if kind == "nccl_error":
        return _NCCL_ERROR_STEPS
    raise ValueError(f"not an NCCL kind: {kind!r}; use 'nccl_timeout' or 'nccl_error'")


# --- the other kinds -----------------------------------------------------------------

_DEVICE_ASSERT_STEPS: tuple[Step, ...] = (
    Step(
        action="Do not shrink the batch",
        detail="This is not a memory error: the batch size cannot fix it.",
        free=True,
    ),
    Step(
        action="Rerun with CUDA_LAUNCH_BLOCKING=1",
        detail="Errors are reported asynchronously, so the traceback may point at an "
        "innocent line. With the variable set, each kernel finishes before the next "
        "call and the traceback names the real one.",
        free=True,
    ),
    Step(
        action="Check label and index ranges on the CPU",
        detail="Run the same batch on the CPU for a readable error, or assert "
        "`0 <= labels.min()` and `labels.max() < num_classes`, and every embedding "
        "index below `num_embeddings` (tokenizer vocabulary vs model vocabulary).",
        free=True,
    ),
    Step(
        action="Restart the process",
        detail="After a device-side assert the CUDA context is unusable; every later CUDA "
        "call fails with the same error.",
        free=True,
    ),
)

_ILLEGAL_ACCESS_STEPS: tuple[Step, ...] = (
    Step(
        action="Do not tune memory",
        detail="A kernel addressed memory it does not own; this is a bug, not a shortage.",
        free=True,
    ),
    Step(
        action="Rerun with CUDA_LAUNCH_BLOCKING=1",
        detail="The failing kernel is reported late; the variable makes the traceback "
        "point at the call that launched it.",
        free=True,
    ),
    Step(
        action="Check indices and custom kernels",
        detail="Out-of-range indices into gather/scatter/index ops, custom CUDA or Triton "
        "kernels and compiled extensions built for another torch version are the "
        "usual causes; `compute-sanitizer python script.py` names the access.",
        free=True,
    ),
    Step(
        action="Restart, then update",
        detail="The context is unusable after the error. If a library kernel is at fault, "
        "update torch and the driver.",
        free=True,
    ),
)

_UNKNOWN_STEPS: tuple[Step, ...] = (
    Step(
        action="Paste the whole traceback",
        detail="The last lines of the traceback carry the error; include them all.",
        free=True,
    ),
    Step(
        action="Probe the machine",
        detail="`gpulesson probe` names the layer (driver, wheel, device) that is broken, if any.",
        free=True,
    ),
)


def other_steps(
    kind: str, *, capability: str | None = None, driver_cuda: str | None = None
) -> tuple[Step, ...]:
    """The steps for an error that is neither out-of-memory nor NCCL, in order.

    >>> other_steps("no_driver")[1].detail.startswith("In a container")
    True
    """
    if kind == "device_assert":
        return _DEVICE_ASSERT_STEPS
    if kind == "illegal_memory_access":
        return _ILLEGAL_ACCESS_STEPS
    if kind == "no_kernel_image":
        cc = (
            f"compute capability {capability} (sm_{capability.replace('.', '')})"
            if capability
            else "this GPU's compute capability"
        )
        return (
            Step(
                action="Compare the wheel's architectures with the card",
                detail=f"The wheel was not built for {cc}. Compare "
                "`torch.cuda.get_arch_list()` with `torch.cuda.get_device_capability()`.",
                free=True,
            ),
            Step(
                action="Install a wheel built for this card",
                detail="Newer cards need a wheel built with a newer CUDA; older cards may need "
                "an older torch that still ships their architecture. Pick it with the "
                "install selector on pytorch.org.",
                free=True,
            ),
        )
    if kind == "driver_too_old":
        return (_step(fix_driver_too_old(driver_cuda)),)
    if kind == "no_driver":
        return (_step(FIX_DRIVER), _step(FIX_CONTAINER))
    if kind == "cpu_only_wheel":
        return (
            Step(
                action="Check the wheel",
                detail='`python -c "import torch; print(torch.__version__, torch.version.cuda)"`:'
                " `None` means a CPU-only build.",
                free=True,
            ),
            _step(FIX_WHEEL),
            Step(
                action="Or run on the CPU on purpose",
                detail="Pick the device at run time instead of calling `.cuda()`.",
                free=True,
            ),
        )
    return _UNKNOWN_STEPS


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
