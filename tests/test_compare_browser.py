"""Charts and the compare page in headless Chromium.

Charts: the specs gpulesson writes, drawn by docs/javascripts/charts.js with the vendored
vega builds, on a small page served from a temporary folder (no site build needed): they
draw marks, label log axes at powers of ten or two, show tooltips, follow the colour
scheme, warn about nothing, and fetch nothing. Then the built site (``built_site``): the
lessons' charts draw, and choosing a bundle file on the compare page, as a reader would,
puts its device's numbers in the table and its series on the chart.

Skipped, with the reason, when no Chromium is found (CHROMIUM or /usr/bin/chromium) or Python
Playwright is missing. Nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest

from gpulesson.results import published
from gpulesson.timing import charts
from gpulesson.timing.charts import Point, Series

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("CHROMIUM") or (
    "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else shutil.which("chromium")
)
if not CHROMIUM or not Path(CHROMIUM).exists():
    pytest.skip("no Chromium: set CHROMIUM or install /usr/bin/chromium", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="Python Playwright is not installed")

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "fixtures" / "bundles"
LAUNCH_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
DRAWN = (
    "() => [...document.querySelectorAll('figure[data-gl-chart]:not([hidden])')]"
    ".every(f => f.dataset.drawn)"
)
MARKS = "svg .role-mark.mark-symbol path"  # the data's points (not the legend's symbols)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


def _serve(folder: Path) -> Iterator[str]:
    handler = functools.partial(_Quiet, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


class _Watched:
    """A Chromium page with its errors, vega's warnings and its outside requests recorded."""

    def __init__(self, browser: object) -> None:
        self.page = browser.new_page(viewport={"width": 900, "height": 900})  # type: ignore[attr-defined]
        self.errors: list[str] = []
        self.warnings: list[str] = []
        self.outside: list[str] = []
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("console", self._console)
        self.page.on("request", self._request)

    def _console(self, message: object) -> None:
        if message.type == "error":  # type: ignore[attr-defined]
            self.errors.append(message.text)  # type: ignore[attr-defined]
        elif message.type == "warning":  # type: ignore[attr-defined]
            self.warnings.append(message.text)  # type: ignore[attr-defined]

    def _request(self, request: object) -> None:
        url = request.url  # type: ignore[attr-defined]
        if urlparse(url).hostname not in (None, "127.0.0.1") and not url.startswith(
            ("data:", "blob:")
        ):
            self.outside.append(url)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        yield chromium
        chromium.close()


# --- the chart renderer on its own --------------------------------------------------------

#: mkdocs-material's text colours per scheme (its palette CSS), which charts.js reads.
_THEME = """
[data-md-color-scheme="default"] { --md-default-fg-color: rgba(0,0,0,.87);
  --md-default-fg-color--light: rgba(0,0,0,.54); --md-default-fg-color--lighter: rgba(0,0,0,.32);
  background: #fff; }
[data-md-color-scheme="slate"] { --md-default-fg-color: hsla(232,75%,90%,.82);
  --md-default-fg-color--light: hsla(232,75%,90%,.56);
  --md-default-fg-color--lighter: hsla(232,75%,90%,.32); background: hsl(232,15%,14%); }
"""


def _sweep() -> dict:
    return charts.line_chart(
        [
            Series("CPU", tuple((float(2**k), 10.0 * 2 ** (k / 2)) for k in range(6, 12))),
            Series("cuda", tuple((float(2**k), 0.05 * 4**k) for k in range(6, 13))),
        ],
        "matrix size n (log scale)",
        "achieved GFLOP/s (log scale)",
        "Matmul throughput by size",
        x_base=2,
    )


def _roof() -> dict:
    return charts.roofline_chart(
        300e9, 30e9, (Point("add", 1 / 12, 2e9), Point("matmul n=2048", 341, 290e9)), "Roofline"
    )


def _page(body: str) -> str:
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>charts</title>'
        '<link rel="icon" href="data:,"><link rel="stylesheet" href="charts.css">'
        f'<style>{_THEME}</style></head><body data-md-color-scheme="default">'
        f'<main class="md-typeset">{body}</main>'
        '<script src="javascripts/charts.js"></script></body></html>'
    )


@pytest.fixture(scope="module")
def chart_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """index.html: the two lesson charts as a site page has them; fetch.html: a chart whose
    data is a URL."""
    root = tmp_path_factory.mktemp("charts")
    shutil.copytree(REPO / "docs" / "javascripts", root / "javascripts")
    shutil.copy(REPO / "docs" / "stylesheets" / "charts.css", root / "charts.css")
    lessons = charts.to_html(_sweep(), caption="sweep") + charts.to_html(_roof(), caption="roof")
    (root / "index.html").write_text(_page(lessons))
    fetching = {**_sweep(), "data": {"url": "https://example.invalid/data.json"}}
    (root / "fetch.html").write_text(_page(charts.to_html(fetching, caption="url")))
    yield from _serve(root)


@pytest.fixture
def chart_page(browser: object, chart_url: str) -> Iterator[_Watched]:
    watched = _Watched(browser)
    watched.page.goto(chart_url)
    watched.page.wait_for_function(DRAWN)
    yield watched
    watched.page.close()


def _axis_labels(page: object, figure: int) -> list[list[str]]:
    """Each labelled axis's tick labels, x first (vega groups grid lines as axes too)."""
    axes = page.eval_on_selector_all(  # type: ignore[attr-defined]
        f"figure[data-gl-chart] >> nth={figure} >> css=g.role-axis",
        "axes => axes.map(a => [...a.querySelectorAll('g.role-axis-label text')]"
        ".map(t => t.textContent).filter(Boolean))",
    )
    return [labels for labels in axes if labels]


def test_charts_draw_every_mark_without_a_warning(chart_page):
    figures = chart_page.page.locator("figure[data-gl-chart]")
    assert figures.evaluate_all("fs => fs.map(f => f.dataset.drawn)") == ["light", "light"]
    sweep, roof = figures.nth(0), figures.nth(1)
    assert sweep.locator("svg .role-mark.mark-line path").count() == 2  # CPU and cuda
    assert sweep.locator(MARKS).count() == 6 + 7  # every point
    assert roof.locator(MARKS).count() == 2
    assert roof.locator("svg .role-mark.mark-line path").count() == 1  # the roof
    assert chart_page.errors == [] and chart_page.outside == []
    assert chart_page.warnings == []  # vega-lite took every spec without a warning


def test_vega_is_never_let_fetch_a_url(browser, chart_url):
    watched = _Watched(browser)
    watched.page.goto(chart_url + "fetch.html")
    watched.page.wait_for_function(DRAWN)
    assert watched.outside == []  # the data URL was not requested
    assert any("refused https://example.invalid/data.json" in w for w in watched.warnings)
    watched.page.close()


def test_log_axes_are_labelled_at_powers_of_ten_and_two(chart_page):
    decades = {"0.001", "0.01", "0.1", "1", "10", "100", "1000"} | {f"1e{k}" for k in range(4, 16)}
    sweep_x, sweep_y = _axis_labels(chart_page.page, 0)
    assert sweep_x == ["64", "128", "256", "512", "1024", "2048", "4096"]
    assert set(sweep_y) <= decades and len(sweep_y) >= 3
    assert "1e4" in sweep_y  # the GPU's 0.05 x 4^12 = 838,861 GFLOP/s: no 100000 or 1,000,000
    roof_x, roof_y = _axis_labels(chart_page.page, 1)
    assert roof_x == ["0.1", "1", "10", "100", "1000"]
    assert roof_y == ["1", "10", "100"]


def test_the_chart_is_one_labelled_image_for_screen_readers(chart_page):
    view = chart_page.page.locator("figure[data-gl-chart] .gl-chart-view").first
    assert view.get_attribute("role") == "img"
    assert view.get_attribute("aria-label") == _sweep()["description"]
    assert view.locator("svg").get_attribute("aria-hidden") == "true"


def test_a_point_shows_its_figures_in_a_tooltip(chart_page):
    page = chart_page.page
    point = page.locator("figure[data-gl-chart]").nth(1).locator(MARKS).nth(1)
    box = point.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.wait_for_selector("#vg-tooltip-element.visible")
    tip = page.inner_text("#vg-tooltip-element")
    assert "matmul n=2048" in tip and "290.0" in tip and "341" in tip


def test_charts_follow_the_colour_scheme(chart_page):
    page = chart_page.page
    first = "document.querySelector('figure[data-gl-chart] "
    stroke = f"() => getComputedStyle({first}.mark-line path')).stroke"
    label = f"() => {first}g.role-axis-label text').getAttribute('fill')"
    light = (page.evaluate(stroke), page.evaluate(label))
    page.evaluate("document.body.setAttribute('data-md-color-scheme', 'slate')")
    page.wait_for_function(
        "() => document.querySelector('figure[data-gl-chart]').dataset.drawn === 'dark'"
    )
    dark = (page.evaluate(stroke), page.evaluate(label))
    assert light[0] == "rgb(21, 101, 192)"  # --gl-chart-0, default scheme
    assert dark[0] == "rgb(100, 181, 246)"  # --gl-chart-0, slate
    assert light[1] != dark[1] and "232" in dark[1]  # axis text in the scheme's text colour


# --- the built site: lessons' charts ------------------------------------------------------


@pytest.fixture(scope="module")
def site_url(built_site: Path) -> Iterator[str]:
    yield from _serve(built_site)


@pytest.mark.parametrize("lesson", ["why-gpus", "roofline"])
def test_the_lessons_charts_draw(browser, site_url, lesson):
    watched = _Watched(browser)
    watched.page.goto(f"{site_url}lessons/{lesson}/")
    watched.page.wait_for_function(DRAWN)
    figures = watched.page.locator("figure[data-gl-chart]")
    assert figures.count() == 1
    assert figures.first.get_attribute("data-drawn") == "light"
    assert figures.first.locator(MARKS).count() > 0
    caption = figures.first.locator("figcaption").inner_text()
    assert "every value is in the table" in caption  # the chart's text equivalent, named
    assert figures.first.locator(".gl-chart-view").get_attribute("role") == "img"
    assert (watched.errors, watched.warnings, watched.outside) == ([], [], [])
    watched.page.close()


# --- the built site: the compare page -------------------------------------------------------


@pytest.fixture
def page(browser: object, site_url: str) -> Iterator[object]:
    watched = _Watched(browser)
    watched.page.goto(f"{site_url}compare/")
    watched.page.wait_for_selector("[data-gl-compare][data-ready='1']")
    yield watched.page
    assert watched.errors == []
    assert watched.warnings == []
    assert watched.outside == []  # the bundle is read in the browser, never sent anywhere
    watched.page.close()


def _choose(page: object, path: Path) -> None:
    page.set_input_files("#gl-compare-file", str(path))  # type: ignore[attr-defined]
    page.wait_for_function(  # type: ignore[attr-defined]
        "() => ['shown', 'refused']"
        ".includes(document.querySelector('[data-gl-compare]').dataset.state)"
    )


def test_choosing_a_bundle_puts_its_device_s_numbers_in_the_table_and_charts(page):
    bundle = json.loads((FIXTURES / "fixture_t4.json").read_text())
    _choose(page, FIXTURES / "fixture_t4.json")
    page.wait_for_function(DRAWN)
    device = bundle["provenance"]["device_name"]
    table = page.inner_text(".gl-compare-table table")
    assert f"yours: {device}" in table  # the reader's device named in the table's text
    assert f"Your {device}" in page.inner_text(".gl-compare-table caption")
    headline = [m for m in bundle["measurements"] if m["headline"]]
    cells = page.eval_on_selector_all(
        "[data-mine]", "cells => cells.map(c => [c.dataset.mine, c.textContent])"
    )
    assert [name for name, _ in cells] == [m["name"] for m in headline]
    assert dict(cells)["matmul_peak.bf16"] == "20.0"  # TFLOP/s, the row's display unit
    assert dict(cells)["memory_bandwidth"] == "240"  # GB/s
    # one bar chart per figure a reference bundle also has, the reader's bar first
    data = json.loads(page.inner_text("#gl-compare-data"))
    shared = {m["name"] for m in headline} & {
        name for ref in data["references"] for name in ref["measurements"]
    }
    bars = page.locator(".gl-compare-chart figure[data-gl-chart]")
    assert bars.count() == len(shared)
    if shared:
        labels = page.eval_on_selector_all(
            ".gl-compare-chart .gl-chart-view",
            "views => views.map(v => v.getAttribute('aria-label'))",
        )
        assert all(f"yours: {device}" in label for label in labels)
    else:
        assert "No reference bundle has these figures yet" in page.inner_text(".gl-compare-chart")
    # the course's throughput chart: the reader's series drawn, named in the legend
    course = page.locator(".gl-compare-course figure[data-gl-chart]")
    assert course.is_visible() and course.get_attribute("data-drawn") == "light"
    legend = course.locator("svg g.role-legend-label text").evaluate_all(
        "texts => texts.map(t => t.textContent)"
    )
    assert f"yours: {device}" in legend
    matmul = [m for m in bundle["measurements"] if m["name"].startswith("matmul.")]
    reader = page.evaluate(
        "() => getComputedStyle(document.body).getPropertyValue('--gl-chart-reader').trim()"
    )
    fills = course.locator(MARKS).evaluate_all("points => points.map(p => p.getAttribute('fill'))")
    assert fills.count(reader) == len(matmul)  # one point in the reader's colour per figure
    assert "Nothing was uploaded" in page.inner_text(".gl-compare-status")


def test_a_bad_bundle_is_refused_with_one_line_naming_the_field(page, tmp_path):
    data = json.loads((FIXTURES / "fixture_h100.json").read_text())
    data["measurements"][3]["value"] = "fast"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    _choose(page, bad)
    status = page.inner_text(".gl-compare-status")
    assert status.startswith("Refused bad.json: measurements[3].value: ")
    assert "\n" not in status
    assert page.locator(".gl-compare-table table").count() == 0


def test_this_build_s_own_bundle_is_read_and_an_unknown_version_refused(page, built_site, tmp_path):
    own = built_site / "build-bundle.json"  # schema version 2, with series
    assert json.loads(own.read_text())["schema_version"] == 2
    _choose(page, own)
    assert page.locator("[data-gl-compare]").get_attribute("data-state") == "shown"
    # results/ holds no bundle yet and a CPU build sweeps no matmul.<dtype>.n<size> rows: the
    # course's throughput chart stays hidden, not drawn empty (vega would warn on teardown)
    names = [m["name"] for m in json.loads(own.read_text())["measurements"]]
    assert not [n for n in names if n.startswith("matmul.")]
    assert page.locator(".gl-compare-course figure[data-gl-chart]").first.is_hidden()
    data = json.loads((FIXTURES / "fixture_t4.json").read_text())
    data["schema_version"] = 3
    later = tmp_path / "later.json"
    later.write_text(json.dumps(data))
    page.set_input_files("#gl-compare-file", str(later))
    page.wait_for_function(  # the first bundle left the state at "shown": wait for the text
        "() => document.querySelector('.gl-compare-status').textContent.startsWith('Refused')"
    )
    status = page.inner_text(".gl-compare-status")
    assert status.startswith("Refused later.json: schema_version: is 3, this page reads 1 and 2")


# --- the built site: published rows and predictions, with no bundle of ours ----------------

#: Recorded from the first line of every document (as tests/test_csp_browser.py does).
RECORD_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => window.__cspViolations.push(
  [e.effectiveDirective, e.blockedURI].join(" | ")), true);
"""


@pytest.fixture
def strict_page(browser: object, site_url: str) -> Iterator[_Watched]:
    """A page that also records Content-Security-Policy violations."""
    watched = _Watched(browser)
    watched.page.add_init_script(RECORD_VIOLATIONS)
    yield watched
    assert watched.page.evaluate("window.__cspViolations") == []
    assert (watched.errors, watched.warnings, watched.outside) == ([], [], [])
    watched.page.close()


def test_a_bundle_is_set_beside_the_published_rows_and_its_device_s_prediction(
    strict_page, site_url
):
    page = strict_page.page
    page.goto(f"{site_url}compare/")
    page.wait_for_selector("[data-gl-compare][data-ready='1']")
    data = json.loads(page.inner_text("#gl-compare-data"))
    # The published rows and the prediction are shown whether or not results/ holds bundles
    # of ours (the repository's own, read here rather than assumed absent).
    ours = sorted((REPO / "results" / "reference").glob("*.json"))
    assert len(data["references"]) == len(ours)
    _choose(page, FIXTURES / "fixture_h100.json")
    page.wait_for_function(DRAWN)
    assert page.locator("[data-gl-compare]").get_attribute("data-state") == "shown"
    table = page.locator(".gl-compare-published table")
    assert "NVIDIA H100 SXM5 80GB (datasheet h100-sxm)" in table.locator("caption").inner_text()
    row = table.locator("tr", has=page.locator("[data-mine-published='matmul_peak.bf16']"))
    cells = row.locator("td, th").evaluate_all("cs => cs.map(c => c.textContent)")
    # yours 700, the H100's dense bf16 peak 989.5 TFLOP/s, 700 / 989.5, MAMF's 794.5
    assert cells[:8] == [
        "best bf16 matmul (shape search)",
        "TFLOP/s",
        "700",
        "990 (upper bound)",
        "0.71x",
        "NVIDIA H100 SXM5 80GB",
        "795",
        "stas00/ml-engineering (Stas Bekman), 2026-12-01",
    ]
    href = row.locator("a").get_attribute("href")
    assert href == published_source("h100-sxm", "matmul_peak.bf16")
    # a figure without the device's own published row: the nearest GPU's, named as such
    bandwidth = table.locator("[data-published='memory_bandwidth']").first.inner_text()
    assert "the nearest GPU with a published row, by memory bandwidth" in bandwidth
    # the reader's value drawn beside the prediction and the published rows
    charts_ = page.locator(".gl-compare-published-chart figure[data-gl-chart]")
    assert charts_.count() >= 3
    labels = charts_.locator(".gl-chart-view").evaluate_all(
        "vs => vs.map(v => v.getAttribute('aria-label'))"
    )
    bf16 = next(label for label in labels if label.startswith("best bf16 matmul"))
    assert "yours: FIXTURE" in bf16 and "700 TFLOP/s" in bf16
    assert "predicted: upper bound 990 TFLOP/s" in bf16 and "795 TFLOP/s" in bf16
    assert charts_.first.locator(".gl-chart-view svg").count() == 1


def published_source(device: str, figure: str) -> str:
    return next(r.source for r in published.rows_for(device, figure))


def test_the_results_page_lists_the_published_rows_and_charts_them(strict_page, site_url):
    page = strict_page.page
    page.goto(f"{site_url}results/")
    page.wait_for_function(DRAWN)
    links = page.eval_on_selector_all(
        "table a[href^='https://']", "as => as.map(a => a.getAttribute('href'))"
    )
    assert len(links) >= 30 and len(set(links)) >= 3
    figures = page.locator("figure[data-gl-chart]")
    assert figures.count() >= 4
    for i in range(figures.count()):
        figure = figures.nth(i)
        assert figure.locator(".gl-chart-view svg").count() == 1
        assert figure.locator(MARKS).count() > 0
        assert "predicted" in figure.locator(".gl-chart-view").get_attribute("aria-label")
