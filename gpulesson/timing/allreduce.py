"""A real all-reduce, timed by message size: its algorithm and bus bandwidth, and the ring formula.

Two ways to run one, both returning an :class:`AllReduceSweep`:

* :func:`measure_gloo_sweep`: N processes on this machine's CPU (``torch.distributed``
  with the gloo backend, over loopback TCP only: ``MASTER_ADDR=127.0.0.1``, a free port,
  ``GLOO_SOCKET_IFNAME`` set to the loopback device). The processes are started with the
  ``spawn`` method (a fresh interpreter each: nothing of the caller's threads or CUDA state
  is inherited), and nothing can hang: ``init_process_group`` and every collective have a
  timeout, the parent waits for the results and for the processes with deadlines, and
  kills any process still alive after them. A rank that fails sends its error back, so the
  caller gets it at once, as a ``RuntimeError`` naming the rank.
* :func:`measure_nccl_sweep`: NCCL across every visible CUDA GPU from one process
  (``torch.cuda.nccl.all_reduce`` on one tensor per GPU), timed with the course's
  stopwatch (:func:`gpulesson.timing.roofline.measure_op`: warm-up, barriers around each
  reading). Needs two or more CUDA GPUs.

Timing, for gloo, in the order the code applies it: one untimed all-reduce checks the sum
(every rank holds rank + 1; the result must be N(N+1)/2) and warms the connections; then
for each size, ``warmup`` untimed calls, then ``repeats`` samples, each a barrier followed
by ``calls_per_sample`` back-to-back all-reduces of zeros (zeros never overflow), timed on
every rank. A sample is the slowest rank's reading over the calls it covered: the
collective is finished when the last rank is. Small messages take several calls per
sample, so the barrier's release skew is shared among them.

Bandwidths follow NVIDIA's nccl-tests (``doc/PERFORMANCE.md``): the algorithm bandwidth
is S / t; the bus bandwidth multiplies it by 2(N-1)/N, the share of the message each rank
sends in a ring all-reduce (:func:`gpulesson.memory.comm.ring_all_reduce_bytes`), so it
can be compared with a link's bandwidth whatever N is. With two ranks the factor is 1.

Used by the lesson ``lessons/multi-gpu.md`` and the suite entry ``all_reduce``
(``gpulesson/results/entries_device.py``); rendered by :mod:`gpulesson.course.multi_gpu`.

>>> t = AllReduceTiming(message_bytes=4 * MIB, ranks=4, samples_s=(0.002, 0.001, 0.003))
>>> t.algorithm_bytes_per_s / MIB, t.bus_bytes_per_s / MIB
(2000.0, 3000.0)
"""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from gpulesson.memory.comm import ring_all_reduce_bytes, sent_fraction
from gpulesson.timing.results import Spread
from gpulesson.units import MIB

KIB = 2**10

# The lesson's sizes: 64 KiB to 64 MiB, four times apart.
DEFAULT_SIZES_BYTES: tuple[int, ...] = tuple(64 * KIB * 4**k for k in range(6))
# Small messages take several calls per sample, so that a sample covers at least this much.
SAMPLE_TARGET_BYTES = 4 * MIB
DEFAULT_TIMEOUT_S = 60.0
FP32_BYTES = 4


@dataclass(frozen=True, kw_only=True)
class AllReduceTiming(Spread):
    """One message size: seconds per all-reduce (the slowest rank's), and its bandwidths."""

    message_bytes: int
    ranks: int
    samples_s: tuple[float, ...]
    calls_per_sample: int = 1

    @property
    def algorithm_bytes_per_s(self) -> float:
        """nccl-tests' algorithm bandwidth: message bytes over the median time."""
        return self.message_bytes / self.median_s

    @property
    def sent_bytes(self) -> float:
        """Bytes each rank sends per call in a ring: 2(N-1)/N x the message."""
        return ring_all_reduce_bytes(self.message_bytes, self.ranks)

    @property
    def bus_bytes_per_s(self) -> float:
        """nccl-tests' bus bandwidth: the algorithm bandwidth x 2(N-1)/N."""
        return self.algorithm_bytes_per_s * sent_fraction("all-reduce", self.ranks)


@dataclass(frozen=True, kw_only=True)
class AllReduceSweep:
    """An all-reduce timed at several message sizes, with where and how it ran.

    ``link`` says in words what carried the bytes; ``check_ok`` whether the checked
    all-reduce summed correctly; ``wall_s`` the whole run, start-up included (None when
    the sweep was read back from a result bundle).
    """

    backend: str
    device: str
    ranks: int
    dtype: str
    threads_per_rank: int
    link: str
    timings: tuple[AllReduceTiming, ...]
    check_ok: bool
    wall_s: float | None

    @property
    def largest(self) -> AllReduceTiming:
        """The largest message: the one whose bus bandwidth the ring prediction uses."""
        return max(self.timings, key=lambda t: t.message_bytes)

    @property
    def smallest(self) -> AllReduceTiming:
        """The smallest message."""
        return min(self.timings, key=lambda t: t.message_bytes)


@dataclass(frozen=True, kw_only=True)
class RingPrediction:
    """The ring formula's time for one size, from the bus bandwidth of the largest size."""

    message_bytes: int
    ranks: int
    sent_bytes: float
    bus_bytes_per_s: float
    measured_s: float
    predicted_s: float

    @property
    def measured_over_predicted(self) -> float:
        """How many times the formula's time the all-reduce took."""
        return self.measured_s / self.predicted_s


def ring_predictions(sweep: AllReduceSweep) -> tuple[RingPrediction, ...]:
    """Each size's time as the ring formula predicts it: 2(N-1)/N x S / bus bandwidth.

    The bus bandwidth is the one measured at the largest size, where the bandwidth term
    dominates; smaller messages also pay a fixed cost per call that the formula leaves out.

    >>> sweep = AllReduceSweep(backend="gloo", device="cpu", ranks=2, dtype="fp32",
    ...     threads_per_rank=1, link="loopback", check_ok=True, wall_s=1.0, timings=(
    ...     AllReduceTiming(message_bytes=MIB, ranks=2, samples_s=(0.002,)),
    ...     AllReduceTiming(message_bytes=4 * MIB, ranks=2, samples_s=(0.004,))))
    >>> [round(p.measured_over_predicted, 2) for p in ring_predictions(sweep)]
    [2.0, 1.0]
    """
    bus = sweep.largest.bus_bytes_per_s
    out = []
    for t in sorted(sweep.timings, key=lambda t: t.message_bytes):
        sent = t.sent_bytes
        out.append(
            RingPrediction(
                message_bytes=t.message_bytes,
                ranks=t.ranks,
                sent_bytes=sent,
                bus_bytes_per_s=bus,
                measured_s=t.median_s,
                predicted_s=sent / bus,
            )
        )
    return tuple(out)


def size_label(message_bytes: int) -> str:
    """A message size as a reader says it: whole KiB or MiB when it is one, else bytes.

    >>> size_label(64 * KIB), size_label(16 * MIB), size_label(1000)
    ('64 KiB', '16 MiB', '1,000 B')
    """
    for unit, factor in (("GiB", 2**30), ("MiB", MIB), ("KiB", KIB)):
        if message_bytes >= factor and message_bytes % factor == 0:
            return f"{message_bytes // factor:,} {unit}"
    return f"{message_bytes:,} B"


def size_name(message_bytes: int) -> str:
    """The size as a measurement name's last part: ``64kib``, ``16mib``, ``1000b``.

    >>> size_name(64 * KIB), size_name(256 * MIB)
    ('64kib', '256mib')
    """
    return size_label(message_bytes).replace(",", "").replace(" ", "").lower()


def headline_figures(sweep: AllReduceSweep) -> dict[str, tuple[float | bool, str]]:
    """The figures a page publishes about a sweep: ``{name: (value, unit)}``.

    ``largest_bus_gbs`` and ``smallest_bus_gbs`` (GB/s, 10^9), their sizes in bytes, the
    measured / formula ratio at the smallest and the second-largest size, the ranks, and
    whether the checked sum was right.
    """
    predictions = ring_predictions(sweep)
    second = predictions[-2] if len(predictions) > 1 else predictions[-1]
    return {
        "ranks": (float(sweep.ranks), "ranks"),
        "check_ok": (sweep.check_ok, ""),
        "largest_bytes": (float(sweep.largest.message_bytes), "bytes"),
        "largest_bus_gbs": (sweep.largest.bus_bytes_per_s / 1e9, "GB/s"),
        "largest_ms": (sweep.largest.median_s * 1e3, "ms"),
        "smallest_bytes": (float(sweep.smallest.message_bytes), "bytes"),
        "smallest_bus_gbs": (sweep.smallest.bus_bytes_per_s / 1e9, "GB/s"),
        "smallest_us": (sweep.smallest.median_s * 1e6, "us"),
        "smallest_over_formula": (predictions[0].measured_over_predicted, "x"),
        "second_bytes": (float(second.message_bytes), "bytes"),
        "second_over_formula": (second.measured_over_predicted, "x"),
    }


def check_sizes(sizes_bytes: Sequence[int]) -> tuple[int, ...]:
    """Message sizes in bytes, each a positive multiple of 4 (fp32 elements), distinct.

    >>> check_sizes([4 * MIB, 64 * KIB])
    (65536, 4194304)
    >>> check_sizes([6])
    Traceback (most recent call last):
    ...
    ValueError: message size 6 bytes is not a positive multiple of 4 (fp32 elements): \
use e.g. 65536 (64 KiB)
    """
    if not sizes_bytes:
        raise ValueError("no message sizes: give at least one, e.g. 65536 (64 KiB)")
    for size in sizes_bytes:
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0 or size % 4:
            raise ValueError(
                f"message size {size!r} bytes is not a positive multiple of 4 (fp32 "
                "elements): use e.g. 65536 (64 KiB)"
            )
    if len(set(sizes_bytes)) != len(sizes_bytes):
        raise ValueError(f"message sizes {list(sizes_bytes)} repeat a size: give each once")
    return tuple(sorted(sizes_bytes))


def calls_per_sample(message_bytes: int, target_bytes: int = SAMPLE_TARGET_BYTES) -> int:
    """How many back-to-back calls one sample covers: enough to move ``target_bytes``.

    >>> calls_per_sample(64 * KIB), calls_per_sample(64 * MIB)
    (64, 1)
    """
    return max(1, math.ceil(target_bytes / message_bytes))


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def loopback_interface() -> str:
    """The loopback device's name for ``GLOO_SOCKET_IFNAME``: lo0 on macOS, lo elsewhere."""
    return "lo0" if sys.platform == "darwin" else "lo"


def _rank_main(request: dict[str, Any]) -> None:
    """One rank: join the group over loopback, check the sum, time every size, print JSON.

    Run in a child interpreter by :func:`measure_gloo_sweep`; its last stdout line is
    ``{"status": "ok", ...}`` or ``{"status": "error", "error": ...}``.
    """
    rank, ranks = int(request["rank"]), int(request["ranks"])
    try:
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(request["port"])
        os.environ["GLOO_SOCKET_IFNAME"] = loopback_interface()
        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)
        dist.init_process_group(
            "gloo",
            rank=rank,
            world_size=ranks,
            timeout=timedelta(seconds=float(request["timeout_s"])),
        )
        try:
            check = torch.full((1024,), float(rank + 1))
            dist.all_reduce(check)
            check_ok = bool((check == ranks * (ranks + 1) / 2).all())
            samples: dict[str, list[float]] = {}
            for size in request["sizes_bytes"]:
                buffer = torch.zeros(size // FP32_BYTES)
                calls = calls_per_sample(size)
                for _ in range(int(request["warmup"])):
                    dist.all_reduce(buffer)
                readings = []
                for _ in range(int(request["repeats"])):
                    dist.barrier()
                    start = time.perf_counter()
                    for _ in range(calls):
                        dist.all_reduce(buffer)
                    readings.append((time.perf_counter() - start) / calls)
                samples[str(size)] = readings
            dist.barrier()
        finally:
            dist.destroy_process_group()
        report = {"status": "ok", "rank": rank, "check_ok": check_ok, "samples": samples}
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which raises it
        report = {"status": "error", "rank": rank, "error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(report), flush=True)


# The child interpreter: imports this module from the same folder as the parent did.
_CHILD = (
    "import json, sys; sys.path.insert(0, sys.argv[1]); "
    "from gpulesson.timing.allreduce import _rank_main; _rank_main(json.loads(sys.argv[2]))"
)
_PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])


def _last_json(text: str) -> dict[str, Any] | None:
    for line in reversed(text.strip().splitlines()):
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and "status" in data:
            return data
    return None


def _tail(text: str, limit: int = 300) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    last = lines[-1] if lines else "no output"
    return last if len(last) <= limit else last[: limit - 3] + "..."


def _run_ranks(requests: list[dict[str, Any]], timeout_s: float) -> list[dict[str, Any]]:
    """Start one child interpreter per rank; wait with a deadline; kill what is left.

    Output goes to temporary files, never to pipes, so a chatty child cannot block.
    The first rank that ends without a report ends the run (the others are killed), so a
    failure surfaces at once instead of after the collective timeout.
    """
    procs: list[tuple[subprocess.Popen[bytes], Any, Any]] = []
    deadline = time.perf_counter() + timeout_s
    try:
        for request in requests:
            out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
            proc = subprocess.Popen(
                [sys.executable, "-c", _CHILD, _PACKAGE_PARENT, json.dumps(request)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
            )
            procs.append((proc, out, err))
        while any(p.poll() is None for p, _, _ in procs):
            for rank, (p, _, err) in enumerate(procs):
                if p.poll() not in (None, 0):
                    err.seek(0)
                    raise RuntimeError(
                        f"all-reduce over gloo: rank {rank} exited with status {p.returncode}: "
                        f"{_tail(err.read().decode(errors='replace'))}"
                    )
            if time.perf_counter() > deadline:
                raise RuntimeError(
                    f"all-reduce over gloo: the ranks did not finish within {timeout_s:g} s; "
                    "the processes were stopped"
                )
            time.sleep(0.02)
        reports = []
        for rank, (_, out, err) in enumerate(procs):
            out.seek(0)
            report = _last_json(out.read().decode(errors="replace"))
            if report is None:
                err.seek(0)
                raise RuntimeError(
                    f"all-reduce over gloo: rank {rank} sent no report: "
                    f"{_tail(err.read().decode(errors='replace'))}"
                )
            if report["status"] != "ok":
                raise RuntimeError(f"all-reduce over gloo: rank {rank} failed: {report['error']}")
            reports.append(report)
        return reports
    finally:
        for p, out, err in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
            out.close()
            err.close()


def measure_gloo_sweep(
    sizes_bytes: Sequence[int] = DEFAULT_SIZES_BYTES,
    *,
    ranks: int = 2,
    warmup: int = 2,
    repeats: int = 7,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> AllReduceSweep:
    """Time an all-reduce of each size on ``ranks`` CPU processes (gloo over loopback).

    Raises ``RuntimeError`` naming the rank when one fails, and when the ranks have not
    finished within ``timeout_s`` (the processes are killed first).

    >>> sweep = measure_gloo_sweep([64 * KIB], repeats=2, warmup=1, timeout_s=60)
    >>> sweep.check_ok, sweep.ranks, sweep.timings[0].repeats
    (True, 2, 2)
    """
    sizes = check_sizes(sizes_bytes)
    if isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 2:
        raise ValueError(f"ranks={ranks!r}: an all-reduce needs at least 2 processes")
    for name, value in (("warmup", warmup), ("repeats", repeats)):
        if isinstance(value, bool) or not isinstance(value, int) or value < (name == "repeats"):
            raise ValueError(f"{name}={value!r} must be a whole number (repeats at least 1)")
    if not math.isfinite(timeout_s) or timeout_s <= 0:
        raise ValueError(f"timeout_s={timeout_s!r} must be a positive number of seconds")
    started = time.perf_counter()
    port = free_port()
    request = {
        "ranks": ranks,
        "port": port,
        "sizes_bytes": list(sizes),
        "warmup": warmup,
        "repeats": repeats,
        # The group's own timeout ends a stuck collective a little before the parent's.
        "timeout_s": max(timeout_s - 5.0, timeout_s / 2),
    }
    reports = _run_ranks([{**request, "rank": r} for r in range(ranks)], timeout_s)
    timings = []
    for size in sizes:
        per_rank = [report["samples"][str(size)] for report in reports]
        slowest = tuple(max(readings) for readings in zip(*per_rank, strict=True))
        timings.append(
            AllReduceTiming(
                message_bytes=size,
                ranks=ranks,
                samples_s=slowest,
                calls_per_sample=calls_per_sample(size),
            )
        )
    return AllReduceSweep(
        backend="gloo",
        device="cpu",
        ranks=ranks,
        dtype="fp32",
        threads_per_rank=1,
        link="loopback TCP on one machine (127.0.0.1)",
        timings=tuple(timings),
        check_ok=all(bool(report["check_ok"]) for report in reports),
        wall_s=time.perf_counter() - started,
    )


def measure_nccl_sweep(
    sizes_bytes: Sequence[int], *, min_run_time_s: float = 0.1
) -> AllReduceSweep:
    """Time NCCL's all-reduce across every visible CUDA GPU, one tensor per GPU, by size.

    Each reading synchronizes every GPU, so it stops when the last one is done. Raises
    ``ValueError`` with fewer than two CUDA GPUs.
    """
    import torch

    from gpulesson.timing.roofline import measure_op

    sizes = check_sizes(sizes_bytes)
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count < 2:
        raise ValueError(
            f"an NCCL all-reduce needs at least 2 CUDA GPUs, this machine has {count}: "
            "use measure_gloo_sweep on the CPU"
        )
    started = time.perf_counter()
    checks = [torch.full((1024,), float(i + 1), device=f"cuda:{i}") for i in range(count)]
    torch.cuda.nccl.all_reduce(checks)
    check_ok = all(bool((c == count * (count + 1) / 2).all()) for c in checks)
    timings = []
    for size in sizes:
        tensors = [torch.zeros(size // FP32_BYTES, device=f"cuda:{i}") for i in range(count)]

        def all_reduce(tensors: list[Any] = tensors) -> None:
            torch.cuda.nccl.all_reduce(tensors)
            for i in range(count):
                torch.cuda.synchronize(i)

        op = measure_op("all-reduce", all_reduce, "cuda", "fp32", 0, size, min_run_time_s)
        timings.append(
            AllReduceTiming(
                message_bytes=size,
                ranks=count,
                samples_s=op.samples_s,
                calls_per_sample=op.calls_per_sample,
            )
        )
        del tensors
    return AllReduceSweep(
        backend="nccl",
        device="cuda",
        ranks=count,
        dtype="fp32",
        threads_per_rank=torch.get_num_threads(),
        link="whatever NCCL chose between these GPUs (NVLink, PCIe or through the host)",
        timings=tuple(timings),
        check_ok=check_ok,
        wall_s=time.perf_counter() - started,
    )
