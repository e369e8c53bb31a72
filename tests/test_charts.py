"""gpulesson.timing.charts: valid SVG, theme-following colours, labelled axes, honest scales."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from gpulesson.timing import charts
from gpulesson.timing.charts import Point, Series

SVG_NS = "{http://www.w3.org/2000/svg}"


def _parse(figure: str) -> ET.Element:
    return ET.fromstring(figure)


def _line() -> str:
    return charts.line_chart(
        [
            Series("CPU", ((64.0, 80.0), (128.0, 200.0), (256.0, 300.0))),
            Series("cuda", ((64.0, 20.0), (128.0, 150.0), (256.0, 1200.0))),
        ],
        x_label="matrix size n (log scale)",
        y_label="achieved GFLOP/s (log scale)",
        title="Throughput <by> size",
    )


def test_line_chart_is_one_line_of_well_formed_html():
    figure = _line()
    assert "\n" not in figure  # a blank line would end Markdown's raw-HTML block
    root = _parse(figure)
    assert root.tag == "figure" and root.get("class") == "gl-chart"
    assert root.find(f"{SVG_NS}svg") is not None
    assert root.find(f"{SVG_NS}svg/{SVG_NS}title").text == "Throughput <by> size"  # escaped


def test_colours_follow_the_theme():
    figure = _line()
    assert 'fill="currentColor"' in figure and 'stroke="currentColor"' in figure
    assert "var(--gl-chart-0," in figure and "var(--gl-chart-1," in figure
    # no fixed black or white anywhere: both would vanish in one of the two themes
    assert not re.search(r"#000\b|#000000|#fff\b|#ffffff|\bblack\b|\bwhite\b", figure, re.I)


def test_axis_labels_with_units_and_ticks_at_the_sizes():
    figure = _line()
    texts = [t.text for t in _parse(figure).iter(f"{SVG_NS}text")]
    assert "matrix size n (log scale)" in texts
    assert "achieved GFLOP/s (log scale)" in texts
    for tick in ("64", "128", "256", "100", "1000"):
        assert tick in texts
    assert "CPU" in texts and "cuda" in texts  # legend


def test_log_axes_keep_order_and_ratios():
    figure = _line()
    circles = [
        (float(c.get("cx")), float(c.get("cy"))) for c in _parse(figure).iter(f"{SVG_NS}circle")
    ]
    cpu = circles[:3]
    xs = [x for x, _ in cpu]
    assert xs == sorted(xs)
    assert xs[1] - xs[0] == pytest.approx(xs[2] - xs[1], abs=0.2)  # doubling = equal steps
    ys = [y for _, y in cpu]
    assert ys[0] > ys[1] > ys[2]  # larger values sit higher (smaller y in SVG)


@pytest.mark.parametrize(
    "series",
    [[], [Series("bad", ((1.0, 0.0),))], [Series("bad", ((-1.0, 2.0),))]],
)
def test_charts_refuse_data_a_log_axis_cannot_show(series):
    with pytest.raises(ValueError):
        charts.line_chart(series, "x", "y", "t")


def test_roofline_draws_the_roof_the_ridge_and_the_points():
    figure = charts.roofline_chart(
        peak_flop_per_s=300e9,
        bandwidth_bytes_per_s=30e9,
        points=(Point("add", 1 / 12, 2e9), Point("matmul n=1024", 171, 290e9)),
        title="Roofline",
    )
    root = _parse(figure)
    texts = [t.text for t in root.iter(f"{SVG_NS}text")]
    assert "ridge 10 FLOP/byte" in texts
    assert "peak 300 GFLOP/s" in texts
    assert "bandwidth 30.0 GB/s" in texts
    assert "add" in texts and "matmul n=1024" in texts
    assert "arithmetic intensity (FLOP/byte, log scale)" in texts
    roof = root.find(f"{SVG_NS}svg").find(f"{SVG_NS}polyline")
    points = [tuple(map(float, p.split(","))) for p in roof.get("points").split()]
    assert len(points) == 3
    assert points[1][1] == pytest.approx(points[2][1])  # flat after the ridge
    assert points[0][1] > points[1][1]  # rising before it


def test_roofline_needs_positive_ceilings():
    with pytest.raises(ValueError, match="positive"):
        charts.roofline_chart(0, 1e9, (), "t")


def test_tick_labels_stay_short():
    assert [charts.format_tick(v) for v in (0.1, 100, 2048, 50000, 3e6)] == [
        "0.1",
        "100",
        "2048",
        "50k",
        "3M",
    ]
