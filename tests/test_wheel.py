"""The installable package: a wheel, installed away from a clone, runs every subcommand."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
    "total capacity of 23.68 GiB of which 1.10 GiB is free."
)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``pip wheel .`` of this checkout, installed (without dependencies) into a folder."""
    tmp = tmp_path_factory.mktemp("wheel")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    built = subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp / "dist"), str(REPO)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = (tmp / "dist").glob("gpulesson-*.whl")
    target = tmp / "site-packages"
    done = subprocess.run(
        [*pip, "install", "--no-deps", "--target", str(target), str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return target


def _gpulesson(target: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpulesson", *args],
        cwd=target.parent,  # not a clone: no docs/, no results/
        env={**os.environ, "PYTHONPATH": str(target)},
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_wheel_carries_its_data_files(installed: Path):
    package = installed / "gpulesson"
    for data in ("bundle.schema.json", "datasheets.json", "example_rates.json"):
        assert (package / "results" / data).is_file(), data
    for table in ("memory/recipes", "errors/fix_ladder"):  # read at import, with their schemas
        for data in (f"{table}.json", f"{table}.schema.json"):
            assert (package / data).is_file(), data
    for name in ("quiz", "glossary", "labs", "error_examples"):
        assert (package / "site" / "schemas" / f"{name}.schema.json").is_file(), name
    assert (package / "inside" / "gpu_limits.json").is_file()  # the cited per-SM limits
    where = subprocess.run(
        [sys.executable, "-c", "import gpulesson; print(gpulesson.__file__)"],
        cwd=installed.parent,
        env={**os.environ, "PYTHONPATH": str(installed)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert Path(where.stdout.strip()).parent == package, "the checkout was imported, not the wheel"
    refused = _gpulesson(installed, "budget", "--params", "nope")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1


RUNS = (
    (("probe",), "", "Verdict:"),
    (("bench", "--sizes", "32", "--device", "cpu"), "", "GFLOP/s"),
    (("budget", "--params", "7e9", "--preset", "amp"), "", "112.00 GB"),
    (("diagnose", "-"), OOM, "exhaustion"),
)

# One interpreter runs the four subcommands in turn (torch is imported once), each with its
# own stdin and captured output, exactly as main() runs for the console script.
SCRIPT = """
import contextlib, io, json, sys
from gpulesson.cli import main
for args, stdin in json.loads(sys.argv[1]):
    out = io.StringIO()
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin.encode()), encoding="utf-8")
    with contextlib.redirect_stdout(out):
        code = main(args)
    print(json.dumps([code, out.getvalue()]))
"""


def test_every_subcommand_runs_from_the_installed_wheel(installed: Path):
    runs = [[list(args), stdin] for args, stdin, _ in RUNS]
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(runs)],
        cwd=installed.parent,  # not a clone: no docs/, no results/
        env={**os.environ, "PYTHONPATH": str(installed)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    outputs = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("[")]
    assert len(outputs) == len(RUNS)
    for (args, _, expected), (code, out) in zip(RUNS, outputs, strict=True):
        assert code == 0 and expected in out, (args, code, out[-500:])
