"""Chart specs (Vega-Lite) and their HTML: the figures the tables show, log axes, themes, no URLs.

The specs are drawn in Chromium by tests/test_compare_browser.py; here they are checked as
data: what each chart plots, its scales and labels, its colours (CSS variables the theme
sets), and the HTML figure a page prints.
"""

from __future__ import annotations

import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest

from gpulesson.course.roofline import roofline_chart
from gpulesson.course.why_gpus import NO_CUDA_TEXT, sweep_chart
from gpulesson.results import render as results_render
from gpulesson.results.compare import load_dir
from gpulesson.site import results_pages
from gpulesson.timing import charts
from gpulesson.timing.charts import Point, Series
from gpulesson.timing.results import MatmulResult, OpResult, Roofline, SweepComparison

FIXTURES = Path(__file__).parent / "fixtures" / "bundles"
CSS = Path(__file__).resolve().parent.parent / "docs" / "stylesheets" / "charts.css"


def _line() -> dict:
    return charts.line_chart(
        [
            Series("CPU", ((64.0, 80.0), (128.0, 200.0), (256.0, 300.0))),
            Series("cuda", ((64.0, 20.0), (128.0, 150.0), (256.0, 1200.0))),
        ],
        x_label="matrix size n (log scale)",
        y_label="achieved GFLOP/s (log scale)",
        title="Throughput <by> size",
        x_base=2,
    )


def _walk(value: object):
    """Every (key, value) pair anywhere in a spec."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield key, item
            yield from _walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item)


class _Figure(HTMLParser):
    """A printed chart: each element's attributes, and the caption's and script's text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.attrs: dict[str, dict[str, str | None]] = {}
        self.text: dict[str, str] = {}
        self._open: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.attrs.setdefault(tag, dict(attrs))
        self._open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        self._open.pop()

    def handle_data(self, data: str) -> None:
        if self._open:
            self.text[self._open[-1]] = self.text.get(self._open[-1], "") + data


def _figure(html_: str) -> tuple[_Figure, dict]:
    parsed = _Figure()
    parsed.feed(html_)
    parsed.close()
    assert parsed._open == []  # every element closed
    return parsed, json.loads(parsed.text["script"])


# --- the line chart -----------------------------------------------------------------------


def test_line_chart_plots_every_point_of_every_series_in_its_colour():
    spec = _line()
    rows = spec["data"]["values"]
    assert [(r["series"], r["x"], r["y"]) for r in rows] == [
        ("CPU", 64.0, 80.0),
        ("CPU", 128.0, 200.0),
        ("CPU", 256.0, 300.0),
        ("cuda", 64.0, 20.0),
        ("cuda", 128.0, 150.0),
        ("cuda", 256.0, 1200.0),
    ]
    assert {r["colour"] for r in rows if r["series"] == "CPU"} == {"var(--gl-chart-0)"}
    assert {r["colour"] for r in rows if r["series"] == "cuda"} == {"var(--gl-chart-1)"}
    line = spec["layer"][0]["encoding"]["color"]
    assert line["field"] == "series" and line["scale"] == {"range": {"field": "colour"}}


def test_both_axes_are_logarithmic_and_titled_with_units():
    enc = _line()["encoding"]
    assert enc["x"]["scale"]["type"] == enc["y"]["scale"]["type"] == "log"
    assert enc["x"]["scale"]["base"] == 2 and enc["y"]["scale"]["base"] == 10
    assert enc["x"]["title"] == "matrix size n (log scale)"
    assert enc["y"]["title"] == "achieved GFLOP/s (log scale)"


def test_size_axis_ticks_are_the_powers_of_two():
    axis = _line()["encoding"]["x"]["axis"]
    assert axis["values"][:8] == [1, 2, 4, 8, 16, 32, 64, 128]
    assert all(b == 2 * a for a, b in zip(axis["values"], axis["values"][1:], strict=False))


def test_decade_axis_labels_powers_of_ten_only_and_short():
    axis = _line()["encoding"]["y"]["axis"]
    assert axis["labelExpr"] == charts.DECADE_LABEL
    # between powers of ten: no label; 1e-3..1e3 plain ('~g'), beyond that '1e' + exponent
    assert charts.DECADE_LABEL.startswith(charts.DECADE_TEST + " ?")
    assert "format(datum.value, '~g')" in charts.DECADE_LABEL
    assert "'1e' + round(" in charts.DECADE_LABEL and "<= 3" in charts.DECADE_LABEL
    assert axis["gridOpacity"]["condition"]["test"] == charts.DECADE_TEST


def test_tooltips_show_the_tables_formats():
    tooltip = {t["field"]: t for t in _line()["encoding"]["tooltip"]}
    assert tooltip["y"]["format"] == ",.1f"  # GFLOP/s as comparison_markdown prints it
    assert tooltip["series"]["type"] == "nominal"


@pytest.mark.parametrize(
    "series",
    [[], [Series("bad", ((1.0, 0.0),))], [Series("bad", ((-1.0, 2.0),))]],
)
def test_charts_refuse_data_a_log_axis_cannot_show(series):
    with pytest.raises(ValueError, match="positive|at least one point"):
        charts.line_chart(series, "x", "y", "t")


def test_only_base_10_or_2_axes():
    with pytest.raises(ValueError, match="base 10 or 2"):
        charts.log_axis(3)


# --- the roofline -----------------------------------------------------------------------


def _roof() -> dict:
    return charts.roofline_chart(
        peak_flop_per_s=300e9,
        bandwidth_bytes_per_s=30e9,
        points=(Point("add", 1 / 12, 2e9), Point("matmul n=1024", 171, 290e9)),
        title="Roofline",
    )


def _layers(spec: dict, mark: str) -> list[dict]:
    return [layer for layer in spec["layer"] if layer["mark"]["type"] == mark]


def test_roofline_draws_the_roof_the_ridge_and_the_points():
    spec = _roof()
    texts = [r["text"] for layer in _layers(spec, "text") for r in layer["data"]["values"]]
    assert "ridge 10 FLOP/byte" in texts
    assert "peak 300 GFLOP/s" in texts
    assert "bandwidth 30.0 GB/s" in texts
    assert "add" in texts and "matmul n=1024" in texts
    assert spec["encoding"]["x"]["title"] == "arithmetic intensity (FLOP/byte, log scale)"
    (roof,) = _layers(spec, "line")
    points = [(p["x"], p["y"]) for p in roof["data"]["values"]]
    assert len(points) == 3
    assert points[1] == pytest.approx((10.0, 300.0))  # the ridge, at the peak in GFLOP/s
    assert points[1][1] == pytest.approx(points[2][1])  # flat after the ridge
    assert points[0][1] == pytest.approx(30.0 * points[0][0])  # bandwidth x intensity before
    (rule,) = _layers(spec, "rule")
    assert rule["data"]["values"][0]["x"] == pytest.approx(10.0)


def test_roofline_points_are_the_measured_ops_in_gflops_with_tooltips():
    spec = _roof()
    (ops,) = _layers(spec, "point")
    assert [(r["op"], r["x"], r["y"]) for r in ops["data"]["values"]] == [
        ("add", pytest.approx(1 / 12), pytest.approx(2.0)),
        ("matmul n=1024", 171, pytest.approx(290.0)),
    ]
    formats = {t["title"]: t.get("format") for t in ops["encoding"]["tooltip"]}
    assert formats == {"operation": None, "FLOP/byte": ".3~g", "GFLOP/s": ",.1f"}


def test_roofline_domain_holds_every_point_and_at_least_two_decades():
    spec = _roof()
    x_low, x_high = spec["encoding"]["x"]["scale"]["domain"]
    y_low, y_high = spec["encoding"]["y"]["scale"]["domain"]
    assert x_low <= 1 / 12 and x_high >= 171
    assert y_low <= 2.0 and y_high >= 300
    for low, high in ((x_low, x_high), (y_low, y_high)):
        assert len([t for t in charts.decade_ticks(low, high) if low <= t <= high]) >= 2


def test_roofline_needs_positive_ceilings():
    with pytest.raises(ValueError, match="positive"):
        charts.roofline_chart(0, 1e9, (), "t")


def test_decade_domain_widens_a_narrow_range_to_powers_of_ten():
    assert charts.decade_domain(20.0, 90.0) == (10, 100)
    assert charts.decade_domain(0.5, 200.0) == (0.5, 200.0)


# --- theme and offline ------------------------------------------------------------------


@pytest.mark.parametrize("spec", [_line(), _roof(), results_render.throughput_chart([])])
def test_colours_are_theme_variables_and_data_is_inline(spec):
    colours = [  # literal colours: in rows (colour), marks and legends (not encodings)
        v
        for k, v in _walk(spec)
        if k in ("colour", "color", "stroke", "symbolStrokeColor") and isinstance(v, str)
    ]
    assert colours and all(re.fullmatch(r"var\(--[\w-]+\)", c) for c in colours), colours
    defined = set(re.findall(r"(--gl-chart-[\w-]+):", CSS.read_text()))
    used = {c[4:-1] for c in colours if c.startswith("var(--gl-")}
    assert used <= defined  # every chart colour is set for both schemes
    text = json.dumps(spec)
    assert not re.search(r"#000\b|#000000|#fff\b|#ffffff|\bblack\b|\bwhite\b", text, re.I)
    assert "url" not in {k for k, _ in _walk(spec)}  # nothing for vega's loader to fetch
    assert "http" not in text


def test_both_schemes_set_every_chart_colour():
    css = CSS.read_text()
    light = css[: css.index('[data-md-color-scheme="slate"]')]
    dark = css[css.index('[data-md-color-scheme="slate"]') :]
    names = [f"--gl-chart-{i}" for i in range(charts.PALETTE_SIZE)] + ["--gl-chart-reader"]
    for name in names:
        assert f"{name}:" in light and f"{name}:" in dark, name


# --- the HTML a page prints -------------------------------------------------------------


def test_to_html_is_one_line_with_label_caption_and_the_spec():
    spec = _line()
    html_ = charts.to_html(spec, caption="Every value is in the table above.")
    assert "\n" not in html_  # a blank line would end Markdown's raw-HTML block
    root, parsed = _figure(html_)
    assert root.attrs["figure"] == {"class": "gl-chart", "data-gl-chart": None}
    view = root.attrs["div"]
    assert view["role"] == "img" and view["class"] == "gl-chart-view"
    assert view["aria-label"] == spec["description"]
    assert "achieved GFLOP/s" in spec["description"] and "CPU and cuda" in spec["description"]
    assert root.text["figcaption"] == "Every value is in the table above."
    assert root.attrs["script"] == {"type": "application/json", "class": "gl-chart-spec"}
    assert parsed == spec


def test_no_value_can_close_the_script_element():
    spec = charts.line_chart([Series("</script><b>", ((1.0, 2.0),))], "x", "y", "t")
    html_ = charts.to_html(spec, caption="c")
    script = html_[html_.index("<script") : html_.index("</script>") + len("</script>")]
    assert script.count("<") == 2  # its own tags only
    _, parsed = _figure(html_)
    assert parsed["data"]["values"][0]["series"] == "</script><b>"


def test_a_hidden_figure_says_so():
    html_ = charts.to_html(_line(), caption="c", hidden=True)
    assert html_.startswith('<figure class="gl-chart" data-gl-chart hidden>')


# --- the lessons' renderers -------------------------------------------------------------


def _matmul(device: str, n: int, seconds: float) -> MatmulResult:
    return MatmulResult(device=device, dtype="fp32", n=n, threads=1, samples_s=(seconds,))


def test_sweep_chart_plots_the_comparisons_gflops():
    cpu = (_matmul("cpu", 64, 1e-4), _matmul("cpu", 128, 5e-4))
    gpu = (_matmul("cuda", 64, 1e-5), _matmul("cuda", 128, 2e-5))
    comparison = SweepComparison(cpu=cpu, gpu=gpu, gpu_device="cuda")
    _, spec = _figure(sweep_chart(comparison))
    rows = spec["data"]["values"]
    assert [(r["series"], r["x"]) for r in rows] == [
        ("CPU", 64.0),
        ("CPU", 128.0),
        ("cuda", 64.0),
        ("cuda", 128.0),
    ]
    for row, result in zip(rows, cpu + gpu, strict=True):
        assert row["y"] == pytest.approx(result.flop_per_s / 1e9)
    assert spec["title"] == "Matmul throughput by size"


def test_sweep_chart_without_a_gpu_says_so_in_its_title():
    alone = SweepComparison(cpu=(_matmul("cpu", 64, 1e-4),), gpu=(), gpu_device=None)
    root, spec = _figure(sweep_chart(alone))
    assert NO_CUDA_TEXT in spec["title"]
    assert {r["series"] for r in spec["data"]["values"]} == {"CPU"}


def _op(name: str, flops: int, bytes_moved: int, seconds: float) -> OpResult:
    return OpResult(
        name=name,
        device="cpu",
        dtype="fp32",
        threads=1,
        samples_s=(seconds,),
        flops=flops,
        bytes_moved=bytes_moved,
    )


def test_roofline_renderer_places_the_roofs_ops():
    copy = _op("copy", 0, 10**10, 1.0)
    peak = _op("matmul n=2048", 10**11, 10**8, 1.0)
    add = _op("add", 10**6, 12 * 10**6, 1e-3)
    roof = Roofline(device="cpu", bandwidth=copy, peak=peak, ops=(add, peak))
    root, spec = _figure(roofline_chart(roof))
    (ops,) = _layers(spec, "point")
    assert [(r["op"], r["x"], r["y"]) for r in ops["data"]["values"]] == [
        ("add", pytest.approx(add.intensity_flop_per_byte), pytest.approx(1.0)),
        ("matmul n=2048", pytest.approx(1000.0), pytest.approx(100.0)),
    ]
    texts = [r["text"] for layer in _layers(spec, "text") for r in layer["data"]["values"]]
    assert f"ridge {roof.ridge_flop_per_byte:.3g} FLOP/byte" in texts
    assert spec["title"] == "Roofline measured on cpu"
    assert "tables above" in root.text["figcaption"]


# --- the results and compare pages' charts ----------------------------------------------


def _references(tmp_path: Path) -> Path:
    (tmp_path / "reference").mkdir()
    shutil.copy(FIXTURES / "fixture_h100.json", tmp_path / "reference")
    return tmp_path


def test_throughput_chart_rows_are_each_bundles_measurements_unchanged(tmp_path):
    bundles = load_dir(_references(tmp_path) / "reference", "reference")
    spec = results_render.throughput_chart(bundles, reader=True)
    rows = spec["datasets"][results_render.OVERLAY_DATASET]
    measurements = bundles[0].bundle.measurements
    assert [(r["name"], r["value"], r["unit"], r["dtype"]) for r in rows] == [
        (m.name, m.value, m.unit, m.dtype) for m in measurements
    ]
    assert {r["series"] for r in rows} == {f"[1] {bundles[0].device}"}
    assert {r["reader"] for r in rows} == {False}
    overlay = spec["usermeta"]["gl_overlay"]
    assert overlay["dataset"] == results_render.OVERLAY_DATASET
    assert overlay["reader_colour"] == charts.READER_COLOUR
    drawn = re.compile(overlay["rows"])  # the rows compare.js adds: those the filter keeps
    assert f"test(/{overlay['rows']}/, datum.name)" == spec["transform"][0]["filter"]
    assert drawn.match("matmul.fp32.n1024") and not drawn.match("matmul_sweep.fp32")
    assert "usermeta" not in results_render.throughput_chart(bundles)  # no reader: no overlay


def test_throughput_chart_keeps_matmul_by_size_rows_and_reads_n_from_the_name():
    spec = results_render.throughput_chart([])
    test, size = spec["transform"][0]["filter"], spec["transform"][1]["calculate"]
    pattern = re.search(r"test\(/(.*)/, datum\.name\)", test).group(1)
    names = ["matmul.fp32.n8192", "matmul.bf16.n256", "matmul_peak.bf16", "matmul.fp8.best"]
    assert [n for n in names if re.match(pattern, n)] == names[:2]
    prefix = re.search(r"replace\(datum\.name, /(.*)/, ''\)", size).group(1)
    assert [int(re.sub(prefix, "", n)) for n in names[:2]] == [8192, 256]
    assert spec["transform"][2] == {"calculate": "datum.value / 1e12", "as": "tflops"}
    assert spec["encoding"]["y"]["title"] == "achieved TFLOP/s (log scale)"


def test_reader_series_is_drawn_bolder():
    spec = results_render.throughput_chart([], reader=True)
    width = spec["layer"][0]["encoding"]["strokeWidth"]
    assert width["condition"] == {"test": "datum.reader", "value": 4} and width["value"] == 2


def test_headline_template_names_the_fields_compare_js_fills():
    spec = results_render.headline_chart_template()
    assert spec["datasets"] == {"bars": []} and spec["data"] == {"name": "bars"}
    fields = {v for k, v in _walk(spec) if k == "field"}
    assert fields == {"series", "shown", "text", "colour"}
    script = (CSS.parent.parent / "javascripts" / "compare.js").read_text()
    for field in fields | {"gl_colours", "gl_bar_px", "gl_log_axis"}:
        assert re.search(rf"\b{field}\b", script), field  # compare.js writes what the spec reads


def test_compare_page_hides_the_course_chart_until_there_is_data(tmp_path):
    empty = results_pages.compare_html(tmp_path)
    assert '<figure class="gl-chart" data-gl-chart hidden>' in empty
    full = results_pages.compare_html(_references(tmp_path))
    figure = full[full.index('<figure class="gl-chart"') :]
    assert figure.startswith('<figure class="gl-chart" data-gl-chart>')
    data = json.loads(re.search(r'id="gl-compare-data">(.*?)</script>', full).group(1))
    assert data["charts"]["headline"] == results_render.headline_chart_template()


def test_results_page_charts_throughput_across_bundles(tmp_path):
    page = results_pages.results_markdown(_references(tmp_path))
    assert "### Matmul throughput by size" in page
    line = next(ln for ln in page.splitlines() if ln.startswith('<figure class="gl-chart"'))
    _, spec = _figure(line)
    assert spec["datasets"][results_render.OVERLAY_DATASET]
    assert "usermeta" not in spec


def test_the_compare_size_axis_spans_every_size_the_suite_sweeps():
    from gpulesson.results.entries_matmul import PLANS

    spec = results_render.throughput_chart([])
    span = spec["encoding"]["x"]["scale"]["domain"]
    assert span == [
        min(plan.sweep_start_n for plan in PLANS.values()),
        max(plan.sweep_max_n for plan in PLANS.values()),
    ]


@pytest.mark.parametrize(
    ("values", "base", "domain"),
    [
        ([64, 100, 4096], 2, (64, 4096)),
        ([8192], 2, (4096, 16384)),  # one size: one power either side
        ([0.013], 10, (0.01, 0.1)),
        ([80.0, 1200.0], 10, (10, 10000)),
    ],
)
def test_line_chart_axes_cover_the_data_with_at_least_two_powers(values, base, domain):
    assert charts.power_domain(values, base) == pytest.approx(domain)
    spec = charts.line_chart(
        [Series("s", tuple((v, v) for v in values))], "x", "y", "t", x_base=base
    )
    assert spec["encoding"]["x"]["scale"]["domain"] == pytest.approx(list(domain))
    assert spec["encoding"]["x"]["scale"]["nice"] is False


def test_roofline_labels_of_neighbouring_points_alternate_below_and_above():
    points = [Point(f"op{i}", 0.1 * 2**i, 1e9 * 2**i) for i in range(5)]
    spec = charts.roofline_chart(300e9, 30e9, points, "R")
    labels = {
        layer["mark"]["dy"]: [r["text"] for r in layer["data"]["values"]]
        for layer in _layers(spec, "text")
        if "dy" in layer["mark"] and layer["mark"].get("align") is None
    }
    assert labels == {16: ["op0", "op2", "op4"], -12: ["op1", "op3"]}
