"""snippets/loader_benchmark.py times a DataLoader loop by num_workers and prints its table."""

from __future__ import annotations

import re

import pytest

SMALL = ("--batch-size", "4", "--batches", "3", "--words", "30")
ROW = re.compile(r"^\s*(\d+)\s+([\d.]+)\s+(\d+)%\s+([\d, ]+)$")


def _rows(stdout: str) -> list[tuple[int, float, int, list[int]]]:
    rows = []
    for line in stdout.splitlines():
        m = ROW.match(line)
        if m:
            firsts = [int(x) for x in m[4].split(",")]
            rows.append((int(m[1]), float(m[2]), int(m[3]), firsts))
    return rows


def test_loader_benchmark_prints_one_row_per_worker_count(run_snippet):
    result = run_snippet("loader_benchmark.py", *SMALL, "--workers", "0", "2", "--step-ms", "2")
    assert result.returncode == 0, result.stderr
    assert "the step sleeps 2.0 ms" in result.stdout
    rows = _rows(result.stdout)
    assert [r[0] for r in rows] == [0, 2]
    for _workers, rate, idle, firsts in rows:
        assert rate > 0 and 0 <= idle <= 100
        assert len(firsts) == 2  # the default two epochs, one first batch each
    best = re.search(r"Most batches/s: (\d+) workers \(([\d.]+)/s\)", result.stdout)
    assert best and int(best[1]) in (0, 2)
    assert float(best[2]) == max(r[1] for r in rows)
    # Every batch includes the 2 ms step, so no rate can pass 500 batches/s.
    assert "the step alone allows 500.0/s" in result.stdout
    assert all(r[1] <= 500.0 for r in rows)


def test_loader_benchmark_keeps_workers_with_persistent(run_snippet):
    result = run_snippet(
        "loader_benchmark.py", *SMALL, "--workers", "1", "--epochs", "3", "--persistent"
    )
    assert result.returncode == 0, result.stderr
    (row,) = _rows(result.stdout)
    assert len(row[3]) == 3


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--workers", "-1"), "--workers -1: use 0 (main process) or more"),
        (("--batches", "1"), "--batches >= 2"),
        (("--step-ms", "-3"), "--step-ms -3.0: a step cannot take negative time"),
    ],
)
def test_loader_benchmark_refuses_bad_input_in_one_line(run_snippet, args, message):
    result = run_snippet("loader_benchmark.py", *args)
    assert result.returncode == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
