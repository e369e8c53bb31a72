"""Result bundles: the shipped schema, round trips, and refusals that name the field."""

from __future__ import annotations

import copy
import getpass
import json
import socket
import types
from pathlib import Path

import jsonschema
import pytest

from gpulesson.probe import probe
from gpulesson.results import bundle as B
from gpulesson.results import provenance

FIXTURES = Path(__file__).parent / "fixtures" / "bundles"


def fixture(name: str = "fixture_h100.json") -> dict:
    return json.loads((FIXTURES / name).read_text())


def measurement_index(data: dict, name: str) -> int:
    return next(i for i, m in enumerate(data["measurements"]) if m["name"] == name)


def test_the_schema_is_a_valid_draft_2020_12_schema_requiring_the_three_parts():
    schema = B.schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["required"] == ["schema_version", "provenance", "measurements"]
    assert schema["properties"]["schema_version"]["enum"] == [1, B.SCHEMA_VERSION]
    required = set(schema["$defs"]["provenance"]["required"])
    for name in (
        "device_type",
        "device_name",
        "device_memory_bytes",
        "driver_version",
        "cuda_version",
        "torch_version",
        "gpulesson_version",
        "gpulesson_commit",
        "created_utc",
        "clocks",
        "power_limit_w",
    ):
        assert name in required
    measurement = schema["$defs"]["measurement"]
    for name in ("name", "unit", "value", "samples", "spread"):
        assert name in measurement["required"]
    assert measurement["properties"]["unit"]["enum"] == list(B.UNITS)


@pytest.mark.parametrize("name", ["fixture_h100.json", "fixture_t4.json"])
def test_fixture_bundles_validate_and_round_trip(name):
    data = fixture(name)
    bundle = B.validate(data)
    assert bundle.provenance.device_name.startswith("FIXTURE")
    again = B.to_dict(bundle)
    assert again == data
    assert B.load(FIXTURES / name) == bundle


def refused(data: dict) -> B.BundleError:
    with pytest.raises(B.BundleError) as info:
        B.validate(data)
    message = str(info.value)
    assert "\n" not in message  # one line
    return info.value


def test_a_missing_provenance_field_is_named():
    data = fixture()
    del data["provenance"]["driver_version"]
    error = refused(data)
    assert error.field == "provenance"
    assert "'driver_version' is a required property" in str(error)


def test_a_wrong_unit_is_named():
    data = fixture()
    data["measurements"][2]["unit"] = "FLOPS"
    error = refused(data)
    assert error.field == "measurements[2].unit"


def test_a_wrong_schema_version_is_named():
    data = fixture()
    data["schema_version"] = 3
    assert refused(data).field == "schema_version"


def _with_series(version: int, points: int = 3) -> dict:
    data = fixture()
    data["schema_version"] = version
    data["measurements"][0]["series"] = {
        "x_label": "n",
        "x_unit": "",
        "y_unit": "s",
        "points": [[float(i), 0.5 * i] for i in range(points)],
    }
    return data


def test_a_series_round_trips_in_version_2_and_version_1_bundles_are_still_read():
    bundle = B.validate(_with_series(2))
    series = bundle.measurements[0].series
    assert series is not None and series.points[2] == (2.0, 1.0) and series.y_unit == "s"
    assert B.to_dict(bundle)["measurements"][0]["series"]["points"][2] == [2.0, 1.0]
    assert B.validate(fixture()).schema_version == 1  # the fixtures are version 1
    assert B.schema()["$defs"]["series"]["properties"]["points"]["maxItems"] == (
        B.MAX_SERIES_POINTS
    )


def test_a_series_in_a_version_1_bundle_or_past_the_bound_is_named():
    assert refused(_with_series(1)).field == "measurements[0].series"
    too_long = refused(_with_series(2, points=B.MAX_SERIES_POINTS + 1))
    assert too_long.field == "measurements[0].series.points"


def test_throughput_above_the_datasheet_peak_is_implausible():
    data = fixture()
    i = measurement_index(data, "matmul_peak.bf16")
    m = data["measurements"][i]
    # 1.2x the H100's dense bf16 peak, made consistent with its samples so only plausibility fails
    m["value"] = 1.2 * 989.5e12
    m["params"]["flop"] = m["value"] * m["spread"]["median"]
    error = refused(data)
    assert error.field == f"measurements[{i}].value"
    assert "1.20x the NVIDIA H100 SXM5 80GB's dense bf16 peak" in str(error)


def test_throughput_just_under_the_tolerance_passes():
    data = fixture()
    m = data["measurements"][measurement_index(data, "matmul_peak.bf16")]
    m["value"] = 1.04 * 989.5e12
    m["params"]["flop"] = m["value"] * m["spread"]["median"]
    B.validate(data)


def test_bandwidth_above_the_datasheet_is_implausible():
    data = fixture()
    i = measurement_index(data, "memory_bandwidth")
    m = data["measurements"][i]
    m["value"] = 3.5e12  # the H100 SXM's datasheet says 3.35 TB/s
    m["params"]["bytes"] = m["value"] * m["spread"]["median"]
    error = refused(data)
    assert error.field == f"measurements[{i}].value"
    assert "datasheet bandwidth" in str(error)


def test_a_size_above_the_device_memory_is_implausible():
    data = fixture()
    i = measurement_index(data, "cuda_context")
    m = data["measurements"][i]
    m["value"] = m["samples"][0] = 100 * 2**30
    m["spread"] = {k: 100 * 2**30 for k in ("median", "p25", "p75", "min", "max")} | {"count": 1}
    error = refused(data)
    assert error.field == f"measurements[{i}].value"


def test_device_memory_must_fit_the_datasheet():
    data = fixture()
    data["provenance"]["device_memory_bytes"] = 40 * 2**30  # half an H100 80GB
    error = refused(data)
    assert error.field == "provenance.device_memory_bytes"


def test_a_value_that_does_not_come_from_its_samples_is_refused():
    data = fixture()
    i = measurement_index(data, "matmul_peak.fp32")
    data["measurements"][i]["value"] *= 2
    assert refused(data).field == f"measurements[{i}].value"


def test_a_spread_that_does_not_summarise_its_samples_is_refused():
    data = fixture()
    data["measurements"][0]["spread"]["max"] = 1.0
    assert refused(data).field == "measurements[0].spread.max"


def test_duplicate_names_are_refused():
    data = fixture()
    data["measurements"].append(copy.deepcopy(data["measurements"][0]))
    assert refused(data).field == f"measurements[{len(data['measurements']) - 1}].name"


def test_tf32_on_a_cpu_is_implausible():
    data = fixture()
    data["provenance"].update(device_type="cpu", datasheet_id=None)
    i = measurement_index(data, "matmul_peak.bf16")
    data["measurements"][i]["dtype"] = "tf32"
    assert refused(data).field == f"measurements[{i}].dtype"


def test_an_unknown_datasheet_id_is_named():
    data = fixture()
    data["provenance"]["datasheet_id"] = "h900"
    error = refused(data)
    assert error.field == "provenance.datasheet_id"


def test_load_names_the_file_for_bad_json_and_bad_fields(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(B.BundleError, match=r"broken.json: not JSON \(line 1"):
        B.load(broken)
    bad = tmp_path / "bad.json"
    data = fixture()
    del data["measurements"]
    bad.write_text(json.dumps(data))
    with pytest.raises(B.BundleError, match=r"^bad.json: \(top level\): 'measurements' is a"):
        B.load(bad)
    with pytest.raises(B.BundleError, match="cannot read the file"):
        B.load(tmp_path / "missing.json")


def _fake_nvml(fail_clock: bool = False) -> types.ModuleType:
    nvml = types.ModuleType("pynvml")
    nvml.NVML_CLOCK_SM, nvml.NVML_CLOCK_MEM = 1, 2
    nvml.nvmlInit = lambda: None
    nvml.nvmlShutdown = lambda: None
    nvml.nvmlDeviceGetHandleByIndex = lambda i: ("gpu", i)

    def clock(handle, kind):
        if fail_clock:
            raise RuntimeError("Not Supported")
        return {1: 1755, 2: 2619}[kind]

    nvml.nvmlDeviceGetClockInfo = clock
    nvml.nvmlDeviceGetMaxClockInfo = lambda handle, kind: {1: 1980, 2: 2619}[kind]
    nvml.nvmlDeviceGetEnforcedPowerLimit = lambda handle: 700000
    return nvml


def test_nvml_clocks_and_power_are_read_and_missing_ones_stay_none():
    clocks, power = provenance.read_nvml(0, _fake_nvml())
    assert (clocks.sm_mhz, clocks.memory_mhz, clocks.sm_max_mhz) == (1755, 2619, 1980)
    assert power == 700
    clocks, power = provenance.read_nvml(0, _fake_nvml(fail_clock=True))
    assert clocks.sm_mhz is None and clocks.sm_max_mhz == 1980  # one field missing, not all


def test_provenance_on_this_cpu_is_complete_and_holds_no_user_or_host_name():
    suite = B.SuiteRun(quick=True, wall_s=1.0, entries=("oom",))
    p = provenance.collect("cpu", suite, report=probe())
    assert p.device_type == "cpu" and p.datasheet_id is None
    assert p.device_memory_bytes and p.device_memory_bytes > 0
    assert p.clocks == B.Clocks() and p.power_limit_w is None  # no NVML answer on a CPU
    measurement = B.Measurement(
        name="oom.requested",
        entry="oom",
        unit="bytes",
        value=1.0,
        samples=(1.0,),
        samples_unit="bytes",
    )
    text = B.to_json(B.Bundle(provenance=p, measurements=(measurement,)))
    B.validate(json.loads(text))
    for private in (socket.gethostname(), getpass.getuser()):
        if len(private) >= 4:
            assert private not in text
