"""Datasheet peaks of common GPUs, with sources: the figures measured results are a fraction of.

The table is ``datasheets.json`` in this folder (shipped with the package), one row per
GPU with a stable id (``t4``, ``h100-sxm``, ``apple-m1-max``, ...), the vendor's figures
exactly as printed, and the link they come from. This module reads it and answers three
questions:

1. Which row is this device? :func:`lookup` takes the name torch reports
   (``torch.cuda.get_device_name()``, e.g. ``"NVIDIA H100 80GB HBM3"``) and matches it
   against each row's ``name_patterns`` (whole-name regular expressions, case-insensitive,
   after dropping a leading ``NVIDIA``); several patterns never match one name.
2. What is the dense peak for a dtype? :meth:`Datasheet.dense_flop_per_s`. When the vendor
   printed only the 2:4 structured-sparsity figure, the dense figure is half of it (NVIDIA's
   footnote), and the row says so.
3. How big and how fast is its memory? ``memory_bytes`` (the stated GB read as GiB, see the
   file's ``rules``) and ``memory_bandwidth_bytes_per_s``.
4. How fast are its links? ``interconnect`` (an :class:`Interconnect`, or None when the row
   gives none): NVLink and PCIe x16 bandwidth per GPU as stated, both directions added, and
   one direction's share (what a ring all-reduce's bus bandwidth is compared with).

The file's format is ``datasheets.schema.json`` (a JSON Schema, beside it): :func:`check`
validates the table once, when it is first read, and names the file, the row, the field and
the fix. The file's ``reference_gpus`` (:func:`reference_ids`) is the one list of GPUs that
every comparison table shows.

Used by :mod:`gpulesson.results.bundle` (plausibility checks), :mod:`gpulesson.results.compare`
(fractions of the datasheet figure), ``gpulesson budget --gpu`` (the peak its hours use) and
the multi-GPU lesson (:mod:`gpulesson.memory.comm`: link times).

Beside the table, ``example_rates.json`` holds the course's example hourly rates per class of
GPU (:func:`example_rates`), each class naming the datasheet ids it prices: the where-to-run
lesson's cost calculator shows them, and ``gpulesson budget --gpu`` takes a class's on-demand
rate as its default price. They are examples from the source lesson, not quotes.

>>> h100 = lookup("NVIDIA H100 80GB HBM3")
>>> h100.id, h100.dense_flop_per_s("bf16") / 1e12, h100.peaks["bf16"].with_sparsity
('h100-sxm', 989.5, True)
>>> get("a100-80gb").memory_bandwidth_bytes_per_s / 1e9
2039.0
>>> lookup("NVIDIA A10G") is None
True
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

from gpulesson.units import GIB

DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8")
DATA_FILE = "datasheets.json"


@dataclass(frozen=True)
class Peak:
    """One printed peak: the figure as stated, and whether it is the sparsity figure."""

    stated_tflops: float
    with_sparsity: bool
    stated: str

    @property
    def dense_flop_per_s(self) -> float:
        """The dense figure in FLOP/s: the stated one, halved when it is the sparsity figure.

        >>> Peak(989, True, "TF32 989*").dense_flop_per_s
        494500000000000.0
        """
        factor = 0.5 if self.with_sparsity else 1.0
        return self.stated_tflops * 1e12 * factor


SOURCE_KINDS = ("vendor", "secondary", "vendor-cited")


@dataclass(frozen=True)
class Source:
    """Where a row's figures come from.

    ``kind`` is ``vendor`` (the vendor's page, read for the row), ``secondary`` (another
    publication that tabulates the vendor's figures, read for the row) or ``vendor-cited``
    (the vendor page that secondary source cites, not read here).
    """

    title: str
    url: str
    kind: str = "vendor"


@dataclass(frozen=True, kw_only=True)
class Interconnect:
    """A GPU's links as its datasheet states them: per GPU, both directions added (GB/s).

    ``nvlink_stated_gb_per_s`` is None for a card without NVLink. The vendor adds both
    directions (see the file's ``rules``), so one direction carries half.

    >>> get("h100-sxm").interconnect.nvlink_one_way_bytes_per_s / 1e9
    450.0
    """

    nvlink_stated_gb_per_s: float | None
    pcie_stated_gb_per_s: float
    pcie_generation: int
    stated: str

    @property
    def nvlink_one_way_bytes_per_s(self) -> float | None:
        """Half the stated NVLink figure, in bytes per second: what one direction carries."""
        if self.nvlink_stated_gb_per_s is None:
            return None
        return self.nvlink_stated_gb_per_s * 1e9 / 2

    @property
    def pcie_one_way_bytes_per_s(self) -> float:
        """Half the stated PCIe x16 figure, in bytes per second: one direction.

        >>> get("a100-80gb").interconnect.pcie_one_way_bytes_per_s / 1e9
        32.0
        """
        return self.pcie_stated_gb_per_s * 1e9 / 2


SCHEMA_FILE = "datasheets.schema.json"


@functools.cache
def schema() -> dict[str, Any]:
    """The JSON Schema of ``datasheets.json`` (shipped beside it)."""
    text = resources.files("gpulesson.results").joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
    return json.loads(text)


def _where(path: list[Any], data: Any, row: str | None = None) -> str:
    """A schema path as the messages name it: ``datasheet row 'h200': interconnect: stated``.

    >>> _where(["devices", 0, "peaks", "bf16"], {"devices": [{"id": "t4"}]})
    "datasheet row 't4': peaks: bf16"
    >>> _where(["reference_gpus", 1], {})
    'reference_gpus: 2'
    """
    parts: list[str] = []
    rest = list(path)
    if row is not None:
        parts.append(row)
    elif len(rest) >= 2 and rest[0] == "devices" and isinstance(rest[1], int):
        item = data["devices"][rest[1]] if isinstance(data, dict) else None
        row_id = item.get("id") if isinstance(item, dict) else None
        parts.append(
            f"datasheet row {row_id!r}"
            if isinstance(row_id, str)
            else f"datasheet row {rest[1] + 1}"
        )
        rest = rest[2:]
    parts.extend(str(p + 1) if isinstance(p, int) else str(p) for p in rest)
    return ": ".join(parts) or "(top level)"


def schema_problem(error: Any, data: Any, row: str | None = None) -> str:
    """One schema error as ``<row>: <field>: <problem and fix>`` (the schema's ``x-fix``)."""
    path = list(error.absolute_path)
    sub = error.schema if isinstance(error.schema, dict) else {}
    if error.validator == "required":
        missing = next(k for k in error.validator_value if k not in error.instance)
        hint = sub.get("properties", {}).get(missing, {}).get("x-if-missing", "")
        return f"{_where([*path, missing], data, row)}: missing; add it{hint}"
    if error.validator == "additionalProperties" and sub.get("additionalProperties") is False:
        known = list(sub.get("properties", {}))
        extra = sorted(k for k in error.instance if k not in known)[0]
        where = _where([*path, extra], data, row)
        return f"{where}: unknown field; the fields are {', '.join(known)}"
    fix = str(sub.get("x-fix") or error.message)
    return f"{_where(path, data, row)}: {fix.replace('{value}', repr(error.instance))}"


def _first_error(instance: Any, sub: dict[str, Any]) -> Any:
    import jsonschema

    validator = jsonschema.Draft202012Validator({**sub, "$defs": schema()["$defs"]})
    return jsonschema.exceptions.best_match(validator.iter_errors(instance))


def parse_interconnect(row_id: str, data: Any) -> Interconnect | None:
    """Check one row's ``interconnect``; ``ValueError`` names the row and the field.

    The checks are the schema's (``$defs/interconnect`` in ``datasheets.schema.json``).

    >>> parse_interconnect("x", None) is None
    True
    >>> parse_interconnect("x", {"nvlink_stated_gb_per_s": 900, "pcie_stated_gb_per_s": -1,
    ...                          "pcie_generation": 5, "stated": "PCIe Gen5: 128GB/s"})
    Traceback (most recent call last):
    ...
    ValueError: datasheet row 'x': interconnect: pcie_stated_gb_per_s: must be a positive \
number of GB/s, not -1
    >>> parse_interconnect("x", {"nvlink_stated_gb_per_s": None, "pcie_stated_gb_per_s": 64,
    ...                          "pcie_generation": 4})
    Traceback (most recent call last):
    ...
    ValueError: datasheet row 'x': interconnect: stated: missing; add it (null for no NVLink)
    """
    if data is None:
        return None
    error = _first_error(data, schema()["$defs"]["interconnect"])
    if error is not None:
        raise ValueError(schema_problem(error, data, row=f"datasheet row {row_id!r}: interconnect"))
    nvlink = data["nvlink_stated_gb_per_s"]
    return Interconnect(
        nvlink_stated_gb_per_s=None if nvlink is None else float(nvlink),
        pcie_stated_gb_per_s=float(data["pcie_stated_gb_per_s"]),
        pcie_generation=int(data["pcie_generation"]),
        stated=str(data["stated"]),
    )


def check(data: Any, label: str = f"gpulesson/results/{DATA_FILE}") -> None:
    """Check the table against its schema, then what a schema cannot say; ``ValueError``.

    The message names the file, the row (its id), the field and the fix. Beyond the schema:
    ids are unique, every name pattern is a regular expression, and every reference GPU
    is a row.

    >>> good = raw()
    >>> check({**good, "devices": [{**good["devices"][0], "peaks": {"fp64": {}}}]}, "t.json")
    Traceback (most recent call last):
    ...
    ValueError: t.json: datasheet row 't4': peaks: unknown dtype 'fp64': use one of fp32, \
tf32, bf16, fp16, fp8 (see gpulesson/results/datasheets.schema.json)
    >>> check({**good, "reference_gpus": ["t4", "h300"]}, "t.json")
    Traceback (most recent call last):
    ...
    ValueError: t.json: reference_gpus: 2: 'h300' is not a datasheet row: use one of its ids
    """
    error = _first_error(data, {k: v for k, v in schema().items() if k != "$defs"})
    if error is not None:
        raise ValueError(
            f"{label}: {schema_problem(error, data)} (see gpulesson/results/{SCHEMA_FILE})"
        )
    seen: set[str] = set()
    for item in data["devices"]:
        where = f"{label}: datasheet row {item['id']!r}"
        if item["id"] in seen:
            raise ValueError(f"{where}: id: {item['id']!r} is used twice; give each row its own id")
        seen.add(item["id"])
        for j, pattern in enumerate(item["name_patterns"], 1):
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(
                    f"{where}: name_patterns: {j}: {pattern!r} is not a regular expression "
                    f"({exc}); fix it"
                ) from None
    for i, gpu in enumerate(data["reference_gpus"], 1):
        if gpu not in seen:
            raise ValueError(
                f"{label}: reference_gpus: {i}: {gpu!r} is not a datasheet row: use one of its ids"
            )


@dataclass(frozen=True)
class Datasheet:
    """One GPU's datasheet row."""

    id: str
    name: str
    architecture: str
    name_patterns: tuple[str, ...]
    memory_stated_gb: float | None
    memory_bandwidth_stated_gb_per_s: float
    peaks: dict[str, Peak]
    note: str
    sources: tuple[Source, ...]
    interconnect: Interconnect | None = None

    @property
    def memory_bytes(self) -> int | None:
        """The stated memory size in bytes, reading the vendor's GB as GiB (see the rules)."""
        if self.memory_stated_gb is None:
            return None
        return round(self.memory_stated_gb * GIB)

    @property
    def memory_bandwidth_bytes_per_s(self) -> float:
        """The stated memory bandwidth in bytes per second (decimal GB/s)."""
        return self.memory_bandwidth_stated_gb_per_s * 1e9

    def dense_flop_per_s(self, dtype: str) -> float | None:
        """The dense peak for ``dtype`` in FLOP/s, or None when the datasheet gives none.

        >>> get("t4").dense_flop_per_s("bf16") is None
        True
        """
        peak = self.peaks.get(dtype)
        return peak.dense_flop_per_s if peak else None

    def matches(self, device_name: str) -> bool:
        """Whether ``device_name`` (as torch reports it) is this GPU.

        >>> get("rtx-4090").matches("NVIDIA GeForce RTX 4090"), get("l4").matches("NVIDIA L40S")
        (True, False)
        """
        name = normalize_name(device_name)
        return any(re.fullmatch(p, name) for p in self.name_patterns)


def normalize_name(device_name: str) -> str:
    """Lower-case, single spaces, without a leading 'NVIDIA'.

    >>> normalize_name("  NVIDIA  GeForce RTX 3090 ")
    'geforce rtx 3090'
    """
    name = re.sub(r"\s+", " ", device_name).strip().lower()
    return re.sub(r"^nvidia ", "", name)


def _row(data: dict[str, Any]) -> Datasheet:
    """Build a row from data that passed :func:`check`."""
    peaks = {
        dtype: Peak(
            stated_tflops=float(p["stated_tflops"]),
            with_sparsity=bool(p["with_sparsity"]),
            stated=str(p["stated"]),
        )
        for dtype, p in data["peaks"].items()
    }
    memory = data["memory_stated_gb"]
    return Datasheet(
        id=str(data["id"]),
        name=str(data["name"]),
        architecture=str(data["architecture"]),
        name_patterns=tuple(data["name_patterns"]),
        memory_stated_gb=None if memory is None else float(memory),
        memory_bandwidth_stated_gb_per_s=float(data["memory_bandwidth_stated_gb_per_s"]),
        peaks=peaks,
        note=str(data.get("note", "")),
        sources=tuple(
            Source(title=s["title"], url=s["url"], kind=s.get("kind", "vendor"))
            for s in data["sources"]
        ),
        interconnect=parse_interconnect(str(data["id"]), data.get("interconnect")),
    )


@functools.cache
def raw() -> dict[str, Any]:
    """The data file as parsed JSON, checked once (its ``rules`` explain the figures)."""
    text = resources.files("gpulesson.results").joinpath(DATA_FILE).read_text(encoding="utf-8")
    data = json.loads(text)
    check(data)
    return data


@functools.cache
def all_rows() -> tuple[Datasheet, ...]:
    """Every row, in file order.

    >>> len({row.id for row in all_rows()}) == len(all_rows())
    True
    """
    return tuple(_row(item) for item in raw()["devices"])


def ids() -> tuple[str, ...]:
    """The stable ids, in file order: what ``--gpu`` options accept.

    >>> ids()[:3]
    ('t4', 'l4', 'a10')
    """
    return tuple(row.id for row in all_rows())


def reference_ids() -> tuple[str, ...]:
    """The reference GPUs every predicted / published / measured table shows (the file's
    ``reference_gpus``, the one list; :func:`gpulesson.results.predict.reference_devices`
    adds devices that have a bundle or published rows).

    >>> reference_ids()
    ('t4', 'rtx-4090', 'a100-80gb', 'h100-sxm', 'h200', 'apple-m4-max')
    """
    return tuple(raw()["reference_gpus"])


def get(datasheet_id: str) -> Datasheet:
    """The row with this id; ``ValueError`` naming the known ids otherwise.

    >>> get("h200").memory_stated_gb
    141.0
    >>> get("h300")
    Traceback (most recent call last):
    ...
    ValueError: unknown GPU id 'h300': use one of t4, l4, a10, a100-40gb, a100-80gb, \
a100-80gb-pcie, h100-sxm, h100-pcie, h200, b200, mi300x, l40s, rtx-3090, rtx-4090, rtx-5090, \
apple-m1-pro, apple-m1-max, apple-m1-ultra, apple-m2, apple-m4, apple-m4-pro, apple-m4-max
    """
    for row in all_rows():
        if row.id == datasheet_id:
            return row
    raise ValueError(f"unknown GPU id {datasheet_id!r}: use one of {', '.join(ids())}")


def lookup(device_name: str | None) -> Datasheet | None:
    """The row whose patterns match ``device_name``, or None for an unknown device.

    >>> lookup("NVIDIA A100-SXM4-40GB").id, lookup("Tesla T4").id, lookup("Apple M1 Max").id
    ('a100-40gb', 't4', 'apple-m1-max')
    >>> lookup("AMD EPYC 7B13") is None
    True
    """
    if not device_name:
        return None
    found = [row for row in all_rows() if row.matches(device_name)]
    if len(found) > 1:  # pragma: no cover - the tests keep patterns disjoint
        raise ValueError(f"{device_name!r} matches several datasheet rows: {found}")
    return found[0] if found else None


# --- example rates ------------------------------------------------------------------
# ``example_rates.json`` beside the datasheets: hourly rates per class of GPU, each class
# naming the datasheet ids it prices. Examples from the source lesson, not quotes: every
# figure built on them says so. The where-to-run lab and ``gpulesson budget --gpu`` read them.

RATES_FILE = "example_rates.json"
_RATE_FIELDS = ("card_class", "vram_gb", "on_demand_usd_per_h", "spot_usd_per_h", "datasheet_ids")


@dataclass(frozen=True, kw_only=True)
class ExampleRate:
    """An example hourly rate for one class of GPU, in US dollars, and the ids it prices."""

    card_class: str
    vram_gb: int
    on_demand_usd_per_h: float
    spot_usd_per_h: float
    datasheet_ids: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class ExampleRates:
    """The example rates with the sentence that says where they come from."""

    source: str
    rates: tuple[ExampleRate, ...]

    def for_gpu(self, datasheet_id: str) -> ExampleRate | None:
        """The class that prices ``datasheet_id``, or None when no example rate covers it.

        >>> example_rates().for_gpu("l4").card_class, example_rates().for_gpu("h100-sxm")
        ('A10 / L4-class', None)
        """
        get(datasheet_id)  # an unknown id is a ValueError naming the known ones
        return next((r for r in self.rates if datasheet_id in r.datasheet_ids), None)


def _rate_number(where: str, field: str, value: Any, whole: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise ValueError(f"{where}: {field}: must be a number of at least 0, not {value!r}")
    if value == float("inf"):
        raise ValueError(f"{where}: {field}: must be finite, not {value!r}")
    if whole and not isinstance(value, int):
        raise ValueError(f"{where}: {field}: must be a whole number, not {value!r}")
    return value


def parse_example_rates(data: Any, label: str = RATES_FILE) -> ExampleRates:
    """Check the rates file's data; ``ValueError`` names the file, the entry and the field.

    >>> parse_example_rates({"source": "example rates", "rates": [{"card_class": "x", "vram_gb": 8,
    ...     "on_demand_usd_per_h": -1, "spot_usd_per_h": 0.1, "datasheet_ids": ["t4"]}]})
    Traceback (most recent call last):
    ...
    ValueError: example_rates.json: rates: 1 ("x"): on_demand_usd_per_h: must be a number \
of at least 0, not -1
    """
    if not isinstance(data, dict) or not isinstance(data.get("rates"), list) or not data["rates"]:
        raise ValueError(f"{label}: needs a non-empty list 'rates'")
    source = data.get("source")
    if not isinstance(source, str) or "example" not in source:
        raise ValueError(f"{label}: source: must be text that calls the rates examples")
    rates: list[ExampleRate] = []
    priced: dict[str, str] = {}
    for i, item in enumerate(data["rates"], 1):
        name = item.get("card_class") if isinstance(item, dict) else None
        where = f"{label}: rates: {i}" + (f' ("{name}")' if isinstance(name, str) else "")
        if not isinstance(item, dict):
            raise ValueError(f"{where}: expected the fields {', '.join(_RATE_FIELDS)}")
        for key in item:
            if key not in _RATE_FIELDS:
                raise ValueError(
                    f"{where}: {key}: unknown field; the fields are {', '.join(_RATE_FIELDS)}"
                )
        for key in _RATE_FIELDS:
            if key not in item:
                raise ValueError(f"{where}: {key}: missing; add it")
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"{where}: card_class: must be text, not {name!r}")
        listed = item["datasheet_ids"]
        if not isinstance(listed, list) or not all(isinstance(x, str) for x in listed):
            raise ValueError(f"{where}: datasheet_ids: must be a list of datasheet ids")
        for gpu in listed:
            if gpu not in ids():
                raise ValueError(
                    f"{where}: datasheet_ids: unknown GPU id {gpu!r}: use one of {', '.join(ids())}"
                )
            if gpu in priced:
                raise ValueError(
                    f"{where}: datasheet_ids: {gpu!r} is already priced by {priced[gpu]!r}: "
                    "list each id once"
                )
            priced[gpu] = name
        rates.append(
            ExampleRate(
                card_class=name,
                vram_gb=int(_rate_number(where, "vram_gb", item["vram_gb"], whole=True)),
                on_demand_usd_per_h=float(
                    _rate_number(where, "on_demand_usd_per_h", item["on_demand_usd_per_h"])
                ),
                spot_usd_per_h=float(_rate_number(where, "spot_usd_per_h", item["spot_usd_per_h"])),
                datasheet_ids=tuple(listed),
            )
        )
    return ExampleRates(source=source, rates=tuple(rates))


@functools.cache
def example_rates() -> ExampleRates:
    """The example rates shipped with the package (``example_rates.json``), checked.

    >>> [r.card_class for r in example_rates().rates]
    ['T4-class', 'A10 / L4-class', 'A100 80 GB-class']
    >>> "example" in example_rates().source
    True
    """
    text = resources.files("gpulesson.results").joinpath(RATES_FILE).read_text(encoding="utf-8")
    return parse_example_rates(json.loads(text), f"gpulesson/results/{RATES_FILE}")
