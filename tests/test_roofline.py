"""gpulesson.timing.roofline: the roof's arithmetic, the regimes, and a small measured roofline."""

from __future__ import annotations

import pytest

from gpulesson.timing import bench, roofline
from gpulesson.timing import render as bench_render
from gpulesson.timing.bench import OpResult


def test_roofline_ridge_ceiling_and_regimes():
    bandwidth = OpResult("copy", "cpu", "fp32", 2, (1.0,), 0, 10 * 10**9)  # 10 GB/s
    peak = OpResult("matmul", "cpu", "fp32", 2, (1.0,), 100 * 10**9, 10**8)  # 100 GFLOP/s
    add = OpResult("add", "cpu", "fp32", 2, (1.0,), 6 * 10**8, 72 * 10**8)  # 72% of its roof
    small = OpResult("tiny matmul", "cpu", "fp32", 2, (1.0,), 10**9, 10**7)  # 100 FLOP/B
    roof = roofline.Roofline("cpu", bandwidth, peak, (add, small, peak))
    assert roof.ridge_flop_per_byte == pytest.approx(10.0)
    assert roof.ceiling_flop_per_s(1.0) == pytest.approx(10e9)
    assert roof.ceiling_flop_per_s(1000.0) == pytest.approx(100e9)
    assert roof.bound(add) == "memory-bound"
    assert roof.bound(peak) == "compute-bound"
    assert roof.bound(small).startswith("overhead-bound")  # 1% of its ceiling


def test_roofline_overhead_label_follows_the_named_share():
    bandwidth = OpResult("copy", "cpu", "fp32", 2, (1.0,), 0, 10 * 10**9)
    peak = OpResult("matmul", "cpu", "fp32", 2, (1.0,), 100 * 10**9, 10**8)
    roof = roofline.Roofline("cpu", bandwidth, peak, ())
    ceiling = roof.ceiling_flop_per_s(1 / 12)
    above_flops = int(ceiling * roofline.OVERHEAD_SHARE * 1.01)
    above = OpResult("add", "cpu", "fp32", 2, (1.0,), above_flops, 12 * above_flops)
    below_flops = int(ceiling * roofline.OVERHEAD_SHARE * 0.99)
    below = OpResult("add", "cpu", "fp32", 2, (1.0,), below_flops, 12 * below_flops)
    assert roof.bound(above) == "memory-bound"
    assert roof.bound(below).startswith("overhead-bound")


def test_roofline_measurement_places_four_operations():
    plan = bench.DevicePlan(1.0, 64, 0.005, 32, 1 * 2**20, 16, 64)
    roof = roofline.measure_roofline("cpu", plan)
    assert [op.name.split(" ")[0] for op in roof.ops] == [
        "elementwise",
        "softmax",
        "matmul",
        "matmul",
    ]
    assert roof.bandwidth.bytes_moved == 2 * 2**20
    table = bench_render.roofline_markdown(roof)
    assert "ridge point" in table and "FLOP/byte" in table
    assert "<svg" in bench_render.roofline_chart(roof)
