"""Published measurements: the shipped rows, their sources, and the loader's checks."""

from __future__ import annotations

import copy
import datetime
import json
from importlib import resources
from urllib.parse import urlparse

import pytest

from gpulesson.results import datasheets, published
from gpulesson.results.bundle import UNITS


def shipped() -> dict:
    text = resources.files("gpulesson.results").joinpath("published.json").read_text("utf-8")
    return json.loads(text)


def bad(change) -> str:
    data = copy.deepcopy(shipped())
    change(data)
    with pytest.raises(ValueError) as err:
        published.parse(data, "p.json", today=datetime.date(2026, 12, 1))
    return str(err.value)


def test_at_least_30_rows_from_at_least_3_publishers_and_pages():
    rows = published.load()
    assert len(rows) >= 30
    assert len({r.publisher for r in rows}) >= 3
    assert len(published.publications()) >= 3
    # distinct projects: the repositories the pages belong to
    projects = {"/".join(urlparse(u).path.split("/")[1:3]) for u in published.publications()}
    assert len(projects) >= 3


def test_the_mamf_tables_are_there_in_both_dtypes():
    mamf = published.rows_for(figure="matmul_peak")
    assert {r.dtype for r in mamf} == {"bf16", "fp8"}
    assert all(r.unit == "TFLOPS" and r.software.startswith("torch ") for r in mamf)
    h100 = {r.dtype: r.value for r in published.rows_for("h100-sxm", "matmul_peak")}
    assert h100 == {"bf16": 794.5, "fp8": 1402.6}


def test_a_published_figure_never_exceeds_its_datasheet_peak():
    for row in published.load():
        sheet = row.datasheet
        if sheet is None:
            continue
        if row.bundle_unit == "FLOP/s" and row.dtype:
            assert row.value_in_bundle_unit <= sheet.dense_flop_per_s(row.dtype), row
        if row.figure == "memory_bandwidth":
            assert row.value_in_bundle_unit <= sheet.memory_bandwidth_bytes_per_s, row


def test_every_row_converts_to_a_bundle_unit():
    for row in published.load():
        assert row.bundle_unit in UNITS
        assert row.value_in_bundle_unit > 0
    us = next(r for r in published.load() if r.unit == "µs")
    assert us.value_in_bundle_unit == pytest.approx(us.value * 1e-6)


def test_devices_with_rows_are_datasheet_ids():
    ids = published.devices()
    assert {"h100-sxm", "h200", "b200", "mi300x", "h100-pcie", "a100-80gb"} <= set(ids)
    assert all(i in datasheets.ids() for i in ids)


def test_the_schema_names_row_and_field():
    message = bad(lambda d: d["rows"][4].__setitem__("value", -1))
    assert message == (
        "p.json: rows: 5 (h100-sxm, matmul_peak.bf16): value: must be the positive number the "
        "source states, not -1 (see gpulesson/results/published.schema.json)"
    )
    assert "rows: 1 (Intel Gaudi 2, matmul_peak.bf16): source: missing; add it" in bad(
        lambda d: d["rows"][0].pop("source")
    )
    assert "rows: 2 (NVIDIA A100 SXM, matmul_peak.bf16): colour: unknown field" in bad(
        lambda d: d["rows"][1].__setitem__("colour", "red")
    )
    assert "figure: must be a measurement name" in bad(
        lambda d: d["rows"][1].__setitem__("figure", "Matmul TFLOPS")
    )


def test_checks_beyond_the_schema():
    assert "device: 'h100-sxm5' looks like a datasheet id but is none" in bad(
        lambda d: d["rows"][4].__setitem__("device", "h100-sxm5")
    )
    assert "retrieved: '2026-13-01' is not a real date" in bad(
        lambda d: d["rows"][0].__setitem__("retrieved", "2026-13-01")
    )
    assert "date: '2027-01' is in the future" in bad(
        lambda d: d["rows"][0].__setitem__("date", "2027-01")
    )
    message = bad(lambda d: d["rows"][0].__setitem__("unit", "TFLOP"))
    assert "unit: 'TFLOP' is not a known unit" in message and "SOURCE_UNITS" in message


def test_a_name_that_is_not_an_id_is_kept_as_the_source_gives_it():
    data = copy.deepcopy(shipped())
    rows = published.parse(data, "p.json", today=datetime.date(2026, 12, 1))
    gaudi = next(r for r in rows if r.device == "Intel Gaudi 2")
    assert gaudi.datasheet is None


def test_unknown_device_in_a_lookup_names_the_ids():
    with pytest.raises(ValueError, match="unknown GPU id 'h300'"):
        published.rows_for("h300")
