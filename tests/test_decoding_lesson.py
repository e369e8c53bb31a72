"""The decoding lesson: its blocks run, its claims hold and can fail, its quiz reads its numbers.

The tests read what the strict build's run of the blocks left, the CPU decode sweep included
(``tests/lesson_blocks.py``: each block's Markdown, the claims, the facts). Claims about GPU
figures must be "not checked" on this CPU build without a reference bundle; every other
claim must hold and be able to fail. The datasheet bounds, cache sizes and reservations are
arithmetic: described, not checked.
"""

from __future__ import annotations

import re

import pytest

from gpulesson.site import claims, facts, quizzes
from gpulesson.timing.decode import plan_for
from tests.conftest import REPO
from tests.lesson_blocks import page_fixture

STEM = "decoding"


page = page_fixture(STEM)


def test_every_block_has_a_lesson_id_and_prints_something(page):
    printed = page.printed
    python = [b for b in printed if not b.startswith(("claim-", "describe-", "quiz-"))]
    assert len(python) >= 9
    assert all(block_id.startswith("decoding-") for block_id in python)
    assert all(out.strip() for out in printed.values())


def test_cpu_claims_hold_and_could_fail_and_gpu_claims_wait_for_a_gpu(page):
    made = page.claims
    cpu = [c for c in made if c.needs is None]
    gpu = [c for c in made if c.needs is not None]
    assert len(cpu) >= 4 and len(gpu) >= 2
    assert page.unmet_claims() == []
    assert [c.rule for c in cpu if not claims.can_fail(c)] == []
    assert [c.rule for c in cpu if c.flip_margin is None] == []
    assert {c.status for c in gpu} <= {claims.HOLDS, claims.NOT_CHECKED}


def test_the_teaching_claims_rest_on_the_measured_sweep(page):
    made, values = page.claims, page.facts
    teaching = {c.rule: c for c in made if c.teaching}
    assert set(teaching) == {
        "decoding.b1_intensity < decoding.ridge",
        "decoding.gain > 2",
        "decoding.max_share <= 1",  # the roofline is a ceiling: a busy machine can hide it
    }
    assert values["decoding.max_share"].kind == facts.MEASURED
    # batch 1's intensity is the model's arithmetic; the ridge is this machine's measurement
    assert values["decoding.b1_intensity"].kind == facts.PREDICTED
    assert values["decoding.ridge"].kind == facts.MEASURED
    assert values["decoding.batch_ratio"].kind == facts.DERIVED


def test_the_arithmetic_is_described_not_checked(page):
    printed, made, values = page.printed, page.claims, page.facts
    read = {n for c in made for n in claims.fact_names(c.rule)}
    arithmetic = ("mla_groups", "overtake", "budget_gqa", "reserved", "h100_", "kv_share")
    assert [n for n in read if any(a in n for a in arithmetic)] == []
    assert values["decoding.mla_groups"].value == 2.25  # DeepSeek-V2's figure, from its sizes
    assert values["decoding.budget_gqa_bytes"].value == values["decoding.formula_gqa_bytes"].value
    described = "\n".join(v for k, v in printed.items() if k.startswith("describe-"))
    assert f"exactly {values['decoding.formula_gqa_gib'].value:.0f} GiB" in described
    assert f"{values['decoding.h100_fp16_bound'].value:.0f} tokens/s" in described


def test_without_a_gpu_the_page_says_which_rows_need_one(page, monkeypatch):
    printed = page.printed
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine measures the GPU rows itself")
    out = printed["decoding-gpu"]
    assert "GPU rows not measured on this build" in out
    assert f"batches {', '.join(str(b) for b in plan_for('cuda').batches)}" in out


def test_the_measured_table_is_this_build_s_sweep(page):
    printed, values = page.printed, page.facts
    out = printed["decoding-measure"]
    for batch in plan_for("cpu").batches:
        assert re.search(rf"^\| {batch} \| ", out, re.M), batch
    assert f"{values['decoding.bandwidth_gbs'].value:,.1f} GB/s" in out


def test_the_quiz_predicts_the_bound_the_page_computed(page, monkeypatch):
    monkeypatch.chdir(REPO)
    values = page.facts
    bound = (
        values["decoding.bandwidth_gbs"].value * 1e9 / (values["decoding.weight_mb"].value * 1e6)
    )
    (question,) = [
        q
        for q, w in zip(quizzes.page_questions(STEM), quizzes.questions(STEM), strict=True)
        if w.facts
    ]
    right = next(o.text for o in question.options if o.correct)
    shown = float(right.removeprefix("About ").removesuffix(" tokens/s").replace(",", ""))
    assert shown == pytest.approx(bound, rel=0.05)  # two significant figures
    wrong = [o.text for o in question.options if not o.correct]
    assert len(set(wrong)) == 3 and right not in wrong
