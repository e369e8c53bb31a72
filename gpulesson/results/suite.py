"""The measurement suite: a registry of named entries that ``gpulesson measure`` runs in order.

An entry is a :class:`SuiteEntry`: a name, a one-line description, ``applies(device)``
(does it make sense on this device?), ``needs`` (said when it does not), and ``run(context)``
returning :class:`~gpulesson.results.bundle.Measurement` objects (and, for a part that
could not run, a :class:`~gpulesson.results.bundle.Skipped` saying why: a dtype this GPU
refuses, say; for a file it made beside them, an :class:`Attachment`). Entries live in the
modules listed in ``ENTRY_MODULES``, each of which defines a tuple ``ENTRIES``; the suite
runs them in that order. To add a row from a lesson (decode tokens/s, a training step's
FLOP/s for MFU, all-reduce bus bandwidth...):

1. write ``gpulesson/results/entries_<topic>.py`` with a function ``run(context)`` that calls
   the same package function the lesson calls and wraps its result in Measurements (use
   :func:`gpulesson.results.measurements.from_timing` for timings), and
   ``ENTRIES = (SuiteEntry(name=..., description=..., applies=..., needs=..., run=run),)``;
2. add the module's name and its entries' names to ``ENTRY_MODULES``;
3. size it from ``context.quick`` and ``context.device`` so ``--quick`` stays under a minute
   on a 2-core CPU and the full suite under five minutes on one GPU, and keep every buffer
   within ``context.memory_budget_bytes``.

:func:`run_suite` runs the entries that apply, reports progress through a callback, and
turns an entry that raises into a skipped line with the error, so one broken entry never
loses the rest of a GPU run.

>>> entry = SuiteEntry(name="noop", description="does nothing", applies=lambda d: True,
...                    needs="nothing", run=lambda c: [])
>>> run = run_suite(Context(device=Device.this("cpu"), quick=True), selected=(entry,))
>>> run.measurements, run.skipped, run.errors
((), (), ())
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import torch

from gpulesson.results.bundle import Measurement, Skipped

# Modules that define ENTRIES, in the order their entries run, each with the names of its
# entries in order: so one entry is found by importing only its own module (a lesson block
# that asks for it depends on that module alone). entries() checks the names against ENTRIES.
ENTRY_MODULES: dict[str, tuple[str, ...]] = {
    "gpulesson.results.entries_device": (
        "cuda_context",
        "stopwatch",
        "launch_overhead",
        "memory_bandwidth",
        "host_copies",
        "all_reduce",
    ),
    "gpulesson.results.entries_matmul": ("matmul", "matmul_peak", "matmul_sweep"),
    "gpulesson.results.entries_roofline": ("roofline",),
    "gpulesson.results.entries_memory": (
        "gpt_memory",
        "oom",
        "gpt_memory_step",
        "gpt_memory_timeline",
        "hf_memory",
        "gpt_block_saved",
    ),
    "gpulesson.results.entries_decode": ("decode",),
    "gpulesson.results.entries_allreduce": ("all_reduce_gloo",),
    "gpulesson.results.entries_compute": ("train_step",),
    "gpulesson.results.entries_precision": ("amp_step", "tf32_accuracy", "autocast_trace"),
    "gpulesson.results.entries_profiling": ("profile_step", "profile_trace"),
    "gpulesson.results.entries_feeding": ("loader", "fusion", "alignment", "copy_call"),
    "gpulesson.results.entries_syncs": ("syncs",),
    "gpulesson.results.entries_inside": ("cache_sweep", "strided", "attention", "fp8_matmul"),
}

# The param of the row that names an Attachment (a bundle that has the row lacks the file).
ATTACHMENT_PARAM = "attachment"

# Share of free device memory (or available RAM) one entry's buffers may take.
MEMORY_BUDGET_SHARE = 0.5


@dataclass(frozen=True)
class Device:
    """The device the suite runs on, as entries need it: kind, name, memory, GPU count."""

    type: str  # "cuda", "mps" or "cpu"
    name: str
    total_bytes: int | None
    free_bytes: int | None
    count: int
    capability: tuple[int, int] | None

    @classmethod
    def this(cls, device_type: str) -> Device:
        """Describe this machine's ``device_type`` device (GPU 0 on CUDA)."""
        import psutil

        if device_type == "cuda":
            props = torch.cuda.get_device_properties(0)
            free, total = torch.cuda.mem_get_info(0)
            return cls(
                type="cuda",
                name=str(props.name),
                total_bytes=int(total),
                free_bytes=int(free),
                count=torch.cuda.device_count(),
                capability=(int(props.major), int(props.minor)),
            )
        memory = psutil.virtual_memory()
        return cls(
            type=device_type,
            name=device_type,
            total_bytes=int(memory.total),
            free_bytes=int(memory.available),
            count=0,
            capability=None,
        )


@dataclass(frozen=True)
class Context:
    """What an entry is given: the device, whether the run is ``--quick``, a memory budget."""

    device: Device
    quick: bool

    @property
    def memory_budget_bytes(self) -> int:
        """The most memory one entry's buffers may take (a share of what is free)."""
        free = self.device.free_bytes or 0
        return int(free * MEMORY_BUDGET_SHARE)

    def fits(self, n_bytes: int) -> bool:
        """Whether buffers totalling ``n_bytes`` fit the memory budget.

        >>> Context(Device("cpu", "cpu", 8 * 2**30, 4 * 2**30, 0, None), quick=True).fits(2**30)
        True
        """
        return n_bytes <= self.memory_budget_bytes


@dataclass(frozen=True)
class SuiteEntry:
    """One named part of the suite."""

    name: str
    description: str
    applies: Callable[[Device], bool]
    needs: str  # what the device lacks when ``applies`` is False, said in the bundle
    run: Callable[[Context], Iterable[Measurement | Skipped | Attachment]]


@dataclass(frozen=True)
class Attachment:
    """A file an entry made beside its figures (the profiler's Chrome trace), as bytes.

    A bundle holds figures, not files: an entry that makes one also returns a row naming it
    (its size, its SHA-256, the file's name in ``params[ATTACHMENT_PARAM]``), and only the
    site build keeps the bytes, for the page that offers the file
    (:func:`gpulesson.site.build_bundle.attachments`).
    """

    entry: str
    name: str
    data: bytes


@dataclass(frozen=True)
class SuiteResult:
    """What a run produced: measurements, entries skipped (and why), entries that failed."""

    measurements: tuple[Measurement, ...]
    skipped: tuple[Skipped, ...]
    errors: tuple[Skipped, ...]
    ran: tuple[str, ...]
    wall_s: float
    attachments: tuple[Attachment, ...] = ()


def entries() -> tuple[SuiteEntry, ...]:
    """Every registered entry, in run order; names are unique.

    >>> names = [e.name for e in entries()]
    >>> names[:2], len(names) == len(set(names))
    (['cuda_context', 'stopwatch'], True)
    """
    found: list[SuiteEntry] = []
    for module_name in ENTRY_MODULES:
        found.extend(_module_entries(module_name))
    names = [e.name for e in found]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"suite entries registered twice: {', '.join(duplicates)}")
    return tuple(found)


def _module_entries(module_name: str) -> tuple[SuiteEntry, ...]:
    """A module's ENTRIES; ValueError when they are not the names ENTRY_MODULES lists."""
    found = tuple(importlib.import_module(module_name).ENTRIES)
    declared = ENTRY_MODULES[module_name]
    if tuple(e.name for e in found) != declared:
        raise ValueError(
            f"{module_name} defines entries {[e.name for e in found]} but ENTRY_MODULES in "
            f"gpulesson/results/suite.py lists {list(declared)}: make them the same"
        )
    return found


def entry(name: str) -> SuiteEntry:
    """The entry called ``name``, importing only the module that defines it.

    >>> entry("decode").name
    'decode'
    >>> entry("warp")
    Traceback (most recent call last):
    ...
    ValueError: unknown suite entry 'warp': use gpulesson measure --list to see the entries
    """
    for module_name, names in ENTRY_MODULES.items():
        if name in names:
            return next(e for e in _module_entries(module_name) if e.name == name)
    raise ValueError(
        f"unknown suite entry {name!r}: use gpulesson measure --list to see the entries"
    )


def select(names: Sequence[str] | None) -> tuple[SuiteEntry, ...]:
    """The entries called ``names`` (all when None), in run order; ValueError for unknown names.

    >>> [e.name for e in select(["oom", "matmul"])]
    ['matmul', 'oom']
    >>> select(["warp"])
    Traceback (most recent call last):
    ...
    ValueError: unknown suite entry 'warp': use gpulesson measure --list to see the entries
    """
    every = entries()
    if names is None:
        return every
    known = {e.name for e in every}
    for name in names:
        if name not in known:
            raise ValueError(
                f"unknown suite entry {name!r}: use gpulesson measure --list to see the entries"
            )
    return tuple(e for e in every if e.name in names)


def run_suite(
    context: Context,
    selected: Sequence[SuiteEntry] | None = None,
    on_start: Callable[[SuiteEntry], None] | None = None,
    on_done: Callable[[SuiteEntry, float], None] | None = None,
) -> SuiteResult:
    """Run every entry that applies to ``context.device``, in order.

    ``on_start(entry)`` and ``on_done(entry, seconds)`` report progress. An entry whose
    ``run`` raises is listed in ``errors`` with the exception's text; the others still run.
    """
    chosen = tuple(selected) if selected is not None else entries()
    measurements: list[Measurement] = []
    skipped: list[Skipped] = []
    errors: list[Skipped] = []
    attachments: list[Attachment] = []
    ran: list[str] = []
    started = time.perf_counter()
    for entry in chosen:
        if not entry.applies(context.device):
            skipped.append(Skipped(entry.name, f"needs {entry.needs}"))
            continue
        if on_start:
            on_start(entry)
        t0 = time.perf_counter()
        try:
            produced = list(entry.run(context))
        except Exception as exc:  # noqa: BLE001 - reported in the bundle and on stderr
            errors.append(Skipped(entry.name, f"error: {type(exc).__name__}: {exc}"))
            produced = []
        else:
            ran.append(entry.name)
        for item in produced:
            if isinstance(item, Skipped):
                skipped.append(item)
            elif isinstance(item, Attachment):
                attachments.append(item)
            else:
                measurements.append(item)
        if on_done:
            on_done(entry, time.perf_counter() - t0)
    return SuiteResult(
        measurements=tuple(measurements),
        skipped=tuple(skipped),
        errors=tuple(errors),
        ran=tuple(ran),
        wall_s=time.perf_counter() - started,
        attachments=tuple(attachments),
    )
