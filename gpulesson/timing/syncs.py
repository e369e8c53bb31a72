"""Hidden synchronizations: which lines make the host wait for the GPU, and for how long.

A CUDA program runs fast when the host queues work and moves on. Any line that needs a
value the GPU has not produced yet (``loss.item()``, printing a CUDA tensor, ``.cpu()``,
``nonzero()``, indexing with a boolean mask, whose result size depends on the data)
makes the host wait until the queue drains: a **synchronization**. The GPU then idles
while the host catches up, launching the next kernels one at a time.

:func:`find_syncs` runs each of :data:`PROBES` with ``torch.cuda.set_sync_debug_mode("warn")``
on, and records whether PyTorch warned "called a synchronizing CUDA operation". Some
probes are the hidden syncs the PyTorch performance tuning guide lists; the others are
their device-side replacements, which should not warn. PyTorch calls the debug mode
experimental: it does not catch every synchronizing operation.

:func:`measure_copy_call` times how long the host is held by one host-to-device copy:
from pageable memory the call returns only when the copy is done (a synchronization in
effect), from pinned memory with ``non_blocking=True`` it returns once the copy is
queued. Both need CUDA; off CUDA they raise ``ValueError``.

Used by the suite entries ``syncs`` (``gpulesson/results/entries_syncs.py``) and
``copy_call`` (``gpulesson/results/entries_feeding.py``), whose measurements the lesson
``feeding.md`` reads back; rendered by :mod:`gpulesson.course.feeding`.

>>> [p.name for p in PROBES][:3]
['loss.item()', 'print(loss)', 'x.cpu()']
>>> find_syncs("cpu")
Traceback (most recent call last):
...
ValueError: set_sync_debug_mode needs a CUDA device, not cpu: run this on a CUDA GPU
"""

from __future__ import annotations

import contextlib
import io
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch

from gpulesson.timing.bench import naive_samples, time_samples
from gpulesson.timing.results import Spread

SYNC_WARNING = "called a synchronizing CUDA operation"


@dataclass(frozen=True)
class Probe:
    """One line of a training loop to test: its code, and whether it is a hidden sync."""

    name: str
    hidden_sync: bool  # True: the tuning guide lists it; False: a device-side replacement
    run: Callable[[torch.Tensor, torch.Tensor], object]


def _print(x: torch.Tensor, mask: torch.Tensor) -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        print(x.sum())


def _branch(x: torch.Tensor, mask: torch.Tensor) -> bool:
    return bool((x > 0).any())  # what `if (x > 0).any():` does


PROBES: tuple[Probe, ...] = (
    Probe("loss.item()", True, lambda x, mask: x.sum().item()),
    Probe("print(loss)", True, _print),
    Probe("x.cpu()", True, lambda x, mask: x.cpu()),
    Probe("x.nonzero()", True, lambda x, mask: x.nonzero()),
    Probe("x[mask]", True, lambda x, mask: x[mask]),
    Probe("if (x > 0).any():", True, _branch),
    Probe("x.sum()", False, lambda x, mask: x.sum()),
    Probe("torch.where(mask, x, 0.0)", False, lambda x, mask: torch.where(mask, x, 0.0)),
    Probe("(x * mask).sum()", False, lambda x, mask: (x * mask).sum()),
)


@dataclass(frozen=True)
class SyncCheck:
    """What the debug mode said about one probe."""

    name: str
    hidden_sync: bool
    warnings: int

    @property
    def warned(self) -> bool:
        """Whether PyTorch reported a synchronization."""
        return self.warnings > 0


def find_syncs(device: str = "cuda", n: int = 1024) -> tuple[SyncCheck, ...]:
    """Run every probe under ``set_sync_debug_mode("warn")``; count the sync warnings of each."""
    if device != "cuda":
        raise ValueError(
            f"set_sync_debug_mode needs a CUDA device, not {device}: run this on a CUDA GPU"
        )
    x = torch.randn(n, device=device)
    mask = x > 0
    torch.cuda.synchronize()
    before = torch.cuda.get_sync_debug_mode()
    checks = []
    try:
        for probe in PROBES:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                torch.cuda.set_sync_debug_mode("warn")
                try:
                    probe.run(x, mask)
                finally:
                    torch.cuda.set_sync_debug_mode(before)
            count = sum(SYNC_WARNING in str(w.message) for w in caught)
            checks.append(SyncCheck(name=probe.name, hidden_sync=probe.hidden_sync, warnings=count))
    finally:
        torch.cuda.set_sync_debug_mode(before)
    return tuple(checks)


def headline_figures(checks: tuple[SyncCheck, ...]) -> dict[str, tuple[float, str]]:
    """How many hidden syncs and device-side replacements there were, and how many warned.

    >>> headline_figures((SyncCheck(name="a", hidden_sync=True, warnings=2),
    ...                   SyncCheck(name="b", hidden_sync=False, warnings=0)))["syncs_warned"]
    (1, 'lines')
    """
    hidden = [c for c in checks if c.hidden_sync]
    free = [c for c in checks if not c.hidden_sync]
    return {
        "syncs_hidden": (len(hidden), "lines"),
        "syncs_warned": (sum(c.warned for c in hidden), "lines"),
        "syncs_free": (len(free), "lines"),
        "free_warned": (sum(c.warned for c in free), "lines"),
    }


@dataclass(frozen=True)
class HostHold(Spread):
    """Seconds the host spent inside one copy call (no barrier after it: that is the point)."""

    kind: str
    samples_s: tuple[float, ...]


@dataclass(frozen=True)
class CopyCall:
    """One host-to-device copy: how long the call held the host, pageable and pinned.

    ``copy`` is the copy itself, timed honestly (barriers on both sides) from pinned
    memory: the work the non-blocking call hands to the GPU.

    >>> r = CopyCall(n_bytes=10**6,
    ...              pageable=HostHold(kind="pageable", samples_s=(1e-3,)),
    ...              pinned=HostHold(kind="pinned, non_blocking", samples_s=(1e-5,)),
    ...              copy=HostHold(kind="copy", samples_s=(5e-4,)))
    >>> r.pinned.median_s / r.copy.median_s  # the call's share of the copy it queued
    0.02
    """

    n_bytes: int
    pageable: HostHold
    pinned: HostHold
    copy: HostHold


def measure_copy_call(
    device: str = "cuda", n_bytes: int = 64 * 2**20, repeats: int = 20
) -> CopyCall:
    """Host seconds inside ``dst.copy_(src)`` from pageable memory and from pinned, non-blocking."""
    if device != "cuda":
        raise ValueError(f"pinned host memory needs CUDA, not {device}: run this on a CUDA GPU")
    if n_bytes < 4:
        raise ValueError(f"n_bytes={n_bytes}: copy at least one fp32 element (4 bytes)")
    n = n_bytes // 4
    pageable = torch.randn(n)
    pinned = pageable.pin_memory()
    dst = torch.empty(n, device=device)
    held_pageable = naive_samples(lambda: dst.copy_(pageable), device, repeats)
    held_pinned = naive_samples(lambda: dst.copy_(pinned, non_blocking=True), device, repeats)
    copy_s, _calls = time_samples(
        lambda: dst.copy_(pinned, non_blocking=True), device, torch.get_num_threads(), 0.1
    )
    return CopyCall(
        n_bytes=n * 4,
        pageable=HostHold(kind="pageable", samples_s=held_pageable),
        pinned=HostHold(kind="pinned, non_blocking", samples_s=held_pinned),
        copy=HostHold(kind="copy (pinned, with barriers)", samples_s=copy_s),
    )
