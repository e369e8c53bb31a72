"""``pytest`` runs on every CPU (``-n auto``), and in one process where torch sees a GPU."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import torch

from tests import conftest
from tests.conftest import REPO


@pytest.fixture
def no_count_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)


def test_a_machine_with_a_gpu_runs_in_one_process(monkeypatch, no_count_variable):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert conftest.pytest_xdist_auto_num_workers(None) == 0


def test_a_container_s_cpu_quota_bounds_the_workers(monkeypatch, tmp_path, no_count_variable):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    monkeypatch.setattr(conftest, "usable_cpus", lambda: 64)
    cpu_max = tmp_path / "cpu.max"
    monkeypatch.setattr(conftest, "CGROUP_CPU_MAX", cpu_max)
    cpu_max.write_text("300000 100000\n", encoding="ascii")
    assert conftest.pytest_xdist_auto_num_workers(None) == 3
    cpu_max.write_text("max 100000\n", encoding="ascii")
    assert conftest.pytest_xdist_auto_num_workers(None) == conftest.MAX_WORKERS
    cpu_max.unlink()  # no cgroup v2 file: the affinity mask alone
    assert conftest.pytest_xdist_auto_num_workers(None) == conftest.MAX_WORKERS


def test_the_count_variable_is_left_to_pytest_xdist(monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_AUTO_NUM_WORKERS", "1")
    assert conftest.pytest_xdist_auto_num_workers(None) is None


def _workers_started() -> int:
    """Run conftest's doctests in a fresh, plain ``pytest``; how many workers it started."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "tests/conftest.py"],
        cwd=REPO,
        env=clean,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    found = re.search(r"^created: (\d+)/\1 workers?$", result.stdout, re.MULTILINE)
    return int(found.group(1)) if found else 0


class _StopAfterXdist:
    """Ends ``pytest.main`` right after pytest-xdist resolved ``-n`` (its hook runs first),
    keeping the worker count: no session, no worker, no test."""

    workers = -1

    def pytest_cmdline_main(self, config: pytest.Config) -> int:
        self.workers = len(config.option.tx)
        return 0


def _workers_resolved(*args: str) -> int:
    """How many workers ``pytest ARGS`` would start here, resolved in this process.

    The repository's ``addopts`` and conftest hook, then pytest-xdist's own resolution of
    ``-n`` (the step before it starts one process per entry of ``tx``); no torch imports.
    """
    stop = _StopAfterXdist()
    conftest_file = str(REPO / "tests" / "conftest.py")
    code = pytest.main(
        [*args, "-p", "no:cacheprovider", "--rootdir", str(REPO), conftest_file], plugins=[stop]
    )
    assert code == 0 and stop.workers >= 0, code
    return stop.workers


def test_plain_pytest_starts_the_hook_s_workers():
    expected = conftest.pytest_xdist_auto_num_workers(None)
    if expected == 0 or expected is None:
        pytest.skip("this machine runs the tests in one process (a GPU, or the count is set)")
    assert _workers_started() == expected


def test_the_command_line_and_the_count_variable_override_the_hook(monkeypatch, no_count_variable):
    expected = conftest.pytest_xdist_auto_num_workers(None)
    assert _workers_resolved() == expected
    assert _workers_resolved("-n", "0") == 0
    assert _workers_resolved("-n", "3") == 3
    monkeypatch.setenv("PYTEST_XDIST_AUTO_NUM_WORKERS", "1")
    assert _workers_resolved() == 1
