"""The first-GPU evidence script: its dry run on CPU, its package check and its summary."""

from __future__ import annotations

import datetime
import subprocess
from pathlib import Path

import pytest

from gpulesson.results import bundle
from tests.benchmarks import gpu_evidence

FIXTURE = Path(__file__).parent / "fixtures" / "bundles" / "fixture_h100.json"


def test_the_dry_run_prints_the_plan_and_runs_nothing(monkeypatch, capsys):
    def refuse(*args, **kwargs):
        raise AssertionError("the dry run started a process")

    monkeypatch.setattr(subprocess, "Popen", refuse)
    monkeypatch.setattr(subprocess, "run", refuse)
    assert gpu_evidence.main(["--dry-run"]) == 0
    out = capsys.readouterr().out
    for name, bound in (("probe", 15), ("measure", 240), ("build", 150), ("pytest-gpu", 60)):
        assert f"{name:<11} {bound:>4} s" in out
    assert "GPULESSON_REQUIRE_DEVICE=cuda" in out and "mkdocs build --strict -d" in out
    assert "measure --device cuda --out " in out and "results/reference/<device>-" in out
    assert "GPULESSON_MEASURED_BUNDLE=" in out and "instead of measuring again" in out
    assert "Bound on the whole run: 465 s (under 480 s)." in out
    assert "Python packages of pyproject.toml" in out


def test_the_step_bounds_sum_under_eight_minutes():
    steps = gpu_evidence.plan(Path("b.json"), Path("s"))
    assert sum(s.timeout_s for s in steps) < gpu_evidence.TOTAL_BOUND_S == 480
    assert [s.name for s in steps][1] == "measure"  # the bundle is saved before the rest
    assert "--quick" in gpu_evidence.plan(Path("b.json"), Path("s"), quick=True)[1].command


def test_the_package_check_reads_pyproject_and_names_what_is_missing():
    reqs = gpu_evidence.requirements()
    names = {gpu_evidence.distribution_name(r) for r in reqs}
    assert {"torch", "jsonschema", "mkdocs", "mkdocs-material", "pytest"} <= names
    assert gpu_evidence.missing_packages(reqs) == ()  # this environment has them all
    assert gpu_evidence.missing_packages(("not-a-real-dist-h7>=1",)) == ("not-a-real-dist-h7>=1",)


def test_a_step_that_runs_out_of_time_is_killed_and_reported(tmp_path):
    slow = gpu_evidence.Step(
        name="slow", command=("sleep", "30"), timeout_s=1, why="a test of the bound"
    )
    result = gpu_evidence.run_step(slow, cwd=tmp_path)
    assert result.timed_out and result.returncode is None and not result.ok
    assert result.seconds < 10
    fails = gpu_evidence.Step(name="fails", command=("false",), timeout_s=5, why="x")
    result = gpu_evidence.run_step(fails, cwd=tmp_path)
    assert result.returncode == 1 and not result.timed_out and not result.ok


def test_the_bundle_is_named_after_the_datasheet_id_and_never_overwrites(tmp_path):
    day = datetime.date(2026, 12, 1)
    first = gpu_evidence.bundle_path(gpu_evidence.device_slug("NVIDIA H200"), day, tmp_path)
    assert first.name == "h200-2026-12-01.json"
    first.write_text("{}")
    assert gpu_evidence.bundle_path("h200", day, tmp_path).name == "h200-2026-12-01-2.json"
    assert gpu_evidence.device_slug("NVIDIA GeForce RTX 2080 Ti") == "geforce-rtx-2080-ti"


def test_the_summary_from_the_fixture_bundle():
    fixture = bundle.load(FIXTURE)
    rows = {r.what: r.value for r in gpu_evidence.summary(fixture)}
    best = max(
        (m for m in fixture.measurements if m.dtype == "bf16" and m.unit == "FLOP/s"),
        key=lambda m: m.value,
    )
    assert rows["best bf16 matmul"].startswith(f"{best.value / 1e12:.1f} TFLOP/s")
    assert f"{best.value / 989.5e12:.0%} of the datasheet's dense 989.5" in rows["best bf16 matmul"]
    copy = fixture.measurement("memory_bandwidth").value
    assert (
        rows["copy bandwidth"] == f"{copy / 1e9:.0f} GB/s, {copy / 3.35e12:.0%} of the datasheet's"
    )
    eager = fixture.measurement("launch_overhead.eager").value
    assert rows["launch overhead, eager"] == f"{eager * 1e6:.2f} µs"
    pinned, pageable = (fixture.measurement(f"h2d.{k}").value for k in ("pinned", "pageable"))
    assert rows["pinned / pageable"] == f"{pinned / pageable:.2f}x"
    assert rows["CUDA context"] == f"{fixture.measurement('cuda_context').value / 2**20:.0f} MiB"
    gpt = [k for k in rows if k.startswith("peak memory ")]
    assert gpt and all("measured" in rows[k] for k in gpt)
    ratio = rows["measured / predicted memory_bandwidth"]
    assert ratio.startswith(f"{copy / 3.35e12:.2f} (upper bound")
    assert "measured / predicted matmul_peak.bf16" in rows
    assert not any("stopwatch" in k for k in rows)  # no model: no ratio


def test_figures_the_bundle_lacks_say_so():
    fixture = bundle.load(FIXTURE)
    kept = tuple(m for m in fixture.measurements if not m.name.startswith(("h2d", "cuda_")))
    thin = bundle.Bundle(provenance=fixture.provenance, measurements=kept)
    rows = {r.what: r.value for r in gpu_evidence.summary(thin)}
    assert rows["host-to-device, pinned"] == gpu_evidence.NOT_IN_BUNDLE
    assert rows["pinned / pageable"] == gpu_evidence.NOT_IN_BUNDLE
    assert rows["CUDA context"] == gpu_evidence.NOT_IN_BUNDLE
    text = gpu_evidence.summary_text(gpu_evidence.summary(thin))
    assert "not in bundle" in text


@pytest.mark.parametrize("name", ["NVIDIA H100 80GB HBM3", "Tesla T4"])
def test_device_slugs_are_datasheet_ids(name):
    from gpulesson.results import datasheets

    assert gpu_evidence.device_slug(name) in datasheets.ids()


def test_a_whole_run_goes_on_after_failures_and_writes_one_log(monkeypatch, tmp_path, capsys):
    saved = tmp_path / "h100-sxm-2026-12-01.json"
    ran = []

    def fake_run(step, cwd=None):
        ran.append(step.name)
        if step.name == "measure":
            saved.write_text(FIXTURE.read_text())  # the bundle the suite would write
        failed = step.name == "build"
        out = '{"devices": [{"name": "NVIDIA H100 80GB HBM3"}]}' if step.name == "probe" else ""
        return gpu_evidence.StepResult(
            name=step.name, returncode=1 if failed else 0, seconds=0.1, timed_out=False, output=out
        )

    monkeypatch.setattr(gpu_evidence, "run_step", fake_run)
    monkeypatch.setattr(gpu_evidence, "bundle_path", lambda slug, day: saved)
    log = tmp_path / "run.log"
    assert gpu_evidence.main(["--log", str(log)]) == 1  # the build failed
    assert ran == ["probe", "measure", "build", "pytest-gpu"]  # it went on after the build
    out = capsys.readouterr().out
    assert "build       FAILED" in out and "pytest-gpu  ok" in out
    assert "measured / predicted memory_bandwidth" in out
    text = log.read_text()
    assert text.count("=== ") >= 9 and "=== build: " in text and "=== summary" in text
