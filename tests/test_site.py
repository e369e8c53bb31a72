"""A strict build of the whole site, as the README's test command runs it."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from gpulesson.site import hooks as site_hooks
from gpulesson.site.provenance import BuildRecord

from .conftest import mkdocs_build

REPO = Path(__file__).resolve().parent.parent


def test_build_writes_the_build_record(built_site: Path):
    record = json.loads((built_site / "build-record.json").read_text())
    for key in (
        "gpulesson_version",
        "git_commit",
        "torch_version",
        "device_type",
        "device_name",
        "device_memory_bytes",
        "cpu_model",
        "built_at_utc",
    ):
        assert key in record
    assert record["device_type"] in ("cuda", "mps", "cpu")


def test_executed_pages_show_the_stamp_and_the_live_probe(built_site: Path):
    page = (built_site / "lessons" / "software-stack" / "index.html").read_text()
    assert 'class="gl-stamp"' in page
    assert "../../build-record.json" in page
    assert "Device picked (cuda, mps, cpu)" in page  # the probe ran at build


def test_built_site_loads_nothing_from_outside(built_site: Path):
    for html in built_site.rglob("*.html"):
        text = html.read_text()
        assert "fonts.googleapis.com" not in text, html
        assert "cdn.jsdelivr.net" not in text, html
        assert 'data-md-component="source"' not in text, html  # would call the GitHub API


def test_require_cuda_fails_without_a_cuda_device(tmp_path: Path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA; the failure path needs a machine without it")
    result = mkdocs_build(tmp_path / "site", GPULESSON_REQUIRE_DEVICE="cuda")
    assert result.returncode != 0
    assert "GPULESSON_REQUIRE_DEVICE=cuda but this build would run on" in result.stderr


def _record(device_type: str) -> BuildRecord:
    return BuildRecord(
        "0.1.0",
        "abc123",
        "2.13.0",
        None,
        device_type,
        "Test CPU",
        2**33,
        "Test CPU",
        4,
        "no_nvidia_gpu",
        "2026-01-01T00:00:00Z",
    )


@pytest.mark.parametrize(("device_type", "warned"), [("cpu", True), ("mps", True), ("cuda", False)])
def test_gpu_pages_warn_unless_built_on_cuda(monkeypatch, device_type, warned):
    monkeypatch.setitem(site_hooks._state, "record", _record(device_type))
    page = SimpleNamespace(url="lessons/x/", meta={"gpu_figures": True})
    markdown = '# Title\n\n```python exec="on" id="a"\nprint(1)\n```\n'
    out = site_hooks.on_page_markdown(markdown, page, None, None)
    assert out.startswith("# Title\n")
    assert 'class="gl-stamp"' in out
    assert ("GPU figures were not measured in this build" in out) is warned


def test_pages_without_executed_code_are_left_alone(monkeypatch):
    monkeypatch.setitem(site_hooks._state, "record", _record("cpu"))
    page = SimpleNamespace(url="x/", meta={"gpu_figures": True})
    markdown = "# Title\n\n```python\nprint(1)\n```\n"
    assert site_hooks.on_page_markdown(markdown, page, None, None) == markdown
