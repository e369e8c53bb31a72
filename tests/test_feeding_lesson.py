"""The feeding lesson: its blocks run, its claims hold and can fail, its quiz reads its numbers.

The tests read what the strict build's run of the blocks left, the loader loop and the
torch.compile of the chain included (``tests/lesson_blocks.py``); the GPU blocks run here
again under a stubbed bundle or suite. Claims about GPU figures must be "not checked" on
this CPU build without a reference bundle; every other claim must be able to fail, and must
hold, except that a teaching claim about a timing may be "not shown on this build" (a shared
machine's bad moment), which the page then says.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from gpulesson.results import entries_feeding
from gpulesson.results.bundle import Bundle, load
from gpulesson.results.compare import Sourced
from gpulesson.results.measurements import single
from gpulesson.site import claims, facts, gpu_figures, quizzes
from gpulesson.timing.alignment import ShapeComparison, ShapeTiming, square_neighbours
from tests.conftest import REPO
from tests.lesson_blocks import exec_blocks, page_fixture, run_block, run_claims_after

STEM = "feeding"
FIXTURE = REPO / "tests" / "fixtures" / "bundles" / "fixture_h100.json"


page = page_fixture(STEM)


def test_every_block_has_a_lesson_id_and_prints_something(page):
    printed = page.printed
    python = [b for b in printed if not b.startswith(("claim-", "describe-", "quiz-"))]
    assert len(python) >= 8 and len(printed) >= 20
    assert all(block_id.startswith("feeding-") for block_id in python)
    assert [b for b, out in printed.items() if not out.strip()] == []


def test_cpu_claims_hold_and_could_fail_and_gpu_claims_wait_for_a_gpu(page):
    made = page.claims
    cpu = [c for c in made if c.needs is None]
    gpu = [c for c in made if c.needs is not None]
    assert len(cpu) >= 9 and len(gpu) >= 5
    # Only a teaching claim may be "not shown", and the page then says so where it stands.
    assert page.unmet_claims() == []
    assert [c.rule for c in cpu if c.flip_margin is None] == []  # every one can fail
    assert [c.rule for c in cpu if not claims.can_fail(c)] == []
    assert {c.status for c in gpu} <= {claims.HOLDS, claims.NOT_CHECKED}


def test_the_lesson_s_points_are_teaching_claims_on_measured_figures(page):
    made, values = page.claims, page.facts
    teaching = {c.rule for c in made if c.teaching}
    assert {
        "feeding.idle_w0 >= 0.25",
        "feeding.speedup_best >= 1.1",
        "feeding.per_op_over_launch < 10",
        "feeding.fusion_speedup >= 1.5",
    } <= teaching
    for c in made:
        if c.status != claims.NOT_CHECKED:
            read = {values[n].kind for n in claims.fact_names(c.rule)}
            assert read & {facts.MEASURED, facts.PUBLISHED}, c.rule
    # The chain's size is a setting, not a timing; the loop's ideal is arithmetic on the plan.
    assert values["feeding.ops_per_call"].kind == facts.CONSTANT
    assert values["feeding.ideal_speedup"].kind == facts.DERIVED
    assert values["feeding.ideal_speedup"].value == pytest.approx(
        (1 + values["feeding.step_share"].value) / values["feeding.step_share"].value
    )


def test_no_block_branches_on_a_claim_and_the_overhead_reads_interleaved_rounds(page):
    printed, values = page.printed, page.facts
    text = (REPO / "docs" / "lessons" / f"{STEM}.md").read_text(encoding="utf-8")
    assert "claim(" not in text and "gain_claim" not in text
    assert values["feeding.overhead_rounds"].value >= 5
    describe = next(out for out in printed.values() if "Timed back to back in" in out)
    assert f"{values['feeding.per_op_over_launch'].value:.1f} times the bare op" in describe


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine measures the GPU rows itself")
def test_without_a_gpu_the_page_says_which_rows_need_one(page):
    printed = page.printed
    for block_id in ("feeding-copies", "feeding-graphs", "feeding-align-gpu"):
        assert "These rows need a CUDA GPU" in printed[block_id], block_id
    assert "`h2d.pinned`" in printed["feeding-copies"]
    assert "`launch_overhead.cuda_graph`" in printed["feeding-graphs"]
    assert "This table needs a CUDA GPU" in printed["feeding-syncs"]
    assert "`x[mask]`" in printed["feeding-syncs"]


def test_the_tables_are_this_build_s_measurements(page):
    printed, values = page.printed, page.facts
    loader = printed["feeding-loader"]
    for label in (
        "0 workers (main process loads)",
        "1 worker, prefetch 2",
        "2 workers, prefetch 2, persistent",
    ):
        assert f"| {label} |" in loader
    assert f"| {values['feeding.best_per_s'].value:.3g} |" in loader
    fusion = printed["feeding-fusion"]
    assert f"| {values['feeding.eager_us'].value:.3g} |" in fusion
    assert f"after {values['feeding.breakeven_calls'].value:,.0f} calls" in fusion
    align = printed["feeding-align"]
    assert "| n=512 (aligned) |" in align and "| vocab 50,304 (aligned) |" in align


def test_the_quiz_predicts_the_calls_the_compile_needs_to_pay_off(page, monkeypatch):
    monkeypatch.chdir(REPO)
    values = page.facts
    breakeven = values["feeding.breakeven_calls"].value
    (question,) = [
        q
        for q, w in zip(quizzes.page_questions(STEM), quizzes.questions(STEM), strict=True)
        if w.facts
    ]
    right = next(o.text for o in question.options if o.correct)
    shown = float(right.removeprefix("About ").removesuffix(" calls").replace(",", ""))
    assert shown == pytest.approx(breakeven, rel=0.05)  # two significant figures
    wrong = [o.text for o in question.options if not o.correct]
    assert len(set(wrong)) == 3 and right not in wrong


def _fixture_with_feeding_rows() -> Bundle:
    """The H100 fixture bundle plus made-up rows of this lesson's entries (test data only)."""
    bundle = load(FIXTURE)
    timings = tuple(
        ShapeTiming(shape=s, samples_s=(t,) * 3)
        for s, t in zip(square_neighbours(4096), (2.0e-4, 1.4e-4, 2.1e-4), strict=True)
    )
    shapes = ShapeComparison(device="cuda", dtype="bf16", calls_per_sample=5, timings=timings)
    copies = [
        single(v, name=f"copy_call.{k}", entry="copy_call", unit="s", label=f"copy call, {k}")
        for k, v in (("pageable", 5e-3), ("pinned", 1e-5), ("copy", 1.3e-3))
    ]
    rows = (*bundle.measurements, *entries_feeding.shape_measurements(shapes, "n"), *copies)
    return dataclasses.replace(bundle, measurements=rows)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine measures the GPU rows itself")
def test_with_a_reference_bundle_the_gpu_rows_and_claims_come_from_it(monkeypatch):
    ref = Sourced(_fixture_with_feeding_rows(), "reference", FIXTURE.name)
    monkeypatch.setattr(gpu_figures, "reference", lambda *args, **kwargs: ref)
    monkeypatch.setattr(gpu_figures, "newest_gpu_bundle", lambda *args, **kwargs: ref)
    wanted = ("feeding-copies", "feeding-graphs", "feeding-align-gpu")
    facts.reset()
    facts.begin_page(f"lessons/{STEM}.md")
    printed, after = {}, {}
    try:
        for block_id, code in exec_blocks(STEM):
            if block_id in wanted:
                printed[block_id] = run_block(STEM, block_id, code)
                after[block_id] = run_claims_after(STEM, block_id)
        made = [c for c in claims.claims() if c.page == f"lessons/{STEM}.md"]
    finally:
        facts.reset()
    for block_id in wanted:
        assert "GPU figures from a reference result bundle" in printed[block_id], block_id
    assert "| n=4096 (aligned) | 4,096 x 4,096 x 4,096 |" in printed["feeding-align-gpu"]
    assert [c.status for c in made] == [claims.HOLDS] * 4  # copies 2, graphs 1, square 1
    (square,) = [c for c in made if "square" in c.rule]
    assert square.teaching and square.numbers["feeding.gpu_square_gain_bf16"] >= 1.1
    # The fixture has no vocabulary rows: that sentence waits, never shown with a blank.
    assert claims.WAITING in after["feeding-align-gpu"]


def test_a_cuda_build_shows_the_gpu_rows_and_syncs_the_suite_measured(monkeypatch):
    from gpulesson.results import entries_syncs
    from gpulesson.site import build_bundle
    from gpulesson.timing.syncs import PROBES, SyncCheck

    bundle = _fixture_with_feeding_rows()  # made-up rows stand in for this build's GPU
    checks = tuple(SyncCheck(p.name, p.hidden_sync, int(p.hidden_sync)) for p in PROBES)
    by_entry = {
        "host_copies": tuple(m for m in bundle.measurements if m.entry == "host_copies"),
        "copy_call": tuple(m for m in bundle.measurements if m.entry == "copy_call"),
        "launch_overhead": tuple(m for m in bundle.measurements if m.entry == "launch_overhead"),
        "syncs": tuple(entries_syncs.sync_measurements(checks)),
    }
    asked = []
    monkeypatch.setattr(gpu_figures, "build_has_gpu", lambda: True)
    monkeypatch.setattr(build_bundle, "applies", lambda entry, device: True, raising=False)
    monkeypatch.setattr(
        build_bundle,
        "measure",
        lambda entry, device: asked.append((entry, device)) or by_entry[entry],
    )
    wanted = ("feeding-copies", "feeding-syncs", "feeding-graphs")
    facts.reset()
    facts.begin_page(f"lessons/{STEM}.md")
    printed = {}
    try:
        for block_id, code in exec_blocks(STEM):
            if block_id in wanted:
                printed[block_id] = run_block(STEM, block_id, code)
                run_claims_after(STEM, block_id)
        made = [c for c in claims.claims() if c.page == f"lessons/{STEM}.md"]
    finally:
        facts.reset()
    assert asked == [
        ("host_copies", "cuda"),
        ("copy_call", "cuda"),
        ("syncs", "cuda"),
        ("launch_overhead", "cuda"),
    ]
    for block_id in wanted:
        assert "reference result bundle" not in printed[block_id], block_id
        assert "needs a CUDA GPU" not in printed[block_id], block_id
    assert "| copy call, pinned |" in printed["feeding-copies"]
    assert "| `x[mask]` | a synchronization | yes (1 warning) |" in printed["feeding-syncs"]
    assert "| `x.sum()` | stays on the device | no |" in printed["feeding-syncs"]
    assert [c.status for c in made] == [claims.HOLDS] * 4  # copies 2, syncs 1, graphs 1
