"""Every snippet is shown by a lesson, runs on any device, and is run by a test.

tests/test_snippets.py checks --help for all of them; each snippet's owner tests its
output (test_snippets.py, test_bench.py, test_diagnose_snippets.py) and
tests/test_notebooks.py runs each one, with the notebook's arguments, on CPU. This file
holds what those leave out: the checks that apply to every snippet, and the CUDA runs of
the two device snippets.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import pytest
import torch

from gpulesson.site.notebooks import SNIPPET_RUNS
from tests.conftest import REPO

SNIPPETS = sorted((REPO / "snippets").glob("*.py"))
TESTS = [p for p in (REPO / "tests").glob("test_*.py") if p.name != "test_snippets_run.py"]
INCLUDE = re.compile(r'^\s*--8<--\s+"([\w./-]+?\.py)', re.MULTILINE)


def _included() -> set[str]:
    return {
        name
        for lesson in (REPO / "docs" / "lessons").glob("*.md")
        for name in INCLUDE.findall(lesson.read_text())
    }


@pytest.mark.parametrize("path", SNIPPETS, ids=lambda p: p.name)
def test_every_snippet_is_shown_by_a_lesson(path: Path):
    assert path.name in _included(), f"no lesson includes snippets/{path.name} with --8<--"


@pytest.mark.parametrize("path", SNIPPETS, ids=lambda p: p.name)
def test_every_snippet_is_named_by_a_test_of_its_own(path: Path):
    # The generic --help test and the notebook runs do not name snippets one by one; a
    # test that quotes the file name is the one that runs it and checks what it prints.
    named = [t.name for t in TESTS if f'"{path.name}"' in t.read_text()]
    assert named, f"no test runs {path.name} and checks its output: add one"


@pytest.mark.parametrize("path", SNIPPETS, ids=lambda p: p.name)
def test_snippet_never_hard_codes_cuda(path: Path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            assert node.func.attr != "cuda", f"{path.name}:{node.lineno} calls .cuda()"


@pytest.mark.parametrize("path", SNIPPETS, ids=lambda p: p.name)
def test_importing_a_snippet_runs_nothing(path: Path, capsys: pytest.CaptureFixture[str]):
    spec = importlib.util.spec_from_file_location(f"snippet_{path.stem}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert callable(getattr(module, "main", None)), f"{path.name} has no main()"
    assert capsys.readouterr().out == ""


def test_notebook_arguments_name_existing_snippets():
    names = {p.name for p in SNIPPETS}
    assert set(SNIPPET_RUNS) <= names, set(SNIPPET_RUNS) - names


@pytest.mark.gpu
def test_device_report_lists_every_gpu_in_gb_and_gib(run_snippet):
    result = run_snippet("device_report.py")
    assert result.returncode == 0, result.stderr
    assert "CUDA available: True" in result.stdout
    for index in range(torch.cuda.device_count()):
        line = next(x for x in result.stdout.splitlines() if x.startswith(f"GPU {index}: "))
        assert torch.cuda.get_device_name(index) in line
        assert " GB (" in line and " GiB)" in line and "compute capability" in line


@pytest.mark.gpu
def test_sync_benchmark_times_the_gpu_with_and_without_the_closing_barrier(run_snippet):
    result = run_snippet("sync_benchmark.py", "--size", "1024", "--repeats", "3")
    assert result.returncode == 0, result.stderr
    assert "cuda with barriers:" in result.stdout
    assert "cuda naive (no closing barrier):" in result.stdout
    assert "Speedup, honest:" in result.stdout
