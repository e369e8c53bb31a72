"""Profile a callable with ``torch.profiler``: per-op self and total times, calls and memory.

The measured side of the lesson "Where did the time go?" (``lessons/profiling.md``) and of
the suite entry ``profile_step`` (:mod:`gpulesson.results.entries_profiling`).

:func:`profile_callable` runs a callable ``wait + warmup + active`` times under
``torch.profiler.profile`` with ``schedule(wait, warmup, active)``, calling ``prof.step()``
after each call, and keeps what ``key_averages()`` reports for the active calls: one
:class:`OpStat` per row (an operator, or a label the code put there with
``record_function``), with self and total times in seconds, the call count and the memory
allocated minus freed. The steps, in order:

1. set the thread count (CPU timings follow it; restored afterwards);
2. for each call: barrier, clock, call, barrier, clock, ``prof.step()``; the clock readings
   of the active calls are the step samples (the profiler is on while they run);
3. read ``key_averages()`` and, if asked, the Chrome trace (``export_chrome_trace``),
   kept gzip-compressed without the per-allocation ``[memory]`` events.

*Self* time is time in a row's own code; *total* time adds the rows it called. On a CPU
profile the times are CPU time; on CUDA the share of each row is its own kernels' time
(``self_device_time_total``, ``self_cuda_time_total`` before torch 2.4: :func:`device_field`),
which is what the GPU spent. :func:`labelled_step` builds the
course's GPT training step with the regions ``forward``, ``backward``, ``optimizer.step``
and ``zero_grad`` labelled; :func:`profile_gpt_step` profiles it.

>>> import torch
>>> a = torch.ones(64, 64)
>>> p = profile_callable(lambda: a @ a @ a, wait=0, warmup=1, active=2)
>>> p.op("aten::mm").calls  # two matmuls a call, two active calls
4
>>> 0 < p.share(p.op("aten::mm")) <= 1
True
"""

from __future__ import annotations

import contextlib
import gzip
import json
import math
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from gpulesson.memory.gpt2 import GPT2, GPT2Config
from gpulesson.timing.bench import barrier
from gpulesson.units import MIB

# The regions the course's training step labels with record_function, in step order.
REGIONS = ("forward", "backward", "optimizer.step", "zero_grad")
# Rows that are matrix multiplications: the family whose share the lesson reads.
MATMUL_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")
STEP_PREFIX = "ProfilerStep"  # the row prof.step() adds for each profiled step
DEVICES = ("cpu", "cuda", "mps")
# The step the lesson profiles: the course's GPT with 2 blocks, about 2.1 million
# parameters and 512 tokens a step: about a third of a second on one CPU core.
PROFILE_CONFIG = GPT2Config(
    vocab_size=2048, seq_len=128, hidden=256, heads=4, layers=2, attention="eager"
)
PROFILE_BATCH = 4
# One thread: on a shared build machine a second thread makes elementwise ops wait on
# each other, and the table would show the waiting instead of the work.
PROFILE_THREADS = 1
TRACE_DROPPED_EVENTS = ("[memory]",)  # one instant per allocation: most of a trace's size


@dataclass(frozen=True, kw_only=True)
class OpStat:
    """One row of ``key_averages()``: an operator, a label the code put in the step, a kernel.

    On a CUDA profile the kernels and copies the GPU ran are rows of their own (kind
    ``kernel``), and each operator's ``self_device_s`` is the time of the kernels it launched
    itself, so the kernel rows and the operator rows count the same GPU time twice: shares
    are taken over the kernel rows (as torch's own table does).
    Times are seconds summed over the active steps; ``calls`` counts them all. Memory is
    bytes allocated minus bytes freed on the profiled device (CPU RAM on a CPU profile, GPU
    memory on CUDA) while the row ran: *self* in its own code, *total* with what it called.
    """

    name: str
    kind: str  # "op"; "label" (record_function regions, ProfilerStep); "kernel" (GPU work)
    calls: int
    self_cpu_s: float
    total_cpu_s: float
    self_device_s: float
    total_device_s: float
    self_memory_bytes: int
    total_memory_bytes: int
    on_device: bool = False  # a row of the GPU's timeline (a kernel, a copy, a GPU range)


@dataclass(frozen=True, kw_only=True)
class StepProfile:
    """What the profiler saw over the ``active`` steps of a schedule, with the step times.

    ``ops`` holds every row, sorted by :meth:`self_s` (largest first). ``step_samples_s``
    are wall-clock seconds of each active step with the profiler on. ``trace_gz`` is the
    gzip-compressed Chrome trace when one was asked for.
    """

    device: str
    threads: int
    wait: int
    warmup: int
    active: int
    memory: bool
    ops: tuple[OpStat, ...]
    step_samples_s: tuple[float, ...]
    trace_gz: bytes | None = field(default=None, repr=False)

    @property
    def basis(self) -> str:
        """Which time the shares are of: the GPU's kernel time on CUDA, else CPU time."""
        return "self CUDA time" if self.device == "cuda" else "self CPU time"

    def self_s(self, row: OpStat) -> float:
        """A row's own time on the profile's basis (kernel time on CUDA, CPU time elsewhere)."""
        return row.self_device_s if self.device == "cuda" else row.self_cpu_s

    def total_s(self, row: OpStat) -> float:
        """A row's time with what it called, on the profile's basis."""
        return row.total_device_s if self.device == "cuda" else row.total_cpu_s

    @property
    def self_sum_s(self) -> float:
        """What shares are shares of, as in torch's table: kernel time on CUDA, else all CPU."""
        if self.device == "cuda":
            return sum(r.self_device_s for r in self.ops if r.kind == "kernel")
        return sum(r.self_cpu_s for r in self.ops)

    def share(self, row: OpStat) -> float:
        """A row's self time over :attr:`self_sum_s` (0 to 1)."""
        total = self.self_sum_s
        return self.self_s(row) / total if total > 0 else 0.0

    def op(self, name: str) -> OpStat:
        """The row called ``name`` (the CPU-side one, when a label also has a GPU row).

        ``ValueError`` listing the largest rows when there is none.
        """
        found = [r for r in self.ops if r.name == name]
        if found:
            return next((r for r in found if r.kind != "kernel" and not r.on_device), found[0])
        listed = ", ".join(r.name for r in self.ops[:12])
        raise ValueError(f"no row {name!r} in the profile (largest rows: {listed})")

    def has(self, name: str) -> bool:
        """Whether a row called ``name`` exists."""
        return any(r.name == name for r in self.ops)

    @property
    def op_rows(self) -> tuple[OpStat, ...]:
        """The operator rows (labels and kernels left out), largest self time first."""
        return tuple(r for r in self.ops if r.kind == "op")

    @property
    def top(self) -> OpStat:
        """The operator with the largest self time."""
        rows = self.op_rows
        if not rows:
            raise ValueError("the profile recorded no operator: did the callable run any op?")
        return rows[0]

    def family_share(self, names: Sequence[str]) -> float:
        """The shares of the rows called ``names`` added up (absent rows count 0)."""
        return sum(self.share(r) for r in self.ops if r.name in names)

    def top_outside(self, names: Sequence[str]) -> OpStat:
        """The operator with the largest self time whose name is not in ``names``."""
        for row in self.op_rows:
            if row.name not in names:
                return row
        raise ValueError(f"every operator in the profile is one of {', '.join(names)}")

    def regions(self, names: Sequence[str] = REGIONS) -> tuple[OpStat, ...]:
        """The labelled regions present in the profile, in the order of ``names``."""
        return tuple(self.op(n) for n in names if self.has(n))

    def region_share(self, row: OpStat, names: Sequence[str] = REGIONS) -> float:
        """A region's total time over the regions' total times added up (0 to 1)."""
        whole = sum(self.total_s(r) for r in self.regions(names))
        return self.total_s(row) / whole if whole > 0 else 0.0

    def calls_per_step(self, row: OpStat) -> float:
        """How many times the row ran in one active step."""
        return row.calls / self.active

    def memory_per_step_bytes(self, row: OpStat, *, self_only: bool = False) -> float:
        """Bytes the row allocated minus freed in one active step (self, or with callees)."""
        n = row.self_memory_bytes if self_only else row.total_memory_bytes
        return n / self.active

    def by_memory(self) -> tuple[OpStat, ...]:
        """The operator rows, largest self memory first."""
        rows = sorted(self.op_rows, key=lambda r: (r.self_memory_bytes, r.name), reverse=True)
        return tuple(rows)

    def allocated_bytes(self) -> float:
        """Self memory of the rows that allocated more than they freed, per step."""
        return sum(max(0, r.self_memory_bytes) for r in self.ops) / self.active

    def net_memory_bytes(self) -> float:
        """Self memory of every row added up, per step: 0 when the step frees all it allocates."""
        return sum(r.self_memory_bytes for r in self.ops) / self.active

    @property
    def step_s(self) -> float:
        """Median wall-clock seconds of an active step (profiler on)."""
        ordered = sorted(self.step_samples_s)
        mid = len(ordered) // 2
        return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2

    @property
    def busy_share(self) -> float:
        """Self time of the operators over the active steps' wall time.

        On CUDA: the share of the step the GPU spent running kernels. On a CPU: the share
        spent inside operators rather than in Python between them.
        """
        wall = sum(self.step_samples_s)
        if self.device == "cuda":
            busy = sum(r.self_device_s for r in self.ops if r.kind == "kernel")
        else:
            busy = sum(r.self_cpu_s for r in self.op_rows)
        return busy / wall if wall > 0 else 0.0

    @property
    def trace_size_bytes(self) -> int:
        """Size of the compressed trace (0 without one)."""
        return len(self.trace_gz or b"")

    def trace_json(self) -> dict[str, Any]:
        """The Chrome trace as JSON data; ``ValueError`` when none was recorded."""
        if self.trace_gz is None:
            raise ValueError("no trace in this profile: profile again with trace=True")
        return json.loads(gzip.decompress(self.trace_gz))


def _check_counts(wait: int, warmup: int, active: int) -> None:
    for name, value, least in (("wait", wait, 0), ("warmup", warmup, 0), ("active", active, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(
                f"{name}={value!r} must be a whole number >= {least}: the schedule runs "
                "wait + warmup + active calls and records the active ones"
            )


def check_device(device: str) -> str:
    """A device name the profiler can run on here; ``ValueError`` with the fix otherwise.

    >>> check_device("cpu")
    'cpu'
    >>> check_device("tpu")
    Traceback (most recent call last):
    ...
    ValueError: device 'tpu' is not one of cpu, cuda, mps: pick one of them
    """
    if device not in DEVICES:
        raise ValueError(f"device {device!r} is not one of {', '.join(DEVICES)}: pick one of them")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' asked for, but torch sees no CUDA GPU: use cpu")
    if device == "mps" and not torch.backends.mps.is_available():
        raise ValueError("device 'mps' asked for, but this machine has no Apple GPU: use cpu")
    return device


@contextlib.contextmanager
def _threads(threads: int | None) -> Iterator[int]:
    before = torch.get_num_threads()
    if threads is not None:
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ValueError(f"threads={threads!r} must be a whole number >= 1")
        torch.set_num_threads(threads)
    try:
        yield torch.get_num_threads()
    finally:
        torch.set_num_threads(before)


def row_kind(name: str, labels: Sequence[str], *, on_device: bool, annotation: bool) -> str:
    """What a row is: ``label`` (a region or a profiler step), ``kernel`` (GPU work) or ``op``.

    >>> row_kind("forward", ("forward",), on_device=True, annotation=True)
    'label'
    >>> row_kind("ampere_sgemm_128x64_tn", (), on_device=True, annotation=False)
    'kernel'
    >>> row_kind("aten::mm", (), on_device=False, annotation=False)
    'op'
    """
    if annotation or name in labels or name.startswith(STEP_PREFIX):
        return "label"
    return "kernel" if on_device else "op"


def device_field(event: Any, name: str) -> float:
    """The device figure ``name`` of a profiler row, under the name this torch gives it.

    torch 2.4 renamed the CUDA columns to device ones (``self_cuda_time_total`` became
    ``self_device_time_total``, ``cuda_memory_usage`` became ``device_memory_usage``) and
    deprecated the old names; torch 2.2 and 2.3 have only the old ones. ``name`` is the new
    name; a row without it is read under the old one, so no deprecation warning is raised
    on a new torch and no ``AttributeError`` on an old one.

    >>> class Old:  # a torch 2.2 row
    ...     self_cuda_time_total = 7.0
    >>> device_field(Old(), "self_device_time_total")
    7.0
    >>> class New:  # a torch 2.4+ row
    ...     self_device_time_total = 5.0
    ...     self_cuda_time_total = 1.0  # deprecated: never read
    >>> device_field(New(), "self_device_time_total")
    5.0
    """
    if hasattr(event, name):
        return float(getattr(event, name))
    return float(getattr(event, name.replace("device", "cuda")))


def _row(event: Any, labels: Sequence[str], device: str) -> OpStat:
    on_cuda = device == "cuda"
    on_device = on_cuda and "CPU" not in str(getattr(event, "device_type", "CPU"))
    annotation = bool(getattr(event, "is_user_annotation", False))
    return OpStat(
        name=str(event.key),
        kind=row_kind(str(event.key), labels, on_device=on_device, annotation=annotation),
        on_device=on_device,
        calls=int(event.count),
        self_cpu_s=float(event.self_cpu_time_total) / 1e6,
        total_cpu_s=float(event.cpu_time_total) / 1e6,
        self_device_s=device_field(event, "self_device_time_total") / 1e6 if on_cuda else 0.0,
        total_device_s=device_field(event, "device_time_total") / 1e6 if on_cuda else 0.0,
        self_memory_bytes=int(
            device_field(event, "self_device_memory_usage")
            if on_cuda
            else event.self_cpu_memory_usage
        ),
        total_memory_bytes=int(
            device_field(event, "device_memory_usage") if on_cuda else event.cpu_memory_usage
        ),
    )


def compact_trace(raw: bytes, dropped: Sequence[str] = TRACE_DROPPED_EVENTS) -> bytes:
    """A Chrome trace without the events named ``dropped``, minified and gzip-compressed.

    ``mtime=0`` keeps the compressed bytes the same for the same trace.

    >>> raw = json.dumps({"traceEvents": [{"name": "[memory]"}, {"name": "aten::mm"}]})
    >>> json.loads(gzip.decompress(compact_trace(raw.encode())))["traceEvents"]
    [{'name': 'aten::mm'}]
    """
    data = json.loads(raw)
    data["traceEvents"] = [e for e in data.get("traceEvents", []) if e.get("name") not in dropped]
    return gzip.compress(json.dumps(data, separators=(",", ":")).encode(), mtime=0)


def _export_trace(prof: profile) -> bytes:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, "trace.json")
        prof.export_chrome_trace(str(path))
        return compact_trace(path.read_bytes())


def quiet_kineto() -> None:
    """Silence the profiler library's console lines where there is no CUDA device to trace.

    Kineto, the library under ``torch.profiler``, prints ``USDT: ... profiler_start`` and
    ``profiler_stop`` for every profile, and with a CUDA build of torch on a machine
    without a GPU also ``ERROR: ... gpuGetDeviceCount failed with code 35``: noise in a
    site build's log, and an alarming line for a reader whose build is fine. It reads
    ``KINETO_LOG_LEVEL`` once, when the first profile of the process starts, and prints
    the messages at that level and above: its ``LoggerOutputType`` runs from VERBOSE (0) to
    ERROR (4) (``libkineto/include/ILoggerObserver.h`` in pytorch/kineto), and with torch
    2.13 and 2.14 level 5 still printed the USDT lines while 6 printed nothing (measured
    here). With a CUDA device the messages stay (a CUPTI failure shows there), and a level
    the reader set is kept.
    """
    if not torch.cuda.is_available():
        os.environ.setdefault("KINETO_LOG_LEVEL", "6")


def profile_callable(
    fn: Callable[[], Any],
    *,
    device: str = "cpu",
    wait: int = 1,
    warmup: int = 1,
    active: int = 1,
    memory: bool = False,
    labels: Sequence[str] = (),
    trace: bool = False,
    threads: int | None = None,
) -> StepProfile:
    """Call ``fn`` ``wait + warmup + active`` times under the profiler; keep the active calls.

    ``device`` is where ``fn`` runs (``cuda`` adds the CUDA activity, so rows get kernel
    times); ``memory`` turns on ``profile_memory``; ``labels`` are the ``record_function``
    names ``fn`` uses (their rows are kind ``label``); ``trace`` keeps the Chrome trace.
    With ``wait = warmup = 0`` there is no schedule: the first call is the one profiled.
    """
    _check_counts(wait, warmup, active)
    check_device(device)
    activities = [ProfilerActivity.CPU]
    if device == "cuda":
        activities.append(ProfilerActivity.CUDA)
    plan = schedule(wait=wait, warmup=warmup, active=active, repeat=1) if wait or warmup else None
    samples: list[float] = []
    quiet_kineto()
    with _threads(threads) as used:
        with profile(activities=activities, schedule=plan, profile_memory=memory) as prof:
            for index in range(wait + warmup + active):
                barrier(device)
                start = time.perf_counter()
                fn()
                barrier(device)
                if index >= wait + warmup:
                    samples.append(time.perf_counter() - start)
                prof.step()
        rows = [_row(e, labels, device) for e in prof.key_averages()]
        packed = _export_trace(prof) if trace else None
    on_cuda = device == "cuda"
    rows.sort(key=lambda r: (r.self_device_s if on_cuda else r.self_cpu_s, r.name), reverse=True)
    return StepProfile(
        device=device,
        threads=used,
        wait=wait,
        warmup=warmup,
        active=active,
        memory=memory,
        ops=tuple(rows),
        step_samples_s=tuple(samples),
        trace_gz=packed,
    )


def labelled_step(
    config: GPT2Config = PROFILE_CONFIG,
    batch: int = PROFILE_BATCH,
    device: str = "cpu",
    seed: int = 0,
) -> tuple[Callable[[], None], int]:
    """The course's GPT training step with its four regions labelled; and its parameter count.

    Each call runs ``forward`` (the loss), ``backward``, ``optimizer.step`` (AdamW) and
    ``zero_grad`` (gradients set to None), each inside ``record_function(name)``.

    >>> step, n = labelled_step(GPT2Config(vocab_size=64, seq_len=8, hidden=16, heads=2,
    ...                                    layers=1), batch=2)
    >>> step(); n
    4464
    """
    check_device(device)
    torch.manual_seed(seed)
    model = GPT2(config).to(device)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    idx = torch.randint(0, config.vocab_size, (batch, config.seq_len), device=device)
    targets = torch.randint(0, config.vocab_size, (batch, config.seq_len), device=device)

    def step() -> None:
        with record_function("forward"):
            loss = model(idx, targets)
        with record_function("backward"):
            loss.backward()
        with record_function("optimizer.step"):
            optimizer.step()
        with record_function("zero_grad"):
            optimizer.zero_grad(set_to_none=True)

    return step, model.num_parameters()


@dataclass(frozen=True, kw_only=True)
class GptStepProfile:
    """A profile of the course's GPT step, with the model's shape and parameter count."""

    config: GPT2Config
    batch: int
    parameters: int
    profile: StepProfile

    @property
    def tokens(self) -> int:
        """Tokens in one step: batch x sequence length."""
        return self.batch * self.config.seq_len

    @property
    def weight_bytes(self) -> int:
        """Bytes of the fp32 weights: 4 per parameter."""
        return 4 * self.parameters

    @property
    def adam_state_bytes(self) -> int:
        """Bytes of AdamW's two fp32 moments: 8 per parameter."""
        return 8 * self.parameters

    def calls_per_step(self, name: str) -> float:
        """How many times the row ``name`` ran in one active step."""
        return self.profile.calls_per_step(self.profile.op(name))

    def region_memory_bytes(self, name: str) -> float:
        """Bytes a labelled region allocated minus freed, per active step."""
        return self.profile.memory_per_step_bytes(self.profile.op(name))


def profile_gpt_step(
    config: GPT2Config = PROFILE_CONFIG,
    batch: int = PROFILE_BATCH,
    *,
    device: str = "cpu",
    wait: int = 1,
    warmup: int = 1,
    active: int = 1,
    memory: bool = True,
    trace: bool = False,
    threads: int | None = PROFILE_THREADS,
) -> GptStepProfile:
    """Profile :func:`labelled_step` with ``schedule(wait, warmup, active)``.

    ``wait = warmup = 0`` profiles the very first step, before AdamW has its state.
    ``threads`` applies to a CPU profile, model building included (None keeps torch's
    setting); torch's setting is restored afterwards.
    """
    with _threads(threads if device == "cpu" else None) as used:
        step, parameters = labelled_step(config, batch, device)
        result = profile_callable(
            step,
            device=device,
            wait=wait,
            warmup=warmup,
            active=active,
            memory=memory,
            labels=REGIONS,
            trace=trace,
            threads=used,
        )
    return GptStepProfile(config=config, batch=batch, parameters=parameters, profile=result)


@dataclass(frozen=True, kw_only=True)
class FirstAndSteady:
    """One model's very first training step, and a steady step after it, each profiled."""

    first: GptStepProfile
    steady: GptStepProfile


def profile_first_and_steady(
    config: GPT2Config = PROFILE_CONFIG,
    batch: int = PROFILE_BATCH,
    *,
    device: str = "cpu",
    memory: bool = True,
    threads: int | None = PROFILE_THREADS,
) -> FirstAndSteady:
    """Profile a new model's first step (no schedule), then a step after one warm-up step.

    The first step is what a profiler started around "the training loop" records first: it
    includes one-off work (AdamW creates its state on its first call). The second profile
    uses ``schedule(wait=0, warmup=1, active=1)`` on the same model.
    """
    with _threads(threads if device == "cpu" else None) as used:
        step, parameters = labelled_step(config, batch, device)
        kwargs: dict[str, Any] = {
            "device": device,
            "memory": memory,
            "labels": REGIONS,
            "threads": used,
        }
        first = profile_callable(step, wait=0, warmup=0, active=1, **kwargs)
        steady = profile_callable(step, wait=0, warmup=1, active=1, **kwargs)
    return FirstAndSteady(
        first=GptStepProfile(config=config, batch=batch, parameters=parameters, profile=first),
        steady=GptStepProfile(config=config, batch=batch, parameters=parameters, profile=steady),
    )


# --- the figures the lesson reads ---------------------------------------------------------

# A figure the lesson reads off a profile: its value and its unit, by name.
Reading = dict[str, tuple[float | int | str, str]]


def _per_step_ms(p: StepProfile, seconds: float) -> float:
    return 1e3 * seconds / p.active


def table_reading(g: GptStepProfile) -> Reading:
    """The op table's figures: the leading op, the matmuls' share, call counts, self vs total.

    Shares are percentages of the self time of every row; times are per active step.

    >>> r = table_reading(profile_gpt_step(GPT2Config(vocab_size=64, seq_len=8, hidden=16,
    ...                   heads=2, layers=1, attention="eager"), 2, memory=False))
    >>> r["addmm_calls"], r["mm_calls"], r["linear_calls"]
    ((4.0, 'calls'), (11.0, 'calls'), (5.0, 'calls'))
    """
    p = g.profile
    matmuls = [p.op(n) for n in MATMUL_OPS if p.has(n)]
    other = p.top_outside(MATMUL_OPS)
    linear, backward = p.op("aten::linear"), p.op("backward")
    return {
        "step_ms": (1e3 * p.step_s, "ms"),
        "busy_share": (p.busy_share, "share"),
        "layers": (g.config.layers, "blocks"),
        "parameters": (g.parameters, "parameters"),
        "top_op": (p.top.name, ""),
        "top_share_pct": (percent(p.share(p.top)), "%"),
        "top_matmul_share_pct": (percent(max(p.share(r) for r in matmuls)), "%"),
        "matmul_share_pct": (percent(p.family_share(MATMUL_OPS)), "%"),
        "top_other_op": (other.name, ""),
        "top_other_share_pct": (percent(p.share(other)), "%"),
        "addmm_calls": (g.calls_per_step("aten::addmm"), "calls"),
        "mm_calls": (g.calls_per_step("aten::mm"), "calls"),
        "bmm_calls": (g.calls_per_step("aten::bmm"), "calls"),
        "linear_calls": (g.calls_per_step("aten::linear"), "calls"),
        "linear_self_ms": (_per_step_ms(p, p.self_s(linear)), "ms"),
        "linear_total_ms": (_per_step_ms(p, p.total_s(linear)), "ms"),
        "backward_self_ms": (_per_step_ms(p, p.self_s(backward)), "ms"),
        "backward_total_ms": (_per_step_ms(p, p.total_s(backward)), "ms"),
    }


def region_reading(g: GptStepProfile) -> Reading:
    """The labelled regions' times per step (ms) and the backward's time over the forward's."""
    p = g.profile
    ms = {r.name: _per_step_ms(p, p.total_s(r)) for r in p.regions()}
    return {
        "forward_ms": (ms["forward"], "ms"),
        "backward_ms": (ms["backward"], "ms"),
        "optimizer_ms": (ms["optimizer.step"], "ms"),
        "zero_grad_ms": (ms["zero_grad"], "ms"),
        "backward_over_forward": (ms["backward"] / ms["forward"], "x"),
    }


def memory_reading(g: GptStepProfile) -> Reading:
    """What the step allocated (MiB per step): in all, net, by the matmuls, by each region."""
    p = g.profile
    allocated = p.allocated_bytes()
    other = next(r for r in p.by_memory() if r.name not in MATMUL_OPS)
    matmul = sum(p.memory_per_step_bytes(p.op(n), self_only=True) for n in MATMUL_OPS if p.has(n))
    regions = {r.name: p.memory_per_step_bytes(r) / MIB for r in p.regions()}
    return {
        "allocated_mib": (allocated / MIB, "MiB"),
        "net_mib": (p.net_memory_bytes() / MIB, "MiB"),
        "weights_mib": (g.weight_bytes / MIB, "MiB"),
        "churn_x": (allocated / g.weight_bytes, "x"),
        "matmul_alloc_mib": (matmul / MIB, "MiB"),
        "top_other_alloc_op": (other.name, ""),
        "top_other_alloc_mib": (p.memory_per_step_bytes(other, self_only=True) / MIB, "MiB"),
        "forward_mib": (regions["forward"], "MiB"),
        "backward_mib": (regions["backward"], "MiB"),
        "optimizer_mib": (regions["optimizer.step"], "MiB"),
        "zero_grad_mib": (regions["zero_grad"], "MiB"),
        "regions_net_mib": (sum(regions.values()), "MiB"),
    }


def first_step_reading(pair: FirstAndSteady) -> Reading:
    """What the optimizer allocated in the first step and in a steady one, beside AdamW's state."""
    first, steady = pair.first, pair.steady
    return {
        "parameters": (first.parameters, "parameters"),
        "first_optimizer_mib": (first.region_memory_bytes("optimizer.step") / MIB, "MiB"),
        "steady_optimizer_mib": (steady.region_memory_bytes("optimizer.step") / MIB, "MiB"),
        "adam_state_mib": (first.adam_state_bytes / MIB, "MiB"),
    }


def gpu_reading(p: StepProfile) -> Reading:
    """A GPU profile's figures, named as the suite's ``profile_step`` rows give them."""
    return {
        "gpu_step_s": (p.step_s, "s"),
        "gpu_top_share": (p.share(p.top), "ratio"),
        "gpu_matmul_share": (p.family_share(MATMUL_OPS), "ratio"),
        "gpu_busy_share": (p.busy_share, "ratio"),
        "gpu_top_op": (p.top.name, ""),
    }


# --- the CUDA memory snapshot ------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class SnapshotSummary:
    """What a CUDA memory snapshot of training steps recorded, read back from its events.

    ``peak_bytes`` replays the recorded ``alloc`` and ``free_completed`` events from
    ``baseline_bytes`` (what was allocated before recording began);
    ``max_allocated_bytes`` is ``torch.cuda.max_memory_allocated()`` in the last (steady)
    step, which every step after the first reaches, so the replay should reach it too.
    ``phase_peaks_bytes`` is the counter's peak within each region of the last step.
    ``pickle_bytes`` is the size of the snapshot file. ``curve`` is the replay's live bytes
    over the events (:func:`replay_curve`, ``curve_stride`` events a point); ``steps`` the
    training steps recorded.
    """

    events: int
    alloc_events: int
    baseline_bytes: int
    peak_bytes: int
    max_allocated_bytes: int
    phase_peaks_bytes: Mapping[str, int]
    pickle_bytes: int
    steps: int = 3
    curve: tuple[tuple[int, int], ...] = ()
    curve_stride: int = 1


def replay_curve(
    events: Sequence[Mapping[str, Any]], baseline_bytes: int = 0, max_points: int = 5000
) -> tuple[tuple[tuple[int, int], ...], int]:
    """The live bytes after each event (:func:`replay_peak`'s running total), and the stride.

    With more events than ``max_points``, each point stands for ``stride`` events in a row:
    the index of the last of them and the largest total among them, so the peak stays.

    >>> events = [{"action": "alloc", "size": 4}, {"action": "alloc", "size": 2},
    ...           {"action": "free_completed", "size": 4}]
    >>> replay_curve(events, 1)
    (((0, 5), (1, 7), (2, 3)), 1)
    >>> replay_curve(events, 1, max_points=2)
    (((1, 7), (2, 3)), 2)
    """
    live, totals = baseline_bytes, []
    for event in events:
        if event.get("action") == "alloc":
            live += int(event["size"])
        elif event.get("action") == "free_completed":
            live -= int(event["size"])
        totals.append(live)
    stride = max(1, math.ceil(len(totals) / max_points))
    points = tuple(
        (min(i + stride, len(totals)) - 1, max(totals[i : i + stride]))
        for i in range(0, len(totals), stride)
    )
    return points, stride


def replay_peak(events: Sequence[Mapping[str, Any]], baseline_bytes: int = 0) -> int:
    """The most memory live at once in a snapshot's trace: + each alloc, - each completed free.

    >>> replay_peak([{"action": "alloc", "size": 512}, {"action": "alloc", "size": 1024},
    ...              {"action": "free_requested", "size": 512},
    ...              {"action": "free_completed", "size": 512},
    ...              {"action": "alloc", "size": 256}], baseline_bytes=100)
    1636
    """
    live = peak = baseline_bytes
    for event in events:
        if event.get("action") == "alloc":
            live += int(event["size"])
        elif event.get("action") == "free_completed":
            live -= int(event["size"])
        peak = max(peak, live)
    return peak


def snapshot_gpt_step(
    config: GPT2Config = PROFILE_CONFIG,
    batch: int = PROFILE_BATCH,
    steps: int = 3,
    path: str | Path | None = None,
) -> SnapshotSummary:
    """Record a CUDA memory snapshot over ``steps`` training steps (CUDA only).

    Recording starts before the model is built, so weights, gradients, AdamW's state and
    activations all appear. The last step's regions each get a peak from
    ``max_memory_allocated`` (reset at the region's start). ``path``, when given, receives
    the pickle for https://pytorch.org/memory_viz.
    """
    if steps < 2:
        raise ValueError(f"steps={steps!r}: record at least 2 so the last one is a steady step")
    check_device("cuda")
    torch.cuda.synchronize()
    baseline = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    torch.cuda.memory._record_memory_history(max_entries=100_000)
    phase_peaks: dict[str, int] = {}
    try:
        torch.manual_seed(0)
        model = GPT2(config).to("cuda")
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        idx = torch.randint(0, config.vocab_size, (batch, config.seq_len), device="cuda")
        targets = torch.randint(0, config.vocab_size, (batch, config.seq_len), device="cuda")
        for index in range(steps):
            last = index == steps - 1
            for region in REGIONS:
                if last:
                    torch.cuda.synchronize()
                    torch.cuda.reset_peak_memory_stats()
                if region == "forward":
                    loss = model(idx, targets)
                elif region == "backward":
                    loss.backward()
                elif region == "optimizer.step":
                    optimizer.step()
                else:
                    optimizer.zero_grad(set_to_none=True)
                if last:
                    torch.cuda.synchronize()
                    phase_peaks[region] = int(torch.cuda.max_memory_allocated())
        snapshot = torch.cuda.memory._snapshot()
        with tempfile.TemporaryDirectory() as folder:
            target = Path(path) if path is not None else Path(folder, "snapshot.pickle")
            torch.cuda.memory._dump_snapshot(str(target))
            size = target.stat().st_size
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
    events = [e for trace in snapshot.get("device_traces", []) for e in trace]
    overall = max(phase_peaks.values())
    curve, stride = replay_curve(events, int(baseline))
    return SnapshotSummary(
        events=len(events),
        alloc_events=sum(1 for e in events if e.get("action") == "alloc"),
        baseline_bytes=int(baseline),
        peak_bytes=replay_peak(events, int(baseline)),
        max_allocated_bytes=overall,
        phase_peaks_bytes=phase_peaks,
        pickle_bytes=size,
        steps=steps,
        curve=curve,
        curve_stride=stride,
    )


def percent(fraction: float) -> float:
    """A fraction as a percentage, rounded to a tenth (for facts a page prints).

    >>> percent(0.48721)
    48.7
    """
    if not math.isfinite(fraction):
        raise ValueError(f"fraction {fraction!r} is not a number")
    return round(100 * fraction, 1)
