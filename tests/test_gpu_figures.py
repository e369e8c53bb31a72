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
