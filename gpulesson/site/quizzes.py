"""Lesson quizzes as data: every option carries the reason it is right or wrong.

The site hooks (``gpulesson/site/labs_hook.py``) append :func:`to_markdown` (a
static, no-JavaScript quiz with answers in collapsible blocks) and a container
the quiz script fills from :func:`to_json` to each lesson whose file stem is a
key of :data:`QUIZZES`. Questions come from the source lessons' quiz plus new
ones that test the course's decision rules.

>>> len(QUIZZES["timing"]) >= 3
True
>>> all(sum(o.correct for o in q.options) == 1 for qs in QUIZZES.values() for q in qs)
True
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Option:
    """One answer choice and why it is right or wrong."""

    text: str
    correct: bool
    why: str


@dataclass(frozen=True)
class Question:
    """A multiple-choice question with exactly one correct option."""

    prompt: str
    options: tuple[Option, ...]

    def __post_init__(self) -> None:
        n_correct = sum(o.correct for o in self.options)
        if n_correct != 1:
            raise ValueError(
                f"question {self.prompt[:40]!r} has {n_correct} correct options: mark exactly one"
            )


def _q(prompt: str, *options: tuple[str, bool, str]) -> Question:
    return Question(prompt, tuple(Option(*o) for o in options))


QUIZZES: dict[str, tuple[Question, ...]] = {
    "why-gpus": (
        _q(
            "Why is a GPU faster than a CPU for training neural networks?",
            (
                "Each GPU core runs at a higher clock than a CPU core.",
                False,
                "GPU lanes run at a lower clock than CPU cores; speed per lane is not the win.",
            ),
            (
                "It runs thousands of independent multiply-adds at once.",
                True,
                "A matmul is billions of independent sums; width, not per-lane speed, wins.",
            ),
            (
                "It has more memory than system RAM.",
                False,
                "Most cards have less memory than the host; memory is the GPU's usual limit.",
            ),
            (
                "Python runs faster on a GPU.",
                False,
                "Python runs on the CPU either way; the GPU only runs the kernels it is sent.",
            ),
        ),
        _q(
            "A 64×64 matmul runs slower on the GPU than on the CPU. What is the likely reason?",
            (
                "The GPU is broken or throttled.",
                False,
                "Nothing is wrong: small work cannot hide the fixed cost of a launch.",
            ),
            (
                "Fixed costs (launch, transfer, Python) outweigh the tiny amount of work.",
                True,
                "2·64³ is about half a million FLOPs, microseconds of work on either chip; the "
                "launch overhead dominates.",
            ),
            (
                "The GPU cannot multiply small matrices.",
                False,
                "It can; it just cannot fill its lanes with so little work.",
            ),
            ("fp32 is disabled on GPUs.", False, "fp32 is supported on every CUDA GPU."),
        ),
        _q(
            "Doubling n in an n×n matmul multiplies the FLOPs by how much?",
            ("2", False, "That would be linear cost; a matmul is 2n³."),
            ("4", False, "That is how the operand bytes grow (n²), not the FLOPs."),
            ("8", True, "2(2n)³ = 8 · 2n³: work grows with the cube, memory with the square."),
            ("16", False, "Too much: the exponent is 3."),
        ),
    ),
    "software-stack": (
        _q(
            "Which command verifies that your NVIDIA GPU is detected and shows its status?",
            (
                "nvidia-smi",
                True,
                "It asks the driver directly, before any Python framework is involved.",
            ),
            ("pip show torch", False, "That describes the Python package, not the hardware."),
            ("python -m torch.gpu", False, "There is no such module."),
            ("lspci --cuda", False, "lspci has no such flag, and it does not talk to the driver."),
        ),
        _q(
            "On an Apple Silicon Mac with a recent PyTorch, what does "
            "`torch.device('cuda' if torch.cuda.is_available() else 'cpu')` pick?",
            ("cuda", False, "There is no CUDA on a Mac; is_available() is False."),
            ("mps", False, "MPS is opt-in: the cuda-or-cpu idiom never asks for it."),
            ("cpu", True, "The two-way idiom falls back to CPU; a three-way pick finds MPS."),
            (
                "It raises an error.",
                False,
                "is_available() returns False quietly; nothing raises until you use 'cuda'.",
            ),
        ),
        _q(
            "`nvidia-smi` works but `torch.version.cuda` is None. Which layer do you fix?",
            ("The driver", False, "nvidia-smi working means the driver is fine."),
            (
                "The PyTorch wheel: it is a CPU-only build",
                True,
                "None means the wheel has no CUDA at all; reinstall from the right index.",
            ),
            (
                "CUDA_VISIBLE_DEVICES",
                False,
                "A hidden device leaves torch.version.cuda set; only the device count drops.",
            ),
            (
                "Install the CUDA toolkit",
                False,
                "PyTorch wheels bundle their own CUDA runtime; the toolkit does not change torch.",
            ),
        ),
    ),
    "where-to-run": (
        _q(
            "You train a few times a year and have no GPU. Which route fits first?",
            (
                "Buy a workstation card",
                False,
                "Money and set-up up front for a few runs a year rarely pays back.",
            ),
            (
                "A free hosted notebook",
                True,
                "No set-up and no cost: right for occasional experiments that fit its limits.",
            ),
            (
                "A month-long on-demand rental",
                False,
                "An idle rented instance bills by the hour whether you use it or not.",
            ),
            (
                "Train on the CPU only",
                False,
                "Possible for small models, but a free GPU is one runtime switch away.",
            ),
        ),
        _q(
            "Why is checkpointing not optional on a spot instance?",
            (
                "Spot instances have less memory.",
                False,
                "Memory depends on the card, not on the pricing model.",
            ),
            (
                "The provider can take the machine back mid-run.",
                True,
                "Without a recent checkpoint, a preemption throws away every hour since the start.",
            ),
            (
                "Spot instances forbid long jobs.",
                False,
                "They allow them; they just do not promise to let them finish.",
            ),
            (
                "Checkpoints make spot cheaper per hour.",
                False,
                "The rate is the same; checkpoints limit how much paid work a preemption wastes.",
            ),
        ),
        _q(
            "A hosted notebook restarts. What survives?",
            ("Variables in memory", False, "The Python process is gone with the runtime."),
            (
                "Packages you pip-installed",
                False,
                "They lived on the runtime's disk, which is reset; re-run the install cell.",
            ),
            (
                "Files you saved to mounted persistent storage",
                True,
                "Only storage outside the runtime (a mounted drive, a bucket) outlives it.",
            ),
            ("The GPU you had", False, "You may get a different card, or none; re-run the check."),
        ),
    ),
    "timing": (
        _q(
            "When timing a GPU matmul, why must you call torch.cuda.synchronize() before "
            "reading the clock?",
            ("It makes the kernel run faster.", False, "It adds a wait; it speeds nothing up."),
            (
                "GPU calls return before the work is done, so the clock would stop early.",
                True,
                "Without the barrier you time the launch (milliseconds), not the multiply.",
            ),
            (
                "It frees GPU memory before the next run.",
                False,
                "Synchronize waits for work; freeing memory is the allocator's job.",
            ),
            (
                "It copies the result back to the CPU.",
                False,
                "No copy happens; .cpu() or .item() would copy (and also wait).",
            ),
        ),
        _q(
            "You time a GPU matmul at 0.006 s and report a 900× speedup over the CPU. "
            "What most likely went wrong?",
            (
                "The GPU is unusually fast.",
                False,
                "Three-digit ratios for one matmul are the signature of a missing barrier.",
            ),
            (
                "The stopwatch stopped before the kernel finished.",
                True,
                "0.006 s is about the launch overhead; the real kernel takes longer.",
            ),
            (
                "The CPU was throttled.",
                False,
                "A slow CPU changes the ratio a little, not by a factor of forty.",
            ),
            (
                "fp16 was used by accident.",
                False,
                "Precision changes the speed by a small factor, not by hundreds.",
            ),
        ),
        _q(
            "Why discard the first few iterations of a benchmark?",
            ("They use a different random seed.", False, "The seed does not change speed."),
            (
                "They pay one-off set-up costs (context, libraries, kernel selection).",
                True,
                "Warm-up keeps set-up out of the figure you report.",
            ),
            (
                "The GPU is cold and clocks low.",
                False,
                "Clock ramp-up exists but is small next to library and context set-up.",
            ),
            (
                "To make the median smaller.",
                False,
                "Dropping samples to get a nicer number is cheating; warm-up has a reason.",
            ),
        ),
    ),
    "roofline": (
        _q(
            "An elementwise add of two large fp32 tensors reaches a tiny share of peak "
            "FLOP/s. Which ceiling limits it?",
            ("Compute", False, "It does one FLOP per 12 bytes moved; the ALUs are idle."),
            (
                "Memory bandwidth",
                True,
                "Its arithmetic intensity is far below the ridge point: bytes bound it.",
            ),
            (
                "PCIe",
                False,
                "Only if the data crosses from the host each time; on-card it does not.",
            ),
            ("Python overhead", False, "For large tensors one launch is negligible."),
        ),
        _q(
            "What does arithmetic intensity measure?",
            ("FLOPs per second", False, "That is throughput, the roofline's y axis."),
            (
                "FLOPs per byte moved to or from memory",
                True,
                "It places an operation on the roofline's x axis.",
            ),
            ("Bytes per parameter", False, "That is the memory budget's unit."),
            ("Kernels per step", False, "Launch count matters, but it is not intensity."),
        ),
        _q(
            "Why should training data move to the GPU once and stay there?",
            (
                "PCIe is much slower than the card's own memory.",
                True,
                "Every round trip over the bus costs far more than reading on the card.",
            ),
            (
                "The GPU cannot read host memory at all.",
                False,
                "It can (pinned memory, unified memory), just slowly.",
            ),
            ("Copies use up VRAM permanently.", False, "Copies free when the tensor is released."),
            (
                "Moving data invalidates the gradients.",
                False,
                "Where a tensor lives does not change autograd's graph semantics.",
            ),
        ),
    ),
    "memory": (
        _q(
            "What does VRAM refer to?",
            ("Virtual RAM on disk", False, "That is swap; GPUs do not page to disk."),
            (
                "The GPU's own memory, separate from system RAM",
                True,
                "Everything a step touches must fit there at once.",
            ),
            ("The CPU's cache", False, "Caches are on the CPU die and far smaller."),
            ("A kind of SSD", False, "VRAM is DRAM (GDDR or HBM) beside the GPU."),
        ),
        _q(
            "Batch size doubles and the run now fails with OOM. Which consumer grew?",
            ("Weights", False, "Weights do not depend on the batch."),
            ("Gradients", False, "One gradient per parameter, whatever the batch."),
            ("Optimizer state", False, "Per parameter, independent of batch."),
            (
                "Activations",
                True,
                "They scale with batch × sequence length: the only one that grew.",
            ),
        ),
        _q(
            "A 7B model in fp16 uses 14 GB. Can you train it with Adam on a 16 GB card?",
            (
                "Yes, 14 GB fits in 16 GB.",
                False,
                "14 GB is the weights only; gradients and Adam's moments come on top.",
            ),
            (
                "No: gradients and Adam's two moments add several times the weights.",
                True,
                "With fp32 gradients and moments the bill is about 98 GB before activations.",
            ),
            (
                "Yes, with a batch size of 1.",
                False,
                "Batch only shrinks activations; the per-parameter state does not move.",
            ),
            ("Only with fp32 weights.", False, "fp32 weights double the weight bill."),
        ),
    ),
    "budget": (
        _q(
            "Sources quote 84, 98 and 112 GB for training a 7B model. Why do they disagree?",
            ("Two of them are wrong.", False, "All three are right for their own assumptions."),
            (
                "Each assumes a different precision recipe for gradients and master weights.",
                True,
                "12, 14 and 16 bytes per parameter, times 7B: name the recipe with the number.",
            ),
            (
                "They use different batch sizes.",
                False,
                "The per-parameter bills differ before any activation is counted.",
            ),
            ("GB versus GiB.", False, "That is a 7 % difference, not 84 versus 112."),
        ),
        _q(
            "What does gradient checkpointing reduce?",
            ("Optimizer state", False, "Untouched: that is what sharding or LoRA reduce."),
            (
                "Activation memory, at the cost of recomputation",
                True,
                "Fewer saved activations, one extra partial forward pass.",
            ),
            (
                "The size of checkpoint files on disk",
                False,
                "Despite the name, it has nothing to do with saving to disk.",
            ),
            ("Weight memory", False, "Weights stay resident."),
        ),
        _q(
            "Why does QLoRA fit a 7B fine-tune on a 24 GB card?",
            ("It trains a smaller model.", False, "The base model is the full 7B."),
            (
                "A 4-bit frozen base plus small trainable adapters",
                True,
                "About half a byte per base weight and optimizer state only for the adapters.",
            ),
            ("It skips the backward pass.", False, "Backward still runs through the base."),
            ("It stores activations on disk.", False, "Activations stay on the card."),
        ),
    ),
    "capacity": (
        _q(
            "Using the fp16 rule of thumb, about how many parameters fit in 24 GB for inference?",
            ("6 billion", False, "That would be 4 bytes per parameter (fp32)."),
            ("12 billion", True, "24 GB ÷ 2 bytes per parameter, before activations and context."),
            ("24 billion", False, "That would be 1 byte per parameter (int8)."),
            ("48 billion", False, "That would be half a byte per parameter (4-bit)."),
        ),
        _q(
            "Why is MIG partitioning a memory feature, not only a compute one?",
            (
                "Each instance gets a fixed slice of the card's memory.",
                True,
                "A 1/7 slice of an 80 GB card sees about 10 GB and can OOM there.",
            ),
            ("MIG compresses memory.", False, "Nothing is compressed."),
            (
                "MIG instances share one memory pool.",
                False,
                "They are isolated; that is the point.",
            ),
            ("MIG only works on consumer cards.", False, "It is a data-centre feature."),
        ),
        _q(
            "Your model's weights fit but training OOMs. Which rung of the ladder comes next?",
            ("Buy a bigger card.", False, "The last rung, not the next one."),
            (
                "Reduce the batch (and accumulate gradients).",
                True,
                "Cheapest first: activations are the consumer the batch controls.",
            ),
            ("Switch to fp32.", False, "That doubles the weights and makes it worse."),
            (
                "Call torch.cuda.empty_cache() each step.",
                False,
                "It frees only cached blocks, not live tensors; it does not raise capacity.",
            ),
        ),
    ),
    "oom": (
        _q(
            "The OOM message says little is free but a lot is 'reserved but unallocated'. "
            "What is it?",
            ("Exhaustion", False, "Exhaustion shows little reserved-but-free memory."),
            ("Fragmentation", True, "Free memory exists but in pieces too small for the request."),
            (
                "A single tensor larger than the card",
                False,
                "Then the request alone exceeds the card's total.",
            ),
            ("A driver bug", False, "The allocator is behaving as designed."),
        ),
        _q(
            "`RuntimeError: CUDA error: device-side assert triggered`. Is this a memory error?",
            (
                "Yes, the card ran out of memory.",
                False,
                "An OOM says 'CUDA out of memory' and names sizes.",
            ),
            (
                "No: a kernel's own check failed, usually an index out of range.",
                True,
                "A data bug (a label ≥ the class count); rerun on CPU to find the line.",
            ),
            (
                "Yes, a fragmentation error.",
                False,
                "Fragmentation appears as an OOM with reserved memory.",
            ),
            ("No, a driver mismatch.", False, "A mismatch shows up at start-up, not mid-step."),
        ),
        _q(
            "nvidia-smi shows 20 GB used while torch.cuda.memory_allocated() says 12 GB. Why?",
            ("A memory leak in PyTorch", False, "The difference is expected."),
            (
                "The caching allocator keeps freed blocks reserved, plus the CUDA context.",
                True,
                "Reserved ≥ allocated; the driver sees reserved plus context.",
            ),
            (
                "nvidia-smi counts in GiB.",
                False,
                "It reports MiB; units alone do not explain 8 GB.",
            ),
            (
                "Another process is using 8 GB.",
                False,
                "Possible, but check the process list; the allocator explains it first.",
            ),
        ),
    ),
    "fix-ladder": (
        _q(
            "What does gradient accumulation buy?",
            (
                "A larger effective batch without larger activations",
                True,
                "Several micro-batches' gradients summed before one optimizer step.",
            ),
            ("Smaller weights", False, "Weights are unchanged."),
            ("A faster step", False, "Each update takes more micro-steps, so it is slower."),
            ("Less optimizer state", False, "Per-parameter state is unchanged."),
        ),
        _q(
            "Which rung should come before sharding across several cards?",
            (
                "Mixed precision and a smaller batch",
                True,
                "Cheap changes on one card first; sharding adds machines and complexity.",
            ),
            ("Buying a bigger card", False, "That is the most expensive rung."),
            ("Rewriting the model in C++", False, "Language does not change the memory bill."),
            ("Disabling autograd", False, "Then nothing trains."),
        ),
        _q(
            "After halving the batch the run still OOMs at the same step. What does that tell you?",
            (
                "Activations were not the consumer that overflows.",
                True,
                "Weights, gradients and optimizer state do not shrink with batch; climb to LoRA, "
                "checkpointing of state, or sharding.",
            ),
            (
                "Halve it again until it works.",
                False,
                "If the per-parameter bill alone overflows, no batch size will fit.",
            ),
            ("The error is not about memory.", False, "It still says out of memory."),
            ("The card is faulty.", False, "Same step, same size: this is arithmetic."),
        ),
    ),
    "cuda-errors": (
        _q(
            "`CUDA error: no kernel image is available for execution on the device`. Which "
            "kind of problem is this?",
            ("Memory", False, "Nothing was allocated; no size is mentioned."),
            (
                "Environment: the wheel was not built for this card's architecture",
                True,
                "Install a build that supports the card's compute capability.",
            ),
            ("Data", False, "The data is never looked at."),
            ("Timing", False, "Timing does not cause errors."),
        ),
        _q(
            "Errors on the GPU are often reported at a later line. Why?",
            (
                "Kernels run asynchronously; the error surfaces at the next synchronizing call.",
                True,
                "Set CUDA_LAUNCH_BLOCKING=1 or run on CPU to get the true line.",
            ),
            ("Python's traceback is wrong.", False, "It is right about where the error surfaced."),
            ("The GPU retries failed kernels.", False, "It does not."),
            ("Logging is buffered.", False, "Buffering does not move exceptions."),
        ),
        _q(
            "Is 'Expected all tensors to be on the same device' a memory error?",
            ("Yes", False, "No allocation failed."),
            (
                "No: a tensor was not moved to the model's device",
                True,
                "A code bug: move every batch with .to(device).",
            ),
            ("Only on MPS", False, "It happens on any pair of devices."),
            ("Only with mixed precision", False, "Precision is unrelated."),
        ),
    ),
}


def to_markdown(stem: str) -> str:
    """A lesson's quiz as static Markdown: options shown, answer and reasons collapsed.

    >>> print(to_markdown("roofline").splitlines()[0][:40])
    **Question 1.** An elementwise add of tw
    """
    if stem not in QUIZZES:
        raise ValueError(f"no quiz for lesson {stem!r}: add one to gpulesson.site.quizzes.QUIZZES")
    blocks = []
    for i, q in enumerate(QUIZZES[stem], 1):
        letters = "ABCDEFG"[: len(q.options)]
        answer = next(letter for letter, o in zip(letters, q.options, strict=True) if o.correct)
        lines = [f"**Question {i}.** {q.prompt}", ""]
        lines += [f"{letter}. {o.text}  " for letter, o in zip(letters, q.options, strict=True)]
        lines += ["", f'??? success "Answer: {answer}"']
        for letter, o in zip(letters, q.options, strict=True):
            verdict = "right" if o.correct else "wrong"
            lines.append(f"    - **{letter}** ({verdict}): {o.why}")
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks)


def to_json() -> str:
    """All quizzes as JSON, keyed by lesson stem, for the quiz script.

    >>> json.loads(to_json())["timing"][0]["options"][1]["correct"]
    True
    """
    return json.dumps(
        {stem: [asdict(q) for q in qs] for stem, qs in QUIZZES.items()}, ensure_ascii=False
    )
