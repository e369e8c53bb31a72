"""The memory and scale lessons' pictures in headless Chromium, light and dark.

Every SVG figure and chart view on those pages carries a non-empty ``aria-label`` and drew
something (its shapes have size on the page), with no console error and no request
outside 127.0.0.1. Skipped, with the reason, without Chromium or Python Playwright.
"""

from __future__ import annotations

import functools
import http.server
import os
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

# The lessons that gained pictures, and how many SVG figures each prints at least.
PAGES = {
    "memory": 1,
    "fix-ladder": 2,
    "budget": 1,
    "capacity": 1,
    "multi-gpu": 5,
    "profiling": 1,
    "feeding": 1,
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
    total = 0
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
            figures = page.locator("figure.gl-figure svg")
            assert figures.count() >= least, f"{name}: {figures.count()} SVG figures"
            page.wait_for_function(_CHARTS_READY)  # Vega draws after load
            drawn = page.evaluate(_DRAWN)
            for item in drawn:
                assert item["label"].strip(), f"{name}: a picture without a text alternative"
                assert item["shapes"] > 0 and item["width"] > 0, f"{name}: {item['label'][:60]}"
            total += figures.count()
            page.close()
    finally:
        context.close()
    assert errors == [] and outside == []
    assert total >= 10
