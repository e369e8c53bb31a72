"""The tree stays ruff-clean; a lint failure names the file and line."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO


def _ruff(*args: str) -> subprocess.CompletedProcess[str]:
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    if not Path(ruff).exists():
        pytest.skip("ruff is not installed; pip install -e '.[dev]' brings it")
    return subprocess.run(
        [ruff, *args, "--no-cache", "."], cwd=REPO, capture_output=True, text=True, timeout=120
    )


def test_ruff_is_clean():
    result = _ruff("check")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_is_clean():
    result = _ruff("format", "--check")
    assert result.returncode == 0, "run `ruff format .`:\n" + result.stdout + result.stderr
