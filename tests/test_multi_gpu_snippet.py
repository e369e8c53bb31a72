"""snippets/allreduce_bench.py all-reduces on CPU processes and prints bus bandwidth by size."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO

SNIPPET = REPO / "snippets" / "allreduce_bench.py"
ROW = re.compile(r"^\s*(\d+) (KiB|MiB)\s+([\d,.]+)\s+([\d.]+)\s+([\d.]+)$")


def _rows(stdout: str) -> list[tuple[str, float, float, float]]:
    found = [ROW.match(line) for line in stdout.splitlines()]
    return [
        (
            f"{m.group(1)} {m.group(2)}",
            float(m.group(3).replace(",", "")),
            *map(float, m.groups()[3:]),
        )
        for m in found
        if m
    ]


def test_two_processes_print_bus_bandwidth_by_size(run_snippet):
    args = ("--sizes", "64KiB,1MiB", "--repeats", "3", "--warmup", "1", "--timeout-s", "60")
    result = run_snippet("allreduce_bench.py", *args)
    assert result.returncode == 0, result.stderr
    assert "backend gloo, 2 processes on the CPU" in result.stdout
    rows = _rows(result.stdout)
    assert [r[0] for r in rows] == ["64 KiB", "1 MiB"]
    for size, micros, algbw, busbw in rows:
        nbytes = int(size.split()[0]) * (2**10 if "KiB" in size else 2**20)
        assert algbw == pytest.approx(nbytes / (micros * 1e-6) / 1e9, rel=0.01, abs=0.002)
        assert busbw == pytest.approx(algbw)  # 2(N-1)/N = 1 for two ranks


def test_three_processes_scale_the_bus_bandwidth_by_4_3(run_snippet):
    args = ("--procs", "3", "--sizes", "1MiB", "--repeats", "2", "--warmup", "1")
    result = run_snippet("allreduce_bench.py", *args)
    assert result.returncode == 0, result.stderr
    ((_, _, algbw, busbw),) = _rows(result.stdout)
    assert busbw == pytest.approx(algbw * 4 / 3, rel=0.01, abs=0.002)


def test_a_rank_whose_partner_never_comes_stops_at_its_timeout():
    env = dict(os.environ, RANK="0", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env |= {"MASTER_PORT": str(port), "GLOO_SOCKET_IFNAME": "lo"}
    started = time.monotonic()
    result = subprocess.run(  # torch gives up on the missing partner after about a second
        [sys.executable, str(SNIPPET), "--sizes", "4KiB", "--timeout-s", "0.5"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert time.monotonic() - started < 45
    assert "time" in result.stderr.lower()  # torch's message names the timeout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--sizes", "6"), "--sizes '6': each size must be a positive multiple of 4 bytes"),
        (("--sizes", "1MB"), "--sizes '1MB': write sizes like 64KiB,1MiB,16MiB"),
        (("--procs", "1"), "--procs 1: an all-reduce needs 2 or more"),
        (("--repeats", "0"), "--repeats must be >= 1"),
        (("--timeout-s", "-1"), "--timeout-s -1.0 must be 0 to 86400"),
        (("--backend", "nccl"), "--backend nccl needs CUDA GPUs: use gloo"),
    ],
)
def test_bad_input_exits_2_with_one_line(run_snippet, args, message):
    result = run_snippet("allreduce_bench.py", *args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1 and message in result.stderr
