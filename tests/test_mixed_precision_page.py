"""The mixed-precision lesson: its blocks run, its claims hold and can fail, its quiz reads them.

The page's executed blocks run in order as the build runs them (same page, same facts);
then every checked claim must hold on this CPU (GPU claims are not checked here, and
must say so), every claim must be able to fail, and the predict-the-number question must
offer the figure the page measured.
"""

from __future__ import annotations

import pytest
import torch

from gpulesson.site import claims, content, facts, quiz_values, quizzes
from tests.conftest import REPO
from tests.lesson_blocks import exec_blocks, run_page

STEM = "mixed-precision"


@pytest.fixture(scope="module")
def page() -> dict[str, object]:
    """Run the page once; keep what each block printed, the facts and the claims."""
    run = run_page(STEM)
    found = {"printed": run.printed, "facts": run.values(), "claims": claims.claims()}
    facts.reset()
    content.reset()
    return found


def test_every_block_has_the_lesson_prefix_and_a_unique_id():
    ids = [block_id for block_id, _ in exec_blocks(STEM)]
    assert ids and all(i.startswith("mp-") for i in ids)
    assert len(ids) == len(set(ids))


def test_every_block_prints_something(page):
    empty = [block_id for block_id, text in page["printed"].items() if not text.strip()]
    assert not empty


def test_claims_hold_on_this_cpu_and_can_fail(page):
    made = page["claims"]
    assert len(made) >= 12
    for c in made:
        assert claims.can_fail(c), c.rule
        if c.needs is None:
            assert c.status == claims.HOLDS, (c.text, c.rule, c.numbers)
        elif not torch.cuda.is_available():
            assert c.status in (claims.NOT_CHECKED, claims.HOLDS), c.text


def test_every_check_reads_a_measured_or_published_fact(page):
    for c in page["claims"]:
        if c.status == claims.NOT_CHECKED:
            continue
        kinds = {c.kinds[name] for name in claims.fact_names(c.rule)}
        assert kinds & set(claims.INDEPENDENT), (c.rule, c.kinds)
        assert c.flip_margin is not None, c.rule


def test_the_formats_limits_are_described_not_checked(page):
    """torch.finfo's limits and the probes' casts follow from the formats: rendered, no mark."""
    rules = " ".join(c.rule for c in page["claims"])
    for name in ("mp.fp16_max", "mp.bf16_eps", "mp.cast_", "mp.grad_lost", "mp.hw_", "mp.amp_bpp"):
        assert name not in rules, name
    f = page["facts"]
    assert f["mp.bf16_eps_over_fp16"] == 8 and 0.99 < f["mp.bf16_max_of_fp32"] < 1
    assert f["mp.amp_bpp"] == f["mp.fp32_bpp"] == 16
    described = [text for block, text in page["printed"].items() if block.startswith("describe-")]
    assert any("65,504" in text and "99.6% of fp32's" in text for text in described)
    assert any("16 bytes per parameter" in text for text in described)


def test_the_teaching_claims_rest_on_this_builds_runs(page):
    teaching = {c.rule for c in page["claims"] if c.teaching}
    assert "mp.trace_lower > 0 and mp.trace_fp32 > 0" in teaching
    assert "mp.err_tf32_over_fp32 > 100 and mp.err_tf32_emulated < mp.err_bf16" in teaching
    assert any(rule.startswith("mp.act_est_ratio < mp.act_meas_ratio") for rule in teaching)
    assert any(rule.startswith("mp.bug_skipped == mp.bug_steps") for rule in teaching)
    assert all(c.status == claims.HOLDS for c in page["claims"] if c.teaching)


def test_the_trace_agrees_with_pytorchs_op_reference(page):
    f = page["facts"]
    assert f["mp.trace_disagreements"] == 0 and f["mp.trace_checked"] >= 10
    assert "`linear`" in page["printed"]["mp-trace"]
    assert "`cross_entropy`" in page["printed"]["mp-trace"]


def test_gpu_rows_say_they_need_a_gpu_on_a_cpu_build(page):
    if torch.cuda.is_available():
        pytest.skip("a CUDA build measures these rows")
    for block_id in ("mp-gpu-speed", "mp-gpu-accuracy", "mp-gpu-steps"):
        text = page["printed"][block_id]
        assert "needs a GPU" in text or "reference result bundle" in text, block_id


def test_the_quiz_offers_the_measured_activation_ratio(page, monkeypatch):
    monkeypatch.chdir(REPO)
    content.reset()  # read this checkout's docs/, not a content cache another test left
    written = quizzes.questions(STEM)
    content.reset()
    templated = [q for q in written if q.facts]
    assert templated, "the quiz needs a predict-the-number question"
    for question in templated:
        values = quiz_values.activation_ratio_readings(
            {n: page["facts"][n] for n in question.facts}
        )
        right = next(o.text for o in question.options if o.correct)
        assert "{measured}" in right or "{value}" in right
        assert values["measured"] == f"{page['facts']['mp.act_meas_ratio']:.2f}"
