"""gpulesson.timing.roofline: the roof's arithmetic, the regimes, and a small measured roofline."""

from __future__ import annotations

import pytest

from gpulesson.course.roofline import link_markdown, roofline_chart, roofline_markdown
from gpulesson.timing import bench, roofline
from gpulesson.timing.results import OVERHEAD_SHARE, LinkBandwidth, OpResult, Roofline


def _op(name: str, flops: int, bytes_moved: int, seconds: float = 1.0) -> OpResult:
    return OpResult(
        name=name,
        device="cpu",
        dtype="fp32",
        threads=2,
        samples_s=(seconds,),
        flops=flops,
        bytes_moved=bytes_moved,
    )


def test_roofline_ridge_ceiling_and_regimes():
    bandwidth = _op("copy", 0, 10 * 10**9)  # 10 GB/s
    peak = _op("matmul", 100 * 10**9, 10**8)  # 100 GFLOP/s
    add = _op("add", 6 * 10**8, 72 * 10**8)  # 72% of its roof
    small = _op("tiny matmul", 10**9, 10**7)  # 100 FLOP/B
    roof = Roofline(device="cpu", bandwidth=bandwidth, peak=peak, ops=(add, small, peak))
    assert roof.ridge_flop_per_byte == pytest.approx(10.0)
    assert roof.ceiling_flop_per_s(1.0) == pytest.approx(10e9)
    assert roof.ceiling_flop_per_s(1000.0) == pytest.approx(100e9)
    assert roof.bound(add) == "memory-bound"
    assert roof.bound(peak) == "compute-bound"
    assert roof.bound(small).startswith("overhead-bound")  # 1% of its ceiling
    placed = {p.op.name: p for p in roof.placements}
    assert placed["add"].share_of_ceiling == pytest.approx(0.72)
    assert placed["add"].ceiling_flop_per_s == pytest.approx(10e9 / 12)
    assert placed["tiny matmul"].regime == roof.bound(small)
    table = roofline_markdown(roof)
    assert "| add | 0.0833 | 0.6 | 0.8 | 72% | memory-bound |" in table


def test_link_ratio_is_on_device_over_the_best_host_copy():
    pageable = _op("h2d pageable", 0, 10**9)  # 1 GB/s
    pinned = _op("h2d pinned", 0, 2 * 10**9)  # 2 GB/s
    on_device = _op("d2d", 0, 100 * 10**9)  # 100 GB/s
    link = LinkBandwidth(device="cuda", pageable=pageable, pinned=pinned, on_device=on_device)
    assert link.on_device_over_link == pytest.approx(50)
    assert "On-device copies run 50x faster" in link_markdown(link)
    no_pin = LinkBandwidth(device="mps", pageable=pageable, pinned=None, on_device=on_device)
    assert no_pin.on_device_over_link == pytest.approx(100)


def test_roofline_overhead_label_follows_the_named_share():
    bandwidth = _op("copy", 0, 10 * 10**9)
    peak = _op("matmul", 100 * 10**9, 10**8)
    roof = Roofline(device="cpu", bandwidth=bandwidth, peak=peak, ops=())
    ceiling = roof.ceiling_flop_per_s(1 / 12)
    above_flops = int(ceiling * OVERHEAD_SHARE * 1.01)
    above = _op("add", above_flops, 12 * above_flops)
    below_flops = int(ceiling * OVERHEAD_SHARE * 0.99)
    below = _op("add", below_flops, 12 * below_flops)
    assert roof.bound(above) == "memory-bound"
    assert roof.bound(below).startswith("overhead-bound")


def test_roofline_measurement_places_four_operations():
    plan = bench.DevicePlan(
        sweep_budget_s=1.0,
        sweep_max_n=64,
        min_run_time_s=0.005,
        illusion_n=32,
        stream_bytes=1 * 2**20,
        small_matmul_n=16,
        large_matmul_n=64,
    )
    roof = roofline.measure_roofline("cpu", plan)
    assert [op.name.split(" ")[0] for op in roof.ops] == [
        "elementwise",
        "softmax",
        "matmul",
        "matmul",
    ]
    assert roof.bandwidth.bytes_moved == 2 * 2**20
    table = roofline_markdown(roof)
    assert "ridge point" in table and "FLOP/byte" in table
    assert "data-gl-chart" in roofline_chart(roof)
