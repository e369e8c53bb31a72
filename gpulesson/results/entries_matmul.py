"""Suite entries for matmul throughput: by size and dtype, and the best shape's peak.

``matmul`` times square n x n matmuls of growing size for each dtype the device runs,
with :func:`gpulesson.timing.bench.sweep` (the function behind ``gpulesson bench`` and the
lesson "Why GPUs win"), within a time budget per dtype. FP8 (CUDA, compute capability
8.9 and later) goes through ``torch._scaled_mm``, timed by
:func:`gpulesson.timing.roofline.measure_op`, the same timer.

``matmul_peak`` looks for the best achievable matmul rate the way Stas Bekman's MAMF
finder does (Maximum Achievable Matmul FLOPS, ``compute/accelerator/benchmarks/mamf-finder.py``
in github.com/stas00/ml-engineering): the datasheet peak is not reachable, so time many
large (m, n, k) shapes and report the fastest. The search, within a time budget:

1. squares from ``sizes``;
2. neighbours of the best square, one dimension moved by 1, 2 and 4 ``step``s each way;
3. the rest of the coarse grid ``sizes`` x ``sizes`` x ``sizes``, largest first.

Differences from the MAMF finder, on purpose: each shape's figure is the median of many
timed blocks (the course's timing discipline), not the best single iteration, so the peak
here is a little lower; no L2 flush between calls (operands of these sizes are far larger
than L2); a fixed time budget instead of a full sweep.

``matmul_sweep`` is the lesson "Why GPUs win"'s CPU-against-GPU sweep with its plan
(:func:`gpulesson.timing.bench.plan_for`): fp32 only, n doubling from 64 within the
lesson's time budget, and on a GPU each size's operands copied from host memory, pageable
and (CUDA) pinned. The lesson measures it on the CPU and, when the build has one, on the
GPU; :func:`comparison_from_measurements` reads both back into the
:class:`~gpulesson.timing.results.SweepComparison` it renders.

>>> result = search_best_shape("cpu", "fp32", sizes=(32, 64), step=16, budget_s=5.0,
...                            min_run_time_s=0.01, budget_bytes=2**30)
>>> result.tried >= 2 and result.best.flops == 2 * result.m * result.n * result.k
True
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from gpulesson.results.bundle import Measurement, Skipped
from gpulesson.results.measurements import matmul_result, op_result, throughput
from gpulesson.results.suite import Context, Device, SuiteEntry
from gpulesson.timing import plans
from gpulesson.timing.bench import TORCH_DTYPES, matmul_precision, measure_transfer, sweep
from gpulesson.timing.bench import plan_for as bench_plan_for
from gpulesson.timing.results import MatmulResult, OpResult, SweepComparison
from gpulesson.timing.roofline import measure_op

MIN_CALLS = 7  # warm-up plus the fewest timed blocks: what one shape costs at least


@dataclass(frozen=True)
class MatmulPlan:
    """Sizes and time budgets of the matmul entries for one kind of device and run."""

    sweep_budget_s: float  # per dtype
    sweep_start_n: int
    sweep_max_n: int
    fp8_sizes: tuple[int, ...]
    search_sizes: tuple[int, ...]
    search_step: int
    search_budget_s: float  # per 16-bit dtype
    fp32_search_budget_s: float
    min_run_time_s: float


# The sizes per device kind live in the one plan table (gpulesson/timing/plans.json).
PLANS: dict[tuple[str, bool], MatmulPlan] = {
    key: MatmulPlan(**sizes) for key, sizes in plans.by_run("matmul").items()
}


def plan_for(context: Context) -> MatmulPlan:
    """The plan for this device kind and ``--quick``."""
    return PLANS[(context.device.type, context.quick)]


def dtypes_for(device: Device, quick: bool) -> tuple[str, ...]:
    """The dtypes worth timing here: tensor-core dtypes only where the hardware has them.

    TF32 and BF16 tensor cores arrive with compute capability 8.0 (Ampere), FP8 with 8.9
    (Ada, Hopper). A CPU without native half precision is very slow at it, so ``--quick``
    keeps fp32 and bf16 there.

    >>> dtypes_for(Device("cuda", "T4", 1, 1, 1, (7, 5)), quick=False)
    ('fp32', 'fp16')
    >>> dtypes_for(Device("cuda", "H100", 1, 1, 1, (9, 0)), quick=False)
    ('fp32', 'tf32', 'bf16', 'fp16', 'fp8')
    >>> dtypes_for(Device("cpu", "cpu", 1, 1, 0, None), quick=True)
    ('fp32', 'bf16')
    """
    if device.type == "cuda":
        cap = device.capability or (0, 0)
        found = ["fp32"]
        if cap >= (8, 0):
            found += ["tf32", "bf16"]
        found.append("fp16")
        if cap >= (8, 9):
            found.append("fp8")
        return tuple(found)
    if device.type == "cpu" and quick:
        return ("fp32", "bf16")
    return ("fp32", "bf16", "fp16")


def _itemsize(dtype: str) -> int:
    return 1 if dtype == "fp8" else torch.empty((), dtype=TORCH_DTYPES[dtype]).element_size()


def operand_bytes(m: int, n: int, k: int, dtype: str) -> int:
    """Bytes of A (m x k), B (k x n) and the output (m x n; bf16 for fp8).

    >>> operand_bytes(1024, 1024, 1024, "bf16") == 3 * 1024 * 1024 * 2
    True
    """
    out_size = 2 if dtype == "fp8" else _itemsize(dtype)
    return (m * k + k * n) * _itemsize(dtype) + m * n * out_size


def _matmul_fn(m: int, n: int, k: int, dtype: str, device: str) -> Callable[[], Any]:
    """The operation to time, with its operands allocated outside the timed region."""
    if dtype == "fp8":
        fp8 = torch.float8_e4m3fn
        a = torch.randn(m, k, device=device).to(fp8)
        b = torch.randn(n, k, device=device).to(fp8).t()  # _scaled_mm wants B column-major
        scale = torch.tensor(1.0, device=device)
        out_dtype = torch.bfloat16
        return lambda: torch._scaled_mm(a, b, scale_a=scale, scale_b=scale, out_dtype=out_dtype)
    torch_dtype = TORCH_DTYPES[dtype]
    a = torch.randn(m, k, device=device, dtype=torch_dtype)
    b = torch.randn(k, n, device=device, dtype=torch_dtype)
    out = torch.empty(m, n, device=device, dtype=torch_dtype)
    return lambda: torch.matmul(a, b, out=out)


def time_shape(m: int, n: int, k: int, dtype: str, device: str, min_run_time_s: float) -> OpResult:
    """Time one (m x k) @ (k x n) matmul with the course's timer: 2mnk FLOPs per call."""
    fn = _matmul_fn(m, n, k, dtype, device)
    with matmul_precision(dtype):
        return measure_op(
            f"matmul {m}x{n}x{k}",
            fn,
            device,
            dtype,
            2 * m * n * k,
            operand_bytes(m, n, k, dtype),
            min_run_time_s,
        )


@dataclass(frozen=True)
class ShapeSearch:
    """The best shape found, its timing, and how much was tried."""

    m: int
    n: int
    k: int
    best: OpResult
    tried: int
    elapsed_s: float


def candidate_shapes(
    sizes: Sequence[int], step: int, best: tuple[int, int, int] | None
) -> Iterator[tuple[int, int, int]]:
    """Phase 2 and 3 of the search: neighbours of ``best``, then the coarse grid, largest first.

    >>> list(candidate_shapes((64,), 16, (64, 64, 64)))[:3]
    [(80, 64, 64), (48, 64, 64), (64, 80, 64)]
    """
    if best is not None:
        for factor in (1, 2, 4):
            for dim in range(3):
                for sign in (1, -1):
                    shape = list(best)
                    shape[dim] += sign * factor * step
                    if shape[dim] > 0:
                        yield (shape[0], shape[1], shape[2])
    grid = sorted(itertools.product(sizes, repeat=3), key=lambda s: -(s[0] * s[1] * s[2]))
    yield from grid


def search_best_shape(
    device: str,
    dtype: str,
    sizes: Sequence[int],
    step: int,
    budget_s: float,
    min_run_time_s: float,
    budget_bytes: int,
) -> ShapeSearch:
    """Time squares, then neighbours of the best, then the grid, until ``budget_s`` is spent.

    A shape is skipped when its operands exceed ``budget_bytes`` or when, at the best rate
    so far, its ``MIN_CALLS`` calls would overrun the budget.
    """
    started = time.perf_counter()
    results: dict[tuple[int, int, int], OpResult] = {}

    def try_shape(shape: tuple[int, int, int]) -> None:
        if shape in results or operand_bytes(*shape, dtype) > budget_bytes:
            return
        elapsed = time.perf_counter() - started
        if results:
            rate = max(r.flop_per_s for r in results.values())
            predicted = max(min_run_time_s, MIN_CALLS * 2 * shape[0] * shape[1] * shape[2] / rate)
            if elapsed + predicted > budget_s:
                return
        results[shape] = time_shape(*shape, dtype, device, min_run_time_s)

    for s in sizes:
        try_shape((s, s, s))
    if not results:
        raise ValueError(
            f"no {dtype} matmul of sizes {list(sizes)} fits in {budget_bytes} bytes of memory"
        )
    best = max(results, key=lambda s: results[s].flop_per_s)
    for shape in candidate_shapes(sizes, step, best):
        if time.perf_counter() - started > budget_s:
            break
        try_shape(shape)
    best = max(results, key=lambda s: results[s].flop_per_s)
    return ShapeSearch(
        m=best[0],
        n=best[1],
        k=best[2],
        best=results[best],
        tried=len(results),
        elapsed_s=time.perf_counter() - started,
    )


def _sweep_fp8(context: Context, plan: MatmulPlan) -> list[tuple[int, OpResult]]:
    results = []
    started = time.perf_counter()
    for n in plan.fp8_sizes:
        if not context.fits(operand_bytes(n, n, n, "fp8")):
            break
        if time.perf_counter() - started > plan.sweep_budget_s:
            break
        results.append((n, time_shape(n, n, n, "fp8", context.device.type, plan.min_run_time_s)))
    return results


def _per_dtype(
    context: Context, entry: str, rows: Callable[[str], list[Measurement]]
) -> list[Measurement | Skipped]:
    """``rows(dtype)`` for each dtype; a dtype the device refuses becomes a Skipped line."""
    out: list[Measurement | Skipped] = []
    for dtype in dtypes_for(context.device, context.quick):
        try:
            out.extend(rows(dtype))
        except RuntimeError as exc:  # e.g. bf16 on an older macOS, or out of memory
            out.append(Skipped(f"{entry}.{dtype}", f"failed: {type(exc).__name__}: {exc}"))
    return out


def matmul_rows(context: Context, dtype: str) -> list[Measurement]:
    """Square matmuls of growing size in one dtype, within the plan's time budget."""
    plan = plan_for(context)
    timings: list[tuple[int, MatmulResult | OpResult]]
    if dtype == "fp8":
        timings = _sweep_fp8(context, plan)
    else:
        max_n = plan.sweep_max_n
        while max_n > plan.sweep_start_n and not context.fits(
            operand_bytes(max_n, max_n, max_n, dtype)
        ):
            max_n //= 2
        swept = sweep(
            context.device.type,
            dtype,
            plan.sweep_budget_s,
            start_n=plan.sweep_start_n,
            max_n=max_n,
            min_run_time_s=plan.min_run_time_s,
        )
        timings = [(r.n, r) for r in swept]
    return [
        throughput(
            r,
            name=f"matmul.{dtype}.n{n}",
            entry="matmul",
            unit="FLOP/s",
            label=f"{dtype} matmul, n={n}",
            dtype=dtype,
            limit="peak_flops",
            params={"n": n},
        )
        for n, r in timings
    ]


def peak_rows(context: Context, dtype: str) -> list[Measurement]:
    """The best-shape search in one dtype: the achievable peak, as a headline figure."""
    plan = plan_for(context)
    device = context.device.type
    if device == "cpu" and dtype != "fp32":
        return []  # CPUs without native half precision: the search would only time emulation
    found = search_best_shape(
        device,
        dtype,
        plan.search_sizes,
        plan.search_step,
        plan.fp32_search_budget_s if dtype == "fp32" else plan.search_budget_s,
        plan.min_run_time_s,
        context.memory_budget_bytes,
    )
    return [
        throughput(
            found.best,
            name=f"matmul_peak.{dtype}",
            entry="matmul_peak",
            unit="FLOP/s",
            label=f"best {dtype} matmul (shape search)",
            dtype=dtype,
            limit="peak_flops",
            headline=True,
            params={
                "m": found.m,
                "n": found.n,
                "k": found.k,
                "shapes_tried": found.tried,
                "search_s": round(found.elapsed_s, 3),
            },
            note="Best of a time-budgeted shape search in the manner of Bekman's MAMF "
            "finder; the median of each shape's samples, not its single fastest call.",
        )
    ]


def run_matmul(context: Context) -> list[Measurement | Skipped]:
    """Square matmuls of growing size, per dtype the device runs."""
    return _per_dtype(context, "matmul", lambda dtype: matmul_rows(context, dtype))


def run_matmul_peak(context: Context) -> list[Measurement | Skipped]:
    """The best-shape search, per dtype the device runs."""
    return _per_dtype(context, "matmul_peak", lambda dtype: peak_rows(context, dtype))


# --- the lesson's CPU-against-GPU sweep -----------------------------------------------------

SWEEP = "matmul_sweep"
_SWEEP_FIELDS = ("budget_s", "max_n", "min_run_time_s")
#: ``--quick`` sizes of ``matmul_sweep`` by device, from the plan table: (time budget s,
#: largest n, min run time s). A full run takes the lesson's (``bench``).
SWEEP_QUICK = {
    device: tuple(plans.sizes(device, "matmul_sweep_quick")[k] for k in _SWEEP_FIELDS)
    for device in plans.DEVICE_KINDS
}
_SWEEP_ROW = re.compile(r"matmul_sweep\.(?P<kind>fp32|h2d_pageable|h2d_pinned)\.n(?P<n>\d+)")


def sweep_plan(context: Context) -> tuple[float, int, float]:
    """(time budget s, largest n, min run time s) of ``matmul_sweep`` here.

    >>> sweep_plan(Context(Device("cpu", "cpu", 8 * 2**30, 4 * 2**30, 0, None), quick=False))
    (2.5, 2048, 0.1)
    """
    if context.quick:
        return SWEEP_QUICK[context.device.type]
    plan = bench_plan_for(context.device.type)
    return plan.sweep_budget_s, plan.sweep_max_n, plan.min_run_time_s


def sweep_rows(context: Context) -> list[Measurement]:
    """The lesson "Why GPUs win"'s fp32 sweep on this device, with the operand copies on a GPU.

    n doubles from 64 until the next size would overrun the time budget
    (:func:`gpulesson.timing.bench.sweep`), as :func:`gpulesson.timing.bench.compare_devices`
    sweeps each device. On a GPU each size's two operands are then copied from host
    memory, pageable and (CUDA) pinned (:func:`gpulesson.timing.bench.measure_transfer`).
    """
    device = context.device.type
    budget_s, max_n, run = sweep_plan(context)
    while max_n > 64 and not context.fits(operand_bytes(max_n, max_n, max_n, "fp32")):
        max_n //= 2
    swept = sweep(device, "fp32", budget_s, start_n=64, max_n=max_n, min_run_time_s=run)
    out = [
        throughput(
            r,
            name=f"{SWEEP}.fp32.n{r.n}",
            entry=SWEEP,
            unit="FLOP/s",
            label=f"fp32 matmul, n={r.n} (the lesson's sweep)",
            dtype="fp32",
            limit="peak_flops",
            params={"n": r.n},
        )
        for r in swept
    ]
    if device == "cpu":
        return out
    for pinned in (False, True) if device == "cuda" else (False,):
        kind = "pinned" if pinned else "pageable"
        for r in swept:
            copy = measure_transfer(r.n, device, "fp32", pinned, run)
            out.append(
                throughput(
                    copy,
                    name=f"{SWEEP}.h2d_{kind}.n{r.n}",
                    entry=SWEEP,
                    unit="B/s",
                    label=f"copy both n={r.n} fp32 operands to the GPU from {kind} memory",
                    dtype="fp32",
                    params={"n": r.n},
                )
            )
    return out


def _sweep_parts(measurements: Sequence[Measurement]) -> dict[str, dict[int, Measurement]]:
    parts: dict[str, dict[int, Measurement]] = {}
    for m in measurements:
        found = _SWEEP_ROW.fullmatch(m.name) if m.entry == SWEEP else None
        if found:
            parts.setdefault(found["kind"], {})[int(found["n"])] = m
    return parts


def comparison_from_measurements(
    cpu: Sequence[Measurement], gpu: Sequence[Measurement] = ()
) -> SweepComparison:
    """The :class:`SweepComparison` of ``matmul_sweep`` rows measured on the CPU and a GPU.

    ``gpu`` holds the entry's rows from the GPU (none on a build without one): its sweep and
    its pageable and pinned operand copies, matched to the sweep by n.
    """
    mine = _sweep_parts(cpu).get("fp32", {})
    theirs = _sweep_parts(gpu)
    sizes = sorted(theirs.get("fp32", {}))
    gpu_rows = tuple(matmul_result(theirs["fp32"][n]) for n in sizes)
    copies = {
        kind: tuple(
            op_result(theirs[f"h2d_{kind}"][n], f"host-to-device copy, {kind}")
            for n in sizes
            if n in theirs.get(f"h2d_{kind}", {})
        )
        for kind in ("pageable", "pinned")
    }
    return SweepComparison(
        cpu=tuple(matmul_result(mine[n]) for n in sorted(mine)),
        gpu=gpu_rows,
        gpu_device=gpu_rows[0].device if gpu_rows else None,
        pageable=copies["pageable"],
        pinned=copies["pinned"],
    )


def run_matmul_sweep(context: Context) -> list[Measurement]:
    """The lesson's fp32 sweep, and on a GPU the operand copies per size."""
    return sweep_rows(context)


ENTRIES = (
    SuiteEntry(
        name="matmul",
        description="n x n matmul throughput by size and dtype (fp32, tf32, bf16, fp16, fp8)",
        applies=lambda device: True,
        needs="nothing",
        run=run_matmul,
    ),
    SuiteEntry(
        name="matmul_peak",
        description="best achievable matmul FLOP/s per dtype from a shape search (MAMF-style)",
        applies=lambda device: True,
        needs="nothing",
        run=run_matmul_peak,
    ),
    SuiteEntry(
        name=SWEEP,
        description="the why-GPUs lesson's fp32 matmul sweep, n doubling within a time budget; "
        "on a GPU with each size's host-to-device operand copies",
        applies=lambda device: True,
        needs="nothing",
        run=run_matmul_sweep,
    ),
)
