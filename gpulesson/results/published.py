"""Published GPU measurements by others, as data: one row per figure, each with its page.

Every GPU figure the course shows is labelled by where it comes from: **predicted** (a model
over the datasheets, :mod:`gpulesson.results.predict`), **published** (this module: a cited
measurement someone else made) or **measured** (a result bundle). ``published.json`` in
this folder holds the published rows, exactly as their sources state them: the value in the
source's own unit (``TFLOPS``, ``GB/s``, ``µs``), the source's address, the date it was read,
and the software and date where the source gives them. Datasheet peaks are not measurements:
they live in ``datasheets.json``.

The file is checked once, when first read: its JSON Schema (``published.schema.json``,
validated with ``jsonschema``), then what a schema cannot say: a ``device`` that looks like
a datasheet id (``h100-sxm``) must be one, ``retrieved`` and ``date`` must be real dates
(not in the future), and the unit must be one of :data:`SOURCE_UNITS`. A bad row is a
``ValueError`` naming the file, the row (its number, device and figure), the field and the
fix.

``figure`` uses the measurement suite's names where one matches (``matmul_peak.bf16`` for a
best-shape matmul search such as MAMF, ``memory_bandwidth``, ``launch_overhead.eager``,
``h2d``); other figures get a name in the same style.

>>> rows = load()
>>> mamf = [r for r in rows if r.device == "h100-sxm" and r.figure == "matmul_peak.bf16"]
>>> mamf[0].value, mamf[0].unit, mamf[0].value_in_bundle_unit / 1e12
(794.5, 'TFLOPS', 794.5)
>>> len(publications()) >= 3
True
"""

from __future__ import annotations

import datetime
import functools
import json
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

from gpulesson.results import datasheets
from gpulesson.results.bundle import UNITS

DATA_FILE = "published.json"
SCHEMA_FILE = "published.schema.json"
LABEL = f"gpulesson/results/{DATA_FILE}"

# The units sources state, each with the bundle unit (gpulesson.results.bundle.UNITS) it
# converts to and the factor. A bundle unit itself is accepted with factor 1.
SOURCE_UNITS: dict[str, tuple[str, float]] = {
    "TFLOPS": ("FLOP/s", 1e12),
    "GFLOPS": ("FLOP/s", 1e9),
    "TB/s": ("B/s", 1e12),
    "GB/s": ("B/s", 1e9),
    "MB/s": ("B/s", 1e6),
    "ms": ("s", 1e-3),
    "µs": ("s", 1e-6),
    "us": ("s", 1e-6),
    "ns": ("s", 1e-9),
    "GiB": ("bytes", 2**30),
    "MiB": ("bytes", 2**20),
    "MB": ("bytes", 1e6),
    **{unit: (unit, 1.0) for unit in UNITS},
}
DATASHEET_ID = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")


@dataclass(frozen=True, kw_only=True)
class Published:
    """One published figure, as its source states it."""

    device: str  # a datasheet id, or the source's name for a GPU the datasheets lack
    figure: str
    value: float
    unit: str
    source: str
    publisher: str
    retrieved: datetime.date
    date: str | None = None
    software: str | None = None
    dtype: str | None = None
    notes: str = ""

    @property
    def bundle_unit(self) -> str:
        """The bundle unit this row's unit converts to (``TFLOPS`` -> ``FLOP/s``).

        >>> next(r for r in load() if r.unit == "µs").bundle_unit
        's'
        """
        return SOURCE_UNITS[self.unit][0]

    @property
    def value_in_bundle_unit(self) -> float:
        """The value in :attr:`bundle_unit` (``794.5 TFLOPS`` -> ``7.945e14``)."""
        return self.value * SOURCE_UNITS[self.unit][1]

    @property
    def datasheet(self) -> datasheets.Datasheet | None:
        """The datasheet row of this device, or None for a GPU the datasheets lack."""
        return datasheets.get(self.device) if self.device in datasheets.ids() else None


@functools.cache
def schema() -> dict[str, Any]:
    """The JSON Schema of ``published.json`` (shipped beside it)."""
    text = resources.files("gpulesson.results").joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
    return json.loads(text)


def _row_label(i: int, item: Any) -> str:
    """``rows: 3 (h100-sxm, matmul_peak.bf16)``: the row's number, device and figure."""
    if not isinstance(item, dict):
        return f"rows: {i + 1}"
    named = [str(item[k]) for k in ("device", "figure") if isinstance(item.get(k), str)]
    return f"rows: {i + 1}" + (f" ({', '.join(named)})" if named else "")


def _where(path: list[Any], data: Any) -> str:
    parts: list[str] = []
    rest = list(path)
    if len(rest) >= 2 and rest[0] == "rows" and isinstance(rest[1], int):
        parts.append(_row_label(rest[1], data["rows"][rest[1]]))
        rest = rest[2:]
    parts.extend(str(p + 1) if isinstance(p, int) else str(p) for p in rest)
    return ": ".join(parts) or "(top level)"


def _schema_problem(error: Any, data: Any) -> str:
    path = list(error.absolute_path)
    sub = error.schema if isinstance(error.schema, dict) else {}
    if error.validator == "required":
        missing = next(k for k in error.validator_value if k not in error.instance)
        return f"{_where([*path, missing], data)}: missing; add it"
    if error.validator == "additionalProperties" and sub.get("additionalProperties") is False:
        known = list(sub.get("properties", {}))
        extra = sorted(k for k in error.instance if k not in known)[0]
        return f"{_where([*path, extra], data)}: unknown field; the fields are {', '.join(known)}"
    fix = str(sub.get("x-fix") or error.message)
    return f"{_where(path, data)}: {fix.replace('{value}', repr(error.instance))}"


def _date(where: str, field: str, text: str, today: datetime.date) -> datetime.date:
    parts = [int(p) for p in text.split("-")]
    try:
        day = datetime.date(parts[0], *(parts[1:] + [1] * (3 - len(parts))))
    except ValueError:
        raise ValueError(f"{where}: {field}: {text!r} is not a real date; fix it") from None
    if day > today:
        raise ValueError(f"{where}: {field}: {text!r} is in the future; give the date it was")
    return day


def parse(
    data: Any, label: str = LABEL, today: datetime.date | None = None
) -> tuple[Published, ...]:
    """Check the file's data and return its rows; ``ValueError`` names file, row and field.

    >>> good = {"format": 1, "about": "x", "rows": [{"device": "h100-sxm",
    ...     "figure": "memory_bandwidth", "value": 3000, "unit": "GB/s",
    ...     "source": "https://example.org/", "publisher": "x", "retrieved": "2026-02-30"}]}
    >>> parse(good, "p.json")
    Traceback (most recent call last):
    ...
    ValueError: p.json: rows: 1 (h100-sxm, memory_bandwidth): retrieved: '2026-02-30' is not \
a real date; fix it
    >>> good["rows"][0].update(retrieved="2026-01-30", device="h300")
    >>> parse(good, "p.json")
    Traceback (most recent call last):
    ...
    ValueError: p.json: rows: 1 (h300, memory_bandwidth): device: 'h300' looks like a \
datasheet id but is none: use one of t4, l4, a10, a100-40gb, a100-80gb, a100-80gb-pcie, \
h100-sxm, h100-pcie, h200, b200, mi300x, l40s, rtx-3090, rtx-4090, rtx-5090, apple-m1-pro, \
apple-m1-max, apple-m1-ultra, apple-m2, apple-m4, apple-m4-pro, apple-m4-max, or the GPU's \
name as the source gives it
    """
    import jsonschema

    today = today or datetime.datetime.now(datetime.UTC).date()
    validator = jsonschema.Draft202012Validator(schema())
    error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if error is not None:
        problem = _schema_problem(error, data)
        raise ValueError(f"{label}: {problem} (see gpulesson/results/{SCHEMA_FILE})")
    rows = []
    for i, item in enumerate(data["rows"]):
        where = f"{label}: {_row_label(i, item)}"
        device = item["device"]
        if DATASHEET_ID.fullmatch(device) and device not in datasheets.ids():
            raise ValueError(
                f"{where}: device: {device!r} looks like a datasheet id but is none: use one of "
                f"{', '.join(datasheets.ids())}, or the GPU's name as the source gives it"
            )
        if item["unit"] not in SOURCE_UNITS:
            raise ValueError(
                f"{where}: unit: {item['unit']!r} is not a known unit: use the source's unit if "
                f"it is one of {', '.join(SOURCE_UNITS)}, or add it to SOURCE_UNITS in "
                "gpulesson/results/published.py with its bundle unit and factor"
            )
        retrieved = _date(where, "retrieved", item["retrieved"], today)
        if "date" in item:
            _date(where, "date", item["date"], today)
        rows.append(
            Published(
                device=device,
                figure=item["figure"],
                value=float(item["value"]),
                unit=item["unit"],
                source=item["source"],
                publisher=item["publisher"],
                retrieved=retrieved,
                date=item.get("date"),
                software=item.get("software"),
                dtype=item.get("dtype"),
                notes=item.get("notes", ""),
            )
        )
    return tuple(rows)


@functools.cache
def load() -> tuple[Published, ...]:
    """The rows shipped with the package (``published.json``), checked once."""
    text = resources.files("gpulesson.results").joinpath(DATA_FILE).read_text(encoding="utf-8")
    return parse(json.loads(text))


def publications() -> tuple[str, ...]:
    """The distinct source pages, in file order.

    >>> publications()[0]
    'https://github.com/stas00/ml-engineering/blob/master/compute/accelerator/README.md#maximum-achievable-matmul-flops-comparison-table'
    """
    return tuple(dict.fromkeys(r.source for r in load()))


def rows_for(device: str | None = None, figure: str | None = None) -> tuple[Published, ...]:
    """The rows for a device and/or a figure (an entry's name matches its measurements).

    ``figure="launch_overhead"`` matches ``launch_overhead.eager`` and the others under it.

    >>> [r.value for r in rows_for("h100-sxm", "matmul_peak")]
    [794.5, 1402.6]
    >>> rows_for("h300")
    Traceback (most recent call last):
    ...
    ValueError: unknown GPU id 'h300': use one of t4, l4, a10, a100-40gb, a100-80gb, \
a100-80gb-pcie, h100-sxm, h100-pcie, h200, b200, mi300x, l40s, rtx-3090, rtx-4090, rtx-5090, \
apple-m1-pro, apple-m1-max, apple-m1-ultra, apple-m2, apple-m4, apple-m4-pro, apple-m4-max
    """
    if device is not None and DATASHEET_ID.fullmatch(device):
        datasheets.get(device)  # an unknown id is a ValueError naming the known ones
    return tuple(
        r
        for r in load()
        if (device is None or r.device == device)
        and (figure is None or r.figure == figure or r.figure.startswith(figure + "."))
    )


def devices() -> tuple[str, ...]:
    """The datasheet ids that have published rows, in file order.

    >>> "h100-sxm" in devices(), "Intel Gaudi 2" in devices()
    (True, False)
    """
    return tuple(dict.fromkeys(r.device for r in load() if r.device in datasheets.ids()))
