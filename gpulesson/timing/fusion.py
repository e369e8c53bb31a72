"""Many small ops or one fused op: a pointwise chain timed eager and under ``torch.compile``.

In eager mode every PyTorch op is one call: Python, the dispatcher, an output
allocation and (on a GPU) a kernel launch, whatever the size of the work. On a small
tensor that fixed cost is the whole time: the program is **overhead-bound**.
``torch.compile`` traces the function and its inductor backend fuses the chain into one
generated kernel (C++ on a CPU, Triton on a GPU), so one call pays one overhead.

:func:`measure_fusion` shows both and what the fusion costs up front:

1. forget earlier compilations (``torch.compiler.reset()``), so the first call compiles,
   and import the compiler first, so its one-time import (seconds, once per process) is
   not counted as this function's compile;
2. compile :func:`pointwise_chain` and time its first call (the one-off compile, with a
   barrier on both sides), then check its output against eager's;
3. time eager and compiled calls the course's way, in turns
   (:func:`gpulesson.timing.bench.time_in_turns`: warm-up, barriers, many samples, one
   block of each per turn, so a burst of other work on a shared machine slows both alike)
   at ``threads`` threads (default 1: the tensors are small, and one thread keeps
   OpenMP's thread wake-ups out of a comparison of per-call costs).

:func:`measure_overhead_rounds` sets one eager op of the chain against a bare tiny op, the
two timed back to back in several rounds, so the lesson's "overhead-bound" reads the median
round's ratio rather than two timings taken seconds apart on a shared machine.

``COMPILE_OPTIONS`` keeps the compile cheap and self-contained: one compile thread (no
pool of worker processes, each importing torch) and inductor's one-time check of the
CPU's vector instructions skipped (``cpp.vec_isa_ok``): that check compiles a test
program once per machine and caches the answer, so it is not part of what each new
function costs. Trade-off: the compile time is this machine's, for this function; a
warm inductor cache (a second run) makes it shorter, a large model much longer.

Used by the suite entry ``fusion`` (``gpulesson/results/entries_feeding.py``), whose
measurements the lesson ``feeding.md`` reads back; rendered by
:mod:`gpulesson.course.feeding`.

>>> pointwise_chain(torch.zeros(2)).shape, OPS_PER_CALL
(torch.Size([2]), 30)
"""

from __future__ import annotations

import contextlib
import importlib
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from gpulesson.timing.bench import barrier, resolve_threads, time_in_turns, time_samples
from gpulesson.timing.inputs import DEVICES
from gpulesson.timing.results import Spread

CHAIN_ROUNDS = 10
OPS_PER_ROUND = 3  # sin, multiply, add
OPS_PER_CALL = CHAIN_ROUNDS * OPS_PER_ROUND
COMPILE_OPTIONS = {"compile_threads": 1, "cpp.vec_isa_ok": True}
COMPILE_DEVICES = ("cpu", "cuda")  # inductor's mature backends; MPS support is newer
CHAIN_TOLERANCE = 1e-4  # largest |compiled - eager| accepted (fp32, values of order 1)
# The headline figures a compiled chain gives (:func:`headline_figures`)
COMPILED_FIGURES = ("compiled_us", "fusion_speedup", "compile_s", "saved_us", "breakeven_calls")


def pointwise_chain(x: torch.Tensor) -> torch.Tensor:
    """Thirty small elementwise ops in a row: ten rounds of sin, multiply, add.

    >>> pointwise_chain(torch.zeros(1)).item() > 0
    True
    """
    for _ in range(CHAIN_ROUNDS):
        x = torch.sin(x) * 1.01 + 0.1
    return x


@dataclass(frozen=True)
class CallTiming(Spread):
    """Seconds per call of the chain in one mode (``eager`` or ``compiled``)."""

    mode: str
    samples_s: tuple[float, ...]
    calls_per_sample: int


@dataclass(frozen=True)
class FusionResult:
    """The chain eager and compiled on one device, and the one-off compile.

    Where ``torch.compile`` could not compile the chain (on a CPU inductor needs a C++
    compiler), ``compiled``, ``compile_s`` and ``max_abs_diff`` are None and
    ``compile_error`` says why; the eager chain is still timed.

    >>> e = CallTiming(mode="eager", samples_s=(100e-6,), calls_per_sample=100)
    >>> c = CallTiming(mode="compiled", samples_s=(20e-6,), calls_per_sample=100)
    >>> r = FusionResult(device="cpu", n_elements=1024, ops_per_call=30, threads=1,
    ...                  eager=e, compiled=c, compile_s=2.0, max_abs_diff=0.0)
    >>> round(r.speedup, 1), round(r.eager_per_op_s * 1e6, 2), round(r.breakeven_calls)
    (5.0, 3.33, 25000)
    """

    device: str
    n_elements: int
    ops_per_call: int
    threads: int
    eager: CallTiming
    compiled: CallTiming | None
    compile_s: float | None
    max_abs_diff: float | None
    compile_error: str = ""

    @property
    def speedup(self) -> float | None:
        """Eager median over compiled median; None when the chain was not compiled."""
        if self.compiled is None:
            return None
        return self.eager.median_s / self.compiled.median_s

    @property
    def eager_per_op_s(self) -> float:
        """Eager seconds per call shared out over the chain's ops."""
        return self.eager.median_s / self.ops_per_call

    @property
    def saved_per_call_s(self) -> float | None:
        """What each call saves compiled: eager median minus compiled median."""
        if self.compiled is None:
            return None
        return self.eager.median_s - self.compiled.median_s

    @property
    def breakeven_calls(self) -> float | None:
        """Calls after which the compile has paid for itself; None when compiling saved nothing."""
        saved = self.saved_per_call_s
        if saved is None or saved <= 0 or self.compile_s is None:
            return None
        return self.compile_s / saved


def missing_figures(f: FusionResult) -> dict[str, str]:
    """The headline figures this result lacks, each with why: what the lesson says instead.

    >>> e = CallTiming(mode="eager", samples_s=(100e-6,), calls_per_sample=100)
    >>> c = CallTiming(mode="compiled", samples_s=(120e-6,), calls_per_sample=100)
    >>> r = FusionResult(device="cpu", n_elements=256, ops_per_call=30, threads=1,
    ...                  eager=e, compiled=c, compile_s=2.0, max_abs_diff=0.0)
    >>> missing_figures(r)["breakeven_calls"]
    'the compiled chain was no faster than eager on this build (120 µs against 100 µs per \
call), so its compile never pays for itself'
    """
    if f.compiled is None:
        return dict.fromkeys(COMPILED_FIGURES, f.compile_error)
    if f.breakeven_calls is None:
        return {
            "breakeven_calls": (
                f"the compiled chain was no faster than eager on this build "
                f"({f.compiled.median_s * 1e6:.3g} µs against {f.eager.median_s * 1e6:.3g} µs "
                "per call), so its compile never pays for itself"
            )
        }
    return {}


def headline_figures(f: FusionResult) -> dict[str, tuple[float, str]]:
    """The figures the lesson's claims read, by name, with their units: those the result has
    (:func:`missing_figures` names the others).

    >>> e = CallTiming(mode="eager", samples_s=(100e-6,), calls_per_sample=100)
    >>> c = CallTiming(mode="compiled", samples_s=(20e-6,), calls_per_sample=100)
    >>> r = FusionResult(device="cpu", n_elements=256, ops_per_call=30, threads=1,
    ...                  eager=e, compiled=c, compile_s=2.0, max_abs_diff=0.0)
    >>> value, unit = headline_figures(r)["breakeven_calls"]
    >>> round(value), unit
    (25000, 'calls')
    """
    figures: dict[str, tuple[float, str]] = {
        "eager_us": (f.eager.median_s * 1e6, "µs"),
        "eager_per_op_us": (f.eager_per_op_s * 1e6, "µs"),
        "ops_per_call": (f.ops_per_call, "ops"),
        "n_elements": (f.n_elements, "elements"),
    }
    speedup, saved_s = f.speedup, f.saved_per_call_s
    if f.compiled is not None and None not in (f.compile_s, speedup, saved_s):
        figures["compiled_us"] = (f.compiled.median_s * 1e6, "µs")
        figures["fusion_speedup"] = (speedup, "x")
        figures["compile_s"] = (f.compile_s, "s")
        figures["saved_us"] = (saved_s * 1e6, "µs")
    if f.breakeven_calls is not None:
        figures["breakeven_calls"] = (f.breakeven_calls, "calls")
    return figures


@dataclass(frozen=True)
class OverheadRounds:
    """One eager op of the chain against one bare tiny op, timed back to back, round by round.

    ``per_op_s`` holds each round's median seconds per op of the eager chain (a call's
    median over :data:`OPS_PER_CALL`), ``bare_op_s`` the same round's median seconds per
    call of an add on one element, whose arithmetic is negligible next to its call.

    >>> r = OverheadRounds(device="cpu", n_elements=256, threads=1,
    ...                    per_op_s=(3e-6, 9e-6, 2e-6), bare_op_s=(1e-6, 1e-6, 1e-6))
    >>> [round(x, 1) for x in r.ratios], round(r.median_ratio, 1)
    ([3.0, 9.0, 2.0], 3.0)
    """

    device: str
    n_elements: int
    threads: int
    per_op_s: tuple[float, ...]
    bare_op_s: tuple[float, ...]

    @property
    def ratios(self) -> tuple[float, ...]:
        """Each round's eager seconds per op over its bare op's seconds."""
        return tuple(op / bare for op, bare in zip(self.per_op_s, self.bare_op_s, strict=True))

    @property
    def median_ratio(self) -> float:
        """The median round's ratio: a burst of other work in a few rounds does not move it."""
        return statistics.median(self.ratios)


def measure_overhead_rounds(
    device: str = "cpu",
    n: int = 256,
    threads: int | None = 1,
    rounds: int = 9,
    min_run_time_s: float = 0.02,
) -> OverheadRounds:
    """Time a bare tiny op and the eager chain back to back, ``rounds`` times.

    On a shared machine other work comes in bursts, so two timings taken seconds apart can
    differ several-fold and their ratio says little. Timed back to back, both halves of a
    round see the same machine, and the median round's ratio leaves the bursts out.
    Trade-off: each half is short (``min_run_time_s``), so a single round is noisy; the
    median over rounds is the figure to read.

    >>> r = measure_overhead_rounds(n=8, rounds=1, min_run_time_s=0.001)
    >>> len(r.ratios), r.median_ratio > 0
    (1, True)
    """
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}: use cuda, mps or cpu")
    if n < 1 or rounds < 1:
        raise ValueError(f"n={n}, rounds={rounds}: use at least one element and one round")
    threads = resolve_threads(threads)
    x = torch.randn(n, device=device)
    one, other, out = (torch.ones(1, device=device) for _ in range(3))
    per_op, bare = [], []
    with using_threads(threads):
        for _ in range(rounds):
            samples, _calls = time_samples(
                lambda: torch.add(one, other, out=out), device, threads, min_run_time_s
            )
            bare.append(statistics.median(samples))
            samples, _calls = time_samples(
                lambda: pointwise_chain(x), device, threads, min_run_time_s
            )
            per_op.append(statistics.median(samples) / OPS_PER_CALL)
    return OverheadRounds(
        device=device,
        n_elements=n,
        threads=threads,
        per_op_s=tuple(per_op),
        bare_op_s=tuple(bare),
    )


@contextlib.contextmanager
def using_threads(n: int) -> Iterator[None]:
    """Run the body with torch at ``n`` intra-op threads, then restore the count.

    >>> with using_threads(1):
    ...     torch.get_num_threads()
    1
    """
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def compile_failure(exc: BaseException, device: str) -> str:
    """Why ``torch.compile`` failed, in one sentence with the fix: the error's first line
    that says something (dynamo wraps it in a few lines of its own).

    >>> compile_failure(RuntimeError("backend='inductor' raised:\\nInvalidCxxCompiler: No "
    ...     "working C++ compiler found\\n\\nSet TORCHDYNAMO_VERBOSE=1 for more"), "cpu")
    'torch.compile could not compile the chain on this machine (InvalidCxxCompiler: No working \
C++ compiler found): on a CPU it needs a C++ compiler on the PATH; install g++ or clang and \
build again'
    """
    lines = [line.strip() for line in str(exc).splitlines()]
    said = [line for line in lines if line and not line.startswith(("backend=", "Set TORCH"))]
    what = (said[0] if said else type(exc).__name__)[:200]
    fix = (
        "on a CPU it needs a C++ compiler on the PATH; install g++ or clang and build again"
        if device == "cpu"
        else "check that Triton works with this torch and driver, then build again"
    )
    return f"torch.compile could not compile the chain on this machine ({what}): {fix}"


def measure_fusion(
    device: str = "cpu", n: int = 256, threads: int | None = 1, min_run_time_s: float = 0.1
) -> FusionResult:
    """Compile :func:`pointwise_chain` on ``device``, then time it eager and compiled (eager
    only, with the reason, where it cannot compile)."""
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}: use cuda, mps or cpu")
    if device not in COMPILE_DEVICES:
        raise ValueError(
            f"this measurement compiles with inductor on cpu or cuda, not {device}: "
            "use device='cpu'"
        )
    if n < 1:
        raise ValueError(f"n={n}: the tensor needs at least one element")
    threads = resolve_threads(threads)
    x = torch.randn(n, device=device)
    importlib.import_module("torch._inductor.compile_fx")  # once per process; not compile_s

    timed = [lambda: pointwise_chain(x)]
    compile_s = max_abs_diff = None
    error = ""
    with using_threads(threads):
        torch.compiler.reset()
        compiled = torch.compile(pointwise_chain, dynamic=False, options=COMPILE_OPTIONS)
        barrier(device)
        start = time.perf_counter()
        try:
            y = compiled(x)
        except Exception as exc:  # no one type: dynamo, inductor and the C++ toolchain each raise
            error = compile_failure(exc, device)
        else:
            barrier(device)
            compile_s = time.perf_counter() - start
            timed.append(lambda: compiled(x))
    if not error:
        max_abs_diff = float((y - pointwise_chain(x)).abs().max())
        if not max_abs_diff <= CHAIN_TOLERANCE:
            raise ValueError(
                f"the compiled chain differs from eager by {max_abs_diff:.3g} (more than "
                f"{CHAIN_TOLERANCE}): report it with your torch version, {torch.__version__}"
            )
    # In turns, as the overhead rounds: a burst of other work slows both alike
    (eager_s, eager_calls), *rest = time_in_turns(timed, device, threads, min_run_time_s)
    return FusionResult(
        device=device,
        n_elements=n,
        ops_per_call=OPS_PER_CALL,
        threads=threads,
        eager=CallTiming(mode="eager", samples_s=eager_s, calls_per_sample=eager_calls),
        compiled=(
            CallTiming(mode="compiled", samples_s=rest[0][0], calls_per_sample=rest[0][1])
            if rest
            else None
        ),
        compile_s=compile_s,
        max_abs_diff=max_abs_diff,
        compile_error=error,
    )
