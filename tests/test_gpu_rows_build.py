"""One strict build of a copy of the repository with a reference bundle under
``results/reference/``: every GPU row of the bundle's device shows measured beside predicted
with the ratio, and the GPU claims are checked against the measured figures too."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
from pathlib import Path

import pytest

from gpulesson.site import exec_cache
from tests.conftest import mkdocs_build, warm_cache

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "bundles" / "fixture_h100.json"
_TOP_LEVEL_SKIP = {".git", ".venv", ".cache", "site", ".pytest_cache", ".ruff_cache"}
# the lessons' GPU tables of figures the fixture bundle measures, by page
MEASURED_TABLES = {
    "why-gpus": ["Best bf16 matmul rate"],
    "timing": ["Launch overhead", "An 8192x8192 bf16 matmul"],
    "roofline": ["Copy bandwidth", "bf16 matmul rate"],
    "feeding": ["Pinned host-to-device copy", "Pageable host-to-device copy", "Launch overhead"],
    "mixed-precision": ["bf16 matmul rate", "fp8 matmul rate"],
    "decoding": ["Memory bandwidth: batch-1 tokens/s"],
    "compute-budget": ["Best bf16 matmul: the ceiling a step meets first"],
}
DEVICE = "NVIDIA H100 SXM5 80GB"


def _skip(folder: str, names: list[str]) -> set[str]:
    skipped = {n for n in names if n == "__pycache__" or n.endswith(".egg-info")}
    if Path(folder) == REPO:
        skipped |= _TOP_LEVEL_SKIP & set(names)
    return skipped


def _cells(table_html: str, device: str) -> list[str]:
    for row in re.findall(r"<tr>(.*?)</tr>", table_html, re.S):
        cells = [
            html.unescape(re.sub(r"<[^>]+>", "", c)).strip()
            for c in re.findall(r"<td>(.*?)</td>", row, re.S)
        ]
        if cells and cells[0] == device:
            return cells
    raise AssertionError(f"no row for {device}")


def _table_after(page: str, title: str) -> str:
    start = page.index(f"<strong>{html.escape(title)}")
    return page[start : page.index("</table>", start)]


@pytest.fixture(scope="module")
def bundle_site(tmp_path_factory: pytest.TempPathFactory, built_site: Path) -> Path:
    """A copy's build with the fixture bundle; the blocks that look at results/ run again."""
    tmp = tmp_path_factory.mktemp("gpu-rows")
    copy = tmp / "repo"
    shutil.copytree(REPO, copy, ignore=_skip, symlinks=True)
    (copy / "results" / "reference").mkdir(parents=True, exist_ok=True)
    shutil.copy(FIXTURE, copy / "results" / "reference" / FIXTURE.name)
    cache = warm_cache(tmp / "cache")
    result = mkdocs_build(tmp / "site", root=copy, GPULESSON_CACHE_DIR=str(cache))
    assert result.returncode == 0, result.stderr[-4000:]
    (tmp / "build.log").write_text(result.stderr, encoding="utf-8")
    return tmp / "site"


@pytest.mark.site
def test_the_copy_reuses_the_repository_s_cache_and_reruns_what_reads_results(bundle_site):
    """The copy's blocks that read nothing the copy changed come from the cache; the ones
    that look at results/ (where the fixture bundle appeared) run again. Where the copy's
    environment says every block runs (CI, as the cache policy reads it), none is reused."""
    log = (bundle_site.parent / "build.log").read_text(encoding="utf-8")
    counts = re.search(r"executed blocks: (\d+) on \d+ pages? \((\d+) ran, (\d+) from cache", log)
    assert counts, log[-2000:]
    total, ran, cached = (int(counts[i]) for i in (1, 2, 3))
    copy_environ = {k: v for k, v in os.environ.items() if not k.startswith("GPULESSON_")}
    if exec_cache.cache_policy(copy_environ).read:
        assert ran > 0 and cached > 0, counts[0]
    else:
        assert (ran, cached) == (total, 0), counts[0]


@pytest.mark.site
def test_every_gpu_row_of_the_bundle_device_shows_measured_and_the_ratio(bundle_site: Path):
    for lesson, titles in MEASURED_TABLES.items():
        page = (bundle_site / "lessons" / lesson / "index.html").read_text(encoding="utf-8")
        assert "measured from the reference bundle results/reference/fixture_h100.json" in page
        for title in titles:
            cells = _cells(_table_after(page, title), DEVICE)
            predicted, measured, ratio = cells[1], cells[3], cells[4]
            assert re.match(r"[0-9.]+ (TFLOP/s|GB/s|µs)", predicted), (lesson, title, cells)
            assert re.match(r"[0-9.]+ (TFLOP/s|GB/s|µs)", measured), (lesson, title, cells)
            assert 0.0 < float(ratio) <= 1.5, (lesson, title, cells)


@pytest.mark.site
def test_the_claims_are_checked_against_the_measured_figures(bundle_site: Path):
    record = json.loads((bundle_site / "build-record.json").read_text(encoding="utf-8"))
    measured = [c for c in record["claims"] if "measured" in c.get("kinds", {}).values()]
    ours = {n for c in measured for n in c["numbers"] if n.startswith("ours.")}
    assert {"ours.bf16", "ours.copy", "ours.launch", "ours.h2d_pinned"} <= ours
    for c in measured:
        if any(n.startswith("ours.") for n in c["numbers"]):
            assert c["status"] == "holds", c
    published = [c for c in record["claims"] if "published" in c.get("kinds", {}).values()]
    assert len({c["rule"] for c in published}) >= 10
    assert all(c["status"] == "holds" for c in published)
