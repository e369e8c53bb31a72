"""The built site's Content-Security-Policy in headless Chromium.

On the home page, lessons with charts, a lab page, the compare page and a notebook page,
the pages' own content runs under the policy without a single violation (charts draw with
Vega's interpreter, the theme's hashed inline scripts run, search and the quiz work), and
an inline event handler or inline script injected into a built page is blocked and
reported. A control serves the same page without its policy, where the same injection
runs, so the blocking is the policy's doing.

Skipped, with the reason, when no Chromium is found (CHROMIUM or /usr/bin/chromium) or
Python Playwright is missing. Nothing leaves 127.0.0.1.
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

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("CHROMIUM") or (
    "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else shutil.which("chromium")
)
if not CHROMIUM or not Path(CHROMIUM).exists():
    pytest.skip("no Chromium: set CHROMIUM or install /usr/bin/chromium", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="Python Playwright is not installed")

FIXTURES = Path(__file__).parent / "fixtures" / "bundles"
LAUNCH_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
#: Recorded from the first line of every document, before the page's own scripts run.
RECORD_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => window.__cspViolations.push(
  [e.effectiveDirective, e.blockedURI, e.sample, e.sourceFile, e.lineNumber].join(" | ")
), true);
"""
READY = (
    "() => [...document.querySelectorAll('.gl-lab[data-lab], .gl-quiz, .gl-flashcards')]"
    ".every(b => b.dataset.ready === '2')"
    " && [...document.querySelectorAll('figure[data-gl-chart]:not([hidden])')]"
    ".every(f => f.dataset.drawn)"
)
DRAWN = (
    "() => [...document.querySelectorAll('figure[data-gl-chart]:not([hidden])')].map("
    "f => [f.dataset.drawn, !!f.querySelector('.gl-chart-view svg, .gl-chart-view canvas')])"
)
#: The theme's search worker has built its index: the result line leaves "Initializing search".
SEARCH_READY = (
    "() => document.querySelector('.md-search-result__meta').textContent.trim()"
    " !== 'Initializing search'"
)
_CSP_META = re.compile(rb'<meta http-equiv="Content-Security-Policy" content="[^"]*">')


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


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        yield chromium
        chromium.close()


class _Watched:
    """A page with its policy violations, console errors and outside requests recorded."""

    def __init__(self, browser: object) -> None:
        self.context = browser.new_context()  # type: ignore[attr-defined]
        self.context.add_init_script(RECORD_VIOLATIONS)
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.outside: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", self._request)

    def _request(self, request: object) -> None:
        url = request.url  # type: ignore[attr-defined]
        if urlparse(url).hostname not in (None, "127.0.0.1") and not url.startswith(
            ("data:", "blob:")
        ):
            self.outside.append(url)

    def open(self, url: str) -> object:
        response = self.page.goto(url)
        assert response is not None and response.ok, f"{url}: {response and response.status}"
        self.page.wait_for_function(READY)
        return self.page

    def violations(self) -> list[str]:
        return self.page.evaluate("window.__cspViolations")

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def watched(browser: object) -> Iterator[_Watched]:
    w = _Watched(browser)
    yield w
    w.close()


def _assert_clean(w: _Watched) -> None:
    """No violation, no console error (Chromium logs each refusal as an error: "Refused to
    load ...", "Executing inline script violates the following Content Security Policy")."""
    w.page.wait_for_timeout(300)  # a late violation (a lazy script) still counts
    assert w.violations() == []
    assert w.errors == []
    assert w.outside == []


@pytest.mark.parametrize(
    ("path", "charts"),
    [
        ("", 0),
        ("lessons/why-gpus/", 1),
        ("lessons/roofline/", 1),
        ("lessons/where-to-run/", 0),  # the cost lab and the quiz
        ("notebooks/why-gpus/", 0),
    ],
)
def test_the_pages_own_content_runs_under_the_policy(watched, site_url: str, path: str, charts):
    page = watched.open(site_url + path)
    policy = page.get_attribute('meta[http-equiv="Content-Security-Policy"]', "content")
    assert "script-src 'self' 'sha256-" in policy and "unsafe-eval" not in policy
    # the theme's inline script ran (so its hash is right): it defines __md_scope
    assert page.evaluate("typeof __md_scope") == "object"
    drawn = page.evaluate(DRAWN)
    assert len(drawn) >= charts and all(d == ["light", True] for d in drawn), drawn
    if path.startswith("notebooks/"):
        # mkdocs-jupyter's inline copy-button script ran
        assert page.evaluate("typeof customElements.get('clipboard-copy')") == "function"
    _assert_clean(watched)


def test_the_compare_page_draws_a_chosen_bundle_under_the_policy(watched, site_url: str):
    page = watched.open(site_url + "compare/")
    page.wait_for_selector("[data-gl-compare][data-ready='1']")
    page.set_input_files("#gl-compare-file", str(FIXTURES / "fixture_t4.json"))
    page.wait_for_function("() => document.querySelector('[data-gl-compare]').dataset.state")
    assert page.get_attribute("[data-gl-compare]", "data-state") == "shown"
    page.wait_for_function(READY)
    drawn = page.evaluate(DRAWN)
    assert drawn and all(d == ["light", True] for d in drawn), drawn
    _assert_clean(watched)


def test_search_works_under_the_policy(watched, site_url: str):
    page = watched.open(site_url)
    # Typed as a reader types, once the index is ready: the theme searches on keyup (or on
    # "ready" for text already there), so a fill() after the index was ready searched nothing.
    page.wait_for_function(SEARCH_READY)
    page.click("input.md-search__input")
    page.locator("input.md-search__input").press_sequentially("roofline")
    page.wait_for_selector(".md-search-result__item")
    titles = page.locator(".md-search-result__item").all_inner_texts()
    assert any("memory-bound" in title.lower() for title in titles), titles
    _assert_clean(watched)


def test_the_quiz_scores_under_the_policy(watched, site_url: str):
    page = watched.open(site_url + "lessons/where-to-run/")
    first = page.locator(".gl-quiz .gl-question").first
    first.locator(".gl-option").first.click()
    score = page.inner_text('.gl-quiz [data-out="score"]')
    assert score.startswith("1 / ") and "answered" in score
    assert first.locator(".gl-why").first.is_visible()
    _assert_clean(watched)


INJECT = """() => {
  const img = document.createElement("div");
  img.innerHTML = '<img src="data:," onerror="window.__pwned = 1" alt="">';
  document.body.append(img);
  const script = document.createElement("script");
  script.textContent = "window.__pwnedScript = 1";
  document.body.append(script);
}"""


def _inject(page: object) -> tuple[object, object]:
    page.evaluate(INJECT)  # type: ignore[attr-defined]
    page.wait_for_timeout(500)  # type: ignore[attr-defined]
    return page.evaluate("[typeof window.__pwned, typeof window.__pwnedScript]")  # type: ignore[attr-defined]


def test_an_injected_inline_handler_and_script_are_blocked_and_reported(watched, site_url):
    page = watched.open(site_url + "lessons/roofline/")
    assert _inject(page) == ["undefined", "undefined"]
    directives = [v.split(" | ")[0] for v in watched.violations()]
    assert "script-src-attr" in directives  # the onerror handler
    assert "script-src-elem" in directives  # the inline script
    assert any("violates the following Content Security Policy" in e for e in watched.errors)


def test_without_the_policy_the_same_injection_runs(watched, site_url):
    """The control: the page served with its policy removed runs both, so the test can fail."""
    url = site_url + "lessons/roofline/"

    def strip_policy(route: object) -> None:
        response = route.fetch()  # type: ignore[attr-defined]
        body, count = _CSP_META.subn(b"", response.body())
        assert count == 1
        route.fulfill(response=response, body=body)  # type: ignore[attr-defined]

    watched.page.route(url, strip_policy)
    page = watched.open(url)
    assert page.locator('meta[http-equiv="Content-Security-Policy"]').count() == 0
    assert _inject(page) == ["number", "number"]
    assert watched.violations() == []
