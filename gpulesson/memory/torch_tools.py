"""The one door to torch's private memory tools: fake tensors and the memory tracker.

Measuring a training step without a GPU needs two private torch APIs:
``FakeTensorMode`` (``torch._subclasses.fake_tensor``: tensors with shapes and
dtypes but no storage) and ``MemTracker`` (``torch.distributed._tools.mem_tracker``:
what is alive, by category, at the peak). Private APIs move between releases
without notice. Everything :mod:`gpulesson.memory.measure` uses from them goes
through this module, which checks each piece when it is first used and, when one
has moved, raises :class:`PrivateTorchAPIError` naming the torch version, the
piece that moved and the fix, instead of measuring something else silently.

What is relied on (checked here): the two import paths; ``MemTracker``'s
``track_external``, ``reset_mod_stats``, ``get_tracker_snapshot`` and its
private ``_peak_mem`` and ``_peak_mem_snap`` (to restart the peak inside a
step, as ``MemTracker.__enter__`` does); and the category names of its
snapshots. Known to work with torch 2.13 (the version the course's CI installs).

>>> mode = fake_tensor_mode()
>>> type(mode).__name__
'FakeTensorMode'
"""

from __future__ import annotations

import importlib
from typing import Any

KNOWN_WORKING_TORCH = "2.13"
FAKE_TENSOR_MODE = "torch._subclasses.fake_tensor.FakeTensorMode"
MEM_TRACKER = "torch.distributed._tools.mem_tracker.MemTracker"
TRACKER_METHODS = ("track_external", "reset_mod_stats", "get_tracker_snapshot")
TRACKER_PEAK_ATTRIBUTES = ("_peak_mem", "_peak_mem_snap")

# The ledger lines a measurement reports, in this order.
CATEGORIES = ("parameters", "gradients", "optimizer state", "activations", "temporaries", "other")
# MemTracker's snapshot categories (its _RefType names) and the ledger line each is.
TRACKER_CATEGORIES = {
    "Parameter": "parameters",
    "Buffer": "other",
    "Gradient": "gradients",
    "Activation": "activations",
    "Temp": "temporaries",
    "Optstate": "optimizer state",
    "Other": "other",
}
TOTAL_KEY = "Total"


class PrivateTorchAPIError(RuntimeError):
    """A private torch API that gpulesson's measured-memory path relies on has moved."""


def _torch_version() -> str:
    import torch

    return str(torch.__version__)


def _moved(what: str, detail: str) -> PrivateTorchAPIError:
    return PrivateTorchAPIError(
        f"torch {_torch_version()}: {what} has moved or changed ({detail}); "
        f"gpulesson.memory.measure relies on this private API, known to work with torch "
        f"{KNOWN_WORKING_TORCH}. Measure with torch {KNOWN_WORKING_TORCH} "
        f"(pip install 'torch=={KNOWN_WORKING_TORCH}.*'), or update "
        "gpulesson/memory/torch_tools.py for this torch."
    )


def _load(dotted: str) -> Any:
    module_name, _, name = dotted.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise _moved(dotted, f"cannot import {module_name}: {exc}") from exc
    try:
        return getattr(module, name)
    except AttributeError as exc:
        raise _moved(dotted, f"{module_name} has no {name}") from exc


def fake_tensor_mode() -> Any:
    """A new ``FakeTensorMode``: inside it, tensors have shapes and dtypes but no storage."""
    return _load(FAKE_TENSOR_MODE)()


def mem_tracker() -> Any:
    """A new ``MemTracker``, checked for every method and attribute the measurement uses.

    >>> tracker = mem_tracker()
    >>> callable(tracker.track_external)
    True
    """
    tracker = _load(MEM_TRACKER)()
    for name in TRACKER_METHODS:
        if not callable(getattr(tracker, name, None)):
            raise _moved(MEM_TRACKER, f"it has no method {name}()")
    for name in TRACKER_PEAK_ATTRIBUTES:
        if not hasattr(tracker, name):
            raise _moved(MEM_TRACKER, f"it has no attribute {name}")
    return tracker


def reset_peak(tracker: Any) -> None:
    """Restart the tracker's peak from what is alive now, as ``MemTracker.__enter__`` does."""
    snap = tracker.get_tracker_snapshot("current")
    try:
        tracker._peak_mem_snap = snap
        tracker._peak_mem = {dev: s[TOTAL_KEY] for dev, s in snap.items()}
    except (AttributeError, KeyError, TypeError) as exc:
        raise _moved(MEM_TRACKER, f"its snapshot or peak fields changed shape: {exc!r}") from exc


def peak_by_category(tracker: Any) -> tuple[int, dict[str, int]]:
    """The tracker's peak: total bytes, and bytes per ledger line (``CATEGORIES``).

    A category this module does not know raises :class:`PrivateTorchAPIError`
    rather than being filed silently under "other".
    """
    snap = tracker.get_tracker_snapshot("peak")
    totals = dict.fromkeys(CATEGORIES, 0)
    total = 0
    for dev_snap in snap.values():
        for key, value in dev_snap.items():
            name = getattr(key, "value", key)
            if name == TOTAL_KEY:
                total += value
            elif name in TRACKER_CATEGORIES:
                totals[TRACKER_CATEGORIES[name]] += value
            else:
                raise _moved(MEM_TRACKER, f"its snapshot has an unknown category {name!r}")
    return total, totals
