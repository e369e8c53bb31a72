"""The installable package: a wheel, installed away from a clone, runs every subcommand."""

from __future__ import annotations

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


@pytest.mark.parametrize(
    ("args", "stdin", "expected"),
    [
        (("probe",), "", "Verdict:"),
        (("bench", "--sizes", "32", "--device", "cpu"), "", "GFLOP/s"),
        (("budget", "--params", "7e9", "--preset", "amp"), "", "112.00 GB"),
        (("diagnose", "-"), OOM, "exhaustion"),
    ],
)
def test_every_subcommand_runs_from_the_installed_wheel(installed: Path, args, stdin, expected):
    result = _gpulesson(installed, *args, stdin=stdin)
    assert result.returncode == 0, result.stderr
    assert expected in result.stdout
