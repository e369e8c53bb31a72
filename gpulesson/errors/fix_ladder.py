"""The fix ladder for an out-of-memory error, and the steps to try for every kind of error.

One job: what to do about a failure. :data:`FIX_LADDER` lists the rungs in the
order to try them, cheapest first; :func:`oom_steps` and :func:`other_steps`
turn a kind and verdict from :mod:`gpulesson.errors.diagnose` into :class:`Step`
lists; :func:`ladder_budget_rows` prices the rungs on one example run with
:mod:`gpulesson.memory.budget`.

Used by the lesson ``lessons/fix-ladder.md`` (and, through ``diagnose()``, by
``lessons/oom.md``, ``lessons/cuda-errors.md`` and ``gpulesson diagnose``).

>>> FIX_LADDER[0].key, FIX_LADDER[0].free
('release', True)
>>> oom_steps("cuda_oom", "fragmentation")[0].action
'Restart with expandable segments'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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


# The fix ladder, in the order to try it. The first four cost nothing but time.
FIX_LADDER: tuple[Rung, ...] = (
    Rung(
        "release",
        "Release references, or restart the runtime",
        "memory pinned by dead objects: old tensors, outputs kept by a notebook, a traceback",
        "nothing; a restart costs the minutes to reload",
        True,
    ),
    Rung(
        "batch",
        "Smaller batch",
        "activations, which grow in proportion to the batch",
        "nothing; more steps per epoch",
        True,
    ),
    Rung(
        "sequence",
        "Shorter sequence (or smaller images)",
        "activations, in proportion to length, and attention scores with its square",
        "nothing, if the task allows shorter inputs",
        True,
    ),
    Rung(
        "accumulation",
        "Gradient accumulation",
        "activations, by running a small micro-batch while the update still sees the full batch",
        "nothing; the same update from more, smaller steps",
        True,
    ),
    Rung(
        "mixed_precision",
        "Mixed precision (bf16 or fp16)",
        "activations roughly by half; weights too when they are stored in 16 bits",
        "a little numerical care (loss scaling for fp16)",
        False,
    ),
    Rung(
        "checkpointing",
        "Activation checkpointing",
        "most stored activations, recomputed in the backward pass",
        "about a third more compute per step",
        False,
    ),
    Rung(
        "peft",
        "PEFT / LoRA",
        "gradients and optimizer state, which then scale with the small adapter",
        "a different fine-tune: only the adapter learns",
        False,
    ),
    Rung(
        "quantization",
        "Quantization (8-bit or 4-bit weights)",
        "the frozen weights, to a half or a quarter of 16-bit",
        "some accuracy; slower or unsupported kernels on some cards",
        False,
    ),
    Rung(
        "hardware",
        "More or bigger GPUs",
        "everything, by sharding (FSDP, ZeRO) or by a larger card",
        "money and, for sharding, engineering",
        False,
    ),
)


def _ladder_steps(start: int = 0, note: dict[str, str] | None = None) -> list[Step]:
    note = note or {}
    return [
        Step(
            rung.name,
            note.get(rung.key, f"Cuts {rung.what_it_cuts}; costs {rung.cost}."),
            rung.free,
        )
        for rung in FIX_LADDER[start:]
    ]


_RESTART_NOTE = (
    "Free memory held by dead references: `del` large tensors, run `gc.collect()` and "
    "`torch.cuda.empty_cache()`; in a notebook, restart the runtime (an output cell or a "
    "saved traceback can pin gigabytes)."
)


def oom_steps(kind: str, verdict: str) -> tuple[Step, ...]:
    """The steps for an out-of-memory error of ``kind``, in order, given its verdict."""
    if kind == "cpu_oom":
        return (
            Step(
                "Check the size asked for",
                "A request far beyond your RAM is a shape bug (a dimension multiplied by "
                "mistake), not a memory shortage: print the shapes before the failing line.",
                True,
            ),
            Step(
                "Hold less in host RAM",
                "Stream the dataset instead of loading it whole; use fewer DataLoader workers "
                "(each is a copy of the process); load checkpoints with "
                "`torch.load(..., mmap=True)` and models with `low_cpu_mem_usage=True`.",
                True,
            ),
            Step(
                "Smaller batch",
                "Host RAM holds each batch before it moves to the device.",
                True,
            ),
            Step(
                "Move the work to the GPU, or add RAM",
                "Offloading to host RAM is the opposite move: it saves VRAM and costs RAM "
                "and speed. A bigger instance is the last rung.",
                False,
            ),
        )
    if kind == "mps_oom":
        first = Step(
            "Release references and the MPS cache",
            "`del` what you no longer need, then `gc.collect()` and `torch.mps.empty_cache()`; "
            "close other apps: unified memory is shared with the whole Mac.",
            True,
        )
        watermark = Step(
            "Leave PYTORCH_MPS_HIGH_WATERMARK_RATIO alone at first",
            "The message suggests 0.0 to lift the cap; PyTorch itself warns that this may "
            "cause system failure. Shrink the work first.",
            True,
        )
        if verdict == "too_large_for_device":
            return (
                Step(
                    "Find the one tensor",
                    "A single tensor larger than the MPS limit: find the op that makes it "
                    "(an attention matrix, logits over a large vocabulary, a shape bug) "
                    "and shrink or chunk that one tensor.",
                    True,
                ),
                first,
                *_ladder_steps(1, {}),
            )
        return (first, watermark, *_ladder_steps(1))
    if verdict == "fragmentation":
        return (
            Step(
                "Restart with expandable segments",
                "Set `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` in the environment "
                "before the process starts, then restart: segments grow in place instead of "
                "leaving holes between fixed blocks.",
                True,
            ),
            Step(
                "Restart the runtime",
                "A fresh process starts with an empty, unfragmented pool; `empty_cache()` "
                "alone cannot move live tensors to close the gaps.",
                True,
            ),
            Step(
                "Keep allocation sizes steady",
                "Varying shapes (unpadded sequence lengths, a last short batch) leave holes "
                "of odd sizes: pad or bucket to a few lengths, drop the ragged last batch.",
                True,
            ),
            *_ladder_steps(1, {}),
        )
    if verdict == "too_large_for_device":
        return (
            Step(
                "Find the single tensor",
                "One allocation is larger than the whole card, so freeing anything else "
                "cannot help: find the op that makes it (print shapes: an attention matrix, "
                "logits over a large vocabulary, an accidental outer product or broadcast).",
                True,
            ),
            Step(
                "Shrink or split that tensor",
                "If it scales with the batch or the sequence, shrink those (rungs 2 and 3); "
                "otherwise compute it in chunks, or use a fused kernel that never builds it "
                "(scaled_dot_product_attention for attention).",
                True,
            ),
            *_ladder_steps(1),
        )
    return (Step(FIX_LADDER[0].name, _RESTART_NOTE, True), *_ladder_steps(1))


def other_steps(kind: str, capability: str | None, driver_cuda: str | None) -> tuple[Step, ...]:
    """The steps for an error that is not out-of-memory, in order."""
    if kind == "device_assert":
        return (
            Step(
                "Do not shrink the batch",
                "This is not a memory error: the batch size cannot fix it.",
                True,
            ),
            Step(
                "Rerun with CUDA_LAUNCH_BLOCKING=1",
                "Errors are reported asynchronously, so the traceback may point at an "
                "innocent line. With the variable set, each kernel finishes before the next "
                "call and the traceback names the real one.",
                True,
            ),
            Step(
                "Check label and index ranges on the CPU",
                "Run the same batch on the CPU for a readable error, or assert "
                "`0 <= labels.min()` and `labels.max() < num_classes`, and every embedding "
                "index below `num_embeddings` (tokenizer vocabulary vs model vocabulary).",
                True,
            ),
            Step(
                "Restart the process",
                "After a device-side assert the CUDA context is unusable; every later CUDA "
                "call fails with the same error.",
                True,
            ),
        )
    if kind == "illegal_memory_access":
        return (
            Step(
                "Do not tune memory",
                "A kernel addressed memory it does not own; this is a bug, not a shortage.",
                True,
            ),
            Step(
                "Rerun with CUDA_LAUNCH_BLOCKING=1",
                "The failing kernel is reported late; the variable makes the traceback "
                "point at the call that launched it.",
                True,
            ),
            Step(
                "Check indices and custom kernels",
                "Out-of-range indices into gather/scatter/index ops, custom CUDA or Triton "
                "kernels and compiled extensions built for another torch version are the "
                "usual causes; `compute-sanitizer python script.py` names the access.",
                True,
            ),
            Step(
                "Restart, then update",
                "The context is unusable after the error. If a library kernel is at fault, "
                "update torch and the driver.",
                True,
            ),
        )
    if kind == "no_kernel_image":
        cc = (
            f"compute capability {capability} (sm_{capability.replace('.', '')})"
            if capability
            else "this GPU's compute capability"
        )
        return (
            Step(
                "Compare the wheel's architectures with the card",
                f"The wheel was not built for {cc}. Compare `torch.cuda.get_arch_list()` "
                "with `torch.cuda.get_device_capability()`.",
                True,
            ),
            Step(
                "Install a wheel built for this card",
                "Newer cards need a wheel built with a newer CUDA; older cards may need an "
                "older torch that still ships their architecture. Pick it with the "
                "install selector on pytorch.org.",
                True,
            ),
        )
    if kind == "driver_too_old":
        found = f" (the driver supports CUDA {driver_cuda})" if driver_cuda else ""
        return (
            Step(
                "Update the NVIDIA driver",
                f"The wheel's CUDA runtime needs a newer driver{found}; `nvidia-smi` prints "
                "the highest CUDA version the driver supports.",
                True,
            ),
            Step(
                "Or install a wheel for an older CUDA",
                "Choose a torch build whose CUDA version is at most the one `nvidia-smi` reports.",
                True,
            ),
        )
    if kind == "no_driver":
        return (
            Step(
                "Make nvidia-smi work",
                "Install or repair the NVIDIA driver; nothing in Python helps until "
                "`nvidia-smi` lists the card.",
                True,
            ),
            Step(
                "In a container, attach the GPU",
                "Start it with GPUs attached (`docker run --gpus all`) and the NVIDIA "
                "container toolkit installed.",
                True,
            ),
        )
    if kind == "cpu_only_wheel":
        return (
            Step(
                "Check the wheel",
                '`python -c "import torch; print(torch.__version__, torch.version.cuda)"`: '
                "`None` means a CPU-only build.",
                True,
            ),
            Step(
                "Reinstall a CUDA build",
                "Install torch from the index URL for a CUDA version your driver supports "
                "(pytorch.org's install selector), or run on CPU by picking the device at "
                "run time instead of calling `.cuda()`.",
                True,
            ),
        )
    return (
        Step(
            "Paste the whole traceback",
            "The last lines of the traceback carry the error; include them all.",
            True,
        ),
        Step(
            "Probe the machine",
            "`gpulesson probe` names the layer (driver, wheel, device) that is broken, if any.",
            True,
        ),
    )


# --- tables -------------------------------------------------------------------------


def ladder_markdown() -> str:
    """The fix ladder as a table, in order, with what each rung cuts and costs."""
    lines = [
        "| rung | what to try | what it cuts | what it costs | free? |",
        "|---|---|---|---|---|",
    ]
    for i, rung in enumerate(FIX_LADDER, 1):
        free = "yes" if rung.free else "no"
        lines.append(f"| {i} | {rung.name} | {rung.what_it_cuts} | {rung.cost} | {free} |")
    return "\n".join(lines)


def ladder_budget_rows() -> list[tuple[str, str, int, int | None]]:
    """Each rung applied alone to one example run, priced by ``gpulesson.memory.budget``.

    The example run: GPT-2 small (124M parameters), batch 16, sequence 1,024,
    everything in fp32 with AdamW, one GPU. Returns (rung, change, peak bytes,
    effective batch) rows; the first row is the run itself. Rung 1 is not a
    row: releasing dead references frees memory the budget never counts.
    """
    from dataclasses import replace

    from gpulesson.memory import budget

    shape = budget.TransformerShape(
        vocab=50257, seq=1024, hidden=768, heads=12, layers=12, batch=16
    )
    runs: list[tuple[str, str, dict[str, Any]]] = [
        ("—", "the example run: fp32, AdamW, batch 16, sequence 1,024", {}),
        (FIX_LADDER[1].name, "batch 16 → 8", {"shape": replace(shape, batch=8)}),
        (FIX_LADDER[2].name, "sequence 1,024 → 512", {"shape": replace(shape, seq=512)}),
        (
            FIX_LADDER[3].name,
            "batch 8, two micro-steps per update",
            {"shape": replace(shape, batch=8), "accumulation_steps": 2},
        ),
        (FIX_LADDER[4].name, "bf16 compute, fp32 master weights", {"preset": "mixed-fp32-master"}),
        (FIX_LADDER[5].name, "full checkpointing of every block", {"checkpointing": "full"}),
        (
            FIX_LADDER[6].name,
            "LoRA rank 8 on attention, bf16 base",
            {"preset": "lora", "lora_rank": 8},
        ),
        (FIX_LADDER[7].name, "QLoRA: 4-bit base, LoRA rank 8", {"preset": "qlora", "lora_rank": 8}),
        (FIX_LADDER[8].name, "4 GPUs, ZeRO stage 3 (FSDP full sharding)", {"gpus": 4, "zero": 3}),
    ]
    rows = []
    for name, change, overrides in runs:
        kwargs: dict[str, Any] = {"preset": "fp32", "shape": shape, **overrides}
        result = budget.estimate(**kwargs)
        rows.append((name, change, result.total_bytes, result.effective_batch))
    return rows


def ladder_budget_markdown() -> str:
    """The rungs' effect on one example run's peak memory, as a table in decimal GB."""
    from gpulesson.units import format_gb

    rows = ladder_budget_rows()
    base = rows[0][2]
    lines = [
        "| rung | change to the example run | peak per GPU (GB) | vs the run | effective batch |",
        "|---|---|---|---|---|",
    ]
    for name, change, peak, effective in rows:
        delta = "—" if peak == base and name == "—" else f"{(peak - base) / base:+.0%}"
        lines.append(
            f"| {name} | {change} | {format_gb(peak).removesuffix(' GB')} | {delta} | "
            f"{effective if effective is not None else '—'} |"
        )
    return "\n".join(lines)


def steps_markdown(steps: tuple[Step, ...]) -> str:
    """A numbered list of steps, the free ones marked.

    >>> steps_markdown((Step("Smaller batch", "why", free=True),))
    '1. **Smaller batch** *(free)*'
    """
    return "\n".join(
        f"{i}. **{step.action}**{' *(free)*' if step.free else ''}"
        for i, step in enumerate(steps, 1)
    )
