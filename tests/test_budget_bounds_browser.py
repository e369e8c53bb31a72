"""The labs' bounds in headless Chromium: a refusal at once, never a frozen tab or Infinity.

The VRAM planner froze its tab on Layers = 1e300 and kept its old total after an
invalid value; the cost lab showed "$Infinity", "Spot saves $NaN" and read an emptied
rate as $0. Here a reader's inputs are typed into the built site's labs, whose ranges
come from the package (``planner.json``'s ``limits``, ``labs.json``'s ``cost.limits``).

Skipped, with the reason, when no Chromium is found (CHROMIUM or /usr/bin/chromium) or
Python Playwright is missing, as ``tests/test_browser.py`` is.
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

import pytest

from gpulesson.memory import cost, shape

CHROMIUM = os.environ.get("CHROMIUM") or (
    "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else shutil.which("chromium")
)
if not CHROMIUM or not Path(CHROMIUM).exists():
    pytest.skip(
        "no Chromium: set CHROMIUM or install /usr/bin/chromium (.ci/run does)",
        allow_module_level=True,
    )
sync_api = pytest.importorskip("playwright.sync_api", reason="Python Playwright is not installed")

LAUNCH_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
#: How long a refusal may take to show: "at once" (a frozen tab never answers).
AT_ONCE_MS = 2000
PLANNER = '.gl-lab[data-lab="planner"]'
COST = '.gl-lab[data-lab="cost"]'
NOT_A_NUMBER = re.compile(r"Infinity|NaN")


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture(scope="module")
def site_url(built_site: Path) -> Iterator[str]:
    handler = functools.partial(_QuietHandler, directory=str(built_site))
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


@pytest.fixture
def page(browser: object) -> Iterator[object]:
    context = browser.new_context()  # type: ignore[attr-defined]
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    yield page
    context.close()
    assert errors == [], errors


def _open(page: object, url: str, box: str) -> None:
    """Load ``url`` and wait for the lab in ``box``; after that every step must be at once."""
    response = page.goto(url, timeout=60_000)  # type: ignore[attr-defined]
    assert response is not None and response.ok, url
    ready = f"document.querySelector('{box}')"
    page.wait_for_function(  # type: ignore[attr-defined]
        f"() => {ready} && {ready}.dataset.ready === '2'", timeout=60_000
    )
    page.set_default_timeout(AT_ONCE_MS)  # type: ignore[attr-defined]


def _value(page: object, box: str, name: str) -> str | None:
    return page.get_attribute(f'{box} [data-out="{name}"]', "data-value")  # type: ignore[attr-defined]


def _text(page: object, box: str, name: str) -> str:
    return page.inner_text(f'{box} [data-out="{name}"]')  # type: ignore[attr-defined]


def test_planner_refuses_1e300_layers_at_once_and_clears_the_old_total(site_url: str, page):
    _open(page, site_url + "lessons/budget/", PLANNER)
    old_total = _value(page, PLANNER, "total")
    assert old_total is not None and float(old_total) > 0  # a result is on screen first

    page.fill(f'{PLANNER} [data-in="layers"]', "1e300")  # a frozen tab times this out
    page.wait_for_function(
        f"() => document.querySelector('{PLANNER} [data-out=\"refusal\"]').textContent !== ''",
        timeout=AT_ONCE_MS,
    )
    refusal = _text(page, PLANNER, "refusal")
    assert refusal.startswith(
        f"Layers 1e300 is too large: at most {shape.count_limit('layers').stated}, because"
    )
    assert shape.count_limit("layers").why in refusal  # the package's reason, from planner.json
    for name in ("total", "needed", "phase", "weights", "activations"):
        assert _value(page, PLANNER, name) is None, name  # no number is left behind
        assert old_total not in _text(page, PLANNER, name)
    assert _text(page, PLANNER, "total") == "–"
    assert page.inner_text(f'{PLANNER} [data-out="cards"]') == ""
    assert not NOT_A_NUMBER.search(page.inner_text(PLANNER))

    page.fill(f'{PLANNER} [data-in="layers"]', "")
    assert _text(page, PLANNER, "refusal").startswith("Layers: enter a whole number from 1")
    page.fill(f'{PLANNER} [data-in="layers"]', str(shape.MAX_LAYERS + 1))
    assert "is too large: at most 10,000" in _text(page, PLANNER, "refusal")

    page.fill(f'{PLANNER} [data-in="layers"]', "32")  # a valid value brings the result back
    assert _text(page, PLANNER, "refusal") == ""
    assert _value(page, PLANNER, "total") == old_total


def test_planner_refuses_each_count_past_its_limit(site_url: str, page):
    _open(page, site_url + "lessons/budget/", PLANNER)
    for field, label in (
        ("hidden", "Hidden size"),
        ("batch", "Batch size"),
        ("vocab", "Vocabulary"),
    ):
        page.fill(f'{PLANNER} [data-in="{field}"]', "1e300")
        assert _text(page, PLANNER, "refusal").startswith(
            f"{label} 1e300 is too large: at most 2^53"
        )
        assert _value(page, PLANNER, "total") is None
        assert not NOT_A_NUMBER.search(page.inner_text(PLANNER))
        _open(page, site_url + "lessons/budget/", PLANNER)  # a fresh planner for the next


def test_cost_lab_refuses_an_empty_or_huge_input_and_never_shows_infinity(site_url: str, page):
    _open(page, site_url + "lessons/where-to-run/", COST)
    rate = cost.card_rates()[0]
    assert float(_value(page, COST, "on-demand") or "nan") == pytest.approx(
        cost.run_cost_usd(rate.on_demand_usd_per_h, 3, 10)
    )

    page.fill(f'{COST} [data-in="on-rate"]', "")  # was read as $0
    note = _text(page, COST, "note")
    assert note.startswith("On-demand rate ($/h): enter a number from 0 to 1,000")
    assert _value(page, COST, "on-demand") is None and _value(page, COST, "spot") is None
    assert "$0" not in page.inner_text(COST)

    page.fill(f'{COST} [data-in="on-rate"]', "1e308")  # was "$Infinity", "Spot saves $NaN"
    note = _text(page, COST, "note")
    assert note.startswith("On-demand rate ($/h) 1e308 is too large: at most 1,000, because")
    assert _value(page, COST, "on-demand") is None
    assert not NOT_A_NUMBER.search(page.inner_text(COST))

    page.fill(f'{COST} [data-in="on-rate"]', "2.5")
    for field, label in (("hours", "Hours per run"), ("runs", "Number of runs")):
        page.fill(f'{COST} [data-in="{field}"]', "1e308")
        assert _text(page, COST, "note").startswith(f"{label} 1e308 is too large: at most 10,000")
        assert not NOT_A_NUMBER.search(page.inner_text(COST))
        page.fill(f'{COST} [data-in="{field}"]', "")
        assert _text(page, COST, "note").startswith(f"{label}: enter a number")
        assert "$0" not in page.inner_text(COST)
        page.fill(f'{COST} [data-in="{field}"]', "4" if field == "hours" else "20")

    assert float(_value(page, COST, "on-demand") or "nan") == pytest.approx(2.5 * 4 * 20)
    assert "Spot saves $" in _text(page, COST, "note")
