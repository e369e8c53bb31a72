"""This build's own result bundle: the suite entries lesson blocks ask for, run once, kept.

A lesson block does not time anything itself. It asks the measurement suite
(:mod:`gpulesson.results.suite`, the code behind ``gpulesson measure``) for an entry on a
device and renders what comes back::

    from gpulesson.results.entries_decode import sweep_from_measurements
    from gpulesson.site import build_bundle
    sweep = sweep_from_measurements(build_bundle.measure("decode", "cpu"))

:func:`measure` runs in the build's block worker. It runs the entry once, full size (not
``--quick``), and keeps its measurements with the block's result, so the execution cache
stores them beside the block's output and facts and replays them when it serves the block
from the cache (:mod:`gpulesson.site.exec_cache`): a cached build has the same figures as
a fresh one. In the build process :func:`record` gathers every block's, and at the end of
the build :func:`write` puts them into the site as ``build-bundle.json``, in the format of
``results/`` (:mod:`gpulesson.results.bundle`: validated, so ``gpulesson compare`` reads
it), its provenance from the same probe as ``build-record.json``. Entries measured on a
second device (the CPU rows of a CUDA build) go to ``build-bundle-<device>.json``: a
bundle is one device's.

An entry that makes a file as well (the profiler's trace: a
:class:`~gpulesson.results.suite.Attachment`) keeps it with its measurements, which a
bundle does not: :func:`attachments` gives a block the files of the entry it measured.

An entry runs once per build. A block that asks for an entry an earlier block of the build
measured (on any page) gets those measurements back without running anything, and the
execution cache records the read as a dependency (``measured:<device>/<entry>`` with the
measurements' hash), so the block runs again when they change.

A machine that has just run the whole suite (``gpulesson measure --out b.json``, full size)
need not measure again to build: with ``GPULESSON_MEASURED_BUNDLE=b.json`` set,
:func:`measure` takes an entry's rows from that bundle when it was measured on this
device of this machine (same device type and name, not ``--quick``), and runs only what
the bundle lacks. The GPU evidence run (``tests/benchmarks/gpu_evidence.py``) builds so.

>>> begin_block({"cpu/x": {"device": "cpu", "entry": "x", "wall_s": 0.0,
...                        "measurements": [], "skipped": []}})
>>> measure("x", "cpu")
()
>>> list(end_reads())
['measured:cpu/x']
>>> end_block()
[]
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpulesson.results import bundle as bundle_module
from gpulesson.results.bundle import Bundle, Measurement, Skipped, SuiteRun

BUNDLE_FILE = "build-bundle.json"
DEVICES = ("cuda", "mps", "cpu")  # the first one measured names build-bundle.json

log = logging.getLogger("mkdocs.plugins.gpulesson.site.build_bundle")

REUSE_ENV = "GPULESSON_MEASURED_BUNDLE"
DEPENDENCY = "measured:"  # the prefix of a cache dependency on another block's measurements

# In the worker: what the running block measured, what the build had measured before it,
# and which of those it read. In the build: every block's, in order, and as data by key.
_block: list[dict[str, Any]] = []
_available: dict[str, Mapping[str, Any]] = {}
_reads: dict[str, str] = {}
_files: dict[str, dict[str, bytes]] = {}
_build: list[Measured] = []
_raw: dict[str, Mapping[str, Any]] = {}
_valid: set[str] = set()  # digests of the bundle texts this process found valid (serve)


@dataclass(frozen=True)
class Measured:
    """One suite entry a block measured: where, on which device, and what came out."""

    page: str
    block_id: str
    device: str
    entry: str
    wall_s: float
    measurements: tuple[Measurement, ...]
    skipped: tuple[Skipped, ...]


# --- in the block worker -----------------------------------------------------------------


def key(device: str, entry: str) -> str:
    """How an entry measured on a device is named in the build (``cpu/decode``)."""
    return f"{device}/{entry}"


def digest(data: Mapping[str, Any]) -> str:
    """The hash of one entry's measurements as data (what a reading block depends on)."""
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def begin_block(available: Mapping[str, Mapping[str, Any]] | None = None) -> None:
    """A block starts: it has measured nothing yet; ``available`` is the build's so far."""
    _block.clear()
    _reads.clear()
    _files.clear()
    _available.clear()
    _available.update(available or {})


def end_reads() -> dict[str, str]:
    """The earlier blocks' entries the block read: dependency name to the hash it read."""
    done = dict(_reads)
    _reads.clear()
    return done


def end_block() -> list[dict[str, Any]]:
    """What the block measured, as data for the build (and the execution cache)."""
    done = list(_block)
    _block.clear()
    return done


def applies(entry: str, device: str) -> bool:
    """Whether suite entry ``entry`` runs on this machine's ``device`` (all_reduce: 2+ GPUs)."""
    from gpulesson.results import suite

    return suite.entry(entry).applies(suite.Device.this(device))


def measure(entry: str, device: str) -> tuple[Measurement, ...]:
    """Run suite entry ``entry`` on ``device`` for this build; its measurements.

    ValueError for an unknown entry or a device it does not apply to; an entry that raised
    raises RuntimeError with its message, so the block fails loudly and the build stops.
    """
    from gpulesson.results import suite

    earlier = _available.get(key(device, entry))
    if earlier is not None:  # an earlier block of this build measured it: never twice
        _reads[DEPENDENCY + key(device, entry)] = digest(earlier)
        _files[key(device, entry)] = _decoded(earlier.get("files", {}))
        return tuple(bundle_module.measurement_from_dict(m) for m in earlier["measurements"])
    if device not in DEVICES:
        raise ValueError(f"device={device!r} is not one of {', '.join(DEVICES)}")
    chosen = suite.entry(entry)  # imports its own module only: the block depends on no other
    context = suite.Context(device=suite.Device.this(device), quick=False)
    if not chosen.applies(context.device):
        raise ValueError(f"suite entry {entry!r} does not run on {device}: it needs {chosen.needs}")
    reused = measured_before(entry, context.device, os.environ.get(REUSE_ENV, ""))
    result = reused if reused is not None else suite.run_suite(context, (chosen,))
    if result.errors:
        raise RuntimeError(f"suite entry {entry!r} failed on {device}: {result.errors[0].reason}")
    _block.append(
        {
            "device": device,
            "entry": entry,
            "wall_s": result.wall_s,
            "measurements": [bundle_module.measurement_to_dict(m) for m in result.measurements],
            "skipped": [{"entry": s.entry, "reason": s.reason} for s in result.skipped],
            "files": {a.name: base64.b64encode(a.data).decode("ascii") for a in result.attachments},
        }
    )
    _files[key(device, entry)] = {a.name: a.data for a in result.attachments}
    return result.measurements


def attachments(entry: str, device: str) -> dict[str, bytes]:
    """The files suite entry ``entry`` made on ``device`` beside its measurements, by name
    (ask :func:`measure` first); empty when it made none.

    >>> begin_block({"cpu/x": {"device": "cpu", "entry": "x", "wall_s": 0.0,
    ...     "measurements": [], "skipped": [], "files": {"t.gz": "AQI="}}})
    >>> measure("x", "cpu"), attachments("x", "cpu")
    ((), {'t.gz': b'\\x01\\x02'})
    >>> attachments("y", "cpu")
    Traceback (most recent call last):
    ...
    ValueError: suite entry 'y' was not measured on cpu in this block: measure it first
    """
    found = _files.get(key(device, entry))
    if found is None:
        raise ValueError(
            f"suite entry {entry!r} was not measured on {device} in this block: measure it first"
        )
    return dict(found)


def _decoded(files: Mapping[str, str]) -> dict[str, bytes]:
    return {name: base64.b64decode(text) for name, text in files.items()}


def measured_before(entry: str, device: Any, path: str) -> Any:
    """The suite's result for ``entry`` from the full-size bundle at ``path`` when it was
    measured on ``device`` (a :class:`~gpulesson.results.suite.Device`: same type and
    name); None when there is no path, the bundle is another machine's or a ``--quick``
    run's, or it lacks the entry. A bundle that does not load raises its one-line error.
    """
    from gpulesson.results import suite

    if not path:
        return None
    try:
        found = bundle_module.load(path)
    except ValueError as error:
        raise ValueError(f"{REUSE_ENV}: {error}") from None
    p = found.provenance
    same_machine = p.device_type == device.type and p.device_name == _device_name(device)
    rows = tuple(m for m in found.measurements if m.entry == entry)
    if any(suite.ATTACHMENT_PARAM in m.params for m in rows):  # no files in a bundle: measure
        return None
    if not same_machine or p.suite.quick or entry not in p.suite.entries or not rows:
        return None
    skipped = tuple(s for s in found.skipped if s.entry == entry)
    return suite.SuiteResult(rows, skipped, (), (entry,), 0.0)


def _device_name(device: Any) -> str:
    """The name a bundle's provenance gives ``device`` (the CPU model on a CPU)."""
    if device.type == "cuda":
        return str(device.name)
    from gpulesson.probe import probe

    return probe().cpu_model


# --- in the build process ----------------------------------------------------------------


def reset() -> None:
    """Forget what earlier builds measured (the start of a build)."""
    _build.clear()
    _raw.clear()


def available() -> dict[str, Mapping[str, Any]]:
    """What the build has measured so far, by :func:`key`, as data (for the next block)."""
    return dict(_raw)


def current(dependency: str) -> str | None:
    """The hash of the measurements a ``measured:`` dependency names, None if not measured.

    >>> reset(); current("measured:cpu/none") is None
    True
    """
    data = _raw.get(dependency.removeprefix(DEPENDENCY))
    return None if data is None else digest(data)


def record(page: str, block_id: str, measured: Iterable[Mapping[str, Any]]) -> None:
    """Keep what a block measured (run now or served from the cache).

    A page rebuilt by ``mkdocs serve`` replaces its block's earlier entry. An entry another
    block already measured on the same device is logged as an error, which stops a strict
    build: the figures belong to one block, and other blocks read them as its facts.
    """
    for data in measured:
        item = Measured(
            page=page,
            block_id=block_id,
            device=str(data["device"]),
            entry=str(data["entry"]),
            wall_s=float(data["wall_s"]),
            measurements=tuple(
                bundle_module.measurement_from_dict(m) for m in data["measurements"]
            ),
            skipped=tuple(Skipped(s["entry"], s["reason"]) for s in data["skipped"]),
        )
        for i, other in enumerate(_build):
            if (other.device, other.entry) != (item.device, item.entry):
                continue
            if (other.page, other.block_id) == (page, block_id):
                del _build[i]
                break
            # Two blocks ran it: the second was served from the cache before the first ran.
            log.error(
                "%s: block %r measures suite entry %r on %s again; block %r on %s already "
                "did: read that block's facts instead (an entry runs once per build)",
                page,
                block_id,
                item.entry,
                item.device,
                other.block_id,
                other.page,
            )
            return
        _build.append(item)
        _raw[key(item.device, item.entry)] = dict(data)


def measured() -> tuple[Measured, ...]:
    """Everything this build measured, in the order the blocks ran."""
    return tuple(_build)


def file_name(device: str, devices: Iterable[str]) -> str:
    """The site file of ``device``'s bundle when the build measured on ``devices``.

    >>> file_name("cpu", ["cpu"]), file_name("cuda", ["cpu", "cuda"])
    ('build-bundle.json', 'build-bundle.json')
    >>> file_name("cpu", ["cpu", "cuda"])
    'build-bundle-cpu.json'
    """
    main = next(d for d in DEVICES if d in set(devices))
    return BUNDLE_FILE if device == main else f"build-bundle-{device}.json"


def bundles(report: Any, cpu_threads: int | None = None) -> dict[str, Bundle]:
    """This build's bundles by site file name; provenance from the build's probe ``report``
    and the thread count of the worker that measured (``cpu_threads``)."""
    from gpulesson.results import provenance

    devices = {m.device for m in _build}
    out: dict[str, Bundle] = {}
    for device in (d for d in DEVICES if d in devices):
        done = [m for m in _build if m.device == device]
        suite = SuiteRun(
            quick=False,
            wall_s=sum(m.wall_s for m in done),
            entries=tuple(m.entry for m in done),
        )
        out[file_name(device, devices)] = Bundle(
            provenance=provenance.collect(device, suite, report=report, cpu_threads=cpu_threads),
            measurements=tuple(x for m in done for x in m.measurements),
            skipped=tuple(x for m in done for x in m.skipped),
        )
    return out


def write(site_dir: Path, report: Any, cpu_threads: int | None = None) -> list[str]:
    """Validate this build's bundles and write them into ``site_dir``; problems, one line each.

    ``report`` and ``cpu_threads`` come from the block worker, which measured: given both,
    the build's own process need not import torch to describe the machine.

    A bundle that does not validate is not written: the problem names its file and field.
    A bundle this process validated before (the last ``mkdocs serve`` rebuild's, when no
    figure changed: the same text but for the time it was made) is not validated again.
    """
    problems = []
    for name, bundle in bundles(report, cpu_threads).items():
        text = bundle_module.to_json(bundle)
        timeless = text.replace(bundle.provenance.created_utc, "", 1)
        digest = hashlib.sha256(timeless.encode()).hexdigest()
        if digest not in _valid:
            try:
                bundle_module.validate(json.loads(text))
            except bundle_module.BundleError as error:
                problems.append(f"{name}: {error}")
                continue
            _valid.add(digest)
        Path(site_dir, name).write_text(text, encoding="utf-8")
    return problems
