"""The course glossary: one list of terms feeding the glossary page, tooltips and flashcards.

Each term has the lazy one-liner people repeat and what it really means. The
site hooks (``gpulesson/site/labs_hook.py``) append :func:`abbreviations_markdown`
to every page, so the ``abbr`` extension puts a tooltip on each term wherever it
appears; ``docs/glossary.md`` prints :func:`to_markdown`; the flashcards read
:func:`to_json`. Used by every lesson; listed in ``docs/glossary.md``.

>>> term("MIG").name
'MIG'
>>> "*[VRAM]:" in abbreviations_markdown()
True
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class Term:
    """One glossary entry.

    ``name`` is matched case-sensitively as a whole word for the tooltip;
    ``tooltip`` is False for terms too common as plain English to underline.
    """

    name: str
    expansion: str
    lazy: str
    meaning: str
    lesson: str
    tooltip: bool = True


TERMS: tuple[Term, ...] = (
    Term(
        "GPU",
        "graphics processing unit",
        "A faster CPU.",
        "A throughput machine: thousands of simple lanes running the same instruction over "
        "different data. Each lane is slower than a CPU core; the win comes from width.",
        "why-gpus",
    ),
    Term(
        "CPU",
        "central processing unit",
        "The slow chip.",
        "A latency machine: a few fast, complex cores that finish one dependent step after "
        "another quickly. It wins on small or branchy work and launches all GPU work.",
        "why-gpus",
    ),
    Term(
        "SIMT",
        "single instruction, multiple threads",
        "The GPU runs many programs at once.",
        "Groups of threads (warps of 32 on NVIDIA) execute one instruction in lockstep on "
        "different data; threads that branch differently wait for each other.",
        "why-gpus",
    ),
    Term(
        "SM",
        "streaming multiprocessor",
        "A GPU core.",
        "The GPU's building block: a cluster of lanes with its own registers, shared memory "
        "and schedulers. A kernel's thread blocks are spread over the SMs; a card has tens "
        "to over a hundred of them.",
        "why-gpus",
    ),
    Term(
        "FLOPs",
        "floating-point operations",
        "How fast a chip is.",
        "A count of work, not a speed: an n-by-n matmul costs 2n³ of them (a multiply and "
        "an add per term). FLOP/s is the rate; peak FLOP/s depends on precision.",
        "why-gpus",
    ),
    Term(
        "CUDA",
        "Compute Unified Device Architecture",
        "The thing you install to make the GPU work.",
        "NVIDIA's platform for general-purpose GPU code: a driver API, a runtime and "
        "libraries. A PyTorch wheel bundles its own CUDA runtime; the driver comes with the "
        "operating system's GPU installer.",
        "software-stack",
    ),
    Term(
        "cuDNN",
        "CUDA Deep Neural Network library",
        "Part of CUDA.",
        "A separate NVIDIA library of tuned kernels for convolutions, attention and other "
        "network layers. PyTorch wheels ship it; you rarely install it yourself.",
        "software-stack",
    ),
    Term(
        "NVML",
        "NVIDIA Management Library",
        "nvidia-smi's settings file.",
        "The C library the driver exposes for querying cards: memory, utilisation, "
        "temperature, driver version. nvidia-smi and the pynvml bindings are built on it.",
        "software-stack",
    ),
    Term(
        "nvidia-smi",
        "NVIDIA System Management Interface",
        "Shows whether PyTorch can see the GPU.",
        "A command-line tool that asks the driver, not Python, what cards exist and what "
        "they are doing. Its 'CUDA Version' is the newest runtime the driver supports, not "
        "the one torch uses.",
        "software-stack",
    ),
    Term(
        "MPS",
        "Metal Performance Shaders",
        "CUDA for Macs.",
        "PyTorch's Apple Silicon backend, built on Metal. It is not CUDA: it must be asked "
        "for by name (device 'mps'), covers a subset of operations, and shares memory with "
        "the CPU.",
        "software-stack",
    ),
    Term(
        "VRAM",
        "video RAM: the memory on the GPU",
        "How big a model you can run.",
        "The GPU's own memory, separate from system RAM. Everything a step touches must fit "
        "there at once: weights, gradients, optimizer state and activations, plus the CUDA "
        "context.",
        "memory",
    ),
    Term(
        "HBM",
        "high-bandwidth memory",
        "Faster VRAM.",
        "Memory dies stacked beside the GPU on one package, with a very wide bus: terabytes "
        "per second on data-centre cards, versus a few hundred GB/s for GDDR on consumer "
        "cards. Bandwidth, not size, is what it buys.",
        "roofline",
    ),
    Term(
        "PCIe",
        "PCI Express",
        "The slot the card sits in.",
        "The bus between host memory and the card. It is one to two orders of magnitude "
        "slower than the card's own memory, which is why data should move to the GPU once "
        "and stay there.",
        "roofline",
    ),
    Term(
        "NVLink",
        "NVIDIA's GPU-to-GPU link",
        "Makes two GPUs into one.",
        "A direct high-bandwidth link between GPUs, several times faster than PCIe. It speeds "
        "up gradient exchange and sharding, but each card still has its own memory.",
        "roofline",
    ),
    Term(
        "Tensor Cores",
        "NVIDIA's matrix-multiply units",
        "Free speed.",
        "Units inside each SM that multiply small matrix tiles per instruction. They only "
        "engage for supported precisions and shapes (fp16, bf16, TF32, int8 and so on), so "
        "the peak FLOP/s quoted for them is not the fp32 peak.",
        "roofline",
    ),
    Term(
        "MIG",
        "Multi-Instance GPU",
        "Splits a GPU to run more jobs faster.",
        "Partitioning a data-centre card into isolated instances, each with a fixed slice of "
        "SMs and, crucially, of memory. It is a memory feature as much as a compute one: a "
        "job on a 1/7 slice of an 80 GB card sees about 10 GB, and runs out of memory there.",
        "capacity",
    ),
    Term(
        "TF32",
        "TensorFloat-32",
        "Same as fp32.",
        "A Tensor Core mode that keeps fp32's range but only about 10 bits of mantissa. "
        "PyTorch can use it for fp32 matmuls on Ampere and newer; it is faster and less "
        "precise than true fp32.",
        "roofline",
    ),
    Term(
        "fp32",
        "32-bit floating point",
        "The normal precision.",
        "4 bytes per number. Mixed-precision training keeps master weights and optimizer "
        "state in fp32 even when the math runs in 16 bits.",
        "memory",
    ),
    Term(
        "fp16",
        "16-bit floating point (half precision)",
        "Half the memory, same model.",
        "2 bytes per number, with a narrow exponent range: training in it needs loss "
        "scaling to keep small gradients from underflowing to zero.",
        "memory",
    ),
    Term(
        "bf16",
        "bfloat16",
        "Another fp16.",
        "2 bytes per number with fp32's exponent range and fewer mantissa bits: no loss "
        "scaling needed, the usual choice for training on recent cards.",
        "memory",
    ),
    Term(
        "arithmetic intensity",
        "FLOPs per byte moved",
        "How hard an operation is.",
        "Work divided by memory traffic. Below the card's ridge point (peak FLOP/s divided by "
        "bandwidth) an operation is memory-bound; above it, compute-bound.",
        "roofline",
    ),
    Term(
        "roofline",
        "roofline model",
        "A benchmark.",
        "A plot of attainable FLOP/s against arithmetic intensity: a sloped roof set by "
        "bandwidth meeting a flat roof set by peak compute. It says which ceiling an "
        "operation hits.",
        "roofline",
    ),
    Term(
        "synchronize",
        "torch.cuda.synchronize()",
        "Makes the GPU faster to measure.",
        "Blocks the CPU until every queued GPU kernel has finished. GPU calls return before "
        "the work is done, so a stopwatch without it times the launch, not the work.",
        "timing",
        tooltip=False,
    ),
    Term(
        "warm-up",
        "untimed first iterations",
        "Wasted runs.",
        "The first calls pay one-off costs (context creation, library loading, kernel "
        "selection). Timing them mixes set-up into the figure, so benchmarks discard them.",
        "timing",
    ),
    Term(
        "activations",
        "saved forward-pass tensors",
        "Intermediate results that disappear.",
        "Outputs of each layer kept for the backward pass. They grow with batch size and "
        "sequence length and usually dominate memory at large batch.",
        "memory",
        tooltip=False,
    ),
    Term(
        "optimizer state",
        "what the optimizer keeps per parameter",
        "Part of the model.",
        "Extra tensors the optimizer keeps between steps: Adam keeps two fp32 moments (8 bytes "
        "per parameter), SGD with momentum one, plain SGD none.",
        "memory",
    ),
    Term(
        "AdamW",
        "Adam with decoupled weight decay",
        "The optimizer everyone uses, so it is free.",
        "Keeps a first and a second moment for every trainable parameter, usually in fp32: "
        "8 bytes per parameter, more than fp16 weights and gradients together.",
        "budget",
    ),
    Term(
        "mixed precision",
        "16-bit math with fp32 master copies",
        "Halves training memory.",
        "Runs matmuls in fp16 or bf16 while keeping fp32 master weights and optimizer state. "
        "It saves time and activation memory, but per-parameter state can grow, not shrink.",
        "budget",
    ),
    Term(
        "gradient checkpointing",
        "activation recomputation",
        "A way to save the model to disk.",
        "Keeps only some layers' activations in the forward pass and recomputes the rest "
        "during backward: less activation memory for roughly one extra forward pass of "
        "compute. Unrelated to saving checkpoints to disk.",
        "budget",
    ),
    Term(
        "gradient accumulation",
        "several micro-batches per optimizer step",
        "A bigger batch for free.",
        "Adds up gradients over several small batches before one optimizer step: the "
        "gradient of a large batch while holding the activations of a small one, at the "
        "cost of more steps per update.",
        "fix-ladder",
    ),
    Term(
        "LoRA",
        "Low-Rank Adaptation",
        "A smaller model.",
        "Freezes the base weights and trains small low-rank adapter matrices beside them. "
        "Gradients and optimizer state exist only for the adapters, so the bill is mostly "
        "the frozen weights.",
        "budget",
    ),
    Term(
        "QLoRA",
        "quantized LoRA",
        "LoRA with a worse model.",
        "LoRA over a base stored in 4 bits (about half a byte per weight plus scales), "
        "dequantized on the fly. It is how a 7B fine-tune fits on a 24 GB card.",
        "budget",
    ),
    Term(
        "FSDP",
        "Fully Sharded Data Parallel",
        "Runs the model on many GPUs faster.",
        "PyTorch's sharding: each card holds only its slice of weights, gradients and "
        "optimizer state, gathering full layers just in time. It divides the per-parameter "
        "bill by the number of cards.",
        "budget",
    ),
    Term(
        "ZeRO",
        "Zero Redundancy Optimizer",
        "A DeepSpeed speed-up.",
        "DeepSpeed's sharding in three stages: optimizer state, then gradients, then weights "
        "split across cards, removing the copies plain data parallelism keeps on each.",
        "budget",
    ),
    Term(
        "OOM",
        "out of memory",
        "The model is too big.",
        "An allocation failed. The message's numbers tell which case it is: the card is full "
        "(exhaustion), enough is free but not in one piece (fragmentation), or one tensor is "
        "larger than the card.",
        "oom",
    ),
    Term(
        "caching allocator",
        "PyTorch's CUDA memory pool",
        "Leaks memory.",
        "PyTorch keeps freed blocks reserved for reuse instead of returning them to the "
        "driver, so nvidia-smi shows more in use than torch has allocated. empty_cache() "
        "returns the free blocks; it never frees live tensors.",
        "oom",
    ),
    Term(
        "fragmentation",
        "free memory in pieces too small",
        "Running out of memory.",
        "Reserved-but-free memory split into blocks none of which fits the next request. "
        "The OOM message shows it as a large 'reserved but unallocated' figure.",
        "oom",
    ),
    Term(
        "device-side assert",
        "a check failing inside a kernel",
        "A GPU crash.",
        "A kernel's own check failed, usually an index out of range (a label outside the "
        "number of classes). It is a data bug, reported late and asynchronously; rerun on CPU "
        "or with CUDA_LAUNCH_BLOCKING=1 to find the line.",
        "cuda-errors",
        tooltip=False,
    ),
    Term(
        "spot instance",
        "preemptible rented capacity",
        "A cheap GPU.",
        "Spare capacity rented at a discount that the provider can take back at short "
        "notice. Only safe with regular checkpoints that a restart can resume from.",
        "where-to-run",
    ),
    Term(
        "on-demand",
        "reserved-while-you-pay capacity",
        "The expensive option.",
        "Capacity that stays yours until you stop it, and bills until you stop it: a "
        "forgotten instance costs the same as a busy one.",
        "where-to-run",
        tooltip=False,
    ),
    Term(
        "SSH",
        "Secure Shell",
        "How you log in.",
        "An encrypted remote shell; a rented GPU instance is usually a bare machine you reach "
        "over it, so installing and checking the stack is your job.",
        "where-to-run",
    ),
    Term(
        "GiB",
        "gibibyte: 2³⁰ bytes",
        "A gigabyte.",
        "1,073,741,824 bytes, 7.4 % more than a GB (10⁹ bytes). A card sold as 24 GB usually "
        "has 24 GiB, which torch reports as 25.8 GB.",
        "memory",
    ),
    Term(
        "CI",
        "continuous integration",
        "The tests.",
        "Automated runs of the build and tests on every change, usually on machines without "
        "a GPU, which is why scripts must pick their device at run time.",
        "software-stack",
    ),
)

_BY_NAME = {t.name: t for t in TERMS}
LESSONS_DIR = Path(__file__).resolve().parents[2] / "docs" / "lessons"


def existing_lessons(lessons_dir: Path = LESSONS_DIR) -> frozenset[str]:
    """File stems of the lessons present, so the glossary links only to pages that exist.

    >>> "software-stack" in existing_lessons()
    True
    """
    return frozenset(p.stem for p in lessons_dir.glob("*.md"))


def term(name: str) -> Term:
    """The glossary entry named ``name``; ValueError naming close matches if absent.

    >>> term("cuda")
    Traceback (most recent call last):
    ...
    ValueError: no glossary term 'cuda': names are case-sensitive, e.g. 'CUDA'
    """
    if name in _BY_NAME:
        return _BY_NAME[name]
    close = [t.name for t in TERMS if t.name.lower() == name.lower()]
    hint = f"e.g. {close[0]!r}" if close else "see gpulesson.site.glossary.TERMS"
    raise ValueError(f"no glossary term {name!r}: names are case-sensitive, {hint}")


def anchor(name: str) -> str:
    """The glossary page's anchor for a term.

    >>> anchor("Tensor Cores")
    'term-tensor-cores'
    """
    return "term-" + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def _tooltip_text(t: Term) -> str:
    first = t.meaning.split(". ")[0].rstrip(".")
    return f"{t.expansion}. {first}.".replace("\n", " ")


def abbreviations_markdown(terms: tuple[Term, ...] = TERMS) -> str:
    """Abbreviation definitions for the ``abbr`` extension: one tooltip per term.

    >>> abbreviations_markdown((term("HBM"),)).startswith("*[HBM]: high-bandwidth memory. Memory")
    True
    """
    return "\n".join(f"*[{t.name}]: {_tooltip_text(t)}" for t in terms if t.tooltip) + "\n"


def to_markdown(
    terms: tuple[Term, ...] = TERMS, linked_lessons: frozenset[str] = frozenset()
) -> str:
    """The glossary page body: terms in alphabetical order, each with an anchor.

    Lessons named in ``linked_lessons`` (file stems) become links; the others
    are named only, so the page builds while lessons are still being written.
    Links are site URLs relative to the glossary page (``glossary/``), because
    MkDocs does not rewrite ``.md`` links inside executed output.

    >>> print(to_markdown((term("MIG"),), frozenset({"capacity"})).splitlines()[-1])
    Lazy version: "Splits a GPU to run more jobs faster." · Lesson: [capacity](../lessons/capacity/)
    """
    lines: list[str] = []
    for t in sorted(terms, key=lambda t: t.name.lower()):
        linked = t.lesson in linked_lessons
        lesson = f"[{t.lesson}](../lessons/{t.lesson}/)" if linked else t.lesson
        lines.append(f"### {t.name} {{#{anchor(t.name)}}}\n")
        lines.append(f"*{t.expansion}.* {t.meaning}\n")
        lines.append(f'Lazy version: "{t.lazy}" · Lesson: {lesson}\n')
    return "\n".join(lines).rstrip() + "\n"


def flashcards_markdown(terms: tuple[Term, ...] = TERMS) -> str:
    """The flashcards without JavaScript: one collapsible block per term.

    >>> print(flashcards_markdown((term("GiB"),)).splitlines()[0])
    ??? question "GiB: A gigabyte."
    """
    blocks = []
    for t in terms:
        blocks.append(f'??? question "{t.name}: {t.lazy}"\n    **{t.expansion}.** {t.meaning}\n')
    return "\n".join(blocks)


def to_json(terms: tuple[Term, ...] = TERMS) -> str:
    """The terms as JSON for the flashcards script.

    >>> json.loads(to_json((term("SM"),)))[0]["name"]
    'SM'
    """
    return json.dumps([asdict(t) for t in terms], ensure_ascii=False)
