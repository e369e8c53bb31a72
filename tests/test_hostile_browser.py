"""Hostile result bundles in a strict build, read by headless Chromium: nothing runs, nothing
is fetched, and harmless punctuation shows as it is.

One strict build of a temporary copy of the repository whose ``results/`` holds the bundles
of ``tests/fixtures/hostile_render/``: a CUDA reference bundle whose every free-text field
is a payload (so the GPU-figures stamp on lesson pages names it), a community bundle the
same, and a reference bundle with a harmless name full of ``< > & | * _ [ ] #``. Each
payload sets ``window.__pwned`` if it ever runs. On Results, Compare and a lesson page with
the stamp: the variable stays undefined, no element has an ``on*`` attribute, no request
leaves 127.0.0.1, and the harmless strings are in the visible text. On Compare, a reader's
hostile bundle is shown as text and one with ``unit: "__proto__"`` is refused in the
page's message area.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpulesson.site.exec_cache import CACHE_DIR_ENV
from tests.conftest import warm_cache
from tests.test_compare_browser import CHROMIUM, LAUNCH_ARGS, _serve, _Watched

pytestmark = pytest.mark.browser
sync_api = pytest.importorskip("playwright.sync_api", reason="Python Playwright is not installed")

REPO = Path(__file__).resolve().parent.parent
HOSTILE = REPO / "tests" / "fixtures" / "hostile_render"
HARMLESS = json.loads((HOSTILE / "reference_harmless_t4.json").read_text())
STAMP = "GPU figures from a reference result bundle"
STAMPED_LESSON = "lessons/timing/"
#: Every lesson that shows GPU figures: each renders the hostile reference bundle's strings.
GPU_LESSONS = sorted(
    f"lessons/{md.stem}/"
    for md in (REPO / "docs" / "lessons").glob("*.md")
    if "\ngpu_figures: true\n" in md.read_text(encoding="utf-8")
)
ON_ATTRIBUTES = (
    "() => [...document.querySelectorAll('*')].flatMap(e => [...e.attributes]"
    ".filter(a => a.name.toLowerCase().startsWith('on')).map(a => e.tagName + ' ' + a.name))"
)


def _copy_repository(target: Path) -> None:
    """The working tree as git sees it (tracked and new files, nothing ignored)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file() and not source.is_symlink():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


@pytest.fixture(scope="module")
def hostile_site(tmp_path_factory: pytest.TempPathFactory, built_site: Path) -> Path:
    """The course built strictly from a copy whose results/ holds the hostile bundles.

    The copy starts from the repository build's cache: the blocks that read results/ run.
    """
    root = tmp_path_factory.mktemp("hostile-repo")
    _copy_repository(root)
    for folder, pattern in (("reference", "reference_*.json"), ("community", "community_*.json")):
        (root / "results" / folder).mkdir(parents=True, exist_ok=True)
        for bundle in HOSTILE.glob(pattern):
            shutil.copy(bundle, root / "results" / folder / bundle.name)
    site = tmp_path_factory.mktemp("hostile-site")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)],
        cwd=root,
        env={
            **os.environ,
            "NO_MKDOCS_2_WARNING": "1",
            CACHE_DIR_ENV: str(warm_cache(tmp_path_factory.mktemp("hostile-cache") / "c")),
        },
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, f"strict build failed:\n{result.stderr[-4000:]}"
    return site


@pytest.fixture(scope="module")
def site_url(hostile_site: Path) -> Iterator[str]:
    yield from _serve(hostile_site)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        yield chromium
        chromium.close()


def _open(browser: object, url: str) -> _Watched:
    watched = _Watched(browser)
    watched.page.goto(url)
    watched.page.wait_for_load_state("load")
    watched.page.wait_for_timeout(300)  # autofocus and load handlers would have fired
    return watched


def _assert_nothing_ran(watched: _Watched) -> None:
    page = watched.page
    assert page.evaluate("() => typeof window.__pwned") == "undefined"
    assert page.evaluate(ON_ATTRIBUTES) == []
    assert watched.outside == []


@pytest.mark.parametrize("path", ["results/", "compare/", *GPU_LESSONS])
def test_no_payload_runs_adds_a_handler_or_fetches_anything(browser, site_url, path):
    watched = _open(browser, site_url + path)
    if path == "compare/":  # its script started: the data block was not swallowed
        watched.page.wait_for_selector("[data-gl-compare][data-ready='1']")
    if path == STAMPED_LESSON:
        assert STAMP in watched.page.inner_text("article")
    _assert_nothing_ran(watched)
    watched.page.close()


@pytest.mark.parametrize("path", ["results/", "compare/"])
def test_harmless_punctuation_shows_as_it_is(browser, site_url, path):
    watched = _open(browser, site_url + path)
    text = watched.page.inner_text("article")
    p = HARMLESS["provenance"]
    for value in (p["device_name"], p["torch_version"], p["driver_version"]):
        assert value in text
    if path == "results/":
        label = next(
            m["label"] for m in HARMLESS["measurements"] if m["name"] == "memory_bandwidth"
        )
        assert label in text  # a measurement's label, in the table of every figure
    watched.page.close()


def _choose(page: object, path: Path) -> str:
    page.set_input_files("#gl-compare-file", str(path))  # type: ignore[attr-defined]
    page.wait_for_function(  # type: ignore[attr-defined]
        "() => ['shown', 'refused']"
        ".includes(document.querySelector('[data-gl-compare]').dataset.state)"
    )
    return page.inner_text(".gl-compare-status")  # type: ignore[attr-defined]


def test_a_reader_s_hostile_bundle_is_shown_as_text(browser, site_url):
    watched = _open(browser, site_url + "compare/")
    page = watched.page
    page.wait_for_selector("[data-gl-compare][data-ready='1']")
    bundle = HOSTILE / "community_hostile_t4.json"
    status = _choose(page, bundle)
    device = json.loads(bundle.read_text())["provenance"]["device_name"]
    assert status.startswith("Showing community_hostile_t4.json: " + device)
    assert f"yours: {device}" in page.inner_text(".gl-compare-table table")
    _assert_nothing_ran(watched)
    assert watched.errors == []
    watched.page.close()


@pytest.mark.parametrize("field", ["unit", "datasheet_id", "dtype"])
@pytest.mark.parametrize("name", ["__proto__", "constructor"])
def test_an_inherited_name_in_a_reader_s_bundle_is_refused(
    browser, site_url, tmp_path, field, name
):
    data = json.loads((REPO / "tests" / "fixtures" / "bundles" / "fixture_t4.json").read_text())
    if field == "datasheet_id":
        data["provenance"]["datasheet_id"] = name
        where = "provenance.datasheet_id"
    else:
        data["measurements"][0][field] = name
        where = f"measurements[0].{field}"
    upload = tmp_path / "inherited.json"
    upload.write_text(json.dumps(data))
    watched = _open(browser, site_url + "compare/")
    watched.page.wait_for_selector("[data-gl-compare][data-ready='1']")
    status = _choose(watched.page, upload)
    assert status.startswith(f"Refused inherited.json: {where}: ")
    assert watched.page.locator(".gl-compare-table table").count() == 0
    assert watched.errors == []  # refused in the message area, no uncaught TypeError
    watched.page.close()
