"""Result bundles: one run of the measurement suite, with its provenance, as data and as JSON.

A bundle is what ``gpulesson measure`` writes and what ``results/`` in the repository
holds: ``schema_version``, ``provenance`` (the machine, the software, when) and
``measurements`` (each a named figure in a unit, with the raw samples behind it and their
spread). The format is ``bundle.schema.json`` in this folder, shipped with the package, so
an installed ``gpulesson`` validates without a clone.

Reading a bundle (:func:`load`, :func:`validate`) checks, in order:

0. what any page can carry (:mod:`gpulesson.results.bundle_input`): :func:`load` opens
   only a regular file, reads at most ``MAX_BUNDLE_BYTES``, and parses strictly (no
   ``NaN`` or ``Infinity``, no duplicate keys, bounded nesting, numbers and strings);
   :func:`validate` checks every value of data given in Python the same way;
1. the JSON Schema (types, required fields, units, name pattern), then that the date
   ``provenance.created_utc`` exists (``2025-02-30`` does not);
2. consistency: each spread matches its samples; a FLOP/s or B/s value matches the
   FLOP or byte count in its params over the median time; a value in its samples' unit
   lies within them; names are unique;
3. plausibility against the datasheet row of the device (:mod:`gpulesson.results.datasheets`):
   no throughput above ``FLOPS_TOLERANCE`` x the dense peak for its dtype, no memory
   bandwidth above the datasheet's, no size above the device's memory, and a device
   memory between ``MEMORY_SHARE`` of the datasheet's size; TF32 and FP8 only on CUDA.

The first problem found raises :class:`BundleError`, a ``ValueError`` whose message is one
line naming the field (``measurements[3].value: ...``) and what to do; :func:`load` puts the
file's name in front (``mine.json: measurements[3].value: ...``).

>>> m = Measurement(name="bandwidth", entry="bandwidth", unit="B/s", value=2e9,
...                 samples=(0.5,), samples_unit="s", params={"bytes": 10**9})
>>> m.spread.median, m.spread.count
(0.5, 1)
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from gpulesson.results import bundle_input, datasheets
from gpulesson.results.bundle_input import FieldError
from gpulesson.results.datasheets import Datasheet
from gpulesson.timing.results import quantile

SCHEMA_VERSION = 2  # 2 added Measurement.series; version 1 bundles are still read
SCHEMA_FILE = "bundle.schema.json"
UNITS = ("FLOP/s", "B/s", "s", "bytes", "ratio", "tokens/s", "steps/s")
LIMITS = ("peak_flops", "memory_bandwidth", "device_memory")
FLOPS_TOLERANCE = 1.05  # a timer's noise can put a result a little over the peak, not more
MEMORY_SHARE = (0.85, 1.0)  # usable memory as a share of the datasheet's stated size
CONSISTENCY_REL = 1e-6  # values written by gpulesson match their samples to rounding
CUDA_ONLY_DTYPES = ("tf32", "fp8")

Scalar = str | int | float | bool | None


class BundleError(FieldError):
    """A bundle that is not valid; ``field`` names where (``provenance.device_name``).

    A ``ValueError``; its message is one printable line (control characters escaped).
    """


@dataclass(frozen=True)
class Spread:
    """Median, quartiles, extremes and count of a measurement's samples (in its samples unit)."""

    median: float
    p25: float
    p75: float
    min: float
    max: float
    count: int


MAX_SERIES_POINTS = 5000  # the schema's maxItems for a series


@dataclass(frozen=True)
class Series:
    """The curve behind a figure: ``points`` (x, y), x in ``x_unit``, y in ``y_unit``.

    At most ``MAX_SERIES_POINTS`` points, so a bundle stays small enough to read whole.
    """

    x_label: str
    x_unit: str
    y_unit: str
    points: tuple[tuple[float, float], ...]


@dataclass(frozen=True)
class Measurement:
    """One named figure with the raw samples behind it.

    ``value`` is in ``unit``; ``samples`` are the readings it comes from, in
    ``samples_unit`` (seconds per call for timings, from which a FLOP/s value is the
    FLOP count in ``params["flop"]`` over the median). ``limit`` names the figure the value
    cannot exceed (see ``LIMITS``); ``headline`` marks the few figures every comparison shows.
    """

    name: str
    entry: str
    unit: str
    value: float
    samples: tuple[float, ...]
    samples_unit: str
    label: str = ""
    dtype: str | None = None
    limit: str | None = None
    headline: bool = False
    params: Mapping[str, Scalar] = field(default_factory=dict)
    warning: str | None = None
    note: str = ""
    series: Series | None = None

    @property
    def spread(self) -> Spread:
        """The samples' median, quartiles, extremes and count."""
        s = self.samples
        return Spread(
            median=quantile(s, 0.5),
            p25=quantile(s, 0.25),
            p75=quantile(s, 0.75),
            min=min(s),
            max=max(s),
            count=len(s),
        )


@dataclass(frozen=True)
class Clocks:
    """NVML clocks in MHz: current at the start of the run, and the maximum. None if unknown."""

    sm_mhz: float | None = None
    memory_mhz: float | None = None
    sm_max_mhz: float | None = None
    memory_max_mhz: float | None = None


@dataclass(frozen=True)
class SuiteRun:
    """How the suite ran: sized down by ``--quick`` or not, how long, which entries."""

    quick: bool
    wall_s: float
    entries: tuple[str, ...]


@dataclass(frozen=True)
class Provenance:
    """Where and with what a bundle was measured (see the schema for each field)."""

    device_type: str
    device_name: str
    device_memory_bytes: int | None
    device_count: int
    compute_capability: str | None
    datasheet_id: str | None
    driver_version: str | None
    driver_cuda_version: str | None
    cuda_version: str | None
    torch_version: str
    python_version: str
    platform: str
    cpu_model: str
    cpu_threads: int
    gpulesson_version: str
    gpulesson_commit: str | None
    created_utc: str
    clocks: Clocks
    power_limit_w: float | None
    suite: SuiteRun


@dataclass(frozen=True)
class Skipped:
    """A suite entry that did not run on this machine, and why."""

    entry: str
    reason: str


@dataclass(frozen=True)
class Bundle:
    """A whole bundle: provenance, measurements, and the entries that were skipped."""

    provenance: Provenance
    measurements: tuple[Measurement, ...]
    skipped: tuple[Skipped, ...] = ()
    schema_version: int = SCHEMA_VERSION

    def measurement(self, name: str) -> Measurement | None:
        """The measurement called ``name``, or None."""
        for m in self.measurements:
            if m.name == name:
                return m
        return None

    @property
    def datasheet(self) -> Datasheet | None:
        """The datasheet row of the device: by the recorded id, else by the device name."""
        if self.provenance.datasheet_id:
            return datasheets.get(self.provenance.datasheet_id)
        if self.provenance.device_type == "cpu":
            return None
        return datasheets.lookup(self.provenance.device_name)


# --- to and from JSON ---------------------------------------------------------------


def measurement_to_dict(m: Measurement) -> dict[str, Any]:
    """One measurement as the schema's object (the spread is written beside the samples).

    The warning and note are written as one line (:func:`bundle_input.one_line`).
    """
    s = m.spread
    out: dict[str, Any] = {
        "name": m.name,
        "entry": m.entry,
        "label": m.label,
        "unit": m.unit,
        "value": m.value,
        "samples": list(m.samples),
        "samples_unit": m.samples_unit,
        "spread": {
            "median": s.median,
            "p25": s.p25,
            "p75": s.p75,
            "min": s.min,
            "max": s.max,
            "count": s.count,
        },
        "dtype": m.dtype,
        "limit": m.limit,
        "headline": m.headline,
        "params": dict(m.params),
        "warning": None if m.warning is None else bundle_input.one_line(m.warning),
    }
    if m.note:
        out["note"] = bundle_input.one_line(m.note)
    if m.series is not None:
        out["series"] = {
            "x_label": m.series.x_label,
            "x_unit": m.series.x_unit,
            "y_unit": m.series.y_unit,
            "points": [[x, y] for x, y in m.series.points],
        }
    return out


def to_dict(bundle: Bundle) -> dict[str, Any]:
    """The bundle as plain data in the schema's shape.

    A skipped entry's reason (often an exception's message, which may span lines) is
    written as one line a reader accepts (:func:`bundle_input.one_line`).
    """
    p = bundle.provenance
    provenance = {
        "device_type": p.device_type,
        "device_name": p.device_name,
        "device_memory_bytes": p.device_memory_bytes,
        "device_count": p.device_count,
        "compute_capability": p.compute_capability,
        "datasheet_id": p.datasheet_id,
        "driver_version": p.driver_version,
        "driver_cuda_version": p.driver_cuda_version,
        "cuda_version": p.cuda_version,
        "torch_version": p.torch_version,
        "python_version": p.python_version,
        "platform": p.platform,
        "cpu_model": p.cpu_model,
        "cpu_threads": p.cpu_threads,
        "gpulesson_version": p.gpulesson_version,
        "gpulesson_commit": p.gpulesson_commit,
        "created_utc": p.created_utc,
        "clocks": {
            "sm_mhz": p.clocks.sm_mhz,
            "memory_mhz": p.clocks.memory_mhz,
            "sm_max_mhz": p.clocks.sm_max_mhz,
            "memory_max_mhz": p.clocks.memory_max_mhz,
        },
        "power_limit_w": p.power_limit_w,
        "suite": {
            "quick": p.suite.quick,
            "wall_s": p.suite.wall_s,
            "entries": list(p.suite.entries),
        },
    }
    return {
        "schema_version": bundle.schema_version,
        "provenance": provenance,
        "measurements": [measurement_to_dict(m) for m in bundle.measurements],
        "skipped": [
            {"entry": s.entry, "reason": bundle_input.one_line(s.reason)} for s in bundle.skipped
        ],
    }


def to_json(bundle: Bundle) -> str:
    """The bundle as indented JSON, ending in a newline."""
    return json.dumps(to_dict(bundle), indent=2) + "\n"


def measurement_from_dict(data: dict[str, Any]) -> Measurement:
    """One measurement from the schema's object (the inverse of :func:`measurement_to_dict`)."""
    return Measurement(
        name=data["name"],
        entry=data["entry"],
        unit=data["unit"],
        value=float(data["value"]),
        samples=tuple(float(x) for x in data["samples"]),
        samples_unit=data["samples_unit"],
        label=data.get("label", ""),
        dtype=data.get("dtype"),
        limit=data.get("limit"),
        headline=bool(data.get("headline", False)),
        params=dict(data.get("params", {})),
        warning=data.get("warning"),
        note=data.get("note", ""),
        series=None if "series" not in data else _series(data["series"]),
    )


def _series(data: dict[str, Any]) -> Series:
    return Series(
        x_label=data["x_label"],
        x_unit=data["x_unit"],
        y_unit=data["y_unit"],
        points=tuple((float(x), float(y)) for x, y in data["points"]),
    )


def from_dict(data: dict[str, Any]) -> Bundle:
    """Build a Bundle from data that already passed the schema (use :func:`validate`)."""
    p = data["provenance"]
    provenance = Provenance(
        device_type=p["device_type"],
        device_name=p["device_name"],
        device_memory_bytes=p["device_memory_bytes"],
        device_count=p["device_count"],
        compute_capability=p["compute_capability"],
        datasheet_id=p["datasheet_id"],
        driver_version=p["driver_version"],
        driver_cuda_version=p["driver_cuda_version"],
        cuda_version=p["cuda_version"],
        torch_version=p["torch_version"],
        python_version=p["python_version"],
        platform=p["platform"],
        cpu_model=p["cpu_model"],
        cpu_threads=p["cpu_threads"],
        gpulesson_version=p["gpulesson_version"],
        gpulesson_commit=p["gpulesson_commit"],
        created_utc=p["created_utc"],
        clocks=Clocks(**p["clocks"]),
        power_limit_w=p["power_limit_w"],
        suite=SuiteRun(
            quick=p["suite"]["quick"],
            wall_s=float(p["suite"]["wall_s"]),
            entries=tuple(p["suite"]["entries"]),
        ),
    )
    return Bundle(
        provenance=provenance,
        measurements=tuple(measurement_from_dict(m) for m in data["measurements"]),
        skipped=tuple(Skipped(s["entry"], s["reason"]) for s in data.get("skipped", [])),
        schema_version=data["schema_version"],
    )


# --- validation ------------------------------------------------------------------------


@functools.cache
def schema() -> dict[str, Any]:
    """The bundle JSON Schema shipped in the package."""
    text = resources.files("gpulesson.results").joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
    return json.loads(text)


def _path(parts: Any) -> str:
    """A JSON path as ``measurements[3].value``.

    >>> _path(["measurements", 3, "value"])
    'measurements[3].value'
    >>> _path([])
    '(top level)'
    """
    return bundle_input.json_path(list(parts))


def check_schema(data: Any) -> None:
    """Raise :class:`BundleError` for the most relevant schema error, naming its field."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema())
    error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if error is None:
        return
    message = error.message if len(error.message) <= 160 else error.message[:157] + "..."
    where = _path(error.absolute_path)
    raise BundleError(where, f"{message} (see gpulesson/results/{SCHEMA_FILE})")


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=CONSISTENCY_REL, abs_tol=1e-12)


def date_problems(data: dict[str, Any]) -> list[tuple[str, str]]:
    """A ``created_utc`` of the right shape that is no real time (``2025-02-30``).

    >>> date_problems({"provenance": {"created_utc": "2025-02-30T00:00:00Z"}})
    [('provenance.created_utc', "'2025-02-30T00:00:00Z' is not a real date and time (day \
is out of range for month): write when the run finished, e.g. 2025-02-28T12:00:00Z")]
    """
    created = data["provenance"]["created_utc"]
    try:
        dt.datetime.fromisoformat(created.replace("Z", "+00:00"))
    except ValueError as exc:
        return [
            (
                "provenance.created_utc",
                f"{created!r} is not a real date and time ({exc}): write when the run "
                "finished, e.g. 2025-02-28T12:00:00Z",
            )
        ]
    return []


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def consistency_problems(data: dict[str, Any]) -> list[tuple[str, str]]:
    """Fields whose values disagree with the samples or params beside them."""
    problems: list[tuple[str, str]] = []
    seen: set[str] = set()
    for i, m in enumerate(data["measurements"]):
        where = f"measurements[{i}]"
        if "series" in m and data.get("schema_version", SCHEMA_VERSION) < 2:
            problems.append(
                (f"{where}.series", "a series needs schema_version 2: set it, or drop the series")
            )
        if m["name"] in seen:
            problems.append((f"{where}.name", f"{m['name']!r} appears twice: names are unique"))
        seen.add(m["name"])
        measured = measurement_from_dict(m)
        s = measured.spread
        stored = m["spread"]
        for key in ("median", "p25", "p75", "min", "max", "count"):
            if not _close(float(stored[key]), float(getattr(s, key))):
                problems.append(
                    (
                        f"{where}.spread.{key}",
                        f"{stored[key]} does not match the samples ({getattr(s, key)}): "
                        "the spread must summarise the samples beside it",
                    )
                )
                break
        params = m.get("params", {})
        work_key = {"FLOP/s": "flop", "B/s": "bytes"}.get(m["unit"])
        if work_key in params and not _is_number(params[work_key]):
            problems.append(
                (
                    f"{where}.params.{work_key}",
                    f"{params[work_key]!r} is not a number: params.{work_key} is the "
                    f"{'FLOP' if work_key == 'flop' else 'byte'} count the value comes from",
                )
            )
            continue
        if m["samples_unit"] == "s" and work_key in params and s.median > 0:
            expected = float(params[work_key]) / s.median
            if not _close(m["value"], expected):
                problems.append(
                    (
                        f"{where}.value",
                        f"{m['value']:.6g} {m['unit']} is not params.{work_key} over the median "
                        f"time ({expected:.6g}): the value must come from its samples",
                    )
                )
        elif m["samples_unit"] == m["unit"] and not (s.min <= m["value"] <= s.max):
            problems.append(
                (
                    f"{where}.value",
                    f"{m['value']:.6g} lies outside its samples ({s.min:.6g} to {s.max:.6g})",
                )
            )
    return problems


def plausibility_problems(bundle: Bundle) -> list[tuple[str, str]]:
    """Figures no real machine of this kind produces (see the module docstring)."""
    problems: list[tuple[str, str]] = []
    p = bundle.provenance
    sheet = bundle.datasheet
    memory = p.device_memory_bytes
    if sheet and sheet.memory_bytes and memory and p.device_type == "cuda":
        share = memory / sheet.memory_bytes
        low, high = MEMORY_SHARE
        if not low <= share <= high:
            problems.append(
                (
                    "provenance.device_memory_bytes",
                    f"{memory} bytes is {share:.0%} of the {sheet.name}'s stated "
                    f"{sheet.memory_stated_gb:g} GiB; a real card reports {low:.0%} to "
                    f"{high:.0%}: check the device name and memory",
                )
            )
    created = dt.datetime.fromisoformat(p.created_utc.replace("Z", "+00:00"))
    if created > dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=1):
        problems.append(("provenance.created_utc", f"{p.created_utc} is in the future"))
    for i, m in enumerate(bundle.measurements):
        where = f"measurements[{i}]"
        if m.dtype in CUDA_ONLY_DTYPES and p.device_type != "cuda":
            problems.append(
                (f"{where}.dtype", f"{m.dtype} exists only on CUDA, not on {p.device_type}")
            )
        if m.limit == "peak_flops":
            if m.unit != "FLOP/s" or m.dtype is None:
                problems.append(
                    (f"{where}.limit", "peak_flops needs a FLOP/s value with its dtype")
                )
                continue
            peak = sheet.dense_flop_per_s(m.dtype) if sheet else None
            if peak and m.value > FLOPS_TOLERANCE * peak:
                problems.append(
                    (
                        f"{where}.value",
                        f"{m.value / 1e12:.4g} TFLOP/s is {m.value / peak:.2f}x the {sheet.name}'s "
                        f"dense {m.dtype} peak ({peak / 1e12:.4g} TFLOP/s, datasheet id "
                        f"{sheet.id}); above {FLOPS_TOLERANCE}x cannot be right: re-measure",
                    )
                )
        elif m.limit == "memory_bandwidth":
            if m.unit != "B/s":
                problems.append((f"{where}.limit", "memory_bandwidth needs a B/s value"))
                continue
            if sheet and m.value > sheet.memory_bandwidth_bytes_per_s:
                problems.append(
                    (
                        f"{where}.value",
                        f"{m.value / 1e9:.4g} GB/s is above the {sheet.name}'s datasheet "
                        f"bandwidth ({sheet.memory_bandwidth_stated_gb_per_s:g} GB/s): "
                        "the buffers must be far larger than the caches",
                    )
                )
        elif m.limit == "device_memory":
            if m.unit != "bytes":
                problems.append((f"{where}.limit", "device_memory needs a value in bytes"))
                continue
            if memory and m.value > memory:
                problems.append(
                    (
                        f"{where}.value",
                        f"{m.value:.0f} bytes is more than the device's memory ({memory} bytes)",
                    )
                )
    return problems


def validate(data: Any) -> Bundle:
    """Check schema, consistency and plausibility; return the Bundle or raise BundleError.

    >>> validate({"schema_version": 1})
    Traceback (most recent call last):
    ...
    gpulesson.results.bundle.BundleError: (top level): 'provenance' is a required property \
(see gpulesson/results/bundle.schema.json)
    """
    try:
        bundle_input.check_values(data)
    except FieldError as exc:
        raise BundleError(exc.field, exc.problem) from None
    check_schema(data)
    problems = date_problems(data) or consistency_problems(data)
    if problems:
        raise BundleError(*problems[0])
    sheet_id = data["provenance"]["datasheet_id"]
    if sheet_id is not None and sheet_id not in datasheets.ids():
        raise BundleError(
            "provenance.datasheet_id",
            f"{sheet_id!r} is not a datasheet id: use one of {', '.join(datasheets.ids())} or null",
        )
    bundle = from_dict(data)
    problems = plausibility_problems(bundle)
    if problems:
        raise BundleError(*problems[0])
    return bundle


def load(path: str | Path, name: str | None = None) -> Bundle:
    """Read and validate a bundle file; BundleError (a ValueError) names the problem.

    The message starts with ``name`` (default: the file's name), then the field. Only a
    regular file is opened (not a link, a device or a FIFO), and at most
    ``bundle_input.MAX_BUNDLE_BYTES`` + 1 bytes are read.

    >>> load("/dev/zero")
    Traceback (most recent call last):
    ...
    gpulesson.results.bundle.BundleError: zero: a character device, not a regular file: a \
bundle is the JSON file gpulesson measure --out wrote; put that file itself here (a link \
is not followed)
    """
    path = Path(path)
    label = name or path.name
    try:
        data = bundle_input.loads_strict(bundle_input.decode(bundle_input.read_bounded(path)))
        return validate(data)  # which walks every value first
    except FieldError as exc:
        where = label if exc.field == "(file)" else f"{label}: {exc.field}"
        raise BundleError(where, exc.problem) from None
