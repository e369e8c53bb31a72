"""The memory and error lessons: their checked claims hold, their quizzes read the page's numbers.

Each test reads what the strict build's run of a lesson's blocks left
(``tests/lesson_blocks.py``; the page's facts restored in this process): the claims (every
one must hold on this CPU and be able to fail) and the quiz, whose predict-the-number
question must offer the figure the page computed.
"""

from __future__ import annotations

import re

import pytest

from gpulesson.course import budget, common, fix_ladder, oom
from gpulesson.errors.diagnose import diagnose
from gpulesson.errors.fix_ladder import checkpointing_leftover
from gpulesson.errors.numbers import format_bytes
from gpulesson.memory.budget import estimate
from gpulesson.memory.capacity import max_params
from gpulesson.site import claims, content, facts, quizzes
from gpulesson.site.error_examples import message
from gpulesson.units import GB, GIB
from tests.conftest import REPO
from tests.lesson_blocks import built_page, run_claims_after

STEMS = ("memory", "budget", "capacity", "oom", "fix-ladder", "cuda-errors")


@pytest.fixture(autouse=True)
def _course(monkeypatch):
    """Read the course's docs/ (example messages, quizzes) and start from no facts."""
    monkeypatch.chdir(REPO)
    facts.reset()
    yield
    facts.reset()
    content.reset()


def right_answer(question: quizzes.Question) -> str:
    return next(o.text for o in question.options if o.correct)


def templated(stem: str) -> list[quizzes.Question]:
    """The lesson's predict-the-number questions, filled from the facts the page published."""
    written = quizzes.questions(stem)
    filled = quizzes.page_questions(stem)
    return [q for q, w in zip(filled, written, strict=True) if w.facts]


# --- the claims -------------------------------------------------------------------------

# memory: the real AdamW step's claim and the measured steps' (also read by
# tests/test_memory_lessons_claims.py). budget, capacity and fix-ladder price with a
# calculator: what they check is what a real step or a measurement bears out.
# oom and cuda-errors read constructed example messages, whose numbers are constants:
# their one check each is on an error this build raises itself.
MINIMUM_CLAIMS = {
    "memory": 1,
    "budget": 2,
    "capacity": 2,
    "oom": 1,  # the host-RAM message this build raises; the examples are described
    "fix-ladder": 2,
    "cuda-errors": 1,  # the CPU's IndexError; the example messages are described
}


@pytest.mark.parametrize("stem", STEMS)
def test_every_claim_holds_on_this_build_and_could_fail(built_site, stem):
    page = built_page(built_site, stem).claims
    assert len(page) >= MINIMUM_CLAIMS[stem]
    assert [c.text for c in page if c.status != claims.HOLDS] == []
    assert [c.rule for c in page if not claims.can_fail(c)] == []
    assert all(c.numbers for c in page)


def test_a_changed_number_under_a_claim_shows_the_warning(built_site):
    printed = built_page(built_site, "fix-ladder").printed
    assert "do not bear" not in "".join(printed.values())
    # As if autocast had kept less than the estimate: the page's own teaching claim says so.
    facts.publish("ladder.amp_measured_ratio", 0.4, "", kind=facts.MEASURED)
    shown = run_claims_after("fix-ladder", "ladder-amp-measured")[0]  # the claim, then prose
    assert shown.startswith('!!! warning "Not shown on this build')
    assert "kept 0.40 of the fp32 activation bytes" in shown


# --- the quizzes ------------------------------------------------------------------------


def test_memory_quiz_asks_for_the_amp_bill_the_page_printed(built_site):
    printed = built_page(built_site, "memory").printed
    (question,) = templated("memory")
    bill = common.figure(estimate(7e9, preset="amp").total_bytes / GB)
    assert right_answer(question) == f"{bill} GB" == "112 GB"
    assert f"**peak of the step (optimizer step)** | **{bill}.000**" in printed[
        "memory-adam-ledger"
    ].replace(",", "")


def test_budget_quiz_offers_the_norm_and_the_gqa_cache(built_site):
    built_page(built_site, "budget")
    norm, kv = templated("budget")
    assert right_answer(norm) == "112 GB"
    assert {o.text for o in norm.options} == {"56 GB", "84 GB", "98 GB", "112 GB"}
    assert right_answer(kv) == "1 GiB"  # 2 x 32 x 8 x 128 x 8192 x 2 bytes
    assert "4 GiB" in {o.text for o in kv.options}  # the same model with MHA


def test_capacity_quiz_reads_the_card_as_gib(built_site):
    built_page(built_site, "capacity")
    (question,) = templated("capacity")
    right = common.figure(max_params(24 * GIB, "amp") / 1e9)
    decimal = common.figure(max_params(24 * GB, "amp") / 1e9)
    assert right_answer(question) == f"{right} billion"
    assert f"{decimal} billion" in {o.text for o in question.options} and right != decimal


def test_oom_quiz_quotes_the_torch_1x_example_and_asks_for_its_cache(built_site):
    built_page(built_site, "oom")
    (question,) = templated("oom")
    text = message("torch_1x")
    for number in re.findall(r"\d+\.\d+ [MG]iB", text):
        assert number in question.prompt
    cache = diagnose(text).reserved_unallocated_bytes
    assert right_answer(question) == format_bytes(cache)
    assert "10.58 GiB" in {o.text for o in question.options}  # reserved, misread as cache


def test_fix_ladder_quiz_asks_for_checkpointings_saving(built_site):
    built_page(built_site, "fix-ladder")
    (question,) = templated("fix-ladder")
    saving = 100 * checkpointing_leftover().checkpointing_saving_fraction
    assert right_answer(question) == f"About {saving:.0f}%"


def test_cuda_errors_quiz_decodes_the_driver_version_in_the_message(built_site):
    built_page(built_site, "cuda-errors")
    (question,) = templated("cuda-errors")
    code = re.search(r"found version (\d+)", message("driver_too_old")).group(1)
    assert code in question.prompt
    assert (
        right_answer(question)
        == f"It supports CUDA up to {diagnose(message('driver_too_old')).driver_cuda_version}."
    )


def test_a_quiz_follows_the_facts_it_is_given():
    """The answer is the page's number: other facts give another answer."""
    facts_now = {"budget.kv_gqa_gib": 2.0, "budget.kv_mha_gib": 8.0}
    filled = quizzes.page_questions("budget", {**facts_now, **_budget_bills()})
    assert right_answer(filled[1]) == "2 GiB"


def _budget_bills() -> dict[str, float]:
    return {
        "budget.amp_7b_gb": 112.0,
        "budget.fp16_fp32_grads_7b_gb": 98.0,
        "budget.bf16_7b_gb": 84.0,
        "budget.bf16_pure_7b_gb": 56.0,
    }


# --- the value functions ------------------------------------------------------------------


def test_named_figures_keep_the_page_numbers_under_their_last_names():
    assert common.named_figures({"capacity.gib24_amp_b": 1.6106}) == {"gib24_amp_b": "1.61"}
    with pytest.raises(ValueError, match="share the name"):
        common.named_figures({"a.x": 1.0, "b.x": 2.0})
    with pytest.raises(ValueError, match="not a positive number"):
        common.named_figures({"a.x": float("nan")})


def test_kv_cache_sizes_refuse_facts_that_make_two_options_alike():
    assert budget.kv_cache_sizes({"budget.kv_gqa_gib": 1.0, "budget.kv_mha_gib": 8.0}) == {
        "gqa": "1",
        "mha": "8",
        "k_only": "0.5",
        "fp32": "2",
    }
    with pytest.raises(ValueError, match="read alike"):
        budget.kv_cache_sizes({"budget.kv_gqa_gib": 1.0, "budget.kv_mha_gib": 1.0})


def test_torch1x_cache_names_missing_facts():
    with pytest.raises(ValueError, match="oom.torch1x_free_bytes"):
        oom.torch1x_cache({"oom.torch1x_requested_bytes": 1})


def test_checkpointing_savings_expectation_is_above_the_real_saving():
    values = fix_ladder.checkpointing_savings(
        {
            "ladder.ckpt_saving_pct": 30.0,
            "ladder.both_saving_pct": 70.0,
            "ladder.run_gb": 10.0,
            "ladder.run_persistent_gb": 2.0,
        }
    )
    assert values == {"ckpt": "30", "both": "70", "everything": "80"}
