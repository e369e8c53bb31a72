"""The compute-budget lesson: its blocks run, every claim holds and can fail, the quiz reads them.

The tests read what the strict build's run of the blocks left (``tests/lesson_blocks.py``);
the GPU block finds no GPU and no reference bundle here, so its claim is "not checked". The
plan's hours, costs and memory are arithmetic on datasheets, an assumed MFU and example
prices: they are described from the facts, never called checked.
"""

from __future__ import annotations

import pytest

from gpulesson.memory.compute import plan_training, training_flops
from gpulesson.results import datasheets
from gpulesson.site import claims, facts, quizzes
from tests.conftest import REPO
from tests.lesson_blocks import page_fixture

STEM = "compute-budget"
PAGE = REPO / "docs" / "lessons" / f"{STEM}.md"


page = page_fixture(STEM)


def _described(printed: dict[str, str]) -> str:
    return "\n".join(out for block_id, out in printed.items() if block_id.startswith("describe-"))


def test_every_block_has_an_id_with_the_lesson_prefix_and_prints(page):
    printed = page.printed
    python = [b for b in printed if not b.startswith(("claim-", "describe-", "quiz-"))]
    assert len(python) >= 11
    assert all(block_id.startswith("compute-") for block_id in python)
    assert all(out.strip() for out in printed.values())
    assert "Traceback" not in "".join(printed.values())


def test_every_claim_holds_or_waits_for_a_gpu_and_could_fail(page):
    found = page.claims
    assert len(found) >= 10
    assert page.unmet_claims() == []
    unchecked = [c for c in found if c.status == claims.NOT_CHECKED]
    assert all(c.needs == "cuda" for c in unchecked)
    assert len(unchecked) <= 1  # only the GPU MFU claim, on a CPU build without a bundle
    assert [c.rule for c in found if not claims.can_fail(c)] == []
    assert [c.rule for c in found if c not in unchecked and c.flip_margin is None] == []


def test_the_teaching_claims_set_a_count_or_a_timing_against_an_independent_figure(page):
    found = page.claims
    teaching = [c for c in found if c.teaching]
    assert len(teaching) == 3  # 6ND against the counter, attention's term, step against matmul
    for c in teaching:  # each holds, or is told as not shown (checked above)
        assert facts.MEASURED in {c.kinds[n] for n in claims.fact_names(c.rule)}, c.rule
    (six_nd,) = [c for c in teaching if "six_nd_flops" in c.rule]
    assert six_nd.kinds["compute.step_six_nd_flops"] == facts.PREDICTED  # the formula


def test_the_plan_s_figures_are_arithmetic_so_no_claim_reads_them(page):
    found = page.claims
    plan = ("plan_", "left_", "memory_", "chinchilla_")
    read = [n for c in found for n in claims.fact_names(c.rule)]
    assert [n for n in read if n.removeprefix("compute.").startswith(plan)] == []
    kinds = {f.name: f.kind for f in facts.page_facts(f"lessons/{STEM}.md").values()}
    assert kinds["compute.plan_hours"] == facts.DERIVED
    assert kinds["compute.plan_mfu"] == facts.CONSTANT
    assert kinds["compute.plan_state_gb"] == facts.PREDICTED


def test_the_page_publishes_6nd_and_the_count_side_by_side(page):
    values = page.values()
    assert values["compute.step_six_nd_flops"] == 6 * 3_716_608 * 256
    ratio = values["compute.step_counted_flops"] / values["compute.step_six_nd_flops"]
    assert values["compute.step_ratio"] == pytest.approx(ratio)
    assert values["compute.linear_backward_over_forward"] == 2.0


def test_the_gpu_block_says_which_rows_need_a_gpu(page):
    printed = page.printed
    assert "need a CUDA GPU" in printed["compute-mfu-gpu"]


def test_the_plan_table_labels_the_rates_as_examples(page):
    printed = page.printed
    table = printed["compute-plan"]
    assert "example rate ($/GPU-hour)" in table and "not quotes" in table
    assert "| no example rate | — |" in table  # the H100 has none, so no invented cost


def test_the_quiz_asks_for_the_hours_the_page_computed(page):
    values = page.values()
    written = quizzes.questions(STEM)
    filled = quizzes.page_questions(STEM, values)
    (question,) = [q for q, w in zip(filled, written, strict=True) if w.facts]
    right = next(o.text for o in question.options if o.correct)
    plan = plan_training(training_flops(7e9, 1.4e11), gpu="a100-80gb", gpus=8, mfu=0.4)
    assert right == f"About {quizzes_about(plan.hours)} hours"
    # the prompt states the run's inputs: they are the page's
    assert "5.88 × 10²¹" in question.prompt and plan.flops.train_flops == 5.88e21
    assert "312 TFLOP/s" in question.prompt
    assert datasheets.get("a100-80gb").dense_flop_per_s("bf16") == 312e12


def quizzes_about(x: float) -> str:
    from gpulesson.course.common import about

    return about(x)


def test_the_t4_option_shows_how_little_memory_zero3_leaves_each_card(page):
    printed, found, values = page.printed, page.claims, page.values()
    t4 = datasheets.get("t4")
    assert values["compute.plan_state_gb"] == pytest.approx(16 * 7e9 / 1e9)
    assert values["compute.plan_state_per_gpu_gb"] == pytest.approx(16 * 7e9 / 8 / 1e9)
    assert values["compute.left_t4_gb"] == pytest.approx((t4.memory_bytes - 16 * 7e9 / 8) / 1e9)
    assert "| NVIDIA T4 |" in printed["compute-plan-memory"]
    described = _described(printed)
    assert "barely fits" in described
    assert f"leaving {values['compute.left_t4_gb']:.1f} GB" in described
    assert not [c for c in found if "barely fits" in c.text]  # described, not checked


def test_the_cost_sentence_says_it_rests_on_the_example_rates_and_one_mfu(page):
    printed, found = page.printed, page.claims
    (sentence,) = [s for s in _described(printed).splitlines() if "times the cheapest" in s]
    assert "costs about the same everywhere" not in sentence
    assert "one assumed MFU" in sentence and "example rates" in sentence
    assert not [c for c in found if "times the cheapest" in c.text]


def test_no_cpu_share_exceeds_the_share_of_the_measured_matmul(page):
    printed, found, values = page.printed, page.claims, page.values()
    assert values["compute.cpu_top_share"] < 1
    step_over_matmul = values["compute.cpu_step_gflops"] / values["compute.cpu_matmul_gflops"]
    assert values["compute.cpu_top_share"] == pytest.approx(step_over_matmul)
    assert "The table leaves out any peak model below the matmul rate" in _described(printed)
    (made,) = [c for c in found if c.rule == "compute.cpu_step_gflops < compute.cpu_matmul_gflops"]
    assert made.status == claims.HOLDS
