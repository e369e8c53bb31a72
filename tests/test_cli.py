"""The console script as a user runs it: exit codes, JSON, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpulesson", *args], capture_output=True, text=True, timeout=120
    )


def test_probe_prints_a_table_and_a_verdict():
    result = run_cli("probe")
    assert result.returncode == 0, result.stderr
    assert "Device picked (cuda, mps, cpu)" in result.stdout
    assert "Verdict:" in result.stdout


def test_probe_json_is_one_object():
    result = run_cli("probe", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["selected_device"] in ("cuda", "mps", "cpu")
    assert "verdict" in data


def test_unknown_command_exits_2_with_one_line():
    result = run_cli("frobnicate")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "invalid choice" in result.stderr


def test_unknown_option_exits_2_with_one_line():
    result = run_cli("probe", "--jsno")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "--jsno" in result.stderr


def test_a_closed_pipe_is_not_a_traceback():
    import os

    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the command writes
    result = subprocess.run(
        [sys.executable, "-m", "gpulesson", "probe", "--json"],
        stdout=write_end,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
    )
    os.close(write_end)
    assert "Traceback" not in result.stderr
    assert result.returncode == 0
