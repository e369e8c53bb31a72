"""Every bundle under results/ is valid; the results and compare pages render from bundles."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from gpulesson.results.compare import duplicate_key, load_dir
from gpulesson.site import results_pages

from .conftest import REPO

FIXTURES = Path(__file__).parent / "fixtures" / "bundles"
RESULTS = REPO / "results"


# --- the repository's results/ ----------------------------------------------------------


def _repo_bundles():
    return results_pages.load_results(RESULTS)  # validates each one, or raises naming it


def test_results_holds_bundles_only_plus_its_readme():
    """Plain files only: a link (to /dev/zero, say), a FIFO or a device is refused too."""
    for path in RESULTS.rglob("*"):
        rel = path.relative_to(RESULTS)
        if path.is_dir() and not path.is_symlink():
            assert rel.parts[0] in ("reference", "community"), f"results/ holds bundles only: {rel}"
            continue
        assert path.is_file() and not path.is_symlink(), f"results/{rel} is not a plain file"
        assert rel == Path("README.md") or (
            rel.parts[0] in ("reference", "community") and rel.suffix == ".json"
        ), f"results/ holds bundles only: {rel}"


def test_every_bundle_in_results_is_valid_complete_and_not_a_fixture():
    for sourced in _repo_bundles():
        p = sourced.bundle.provenance
        assert not p.device_name.startswith("FIXTURE"), sourced.file
        assert p.gpulesson_commit, f"{sourced.file}: no gpulesson commit recorded"
        if p.device_type == "cuda":
            for field in ("driver_version", "cuda_version", "compute_capability"):
                assert getattr(p, field), f"{sourced.file}: provenance.{field} is missing"
        assert sourced.bundle.measurements


def test_no_two_bundles_share_device_torch_and_day():
    seen: dict[tuple[str, str, str], str] = {}
    for sourced in _repo_bundles():
        key = duplicate_key(sourced)
        assert key not in seen, f"{sourced.file} repeats {seen[key]}: {key}"
        seen[key] = sourced.file


def test_the_readme_points_to_the_schema_and_says_how_to_contribute():
    text = (RESULTS / "README.md").read_text()
    assert "gpulesson/results/bundle.schema.json" in text
    assert "results/community/" in text and "pull request" in text
    assert (REPO / "gpulesson" / "results" / "bundle.schema.json").is_file()


def test_the_schema_and_datasheets_ship_in_the_wheel():
    text = (REPO / "pyproject.toml").read_text()
    assert re.search(r'"gpulesson\.results" = \[[^\]]*"\*\.json"', text)


# --- the pages, rendered from fixture folders -------------------------------------------------


@pytest.fixture
def results_dir(tmp_path: Path) -> Path:
    (tmp_path / "reference").mkdir()
    (tmp_path / "community").mkdir()
    shutil.copy(FIXTURES / "fixture_h100.json", tmp_path / "reference")
    shutil.copy(FIXTURES / "fixture_t4.json", tmp_path / "community")
    return tmp_path


def test_results_page_tells_reference_and_community_apart(results_dir):
    text = results_pages.results_markdown(results_dir)
    assert "1 reference, 1 community" in text
    h100 = next(line for line in text.splitlines() if line.startswith("| [1] |"))
    t4 = next(line for line in text.splitlines() if line.startswith("| [2] |"))
    assert "H100" in h100 and "| reference |" in h100 and "0.0.0+fixture" in h100
    assert "T4" in t4 and "| community |" in t4
    bf16 = next(line for line in text.splitlines() if line.startswith("| best bf16 matmul"))
    assert bf16 == "| best bf16 matmul (shape search) | TFLOP/s | 700 | 71% | 20.0 | — |"
    assert "No GPU bundle" not in text


def test_results_page_says_plainly_when_there_is_no_gpu_bundle(tmp_path):
    assert "No result bundles yet" in results_pages.results_markdown(tmp_path)
    cpu = json.loads((FIXTURES / "fixture_h100.json").read_text())
    cpu["provenance"].update(device_type="cpu", device_name="FIXTURE CPU", datasheet_id=None)
    cpu["measurements"] = [m for m in cpu["measurements"] if m["dtype"] in (None, "fp32")]
    (tmp_path / "reference").mkdir()
    (tmp_path / "reference" / "cpu.json").write_text(json.dumps(cpu))
    text = results_pages.results_markdown(tmp_path)
    assert "No GPU bundle yet" in text and "These are CPU figures, not GPU figures." in text


def test_compare_page_embeds_the_reference_figures_for_the_browser(results_dir):
    html = results_pages.compare_html(results_dir)
    assert 'type="file"' in html and "nothing is uploaded" in html
    payload = re.search(r'<script type="application/json" id="gl-compare-data">(.*)</script>', html)
    data = json.loads(payload.group(1))
    [ref] = data["references"]  # reference bundles only, not community ones
    assert ref["device"].endswith("NVIDIA H100 80GB HBM3") and ref["datasheet_id"] == "h100-sxm"
    assert ref["measurements"]["matmul_peak.bf16"]["value"] == pytest.approx(700e12)
    assert data["datasheets"]["h100-sxm"]["peaks_flop_per_s"]["bf16"] == pytest.approx(989.5e12)
    assert data["flops_tolerance"] == 1.05 and data["schema_versions"] == [1, 2]
    assert "</script>" not in payload.group(1)


def test_the_pages_read_no_fixture(results_dir):
    assert results_pages.RESULTS_DIR == RESULTS
    assert all(not s.bundle.provenance.device_name.startswith("FIXTURE") for s in _repo_bundles())
    assert load_dir(results_dir / "reference", "reference")  # fixtures only where a test puts them
