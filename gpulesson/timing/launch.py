"""What one call costs when it does almost no work: launch overhead, measured.

A GPU call pays a fixed cost before any arithmetic happens: PyTorch's dispatch in
Python and C++, then the driver's kernel launch. To see it alone, time an operation
that does almost nothing (an add of two one-element tensors) many times back to back,
with the barrier before each clock reading (``gpulesson.timing.bench.time_samples``),
and divide each reading by the calls it covered. On CUDA the same ops are also
captured once in a CUDA graph and replayed: the replay skips the per-call CPU work,
so what remains per op is the GPU-side cost.

On a CPU there is no launch and no queue: the per-call figure is PyTorch's dispatch
of a tiny op on the CPU, which is what a CPU build of the course can show.

Used by the lesson ``timing.md`` and by the results suite (``gpulesson measure``): the
entry ``launch_overhead``, and the entry ``fusion`` (the lesson ``feeding.md``'s tiny op, at
one thread).

>>> r = measure_launch_overhead("cpu", min_run_time_s=0.01)
>>> r.eager.mode, r.graph is None, 0 < r.median_s < 0.01
('eager', True, True)
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from gpulesson.timing.bench import resolve_threads, time_samples
from gpulesson.timing.inputs import DEVICES
from gpulesson.timing.results import LaunchOverhead, LaunchTiming

TINY_OP = "torch.add(x, y, out=z) on one-element fp32 tensors"
GRAPH_OPS = 100  # ops captured in one CUDA graph; a replay's time is divided by this


def _tiny_op(device: str) -> Callable[[], torch.Tensor]:
    """The op timed: an add whose work (one element) is negligible next to its call."""
    x = torch.ones(1, device=device)
    y = torch.ones(1, device=device)
    z = torch.empty(1, device=device)
    return lambda: torch.add(x, y, out=z)


def _graph_replay(op: Callable[[], torch.Tensor]) -> Callable[[], None]:
    """Capture ``GRAPH_OPS`` calls of ``op`` in one CUDA graph; return its replay."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up on a side stream, as capture requires
        for _ in range(3):
            op()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(GRAPH_OPS):
            op()
    return graph.replay


def measure_launch_overhead(
    device: str = "cpu",
    threads: int | None = None,
    min_run_time_s: float = 0.2,
    graph: bool | None = None,
) -> LaunchOverhead:
    """Median seconds per call of a tiny op on ``device``: eager, and on CUDA graph-replayed.

    Steps: build three one-element tensors on the device; warm up; time blocks of
    back-to-back calls with a barrier before every clock reading; keep each
    block's time divided by its calls as one sample (at least ``MIN_SAMPLES``).
    With ``graph`` (default: on CUDA), capture ``GRAPH_OPS`` calls in a CUDA graph
    and time its replays the same way, dividing by the ops per replay.

    Trade-off: back-to-back calls measure the cost per call a loop pays (the
    CPU-side launch rate), not the latency of one isolated launch, which a single
    reading cannot resolve.
    """
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}: use cuda, mps or cpu")
    threads = resolve_threads(threads)
    if graph is None:
        graph = device == "cuda"
    if graph and device != "cuda":
        raise ValueError(f"CUDA graphs need a CUDA device, not {device}: use graph=False")
    op = _tiny_op(device)
    samples, calls = time_samples(op, device, threads, min_run_time_s)
    eager = LaunchTiming(
        device=device, mode="eager", threads=threads, samples_s=samples, calls_per_sample=calls
    )
    replayed = None
    if graph:
        replay = _graph_replay(op)
        samples, calls = time_samples(replay, device, threads, min_run_time_s)
        replayed = LaunchTiming(
            device=device,
            mode="cuda-graph",
            threads=threads,
            samples_s=tuple(s / GRAPH_OPS for s in samples),
            calls_per_sample=calls * GRAPH_OPS,
        )
    return LaunchOverhead(device=device, op=TINY_OP, eager=eager, graph=replayed)
