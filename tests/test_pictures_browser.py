"""The lessons' pictures in headless Chromium, light and dark.

Every SVG figure and chart view shown on those pages carries a non-empty ``aria-label`` and
drew something (its shapes have size on the page), with no console error and no request
outside 127.0.0.1. The pipeline lab of the multi-gpu lesson shows, for the stages and
micro-batches chosen in its selects, the figure whose bubble is ``bubble_fraction``'s, and
without JavaScript its default one. Skipped, with the reason, without Chromium or Python
Playwright.
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest

CHROMIUM = os.environ.get("CHROMIUM") or (
    "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else shutil.which("chromium")
)
if not CHROMIUM or not Path(CHROMIUM).exists():
    pytest.skip(
        "no Chromium: set CHROMIUM or install /usr/bin/chromium (.ci/run does)",
        allow_module_level=True,
    )
sync_api = pytest.importorskip("playwright.sync_api", reason="Python Playwright is not installed")

from gpulesson.memory import diagrams  # noqa: E402  (after the skips, as the fixtures are)
from gpulesson.memory.parallel import bubble_fraction  # noqa: E402

# The lessons that gained pictures, and how many each shows at least (SVG figures and chart
# views not hidden: the pipeline lab's other cells wait, hidden, for its selects).
PAGES = {
    "memory": 1,
    "fix-ladder": 2,
    "budget": 1,
    "capacity": 1,
    "multi-gpu": 5,
    "profiling": 1,
    "feeding": 1,
    "inside-gpu": 2,
}
LAUNCH_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]

# For each figure and chart view: its label, and how many of its shapes have an area.
_VISIBLE = (
    "[...document.querySelectorAll('figure.gl-figure svg, .gl-chart-view')]"
    ".filter(e => !e.closest('[hidden]'))"
)
_CHARTS_READY = f"""() => {_VISIBLE}.filter(e => e.matches('.gl-chart-view'))
    .every(v => v.querySelector('svg, canvas'))"""
_DRAWN = (
    "() => "
    + _VISIBLE
    + """.map(e => ({
    label: e.getAttribute('aria-label') || '',
    shapes: [...e.querySelectorAll('rect, polygon, path, circle, line, canvas')]
        .filter(s => { const b = s.getBoundingClientRect(); return b.width > 0 && b.height > 0; })
        .length,
    width: e.getBoundingClientRect().width,
}))"""
)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture(scope="module")
def site_url(built_site: Path) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Quiet, directory=str(built_site))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        yield chromium
        chromium.close()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_picture_has_a_label_and_draws_without_errors(site_url, browser, scheme):
    context = browser.new_context(color_scheme=scheme)
    errors: list[str] = []
    outside: list[str] = []
    total = lessons = 0
    try:
        for name, least in PAGES.items():
            page = context.new_page()
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on(
                "request",
                lambda r: (
                    outside.append(r.url)
                    if urlparse(r.url).hostname != "127.0.0.1"
                    and not r.url.startswith(("data:", "blob:", "about:"))
                    else None
                ),
            )
            response = page.goto(f"{site_url}lessons/{name}/")
            assert response is not None and response.ok, name
            page.wait_for_function(_CHARTS_READY)  # Vega draws after load
            drawn = page.evaluate(_DRAWN)
            assert len(drawn) >= least, f"{name}: {len(drawn)} pictures shown"
            for item in drawn:
                assert item["label"].strip(), f"{name}: a picture without a text alternative"
                assert item["shapes"] > 0 and item["width"] > 0, f"{name}: {item['label'][:60]}"
            total += len(drawn)
            lessons += 1 if drawn else 0
            page.close()
    finally:
        context.close()
    assert errors == [] and outside == []
    assert total >= 12 and lessons >= 8


LAB = "div.gl-pipeline-lab"
_SHOWN_CELLS = f"""() => [...document.querySelectorAll('{LAB} .gl-pipeline-cell')]
    .filter(c => !c.hidden && c.getBoundingClientRect().height > 0)
    .map(c => ({{stages: c.dataset.stages, micro: c.dataset.microbatches,
                label: c.querySelector('svg').getAttribute('aria-label')}}))"""


def _bubble_stated(label: str) -> str:
    m = re.search(r"The bubble formula \(p-1\)/\(m\+p-1\) gives ([\d.]+%)", label)
    assert m, label
    return m[1]


def test_the_pipeline_lab_shows_the_figure_of_the_chosen_stages_and_micro_batches(
    site_url, browser
):
    context = browser.new_context(color_scheme="light")
    errors: list[str] = []
    try:
        page = context.new_page()
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{site_url}lessons/multi-gpu/")
        stages = page.get_by_label("Stages", exact=True)
        micro = page.get_by_label("Micro-batches", exact=True)
        assert stages.is_visible() and micro.is_visible()
        default = page.evaluate(_SHOWN_CELLS)
        assert [(c["stages"], c["micro"]) for c in default] == [
            tuple(str(v) for v in diagrams.LAB_DEFAULT)
        ]
        for p in diagrams.LAB_STAGES:
            for m in (1, 8, 16):
                stages.select_option(str(p))
                micro.select_option(str(m))
                (cell,) = page.evaluate(_SHOWN_CELLS)
                assert (cell["stages"], cell["micro"]) == (str(p), str(m))
                bubble = bubble_fraction(stages=p, microbatches=m)
                assert _bubble_stated(cell["label"]) == f"{bubble:.1%}"
                assert cell["label"].count(f"idles {bubble:.1%}") == 2
                status = page.locator(f"{LAB} .gl-pipeline-status").inner_text()
                assert status == diagrams.lab_status(p, m)
                assert status.endswith(f"the formula's bubble {bubble:.1%}.")
        page.close()
    finally:
        context.close()
    assert errors == []


def test_without_javascript_the_pipeline_lab_shows_its_default_figure(site_url, browser):
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(f"{site_url}lessons/multi-gpu/")
        assert not page.locator(f"{LAB} .gl-pipeline-controls").is_visible()
        shown = page.locator(f"{LAB} .gl-pipeline-cell:not([hidden]) figure.gl-figure svg")
        assert shown.count() == 1 and shown.first.is_visible()
        p, m = diagrams.LAB_DEFAULT
        bubble = bubble_fraction(stages=p, microbatches=m)
        assert _bubble_stated(shown.first.get_attribute("aria-label")) == f"{bubble:.1%}"
        hidden = page.locator(f"{LAB} .gl-pipeline-cell[hidden]")
        assert hidden.count() == len(diagrams.LAB_STAGES) * len(diagrams.LAB_MICROBATCHES) - 1
        assert not hidden.first.is_visible()
        page.close()
    finally:
        context.close()
