"""The files readers copy from snippets/ run as the pages say they do."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SNIPPETS = Path(__file__).resolve().parent.parent / "snippets"


def run_snippet(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SNIPPETS / name), *args], capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize("name", sorted(p.name for p in SNIPPETS.glob("*.py")))
def test_every_snippet_has_help(name: str):
    result = run_snippet(name, "--help")
    assert result.returncode == 0, result.stderr
    assert "usage:" in result.stdout


@pytest.mark.parametrize("name", sorted(p.name for p in SNIPPETS.glob("*.py")))
def test_snippets_need_only_torch_and_the_standard_library(name: str):
    source = (SNIPPETS / name).read_text()
    assert "gpulesson" not in source


def test_pick_device_uses_the_best_device():
    import torch

    result = run_snippet("pick_device.py")
    assert result.returncode == 0, result.stderr
    expected = (
        "cuda"
        if torch.cuda.is_available()
        else ("mps" if torch.backends.mps.is_available() else "cpu")
    )
    assert f"Using: {expected}" in result.stdout
    assert "result sum is finite: True" in result.stdout


def test_device_report_answers_the_cuda_question():
    import torch

    result = run_snippet("device_report.py")
    assert result.returncode == 0, result.stderr
    assert f"CUDA available: {torch.cuda.is_available()}" in result.stdout
    assert f"torch built with CUDA: {torch.version.cuda}" in result.stdout
