"""``gpulesson compare``: bundles side by side in the terminal; bad bundles refused in one line."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpulesson.cli.compare import terminal_text
from gpulesson.results import bundle as B
from gpulesson.results.compare import Sourced, compare
from gpulesson.results.render import comparison_to_text

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


def test_dev_zero_exits_2_at_once_in_one_line(tmp_path):
    """The console script itself: /dev/zero is never read (it would never end)."""
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "gpulesson", "compare", "/dev/zero"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    elapsed_s = time.perf_counter() - start
    assert result.returncode == 2
    assert result.stderr == (
        "gpulesson compare: error: /dev/zero: a character device, not a regular file: a "
        "bundle is the JSON file gpulesson measure --out wrote; put that file itself here "
        "(a link is not followed)\n"
    )
    assert result.stdout == ""
    assert elapsed_s < 30  # an interpreter's start-up, not a read of /dev/zero


def _sourced_with_escapes() -> Sourced:
    """The H100 fixture with escape sequences in every string compare prints.

    Built in Python, past the loader (which refuses them), to test the printing itself.
    """
    bundle = B.load(H100)
    esc = "\x1b[31m\x1b]0;title\x07\x9b2J\r\u202e"
    p = dataclasses.replace(bundle.provenance, device_name=f"GPU{esc}X", torch_version=f"2{esc}")
    measurements = tuple(
        dataclasses.replace(m, label=f"{m.label}{esc}") for m in bundle.measurements
    )
    return Sourced(
        dataclasses.replace(bundle, provenance=p, measurements=measurements), "given", "x.json"
    )


def test_text_output_carries_no_control_sequence_whatever_the_strings_held(capsys):
    mine = _sourced_with_escapes()
    raw = comparison_to_text(compare(mine, [mine]))
    assert "\x1b" in raw  # the renderer alone would pass them on
    text = terminal_text(raw)
    assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e]", text)
    assert "GPUX" in text and "CUDA context memory" in text
    assert text.count("\n") == raw.count("\n")


def test_a_bundle_whose_strings_carry_escapes_prints_none(run_cli, tmp_path):
    data = json.loads(H100.read_text())
    data["provenance"]["device_name"] = "GPU \x1b[2J\x1b]0;pwned\x07"
    data["measurements"][0]["label"] = "\x9b31mred"
    for raw in (False, True):  # as JSON escapes, and as the raw characters themselves
        path = tmp_path / f"esc{raw}.json"
        text = json.dumps(data)
        if raw:
            text = text.replace("\\u001b", "\x1b").replace("\\u0007", "\x07")
            text = text.replace("\\u009b", "\x9b")
            assert "\x1b" in text and "\x9b" in text
        path.write_text(text, encoding="utf-8")
        result = run_cli("compare", str(path), str(H100))
        output = result.stdout + result.stderr
        assert result.returncode == 2 and result.stderr.count("\n") == 1
        assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f]", output)
        assert f"{path}: provenance.device_name: holds U+001B" in result.stderr


def test_json_output_is_strict_json(run_cli):
    result = run_cli("compare", str(T4), str(H100), "--all", "--json")
    assert result.returncode == 0

    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} in --json output")

    data = json.loads(result.stdout, parse_constant=refuse)
    assert data["rows"] and all(isinstance(r["cells"], list) for r in data["rows"])


def test_a_missing_results_folder_exits_2_naming_it(run_cli, tmp_path):
    missing = tmp_path / "no-such-results"
    result = run_cli("compare", str(H100), "--results", str(missing))
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (
        f"gpulesson compare: error: --results {missing}: no such folder: name the results "
        "folder of a clone (it holds reference/), or leave --results out\n"
    )
    folder = tmp_path / "results"
    (folder / "reference").mkdir(parents=True)
    shutil.copy(T4, folder / "reference")
    result = run_cli("compare", str(H100), "--results", str(folder))
    assert result.returncode == 0 and "[1]:  FIXTURE (not a measurement) Tesla T4" in result.stdout


def test_a_hostile_reference_bundle_is_refused_naming_its_folder(run_cli, tmp_path):
    reference = tmp_path / "results" / "reference"
    reference.mkdir(parents=True)
    (reference / "z.json").symlink_to("/dev/zero")
    result = run_cli("compare", str(H100), "--results", str(tmp_path / "results"))
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert result.stderr.startswith(
        "gpulesson compare: error: results/reference/z.json: a symbolic link, not a regular file"
    )
