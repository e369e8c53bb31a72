"""The compare page in headless Chromium: choose a bundle file, see its numbers in table and chart.

Skipped, with the reason, when no Chromium is found (CHROMIUM or /usr/bin/chromium) or Python
Playwright is missing. Uses the strictly built site (``built_site``) and the fixture bundles;
the file is chosen through the page's file input, as a reader would, and nothing leaves
127.0.0.1.
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

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("CHROMIUM") or (
    "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else shutil.which("chromium")
)
if not CHROMIUM or not Path(CHROMIUM).exists():
    pytest.skip("no Chromium: set CHROMIUM or install /usr/bin/chromium", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="Python Playwright is not installed")

FIXTURES = Path(__file__).parent / "fixtures" / "bundles"
LAUNCH_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture(scope="module")
def compare_url(built_site: Path) -> Iterator[str]:
    handler = functools.partial(_Quiet, directory=str(built_site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/compare/"
    server.shutdown()
    server.server_close()


@pytest.fixture
def page(compare_url: str) -> Iterator[object]:
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        page = browser.new_page()
        errors: list[str] = []
        outside: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on(
            "request",
            lambda r: (
                outside.append(r.url)
                if urlparse(r.url).hostname not in (None, "127.0.0.1")
                and not r.url.startswith(("data:", "blob:"))
                else None
            ),
        )
        page.goto(compare_url)
        page.wait_for_selector("[data-gl-compare][data-ready='1']")
        yield page
        assert errors == []
        assert outside == []  # the bundle is read in the browser, never sent anywhere
        browser.close()


def _choose(page: object, path: Path) -> None:
    page.set_input_files("#gl-compare-file", str(path))  # type: ignore[attr-defined]
    page.wait_for_function(  # type: ignore[attr-defined]
        "() => ['shown', 'refused']"
        ".includes(document.querySelector('[data-gl-compare]').dataset.state)"
    )


def test_choosing_a_bundle_puts_its_device_s_numbers_in_the_table_and_chart(page):
    bundle = json.loads((FIXTURES / "fixture_t4.json").read_text())
    _choose(page, FIXTURES / "fixture_t4.json")
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
    # one chart per figure a reference bundle also has; the reader's bar drawn and labelled
    data = json.loads(page.inner_text("#gl-compare-data"))
    shared = {m["name"] for m in headline} & {
        name for ref in data["references"] for name in ref["measurements"]
    }
    mine_bars = page.locator(".gl-compare-chart svg rect[data-bar='mine']")
    assert mine_bars.count() == len(shared)
    if shared:
        labels = page.eval_on_selector_all(
            ".gl-compare-chart svg", "svgs => svgs.map(s => s.getAttribute('aria-label'))"
        )
        assert all(f"yours: {device}" in label for label in labels)
    else:
        assert "No reference bundle has these figures yet" in page.inner_text(".gl-compare-chart")
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
