"""Suite entries about the device and its links: context, stopwatch, launches, bandwidth, copies.

Each entry calls the function the lessons call and keeps its samples:

* ``cuda_context``: memory the CUDA context takes before any tensor (CUDA only; runs
  first, before other entries allocate);
* ``stopwatch``: one matmul timed honestly and naively
  (:func:`gpulesson.timing.bench.async_illusion`, the lesson "Timing GPU work honestly",
  with its plan on a full CPU run); :func:`illusion_from_measurements` reads it back;
* ``launch_overhead``: seconds per call of a tiny op, eager and on CUDA graph-replayed
  (:func:`gpulesson.timing.launch.measure_launch_overhead`, the same lesson's plan on a
  full CPU run); :func:`launch_from_measurements` reads it back;
* ``memory_bandwidth``: a copy between buffers far larger than the last-level cache
  (:func:`gpulesson.timing.roofline.measure_bandwidth`, the roofline lesson);
* ``host_copies``: host-to-device (:func:`gpulesson.timing.bench.measure_transfer`) and
  device-to-host copies from pageable and pinned memory; with ``memory_bandwidth``,
  :func:`link_from_measurements` reads them back as the roofline lesson's host link;
* ``all_reduce``: bus bandwidth of an NCCL all-reduce across every visible GPU (more than
  one), by message size (:func:`gpulesson.timing.allreduce.measure_nccl_sweep`, the
  multi-GPU lesson); :func:`all_reduce_sweep` reads those rows back for the lesson.

>>> [e.name for e in ENTRIES]
['cuda_context', 'stopwatch', 'launch_overhead', 'memory_bandwidth', 'host_copies', 'all_reduce']
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from gpulesson.results.bundle import Bundle, Measurement
from gpulesson.results.entries_allreduce import sweep_from_measurements, sweep_measurements
from gpulesson.results.measurements import matmul_result, op_result, seconds, single, throughput
from gpulesson.results.suite import Context, Device, SuiteEntry
from gpulesson.timing import plans
from gpulesson.timing.allreduce import AllReduceSweep, measure_nccl_sweep, size_name
from gpulesson.timing.bench import async_illusion, measure_transfer, plan_for
from gpulesson.timing.launch import measure_launch_overhead
from gpulesson.timing.results import (
    IllusionResult,
    LaunchOverhead,
    LaunchTiming,
    LinkBandwidth,
)
from gpulesson.timing.roofline import measure_bandwidth, measure_op
from gpulesson.units import MIB

# Buffers for the bandwidth copy are at least this many times the GPU's L2 cache.
L2_MULTIPLE = 16


@dataclass(frozen=True)
class DevicePlan:
    """Sizes for the device entries on one kind of device and run."""

    illusion_n: int
    min_run_time_s: float
    bandwidth_bytes: int  # each of the two buffers of the copy
    copy_n: int  # host copies move n x n fp32 tensors
    all_reduce_bytes: int
    # The stopwatch's and launch_overhead's min_run_time_s where the lesson "Timing GPU work
    # honestly" times longer than the other entries (None: min_run_time_s).
    timer_run_time_s: float | None = None


# The sizes per device kind live in the one plan table (gpulesson/timing/plans.json); a full
# run's illusion is the lesson's (bench's), a quick run's is the table's.
PLANS: dict[tuple[str, bool], DevicePlan] = {
    (device, quick): DevicePlan(**{"illusion_n": plan_for(device).illusion_n, **sizes})
    for (device, quick), sizes in plans.by_run("device").items()
}


def _plan(context: Context) -> DevicePlan:
    return PLANS[(context.device.type, context.quick)]


def _timer_run_time_s(context: Context) -> float:
    """The min_run_time_s of the stopwatch and launch timings (the lesson's, on a full CPU run).

    >>> _timer_run_time_s(Context(Device("cpu", "cpu", 1, 1, 0, None), quick=False))
    0.2
    """
    plan = _plan(context)
    return plan.min_run_time_s if plan.timer_run_time_s is None else plan.timer_run_time_s


# --- CUDA context ------------------------------------------------------------------------


def _nvml_process_bytes() -> int | None:
    """This process's memory on GPU 0 as NVML reports it; None when NVML cannot say."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no NVML answer
        return None
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
            if proc.pid == os.getpid() and proc.usedGpuMemory is not None:
                return int(proc.usedGpuMemory)
        return None  # in a container NVML may not see this process's id
    except Exception:  # noqa: BLE001
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def measure_context_bytes() -> tuple[int, int, int, str]:
    """Memory this process holds on GPU 0 beyond torch's allocator: mostly the CUDA context.

    Creates the context with a one-element tensor, then takes the process's GPU memory
    (NVML's per-process figure; without it, total minus free from the driver, which also
    counts other processes) and subtracts what torch's caching allocator reserved.
    Returns (context bytes, process bytes, reserved bytes, method).
    """
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    reserved = int(torch.cuda.memory_reserved(0))
    process = _nvml_process_bytes()
    method = "NVML per-process memory minus torch.cuda.memory_reserved()"
    if process is None:
        free, total = torch.cuda.mem_get_info(0)
        process = int(total - free)
        method = (
            "torch.cuda.mem_get_info() total minus free (counts other processes too) "
            "minus torch.cuda.memory_reserved()"
        )
    return max(process - reserved, 0), process, reserved, method


def run_cuda_context(context: Context) -> list[Measurement]:
    """The CUDA context's memory, a headline figure (it is gone before any tensor)."""
    ctx_bytes, process, reserved, method = measure_context_bytes()
    return [
        single(
            ctx_bytes,
            name="cuda_context",
            entry="cuda_context",
            unit="bytes",
            label="CUDA context memory",
            limit="device_memory",
            headline=True,
            params={"method": method, "process_bytes": process, "reserved_bytes": reserved},
        )
    ]


# --- stopwatch, launches -------------------------------------------------------------------


def run_stopwatch(context: Context) -> list[Measurement]:
    """One fp32 matmul timed with and without the closing barrier, and the CPU's time."""
    plan = _plan(context)
    device = context.device.type
    r = async_illusion(plan.illusion_n, device, "fp32", min_run_time_s=_timer_run_time_s(context))
    n = plan.illusion_n
    out = [
        seconds(
            r.honest,
            name="stopwatch.honest",
            entry="stopwatch",
            dtype="fp32",
            label=f"fp32 matmul n={n}, synchronized stopwatch",
            params={"n": n},
        ),
        seconds(
            r.naive,
            name="stopwatch.naive",
            entry="stopwatch",
            dtype="fp32",
            label=f"fp32 matmul n={n}, naive stopwatch (no closing barrier)",
            params={"n": n},
        ),
    ]
    honest = r.honest.median_s
    out.append(
        Measurement(
            name="stopwatch.inflation",
            entry="stopwatch",
            unit="ratio",
            value=r.inflation,
            samples=tuple(honest / s for s in r.naive.samples_s),
            samples_unit="ratio",
            label="how many times too fast the naive stopwatch reads",
            headline=True,
            params={"n": n, "device": device},
            note="Samples: the synchronized median over each naive reading.",
        )
    )
    if device != "cpu":
        out.append(
            seconds(
                r.cpu,
                name="stopwatch.cpu",
                entry="stopwatch",
                dtype="fp32",
                label=f"the same matmul on this machine's CPU, n={n}",
                params={"n": n},
            )
        )
    return out


def illusion_from_measurements(measurements: Sequence[Measurement]) -> IllusionResult | None:
    """The :class:`IllusionResult` the ``stopwatch`` rows describe; None without them.

    On a CPU the CPU baseline is the honest timing itself, as
    :func:`gpulesson.timing.bench.async_illusion` returns it.
    """
    by_name = {m.name: m for m in measurements if m.entry == "stopwatch"}
    if "stopwatch.honest" not in by_name or "stopwatch.naive" not in by_name:
        return None
    honest = matmul_result(by_name["stopwatch.honest"])
    naive = matmul_result(by_name["stopwatch.naive"], closing_barrier=False)
    cpu = matmul_result(by_name["stopwatch.cpu"]) if "stopwatch.cpu" in by_name else honest
    return IllusionResult(honest=honest, naive=naive, cpu=cpu)


def run_launch_overhead(context: Context) -> list[Measurement]:
    """Seconds per call of a tiny op, eager and (on CUDA) replayed from a CUDA graph."""
    device = context.device.type
    r = measure_launch_overhead(device, min_run_time_s=_timer_run_time_s(context))
    out = [
        seconds(
            r.eager,
            name="launch_overhead.eager",
            entry="launch_overhead",
            label="launch overhead per tiny op, eager",
            headline=True,
            params={"op": r.op},
        )
    ]
    if r.graph is not None:
        out.append(
            seconds(
                r.graph,
                name="launch_overhead.cuda_graph",
                entry="launch_overhead",
                label="launch overhead per tiny op, CUDA graph replay",
                headline=True,
                params={"op": r.op},
            )
        )
    return out


def _launch_timing(m: Measurement, mode: str) -> LaunchTiming:
    return LaunchTiming(
        device=str(m.params["device"]),
        mode=mode,
        threads=int(m.params["threads"]),
        samples_s=tuple(m.samples),
        calls_per_sample=int(m.params["calls_per_sample"]),
    )


def launch_from_measurements(measurements: Sequence[Measurement]) -> LaunchOverhead | None:
    """The :class:`LaunchOverhead` the ``launch_overhead`` rows describe; None without them."""
    by_name = {m.name: m for m in measurements if m.entry == "launch_overhead"}
    eager = by_name.get("launch_overhead.eager")
    if eager is None:
        return None
    graph = by_name.get("launch_overhead.cuda_graph")
    return LaunchOverhead(
        device=str(eager.params["device"]),
        op=str(eager.params["op"]),
        eager=_launch_timing(eager, "eager"),
        graph=None if graph is None else _launch_timing(graph, "cuda-graph"),
    )


# --- bandwidth and copies ------------------------------------------------------------------


def bandwidth_buffer_bytes(context: Context) -> tuple[int, int | None]:
    """The copy's buffer size: the plan's, at least ``L2_MULTIPLE`` x L2, within the budget.

    Returns (bytes per buffer, L2 bytes or None when unknown).
    """
    size = _plan(context).bandwidth_bytes
    l2 = None
    if context.device.type == "cuda":
        l2 = int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0)) or None
        if l2:
            size = max(size, L2_MULTIPLE * l2)
    while size > 16 * MIB and not context.fits(2 * size):
        size //= 2
    return size, l2


def run_memory_bandwidth(context: Context) -> list[Measurement]:
    """Copy one large buffer into another: bytes read plus written over the median time."""
    size, l2 = bandwidth_buffer_bytes(context)
    r = measure_bandwidth(context.device.type, size, "fp32", _plan(context).min_run_time_s)
    return [
        throughput(
            r,
            name="memory_bandwidth",
            entry="memory_bandwidth",
            unit="B/s",
            label="device memory bandwidth (copy, read + write)",
            limit="memory_bandwidth",
            headline=True,
            params={"buffer_bytes": size, "l2_bytes": l2},
        )
    ]


def link_from_measurements(measurements: Sequence[Measurement]) -> LinkBandwidth | None:
    """The host link beside the on-device copy: ``host_copies`` and ``memory_bandwidth`` rows.

    The host-to-device copies (pageable; pinned on CUDA) and the device's copy bandwidth as
    the roofline lesson's :class:`LinkBandwidth`; None without a pageable copy or a
    bandwidth row (a CPU has no host link).
    """
    by_name = {m.name: m for m in measurements}
    pageable, on_device = by_name.get("h2d.pageable"), by_name.get("memory_bandwidth")
    if pageable is None or on_device is None:
        return None
    pinned = by_name.get("h2d.pinned")
    return LinkBandwidth(
        device=str(on_device.params["device"]),
        pageable=op_result(pageable, "host-to-device copy, pageable"),
        pinned=None if pinned is None else op_result(pinned, "host-to-device copy, pinned"),
        on_device=op_result(on_device, "copy"),
    )


def measure_device_to_host(n: int, device: str, pinned: bool, min_run_time_s: float):
    """Time copying one n x n fp32 tensor from ``device`` to host memory (pinned or not)."""
    src = torch.randn(n, n, device=device)
    dst = torch.empty(n, n)
    if pinned:
        dst = dst.pin_memory()
    return measure_op(
        "device-to-host copy, " + ("pinned" if pinned else "pageable"),
        lambda: dst.copy_(src, non_blocking=pinned),
        device,
        "fp32",
        0,
        src.numel() * src.element_size(),
        min_run_time_s,
    )


def run_host_copies(context: Context) -> list[Measurement]:
    """Host-to-device and device-to-host copy rates, from pageable and (CUDA) pinned memory."""
    device = context.device.type
    plan = _plan(context)
    n = plan.copy_n
    while n > 512 and not context.fits(4 * n * n * 4):
        n //= 2
    out = []
    for pinned in (False, True) if device == "cuda" else (False,):
        kind = "pinned" if pinned else "pageable"
        h2d = measure_transfer(n, device, "fp32", pinned, plan.min_run_time_s)
        out.append(
            throughput(
                h2d,
                name=f"h2d.{kind}",
                entry="host_copies",
                unit="B/s",
                label=f"host-to-device copy from {kind} memory",
                headline=True,
                params={"n": n},
            )
        )
        d2h = measure_device_to_host(n, device, pinned, plan.min_run_time_s)
        out.append(
            throughput(
                d2h,
                name=f"d2h.{kind}",
                entry="host_copies",
                unit="B/s",
                label=f"device-to-host copy to {kind} memory",
                params={"n": n},
            )
        )
    return out


ALL_REDUCE_NAME = "all_reduce.bus_bandwidth"
# The smallest message of the sweep; the largest is the plan's ``all_reduce_bytes``.
ALL_REDUCE_MIN_BYTES = 64 * 2**10


def all_reduce_sizes(context: Context) -> tuple[int, ...]:
    """Message sizes for the all-reduce sweep: 64 KiB up to the plan's, four times apart.

    The largest is halved until one tensor of it fits the memory budget (each GPU holds one).

    >>> from gpulesson.results.suite import Device
    >>> gpus = Device("cuda", "x", 80 * 2**30, 80 * 2**30, 8, (9, 0))
    >>> [s // 2**20 for s in all_reduce_sizes(Context(device=gpus, quick=True))][-3:]
    [4, 16, 64]
    """
    largest = _plan(context).all_reduce_bytes
    while largest > ALL_REDUCE_MIN_BYTES and not context.fits(largest):
        largest //= 2
    sizes = [largest]
    while sizes[-1] // 4 >= ALL_REDUCE_MIN_BYTES:
        sizes.append(sizes[-1] // 4)
    return tuple(sorted(sizes))


def all_reduce_measurements(sweep: AllReduceSweep) -> list[Measurement]:
    """One bus-bandwidth row per message size, plus the largest size as the headline.

    Each row's samples are seconds per all-reduce and its ``bytes`` the bytes each GPU sends
    (2(N-1)/N x the message), so the value is nccl-tests' bus bandwidth. The headline
    ``all_reduce.bus_bandwidth`` repeats the largest size under a name every bundle shares.
    """
    rows = sweep_measurements(sweep, entry="all_reduce", prefix=ALL_REDUCE_NAME)
    largest = f"{ALL_REDUCE_NAME}.{size_name(sweep.largest.message_bytes)}"
    (head,) = (m for m in rows if m.name == largest)
    return [*rows, dataclasses.replace(head, name=ALL_REDUCE_NAME, headline=True)]


def run_all_reduce(context: Context) -> list[Measurement]:
    """Bus bandwidth of an in-process NCCL all-reduce over every visible GPU, by size.

    Bus bandwidth = message bytes x 2(N-1)/N over the time: what each GPU's link
    carries in a ring all-reduce (NCCL's nccl-tests define it so). The timed call
    synchronizes every GPU, so the clock stops when the last one is done.
    """
    sweep = measure_nccl_sweep(
        all_reduce_sizes(context), min_run_time_s=_plan(context).min_run_time_s
    )
    return all_reduce_measurements(sweep)


def all_reduce_sweep(bundle: Bundle | None) -> AllReduceSweep | None:
    """The all-reduce rows of a bundle as a sweep (for a page), or None when it has none.

    >>> all_reduce_sweep(None) is None
    True
    """
    if bundle is None:
        return None
    link = f"the links of the bundle's machine ({bundle.provenance.device_name})"
    return sweep_from_measurements(bundle.measurements, ALL_REDUCE_NAME, link)


def _is(device_type: str):
    return lambda device: device.type == device_type


def _many_gpus(device: Device) -> bool:
    return device.type == "cuda" and device.count > 1


ENTRIES = (
    SuiteEntry(
        name="cuda_context",
        description="memory the CUDA context takes",
        applies=_is("cuda"),
        needs="a CUDA device",
        run=run_cuda_context,
    ),
    SuiteEntry(
        name="stopwatch",
        description="a matmul timed with and without the closing barrier",
        applies=lambda device: True,
        needs="nothing",
        run=run_stopwatch,
    ),
    SuiteEntry(
        name="launch_overhead",
        description="seconds per call of a tiny op (eager; CUDA graph on CUDA)",
        applies=lambda device: True,
        needs="nothing",
        run=run_launch_overhead,
    ),
    SuiteEntry(
        name="memory_bandwidth",
        description="copy bandwidth over buffers far larger than the caches",
        applies=lambda device: True,
        needs="nothing",
        run=run_memory_bandwidth,
    ),
    SuiteEntry(
        name="host_copies",
        description="host-to-device and device-to-host copies, pageable and pinned",
        applies=lambda device: device.type in ("cuda", "mps"),
        needs="a GPU (CUDA or MPS)",
        run=run_host_copies,
    ),
    SuiteEntry(
        name="all_reduce",
        description="NCCL all-reduce bus bandwidth by message size across the visible GPUs",
        applies=_many_gpus,
        needs="more than one CUDA GPU",
        run=run_all_reduce,
    ),
)
