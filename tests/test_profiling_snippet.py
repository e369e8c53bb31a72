"""snippets/profile_step.py profiles a step, prints its top ops and writes a trace."""

from __future__ import annotations

import importlib.util
import io
import json
import re
from contextlib import redirect_stdout

import pytest
import torch

from tests.conftest import REPO

SMALL = ("--hidden", "32", "--layers", "2", "--batch", "8")
ROW = re.compile(r"^(\S.*?)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)%")


def _snippet():
    path = REPO / "snippets" / "profile_step.py"
    spec = importlib.util.spec_from_file_location("profile_step_snippet", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rows(stdout: str) -> list[tuple[str, int, float, float, float]]:
    found = [ROW.match(line) for line in stdout.splitlines()]
    return [
        (m[1], int(m[2]), float(m[3]), float(m[4]), float(m[5]))
        for m in found
        if m and m[1] != "op"
    ]


def test_profile_step_prints_the_top_ops_with_their_shares_and_writes_a_trace(
    run_snippet, tmp_path
):
    trace = tmp_path / "trace.json"
    # Enough rows that addmm is printed wherever its share ranks: on a model this small its
    # rank among the step's ops is the machine's answer (one README run left it out of the top 10).
    args = ("--active", "2", "--top", "40", "--trace", str(trace))
    result = run_snippet("profile_step.py", *SMALL, *args)
    assert result.returncode == 0, result.stderr
    assert "Profiled 2 step(s) on cpu after 1 unprofiled and 1 warm-up step(s)" in result.stdout
    rows = _rows(result.stdout)
    assert 10 < len(rows) <= 40
    shares = [r[4] for r in rows]
    assert shares == sorted(shares, reverse=True) and sum(shares) <= 100.5
    calls = {name: n for name, n, *_ in rows}
    # 2 steps x 2 blocks x 2 linears: each runs one addmm forward
    assert calls["aten::addmm"] == 8
    assert all(total >= self_ms for _, _, self_ms, total, _ in rows)
    events = json.loads(trace.read_text())["traceEvents"]
    assert {"forward", "backward", "optimizer.step"} <= {e.get("name") for e in events}
    assert "ui.perfetto.dev" in result.stdout


def test_profile_step_adds_a_memory_column_when_asked(run_snippet):
    result = run_snippet("profile_step.py", *SMALL, "--active", "1", "--top", "3", "--memory")
    assert result.returncode == 0, result.stderr
    assert "self MiB" in result.stdout.splitlines()[1]
    assert len(_rows(result.stdout)) == 3


def test_the_function_profiles_any_callable_and_skips_the_wait_and_warmup_calls():
    snippet = _snippet()
    a = torch.ones(16, 16)
    prof = snippet.profile_callable(lambda: a @ a, torch.device("cpu"), wait=2, warmup=1, active=4)
    assert [e.count for e in prof.key_averages() if e.key.startswith("ProfilerStep")] == [4]
    mm = next(e for e in prof.key_averages() if e.key == "aten::mm")
    assert mm.count == 4 and len(prof.step_times_s) == 4
    out = io.StringIO()
    with redirect_stdout(out):
        snippet.print_top_ops(prof, torch.device("cpu"), top=40)
    printed = [line.split()[0] for line in out.getvalue().splitlines()[1:-1]]
    assert "aten::mm" in printed and "ProfilerStep*" in printed


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--active", "0"), "argument --active: 0 must be >= 1"),
        (("--wait", "-1"), "argument --wait: -1 must be >= 0"),
        (("--top", "x"), "argument --top: 'x' is not a whole number"),
        (("--trace", "/no/such/folder/t.json"), "folder '/no/such/folder' does not exist"),
    ],
)
def test_profile_step_refuses_bad_input_in_one_line(run_snippet, args, message):
    result = run_snippet("profile_step.py", *args)
    assert result.returncode == 2 and result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1 and message in result.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for machines without CUDA")
def test_a_memory_snapshot_needs_cuda(run_snippet, tmp_path):
    result = run_snippet("profile_step.py", "--snapshot", str(tmp_path / "s.pickle"))
    assert result.returncode == 2
    assert "--snapshot needs a CUDA GPU" in result.stderr and result.stdout == ""


@pytest.mark.gpu
def test_on_cuda_the_table_is_kernel_time_and_the_snapshot_is_written(run_snippet, tmp_path):
    snapshot = tmp_path / "s.pickle"
    result = run_snippet("profile_step.py", "--snapshot", str(snapshot))
    assert result.returncode == 0, result.stderr
    assert "on cuda" in result.stdout and "self CUDA time" in result.stdout
    assert snapshot.stat().st_size > 0


def test_device_columns_are_read_under_the_name_the_installed_torch_has():
    """torch 2.4 renamed the ``*_cuda_*`` columns to ``*_device_*``; 2.2 and 2.3 have the old."""
    field = _snippet().device_field

    class Old:  # a torch 2.2-2.3 profiler row
        self_cuda_time_total = 7.0
        self_cuda_memory_usage = 2048

    class New:  # torch 2.4 and later
        self_device_time_total = 5.0
        self_device_memory_usage = 1024

    assert field(Old(), "self_device_time_total") == 7.0
    assert field(Old(), "self_device_memory_usage") == 2048
    assert field(New(), "self_device_time_total") == 5.0
    assert field(New(), "self_device_memory_usage") == 1024
