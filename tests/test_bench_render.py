"""gpulesson.timing.render and gpulesson.timing.teaching: teaching figures, FLOP tables, JSON."""

from __future__ import annotations

import json

import pytest

from gpulesson.timing import bench, teaching
from gpulesson.timing import render as bench_render
from gpulesson.timing.bench import MatmulResult


def _sweep_result(device: str, n: int, seconds: float) -> MatmulResult:
    return MatmulResult(device, "fp32", n, 2, (seconds,))


def test_teaching_figures_follow_from_their_inputs():
    t = teaching.TeachingTiming()
    assert t.gpu_honest_s == pytest.approx(0.205)
    assert t.naive_speedup == pytest.approx(1000)
    assert t.honest_speedup == pytest.approx(5.0 / 0.205)
    assert t.illusion == pytest.approx(1000 / (5.0 / 0.205))
    page = bench_render.teaching_timing_markdown(t)
    assert "Teaching estimate" in page and "24.4x" in page and "1,000x" in page


def test_flops_and_lane_estimate():
    assert bench.matmul_flops(5000) == 2.5e11
    assert "2.5 x 10^11" in bench_render.flops_markdown()
    assert "0.512x" in bench_render.flops_markdown((5000, 4000))
    assert teaching.LaneEstimate().ratio == pytest.approx(4.096e12 / 3.2e10)


def test_json_carries_every_promised_field():
    data = json.loads(bench_render.to_json([_sweep_result("cpu", 64, 1e-5)], "cpu", "fp32"))
    (m,) = data["measurements"]
    for key in ("device", "dtype", "n", "threads", "median_s", "flops", "flop_per_s"):
        assert key in m
    assert m["flops"] == 2 * 64**3 and m["samples_s"] == [1e-5]
    assert "how_to_compare" in data
