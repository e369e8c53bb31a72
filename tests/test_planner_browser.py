"""The VRAM planner across GPUs in headless Chromium, on the built site.

Setting GPUs = 8 and ZeRO stage = 3 must show the memory per GPU and the bytes sent per step
that ``gpulesson budget --gpus 8 --zero 3 --json`` gives for the planner's shape; the
estimator's measured error is shown beside the total; a model preset sets the parameter count
to the shape's own (Llama-3-8B: 8.03e9); invalid input still clears the result. No inline
script or handler runs (the site's Content-Security-Policy forbids them): a violation fails.

Skipped, with the reason, when no Chromium is found (CHROMIUM or /usr/bin/chromium) or Python
Playwright is missing, as ``tests/test_budget_bounds_browser.py`` is.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpulesson.memory import planner

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
PLANNER = '.gl-lab[data-lab="planner"]'
#: The planner's first inputs (labs.js): the shape the CLI is asked about.
DEFAULT_ARGS = (
    "--params", "7e9", "--vocab", "32000", "--seq", "512", "--hidden", "4096",
    "--heads", "32", "--layers", "32", "--batch", "1",
)  # fmt: skip


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
def page(browser: object, site_url: str) -> Iterator[object]:
    context = browser.new_context()  # type: ignore[attr-defined]
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on(
        "console",
        lambda m: errors.append(m.text) if "Content Security Policy" in m.text else None,
    )
    response = page.goto(site_url + "lessons/budget/", timeout=60_000)
    assert response is not None and response.ok
    page.wait_for_function(
        f"() => document.querySelector('{PLANNER}')?.dataset.ready === '2'", timeout=60_000
    )
    page.set_default_timeout(5_000)
    yield page
    context.close()
    assert errors == [], errors


def _value(page: object, name: str) -> str | None:
    return page.get_attribute(f'{PLANNER} [data-out="{name}"]', "data-value")  # type: ignore[attr-defined]


def _cli(*args: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "gpulesson", "budget", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_8_gpus_with_zero_3_shows_what_gpulesson_budget_gives(page):
    one_gpu = _value(page, "total")
    page.select_option(f'{PLANNER} select[data-in="gpus"]', "8")
    page.select_option(f'{PLANNER} select[data-in="zero"]', "3")
    cli = _cli(*DEFAULT_ARGS, "--gpus", "8", "--zero", "3")
    assert _value(page, "total") == str(cli["total_bytes"])
    assert _value(page, "total") != one_gpu  # the stage changed memory per GPU
    assert _value(page, "sent") == str(cli["comm_bytes_per_step"])
    assert _value(page, "weights") == str(cli["weights_bytes"])
    assert _value(page, "optimizer") == str(cli["optimizer_bytes"])
    assert _value(page, "needed") == str(cli["with_headroom_bytes"])
    page.select_option(f'{PLANNER} select[data-in="zero"]', "1")
    cli1 = _cli(*DEFAULT_ARGS, "--gpus", "8", "--zero", "1")
    assert _value(page, "total") == str(cli1["total_bytes"])
    assert _value(page, "sent") == str(cli1["comm_bytes_per_step"])


def test_zero_on_one_gpu_is_refused_and_clears_the_result(page):
    page.select_option(f'{PLANNER} select[data-in="zero"]', "2")
    refusal = page.inner_text(f'{PLANNER} [data-out="refusal"]')
    assert refusal == "ZeRO stage 2 shards across GPUs: pick 2 or more GPUs."
    for name in ("total", "sent", "needed", "weights"):
        assert _value(page, name) is None, name
    page.select_option(f'{PLANNER} select[data-in="gpus"]', "4")
    assert page.inner_text(f'{PLANNER} [data-out="refusal"]') == ""
    assert _value(page, "total") is not None


def test_the_estimators_measured_error_is_shown_beside_the_total(page):
    text = page.inner_text(f'{PLANNER} [data-out="error-range"]')
    assert text.startswith("measured error: within ±"), text
    assert float(_value(page, "error-range") or "nan") > 0
    total_row = page.inner_text(f"{PLANNER} dl.gl-results")
    assert "measured error: within ±" in total_row


def test_a_preset_sets_the_parameter_count_to_the_shapes_own(page):
    presets = {m.id: m for m in planner.model_presets()}
    page.select_option(f'{PLANNER} select[data-in="model"]', "llama-3-8b")
    llama = presets["llama-3-8b"]
    assert _value(page, "params") == str(llama.shape.parameters())
    assert abs(llama.shape.parameters() / llama.cited_parameters - 1) < 0.005
    assert llama.source in page.inner_text(f'{PLANNER} [data-out="preset-source"]')
    args = (
        "--params", str(llama.shape.parameters()), "--vocab", "128256", "--seq", "8192",
        "--hidden", "4096", "--heads", "32", "--kv-heads", "8", "--layers", "32",
        "--ffn", "14336", "--gated", "--untied-head", "--no-position-table",
    )  # fmt: skip
    assert _value(page, "total") == str(_cli(*args)["total_bytes"])
    page.select_option(f'{PLANNER} select[data-in="model"]', "gpt2")
    assert _value(page, "params") == "124439808"


def test_the_card_list_holds_every_datasheet_row(page):
    ids = page.eval_on_selector_all(
        f'{PLANNER} [data-out="datasheet-cards"] li', "els => els.map(e => e.dataset.cardId)"
    )
    assert ids == [c["id"] for c in planner.card_rows()]
    page.select_option(f'{PLANNER} select[data-in="card"]', "h200")
    h200 = next(c for c in planner.card_rows() if c["id"] == "h200")
    fits = int(_value(page, "needed") or "0") <= h200["memory_bytes"]
    verdict = page.inner_text(f'{PLANNER} [data-out="card-verdict"]')
    assert verdict == f"{h200['name']}: {'fits' if fits else 'too small'}"
