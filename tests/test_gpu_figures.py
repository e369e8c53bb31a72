"""GPU figures on a lesson: this build's GPU, else the newest reference bundle, labelled."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpulesson.results.compare import load_dir
from gpulesson.site import facts, gpu_figures

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "bundles"


@pytest.fixture
def results(tmp_path: Path) -> Path:
    (tmp_path / "reference").mkdir()
    for name in ("fixture_t4.json", "fixture_h100.json"):
        shutil.copy(FIXTURES / name, tmp_path / "reference" / name)
    return tmp_path


def test_a_cpu_build_takes_the_newest_gpu_reference_bundle(results: Path):
    ref = gpu_figures.reference(results, on_gpu=False)
    assert ref is not None
    newest = max(
        load_dir(results / "reference", "reference"),
        key=lambda s: s.bundle.provenance.created_utc,
    )
    assert ref.file == newest.file


def test_a_gpu_build_measures_for_itself(results: Path):
    assert gpu_figures.reference(results, on_gpu=True) is None


def test_no_bundle_means_no_reference(tmp_path: Path):
    assert gpu_figures.reference(tmp_path, on_gpu=False) is None


def test_the_stamp_names_the_bundles_device_date_and_software_not_this_build(results: Path):
    ref = gpu_figures.reference(results, on_gpu=False)
    stamp = gpu_figures.stamp_markdown(ref)
    p = ref.bundle.provenance
    assert "not from this build's machine" in stamp
    assert p.device_name in stamp and ref.date in stamp and f"torch {p.torch_version}" in stamp
    assert f"results/reference/{ref.file}" in stamp


def test_publish_makes_bundle_figures_page_facts_and_names_missing_ones(results: Path):
    ref = gpu_figures.reference(results, on_gpu=False)
    facts.reset()
    facts.begin_page("lessons/timing.md")
    name = ref.bundle.measurements[0].name
    values = gpu_figures.publish(ref, {"timing.gpu_figure": name})
    assert facts.value("timing.gpu_figure") == values["timing.gpu_figure"]
    assert facts.get("timing.gpu_figure").unit == ref.bundle.measurements[0].unit
    with pytest.raises(ValueError, match="has no measurement 'nope'"):
        gpu_figures.publish(ref, {"x": "nope"})
    facts.reset()


def test_the_kinds_line_names_what_a_page_shows_on_each_kind_of_build(results: Path, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert gpu_figures.kinds_line("cpu", empty).endswith("none measured on this build.")
    newest = gpu_figures.newest_gpu_bundle(results)
    with_bundle = gpu_figures.kinds_line("mps", results)
    assert with_bundle.endswith(f"results/reference/{newest.file}.")
    assert "none measured" not in with_bundle
    assert gpu_figures.kinds_line("cuda", empty).endswith("measured on this build's GPU.")
    html = gpu_figures.kinds_stamp_html("cpu", empty)
    assert html.startswith('<div class="gl-stamp gl-gpu-kinds" markdown="0">GPU figures on this')


def test_a_fact_keeps_its_kind_through_the_cache_and_the_worker():
    facts.reset()
    facts.begin_page("p.md")
    facts.begin_block("b")
    facts.publish("gpu.published", 794.5, "TFLOP/s", kind=facts.PUBLISHED)
    saved = [f.to_dict() for f in facts.end_block()]
    facts.reset()
    facts.begin_page("p.md")
    facts.replay(saved)
    assert facts.get("gpu.published").kind == "published"
    facts.reset()
    facts.restore(saved)
    assert facts.get("gpu.published", "p.md").kind == "published"
    with pytest.raises(ValueError, match="has kind 'typed': use one of measured, published"):
        facts.restore([{**saved[0], "kind": "typed"}])
