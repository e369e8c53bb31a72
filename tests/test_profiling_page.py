"""The profiling lesson, as the strict build ran it: claims hold, the quiz and trace work.

Reads what the build's run of the page's blocks left (``tests/lesson_blocks.py``):
the checked claims (every CPU claim holds and can fail; the GPU ones wait for a GPU or a
bundle), the predict-the-number question, and the trace the page offers for download. With
a reference bundle holding ``profile_step`` rows, the GPU block shows the bundle's figures
under its stamp and the GPU claims are checked against them.
"""

from __future__ import annotations

import base64
import functools
import gzip
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from gpulesson.course import common
from gpulesson.results.bundle import load, to_json
from gpulesson.results.entries_profiling import profile_measurements
from gpulesson.site import claims, content, facts, gpu_figures, quizzes
from gpulesson.timing.profile import (
    PROFILE_BATCH,
    PROFILE_CONFIG,
    REGIONS,
    GptStepProfile,
    OpStat,
    StepProfile,
)
from tests.conftest import REPO
from tests.lesson_blocks import exec_blocks, page_fixture, run_block, run_claims_after

STEM = "profiling"
PAGE = f"lessons/{STEM}.md"
FIXTURE = REPO / "tests" / "fixtures" / "bundles" / "fixture_h100.json"


page = page_fixture(STEM)


def test_every_block_has_an_id_with_the_lessons_prefix():
    assert all(bid.startswith("profiling-") for bid in dict(exec_blocks(STEM)))


def test_every_cpu_claim_holds_and_could_fail(page):
    found = page.claims
    cpu = [c for c in found if c.needs is None]
    assert len(cpu) >= 10
    assert [c.text for c in cpu if c.status != claims.HOLDS] == []
    assert [c.rule for c in cpu if not claims.can_fail(c)] == []


def test_the_timing_teaching_claims_read_medians_with_a_stated_factor(page):
    """Shares and ratios of one profiled step move on a busy machine: the lesson's points rest
    on the median of five profiles, with a factor wide enough that noise cannot flip them."""
    printed, found, published = page.printed, page.claims, page.facts
    teaching = {c.rule: c for c in found if c.teaching}
    shares = teaching[
        "profiling.median_matmul_share_pct > 3 * profiling.median_top_other_share_pct"
    ]
    ratio = teaching["profiling.median_backward_over_forward > 1.5"]
    for c in (shares, ratio):
        assert c.status == claims.HOLDS
        assert set(c.kinds.values()) >= {facts.MEASURED}
        assert c.flip_margin is not None and c.flip_margin > 0.05, (c.rule, c.flip_margin)
    assert published["profiling.repeats"].value == published["profiling.region_repeats"].value == 5
    assert published["profiling.layers"].kind == facts.CONSTANT
    assert published["profiling.adam_state_mib"].kind == facts.PREDICTED
    # the single step's leading row is described, not checked: it may differ between runs
    assert all("top_share_pct" not in c.rule for c in found)
    assert any(
        "the top row is `aten::" in text for block, text in printed.items() if "describe" in block
    )


def test_without_a_gpu_or_a_bundle_the_gpu_claims_are_not_checked(page):
    printed, found = page.printed, page.claims
    # The build read results/ as it is: the page's premise is that it holds no bundle.
    assert gpu_figures.newest_gpu_bundle() is None, "results/reference/ holds a GPU bundle"
    gpu = [c for c in found if c.needs == "cuda"]
    assert len(gpu) == 4 and all(c.status == claims.NOT_CHECKED for c in gpu)
    assert "measured, never predicted" in printed["profiling-gpu"]
    assert all(claims.to_markdown(c) == claims.WAITING for c in gpu)  # no blanks
    assert "recorded no snapshot" in printed["profiling-snapshot"]


def test_the_page_offers_its_trace_for_download(page):
    printed = page.printed
    out = printed["profiling-regions"]
    match = re.search(r'href="data:application/gzip;base64,([A-Za-z0-9+/=]+)"', out)
    assert match and 'download="profile-step.json.gz"' in out
    payload = base64.b64decode(match.group(1))
    assert len(payload) < 150_000
    names = {e.get("name") for e in json.loads(gzip.decompress(payload))["traceEvents"]}
    assert set(REGIONS) <= names


def test_the_quiz_asks_for_the_first_steps_allocation_the_page_measured(page, monkeypatch):
    published = page.facts
    monkeypatch.chdir(REPO)
    facts.reset()
    facts.begin_page(PAGE)
    facts.restore([f.to_dict() for f in published.values()])
    try:
        filled = quizzes.page_questions(STEM)
    finally:
        facts.reset()
        content.reset()
    question = next(q for q in filled if "first training step" in q.prompt)
    correct = next(o.text for o in question.options if o.correct)
    measured = published["profiling.first_optimizer_mib"].value
    assert correct == f"About {common.about(measured)} MiB"
    assert f"{published['profiling.parameters'].value:,}" in question.prompt


def _bundle_with_profile_rows(tmp_path: Path) -> Path:
    """A results folder whose newest reference bundle holds profile_step rows of a fast GPU."""
    rows = tuple(
        OpStat(
            name=name,
            kind=kind,
            on_device=kind == "kernel",
            calls=1,
            self_cpu_s=0.0 if kind == "kernel" else 0.002,
            total_cpu_s=0.0 if kind == "kernel" else 0.002,
            self_device_s=device_s,
            total_device_s=device_s,
            self_memory_bytes=0,
            total_memory_bytes=0,
        )
        for name, kind, device_s in (
            ("aten::mm", "op", 0.0006),
            ("sgemm", "kernel", 0.0006),
            ("aten::addmm", "op", 0.0003),
            ("sgemm_bias", "kernel", 0.0003),
            ("aten::add", "op", 0.0001),
            ("elementwise", "kernel", 0.0001),
        )
    )
    p = StepProfile(
        device="cuda",
        threads=8,
        wait=1,
        warmup=1,
        active=3,
        memory=False,
        ops=rows,
        step_samples_s=(0.004, 0.0041, 0.0042),
    )
    g = GptStepProfile(config=PROFILE_CONFIG, batch=PROFILE_BATCH, parameters=2_137_088, profile=p)
    base = load(FIXTURE)
    bundle = replace(base, measurements=(*base.measurements, *profile_measurements(g)))
    (tmp_path / "reference").mkdir()
    (tmp_path / "reference" / FIXTURE.name).write_text(to_json(bundle))
    return tmp_path


def test_a_cpu_build_shows_the_bundles_profile_rows_and_checks_the_gpu_claims(tmp_path):
    root = _bundle_with_profile_rows(tmp_path)
    blocks = dict(exec_blocks(STEM))
    facts.reset()
    facts.begin_page(PAGE)
    original = gpu_figures.reference
    gpu_figures.reference = functools.partial(original, root, on_gpu=False)
    try:
        facts.publish("profiling.step_ms", 150.0, "ms")  # the CPU step, from the ops block
        facts.publish("profiling.busy_share", 0.95, "share")
        out = run_block(STEM, "profiling-gpu", blocks["profiling-gpu"])
        run_claims_after(STEM, "profiling-gpu")
        ref = gpu_figures.reference()
        assert out.startswith(gpu_figures.stamp_markdown(ref))
        assert facts.value("profiling.gpu_step_s") == pytest.approx(0.0041)
        assert facts.value("profiling.gpu_busy_share") == pytest.approx(0.001 / 0.0123)
        gpu = [c for c in claims.claims() if c.needs == "cuda"]
        assert len(gpu) == 2 and all(c.status == claims.HOLDS for c in gpu)
        assert all(claims.can_fail(c) for c in gpu)
    finally:
        gpu_figures.reference = original
        facts.reset()
