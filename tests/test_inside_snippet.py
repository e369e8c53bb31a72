"""snippets/cache_sweep.py reads working sets of growing size and prints the bandwidth of each."""

from __future__ import annotations

import re

ROW = re.compile(r"^\s*([\d.]+) (KiB|MiB)\s+([\d.]+)$")


def test_cache_sweep_prints_one_row_per_half_doubling(run_snippet):
    result = run_snippet(
        "cache_sweep.py",
        "--device",
        "cpu",
        "--smallest-kib",
        "8",
        "--largest-mib",
        "1",
        "--rounds",
        "2",
        "--sample-mib",
        "8",
    )
    assert result.returncode == 0, result.stderr
    assert "Read bandwidth on cpu, one thread, median of 2 rounds" in result.stdout
    rows = [ROW.match(line) for line in result.stdout.splitlines()]
    rows = [m for m in rows if m]
    sizes = [float(m[1]) * (1024 if m[2] == "MiB" else 1) for m in rows]
    assert sizes[0] == 8 and sizes[-1] == 1024  # 8 KiB to 1 MiB
    assert len(sizes) == 15  # half-doublings: 2 per doubling, 7 doublings, both ends
    assert all(b > a for a, b in zip(sizes, sizes[1:], strict=False))
    assert all(float(m[3]) > 0 for m in rows)


def test_cache_sweep_refuses_an_empty_range(run_snippet):
    result = run_snippet("cache_sweep.py", "--smallest-kib", "4096", "--largest-mib", "1")
    assert result.returncode == 2
    assert "--largest-mib must be at least --smallest-kib" in result.stderr
