"""Bundles side by side: a reader's numbers against reference bundles, and every bundle at once.

:func:`compare` lines up one bundle ("mine") against others by measurement name: for each
figure, mine and each other's value, the ratio mine / theirs, and each figure's fraction of
its device's datasheet peak (:mod:`gpulesson.results.datasheets`; dense peak for FLOP/s,
memory bandwidth for B/s). :func:`across` does the same for any number of bundles without a
"mine", for the results page. Both keep to the ``headline`` figures unless asked for all.

:func:`load_dir` reads every ``*.json`` bundle in a folder (validated: a bad one raises
``BundleError`` naming the file and field; a link, a device, a FIFO or a folder named
``*.json`` is refused without being read, and so is a folder that is itself a link). The
library never looks for the repository's ``results/`` by itself: the CLI passes
``./results/reference`` when run from a clone, and the site's loader passes the
repository's folder.

>>> from gpulesson.results.bundle import Measurement
>>> m = Measurement(name="memory_bandwidth", entry="memory_bandwidth", unit="B/s", value=1.5e12,
...                 samples=(1.0,), samples_unit="s", limit="memory_bandwidth")
>>> from gpulesson.results.datasheets import get
>>> round(datasheet_fraction(m, get("a100-40gb")), 3)
0.965
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gpulesson.results.bundle import Bundle, BundleError, Measurement, load
from gpulesson.results.bundle_input import FORBIDDEN
from gpulesson.results.datasheets import Datasheet

SOURCES = ("reference", "community", "given")


@dataclass(frozen=True)
class Sourced:
    """A bundle and where it came from: ``reference`` (the project's GPU runners),
    ``community`` (a reader's pull request) or ``given`` (a file named by the user)."""

    bundle: Bundle
    source: str
    file: str

    @property
    def date(self) -> str:
        """The day the bundle was made (YYYY-MM-DD)."""
        return self.bundle.provenance.created_utc[:10]

    @property
    def device(self) -> str:
        """The device's name as torch reported it."""
        return self.bundle.provenance.device_name

    @property
    def label(self) -> str:
        """Device, source and date: how tables name a bundle."""
        return f"{self.device} ({self.source}, {self.date})"


@dataclass(frozen=True)
class Cell:
    """One bundle's figure in a row: value, fraction of its datasheet, ratio to mine."""

    value: float
    datasheet_fraction: float | None
    ratio_to_mine: float | None  # mine / this; None in mine's own cell


@dataclass(frozen=True)
class Row:
    """One measurement across bundles; ``cells`` line up with the bundles (None: not measured)."""

    name: str
    label: str
    unit: str
    cells: tuple[Cell | None, ...]


@dataclass(frozen=True)
class Comparison:
    """Mine against others: ``rows[i].cells[0]`` is mine, ``cells[j]`` is ``others[j - 1]``."""

    mine: Sourced
    others: tuple[Sourced, ...]
    rows: tuple[Row, ...]


@dataclass(frozen=True)
class Across:
    """Every bundle side by side: ``rows[i].cells[j]`` belongs to ``bundles[j]``."""

    bundles: tuple[Sourced, ...]
    rows: tuple[Row, ...]


def datasheet_fraction(m: Measurement, sheet: Datasheet | None) -> float | None:
    """The value over the datasheet figure its ``limit`` names, or None when there is none."""
    if sheet is None:
        return None
    if m.limit == "peak_flops" and m.dtype:
        peak = sheet.dense_flop_per_s(m.dtype)
        return m.value / peak if peak else None
    if m.limit == "memory_bandwidth":
        return m.value / sheet.memory_bandwidth_bytes_per_s
    return None


def _names(bundles: Sequence[Bundle], headline_only: bool) -> list[Measurement]:
    """The measurements to show, first bundle's order first, each name once."""
    seen: dict[str, Measurement] = {}
    for bundle in bundles:
        for m in bundle.measurements:
            if (m.headline or not headline_only) and m.name not in seen:
                seen[m.name] = m
    return list(seen.values())


def _cell(bundle: Bundle, name: str, mine: Measurement | None) -> Cell | None:
    m = bundle.measurement(name)
    if m is None:
        return None
    ratio = None
    if mine is not None and m.value > 0:
        ratio = mine.value / m.value
    return Cell(m.value, datasheet_fraction(m, bundle.datasheet), ratio)


def compare(mine: Sourced, others: Sequence[Sourced], headline_only: bool = True) -> Comparison:
    """Line up ``mine`` against ``others`` by measurement name (only names mine has)."""
    rows = []
    for m in _names([mine.bundle], headline_only):
        cells = [_cell(mine.bundle, m.name, None)]
        cells += [_cell(o.bundle, m.name, m) for o in others]
        rows.append(Row(name=m.name, label=m.label or m.name, unit=m.unit, cells=tuple(cells)))
    return Comparison(mine=mine, others=tuple(others), rows=tuple(rows))


def across(bundles: Sequence[Sourced], headline_only: bool = False) -> Across:
    """Every measurement of every bundle, one row per name, one cell per bundle."""
    rows = []
    for m in _names([b.bundle for b in bundles], headline_only):
        cells = tuple(_cell(b.bundle, m.name, None) for b in bundles)
        rows.append(Row(name=m.name, label=m.label or m.name, unit=m.unit, cells=cells))
    return Across(bundles=tuple(bundles), rows=tuple(rows))


def load_dir(folder: str | Path, source: str) -> tuple[Sourced, ...]:
    """Every ``*.json`` bundle in ``folder`` (none if it does not exist), oldest first.

    Messages name a file by its folder and its parent's (``results/community/z.json``).

    >>> load_dir("/dev/null", "given")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    gpulesson.results.bundle.BundleError: /dev/null: holds bundles only, so it must be a ...
    """
    if source not in SOURCES:
        raise ValueError(f"unknown bundle source {source!r}: use one of {', '.join(SOURCES)}")
    folder = Path(folder)
    try:
        mode = os.lstat(folder).st_mode
    except FileNotFoundError:
        # Try to list it anyway: a site build's execution cache records the attempt (an
        # audit event), so a block that found no bundles runs again once the folder appears.
        with contextlib.suppress(OSError):
            os.listdir(folder)
        return ()
    except OSError as exc:
        raise BundleError(str(folder), f"cannot read the folder ({exc.strerror})") from None
    if not stat.S_ISDIR(mode):
        what = "a symbolic link" if stat.S_ISLNK(mode) else "not a folder"
        raise BundleError(
            str(folder),
            f"holds bundles only, so it must be a folder, and it is {what}: commit the "
            "bundles themselves in a real folder",
        )
    prefix = f"{folder.parent.name}/{folder.name}/" if folder.parent.name else f"{folder}/"
    names = sorted(entry.name for entry in os.scandir(folder) if entry.name.endswith(".json"))
    for name in names:
        if FORBIDDEN.search(name):
            raise BundleError(
                prefix + name,
                "the file name holds a control or invisible formatting character: rename "
                "the file to plain text (device and date, like l4-2025-01-31.json)",
            )
    found = [Sourced(load(folder / name, prefix + name), source, name) for name in names]
    return tuple(sorted(found, key=lambda s: (s.bundle.provenance.created_utc, s.file)))


def duplicate_key(sourced: Sourced) -> tuple[str, str, str]:
    """Device, torch version and day: two bundles sharing all three are one too many.

    >>> from types import SimpleNamespace as NS
    >>> p = NS(device_name="NVIDIA L4", torch_version="2.5.1", created_utc="2025-01-02T03:04:05Z")
    >>> duplicate_key(NS(bundle=NS(provenance=p)))
    ('NVIDIA L4', '2.5.1', '2025-01-02')
    """
    p = sourced.bundle.provenance
    return (p.device_name, p.torch_version, p.created_utc[:10])
