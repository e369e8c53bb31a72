"""Shapes that suit the hardware: one matmul at an aligned size and at its odd neighbours.

Matrix units work on tiles: NVIDIA's tensor cores are used most efficiently when a
matmul's dimensions are multiples of 8 elements for 16-bit types (16 bytes), and better
still at multiples of 64 or 128, where tiles divide the matrix with no ragged edge
(NVIDIA, "Matrix Multiplication Background"). A CPU's vector units and its BLAS
library's blocking have their own sizes. So ``n = 4096`` can run faster per FLOP than
``4095`` or ``4097``, and nanoGPT pads GPT-2's vocabulary of 50,257 to 50,304
(a multiple of 64) for the same reason.

:func:`measure_shapes` times a few GEMM shapes on one device and dtype **interleaved**:
each round times every shape once (a block of calls between two barriers), so a
machine that gets busier halfway through slows every shape alike instead of the last
one; the median over rounds is each shape's figure. Work is counted as 2·m·k·n FLOPs,
so shapes that differ by a row compare fairly per FLOP. :data:`PLANS` sizes the
square neighbours and the vocabulary projection per device (small on a CPU).

Used by the lesson ``feeding.md`` and the suite entry ``alignment``
(``gpulesson/results/entries_feeding.py``); rendered by
:mod:`gpulesson.course.feeding`.

>>> shapes = (GemmShape(label="n=8", m=8, k=8, n=8, aligned=True),
...           GemmShape(label="n=9", m=9, k=9, n=9, aligned=False))
>>> r = measure_shapes(shapes, "cpu", "fp32", rounds=3, calls_per_sample=2)
>>> [t.shape.label for t in r.timings], r.timings[0].repeats
(['n=8', 'n=9'], 3)
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from gpulesson.timing import plans
from gpulesson.timing.bench import TORCH_DTYPES, barrier, matmul_precision, resolve_threads
from gpulesson.timing.fusion import using_threads
from gpulesson.timing.inputs import DEVICES, check_dtype
from gpulesson.timing.results import Spread

GPT2_VOCAB = 50257
PADDED_VOCAB = 50304  # nanoGPT's padding: the next multiple of 64


@dataclass(frozen=True)
class GemmShape:
    """One matmul: (m x k) @ (k x n), and whether its sizes are the aligned ones.

    >>> GemmShape(label="v", m=2, k=3, n=4, aligned=False).flops
    48
    """

    label: str
    m: int
    k: int
    n: int
    aligned: bool

    @property
    def flops(self) -> int:
        """2·m·k·n: a multiply and an add per term."""
        return 2 * self.m * self.k * self.n


def square_neighbours(n: int) -> tuple[GemmShape, ...]:
    """The n x n matmul (aligned) between its neighbours n - 1 and n + 1.

    >>> [s.label for s in square_neighbours(4096)]
    ['n=4095', 'n=4096', 'n=4097']
    """
    if n < 2:
        raise ValueError(f"n={n}: use an aligned size of 2 or more, like 512 or 4096")
    return tuple(
        GemmShape(label=f"n={size}", m=size, k=size, n=size, aligned=size == n)
        for size in (n - 1, n, n + 1)
    )


def vocab_projection(tokens: int, hidden: int) -> tuple[GemmShape, ...]:
    """A language model's output layer: (tokens x hidden) @ (hidden x vocab), both vocabularies.

    >>> [(s.label, s.aligned) for s in vocab_projection(8, 16)]
    [('vocab 50,257', False), ('vocab 50,304', True)]
    """
    return tuple(
        GemmShape(label=f"vocab {v:,}", m=tokens, k=hidden, n=v, aligned=v == PADDED_VOCAB)
        for v in (GPT2_VOCAB, PADDED_VOCAB)
    )


@dataclass(frozen=True)
class ShapeTiming(Spread):
    """Seconds per call of one shape, one sample per round."""

    shape: GemmShape
    samples_s: tuple[float, ...]

    @property
    def flop_per_s(self) -> float:
        """Achieved rate: the shape's FLOPs over the median time."""
        return self.shape.flops / self.median_s


@dataclass(frozen=True)
class ShapeComparison:
    """Shapes timed interleaved on one device and dtype.

    >>> aligned = GemmShape(label="a", m=4, k=4, n=4, aligned=True)
    >>> odd = GemmShape(label="b", m=5, k=4, n=4, aligned=False)
    >>> r = ShapeComparison(device="cpu", dtype="fp32", calls_per_sample=1, timings=(
    ...     ShapeTiming(shape=aligned, samples_s=(1.0,)), ShapeTiming(shape=odd, samples_s=(2.5,))))
    >>> r.aligned_gain
    2.0
    """

    device: str
    dtype: str
    calls_per_sample: int
    timings: tuple[ShapeTiming, ...]
    threads: int = 1

    @property
    def aligned(self) -> ShapeTiming:
        """The aligned shape's timing."""
        return next(t for t in self.timings if t.shape.aligned)

    @property
    def aligned_gain(self) -> float:
        """Aligned FLOP/s over the best unaligned FLOP/s: above 1 when alignment paid."""
        others = [t.flop_per_s for t in self.timings if not t.shape.aligned]
        return self.aligned.flop_per_s / max(others)

    def relative(self, timing: ShapeTiming) -> float:
        """A shape's FLOP/s as a share of the aligned shape's."""
        return timing.flop_per_s / self.aligned.flop_per_s


def measure_shapes(
    shapes: Sequence[GemmShape],
    device: str = "cpu",
    dtype: str = "fp32",
    rounds: int = 7,
    calls_per_sample: int = 1,
    warmup: int = 2,
    threads: int | None = None,
) -> ShapeComparison:
    """Time every shape once per round (interleaved), ``rounds`` rounds; see the module.

    ``threads`` sets torch's intra-op threads for the run (default: as it is).
    """
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}: use cuda, mps or cpu")
    check_dtype(dtype, device)
    if sum(s.aligned for s in shapes) != 1 or len(shapes) < 2:
        raise ValueError("give two or more shapes, exactly one of them aligned=True")
    if rounds < 1 or calls_per_sample < 1:
        raise ValueError(f"rounds={rounds}, calls_per_sample={calls_per_sample}: use 1 or more")
    torch_dtype = TORCH_DTYPES[dtype]
    calls = []
    for s in shapes:
        a = torch.randn(s.m, s.k, device=device, dtype=torch_dtype)
        b = torch.randn(s.k, s.n, device=device, dtype=torch_dtype)
        out = torch.empty(s.m, s.n, device=device, dtype=torch_dtype)
        calls.append(lambda a=a, b=b, out=out: torch.matmul(a, b, out=out))
    samples: list[list[float]] = [[] for _ in shapes]
    threads = resolve_threads(threads)
    with matmul_precision(dtype), using_threads(threads):
        for call in calls:
            for _ in range(warmup):
                call()
        for _ in range(rounds):
            for i, call in enumerate(calls):
                barrier(device)
                start = time.perf_counter()
                for _ in range(calls_per_sample):
                    call()
                barrier(device)
                samples[i].append((time.perf_counter() - start) / calls_per_sample)
    return ShapeComparison(
        device=device,
        dtype=dtype,
        calls_per_sample=calls_per_sample,
        threads=threads,
        timings=tuple(
            ShapeTiming(shape=s, samples_s=tuple(t)) for s, t in zip(shapes, samples, strict=True)
        ),
    )


@dataclass(frozen=True)
class AlignmentPlan:
    """Sizes for one device: the aligned square size, the vocabulary projection, the dtypes."""

    square_n: int
    tokens: int
    hidden: int
    dtypes: tuple[str, ...]
    rounds: int
    calls_per_sample: int
    threads: int | None = None  # None: torch's default for the device


# The sizes per device kind live in one table with the other timed measurements' sizes
# (gpulesson/timing/plans.py, which says why they are what they are).
PLANS: dict[str, AlignmentPlan] = {
    device: AlignmentPlan(**plans.sizes(device, "alignment")) for device in plans.DEVICE_KINDS
}


def headline_figures(c: ShapeComparison, kind: str) -> dict[str, tuple[float, str]]:
    """The aligned shape's gain and rate, named ``<kind>_gain_<dtype>`` and so on.

    >>> a = ShapeTiming(shape=GemmShape(label="a", m=4, k=4, n=4, aligned=True),
    ...                 samples_s=(1.0,))
    >>> b = ShapeTiming(shape=GemmShape(label="b", m=5, k=5, n=5, aligned=False),
    ...                 samples_s=(4.0,))
    >>> c = ShapeComparison(device="cpu", dtype="fp32", calls_per_sample=1, timings=(a, b))
    >>> headline_figures(c, "square")["square_gain_fp32"]
    (2.048, 'x')
    """
    return {
        f"{kind}_gain_{c.dtype}": (c.aligned_gain, "x"),
        f"{kind}_aligned_flop_per_s_{c.dtype}": (c.aligned.flop_per_s, "FLOP/s"),
    }


def plan_for(device: str) -> AlignmentPlan:
    """The alignment plan for a device.

    >>> plan_for("cuda").square_n
    4096
    """
    if device not in PLANS:
        raise ValueError(f"unknown device {device!r}: use cuda, mps or cpu")
    return PLANS[device]


def measure_plan(device: str) -> list[tuple[str, ShapeComparison, dict[str, tuple[float, str]]]]:
    """Every comparison of the device's plan: (kind, result, headline figures), kind first.

    Kinds are ``square`` (:func:`square_neighbours`) and ``vocab``
    (:func:`vocab_projection`), for each dtype of the plan.
    """
    plan = plan_for(device)
    groups = (
        ("square", square_neighbours(plan.square_n)),
        ("vocab", vocab_projection(plan.tokens, plan.hidden)),
    )
    found = []
    for dtype in plan.dtypes:
        for kind, shapes in groups:
            c = measure_shapes(
                shapes, device, dtype, plan.rounds, plan.calls_per_sample, threads=plan.threads
            )
            found.append((kind, c, headline_figures(c, kind)))
    return found
