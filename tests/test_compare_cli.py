"""``gpulesson compare``: bundles side by side in the terminal; bad bundles refused in one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures" / "bundles"
H100 = FIXTURES / "fixture_h100.json"
T4 = FIXTURES / "fixture_t4.json"


def test_two_bundles_side_by_side_with_ratios_and_datasheet_fractions(run_cli):
    result = run_cli("compare", str(T4), str(H100))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith("mine: FIXTURE (not a measurement) Tesla T4 [cuda]")
    assert "[1]:  FIXTURE (not a measurement) NVIDIA H100 80GB HBM3 [cuda]" in out
    row = next(line for line in out.splitlines() if line.startswith("best bf16 matmul"))
    # T4 20 TFLOP/s (no bf16 datasheet figure) against H100 700 (71% of its 989.5 dense)
    assert row.split()[-5:] == ["20.0", "—", "700", "71%", "0.029x"]
    bandwidth = next(line for line in out.splitlines() if line.startswith("device memory"))
    assert "75%" in bandwidth and "87%" in bandwidth  # 240 of 320 GB/s; 2,900 of 3,350 GB/s


def test_all_shows_every_figure_and_json_is_one_object(run_cli):
    headline = run_cli("compare", str(T4), str(H100)).stdout
    every = run_cli("compare", str(T4), str(H100), "--all").stdout
    assert "bf16 matmul, n=8192" in every and "bf16 matmul, n=8192" not in headline
    data = json.loads(run_cli("compare", str(T4), str(H100), "--json").stdout)
    assert data["mine"]["file"] == "fixture_t4.json"
    row = next(r for r in data["rows"] if r["name"] == "matmul_peak.bf16")
    assert row["cells"][1]["datasheet_fraction"] == pytest.approx(700e12 / 989.5e12)
    assert row["cells"][1]["ratio_to_mine"] == pytest.approx(20 / 700)


def test_default_is_the_reference_bundles_of_the_clone(run_cli, tmp_path, monkeypatch):
    reference = tmp_path / "results" / "reference"
    reference.mkdir(parents=True)
    shutil.copy(H100, reference)
    shutil.copy(T4, reference)
    monkeypatch.chdir(tmp_path)
    result = run_cli("compare", str(reference / "fixture_t4.json"))
    assert result.returncode == 0, result.stderr
    assert "[1]:  FIXTURE (not a measurement) NVIDIA H100" in result.stdout
    assert "[2]:" not in result.stdout  # mine is not compared with itself


def test_with_nothing_to_compare_it_prints_the_one_bundle(run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no results/ here
    result = run_cli("compare", str(H100))
    assert result.returncode == 0
    assert "(nothing to compare against: this bundle's own figures)" in result.stdout
    assert "best bf16 matmul (shape search)" in result.stdout


def _write(tmp_path: Path, data: dict) -> str:
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(data))
    return str(path)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda d: d.pop("provenance"), "(top level)"),
        (lambda d: d["provenance"].update(device_type="tpu"), "provenance.device_type"),
        (lambda d: d["measurements"][0].update(unit="parsecs"), "measurements[0].unit"),
        (lambda d: d["measurements"][0].update(value=-1), "measurements[0].value"),
    ],
)
def test_a_bad_bundle_is_refused_with_one_line_naming_the_field(run_cli, tmp_path, change, field):
    data = json.loads(H100.read_text())
    change(data)
    path = _write(tmp_path, data)
    result = run_cli("compare", path)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"gpulesson compare: error: {path}: {field}: ")
    assert result.stdout == ""


def test_an_implausible_bundle_is_refused(run_cli, tmp_path):
    data = json.loads(H100.read_text())
    i = next(i for i, m in enumerate(data["measurements"]) if m["name"] == "matmul_peak.fp8")
    m = data["measurements"][i]
    m["value"] = 3958e12  # the with-sparsity figure: twice the dense peak
    m["params"]["flop"] = m["value"] * m["spread"]["median"]
    result = run_cli("compare", _write(tmp_path, data))
    assert result.returncode == 2
    assert f"measurements[{i}].value: 3958 TFLOP/s is 2.00x" in result.stderr


def test_missing_and_non_json_files_are_one_line(run_cli, tmp_path):
    result = run_cli("compare", str(tmp_path / "nope.json"))
    assert result.returncode == 2 and "cannot read the file" in result.stderr
    junk = tmp_path / "junk.json"
    junk.write_text("hello")
    result = run_cli("compare", str(junk))
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "not JSON" in result.stderr


def test_no_bundle_is_one_line_saying_how_to_make_one(run_cli):
    result = run_cli("compare")
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "no bundle given" in result.stderr and "gpulesson measure --out" in result.stderr
