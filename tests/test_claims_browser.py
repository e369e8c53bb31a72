"""In Chromium: a checked claim's mark shows its rule on hover and leads to its entry."""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("CHROMIUM") or (
    "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else shutil.which("chromium")
)
if not CHROMIUM or not Path(CHROMIUM).exists():
    pytest.skip("no Chromium: set CHROMIUM or install /usr/bin/chromium", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="Python Playwright is not installed")

LAUNCH_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture(scope="module")
def site_url(built_site: Path) -> Iterator[str]:
    handler = functools.partial(_Quiet, directory=str(built_site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def test_hovering_a_check_mark_shows_its_rule_and_clicking_opens_the_page_s_checks(site_url):
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{site_url}lessons/timing/")
        mark = page.locator("a.gl-claim-holds").first
        mark.hover()
        title = mark.get_attribute("title") or ""
        assert title.startswith("Checked at build: ") and " with " in title
        assert "(checked on this build)" not in page.inner_text("article")
        checks = page.locator("details#gl-checks")
        assert checks.get_attribute("open") is None  # collapsed until asked for
        mark.click()
        target = mark.get_attribute("href") or ""
        page.evaluate("document.querySelector('details#gl-checks').open = true")
        entry = page.locator(target)
        assert entry.is_visible() and "holds" in entry.inner_text()
        assert "Rule " in entry.inner_text() and "flips with" in entry.inner_text()
        assert errors == []
        browser.close()
