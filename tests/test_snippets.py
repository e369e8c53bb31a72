"""The files readers copy from snippets/ run as the pages say they do.

Run in this process (the ``run_snippet`` fixture): torch is imported once, not per snippet.
"""

from __future__ import annotations

import pytest
import torch

from tests.conftest import REPO

SNIPPETS = REPO / "snippets"


@pytest.mark.parametrize("name", sorted(p.name for p in SNIPPETS.glob("*.py")))
def test_every_snippet_has_help(name: str, run_snippet):
    result = run_snippet(name, "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: {name}")


@pytest.mark.parametrize("name", sorted(p.name for p in SNIPPETS.glob("*.py")))
def test_snippets_need_only_torch_and_the_standard_library(name: str):
    source = (SNIPPETS / name).read_text()
    assert "gpulesson" not in source


def test_pick_device_uses_the_best_device(run_snippet):
    result = run_snippet("pick_device.py")
    assert result.returncode == 0, result.stderr
    expected = (
        "cuda"
        if torch.cuda.is_available()
        else ("mps" if torch.backends.mps.is_available() else "cpu")
    )
    assert f"Using: {expected}" in result.stdout
    assert "result sum is finite: True" in result.stdout


def test_device_report_answers_the_cuda_question(run_snippet):
    result = run_snippet("device_report.py")
    assert result.returncode == 0, result.stderr
    assert f"CUDA available: {torch.cuda.is_available()}" in result.stdout
    assert f"torch built with CUDA: {torch.version.cuda}" in result.stdout
