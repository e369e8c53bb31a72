"""Checked claims: a sentence is checked against the page's facts, and a failure shows."""

from __future__ import annotations

import pytest

from gpulesson.site import claims, facts


@pytest.fixture(autouse=True)
def _page():
    facts.reset()
    claims.reset()
    facts.begin_page("lessons/roofline.md")
    facts.begin_block("roofline-table")
    facts.publish("roofline.bandwidth_roof", 32.0, "GB/s")
    facts.publish("roofline.best_add_rate", 51.0, "GB/s")
    facts.end_block()
    yield
    facts.reset()
    claims.reset()


def test_a_claim_that_holds_renders_its_sentence_with_the_numbers_filled_in():
    out = claims.claim(
        "The add reaches {roofline.best_add_rate:.0f} GB/s.", "roofline.best_add_rate > 10"
    )
    assert out.startswith("The add reaches 51 GB/s.")
    assert "checked on this build" in out
    assert claims.claims()[0].status == claims.HOLDS


def test_a_claim_that_fails_shows_a_warning_admonition_with_its_numbers():
    out = claims.claim(
        "The bandwidth roof is the highest add rate measured on this page.",
        "roofline.bandwidth_roof >= roofline.best_add_rate",
    )
    assert out.startswith(
        '!!! warning "On this build\'s machine, the numbers do not bear this out"'
    )
    assert "roofline.bandwidth_roof = 32 GB/s" in out and "roofline.best_add_rate = 51 GB/s" in out
    recorded = claims.claims()[0]
    assert recorded.status == claims.FAILS
    assert recorded.page == "lessons/roofline.md"
    assert recorded.numbers == {"roofline.bandwidth_roof": 32.0, "roofline.best_add_rate": 51.0}


def test_changing_a_number_under_a_claim_flips_its_verdict():
    holds = claims.evaluate("x", "roofline.best_add_rate >= roofline.bandwidth_roof")
    assert holds.status == claims.HOLDS
    facts.publish("roofline.best_add_rate", 10.0, "GB/s")
    assert claims.evaluate("x", "roofline.best_add_rate >= roofline.bandwidth_roof").status == (
        claims.FAILS
    )


def test_a_gpu_claim_without_gpu_facts_is_not_checked_and_says_so():
    out = claims.claim("The GPU wins by {bench.gpu_x:.0f}x.", "bench.gpu_x >= 10", needs="cuda")
    assert "not checked on this build" in out and "CUDA GPU" in out
    assert "The GPU wins by –x." in out
    assert claims.claims()[0].status == claims.NOT_CHECKED


def test_a_claim_on_a_missing_fact_fails_loudly_naming_what_exists():
    with pytest.raises(ValueError, match="roofline.nope.*published: roofline.bandwidth_roof"):
        claims.claim("x", "roofline.nope > 1")


@pytest.mark.parametrize(
    "rule",
    [
        "__import__('os')",
        "roofline.best_add_rate.__class__",
        "open('x')",
        "[1][0] > 0",
        "'a' < 'b'",
    ],
)
def test_rules_cannot_run_code(rule):
    with pytest.raises(ValueError):
        claims.check_rule(rule, {"roofline.best_add_rate": 1.0})


def test_a_rule_naming_no_fact_is_refused_because_it_cannot_fail():
    with pytest.raises(ValueError, match="names no fact"):
        claims.claim("Two is more than one.", "2 > 1")


def test_can_fail_finds_tautologies_and_accepts_real_rules():
    real = claims.evaluate("x", "roofline.best_add_rate > 2 * roofline.bandwidth_roof")
    assert claims.can_fail(real)
    tautology = claims.evaluate("x", "roofline.best_add_rate > 0 or roofline.best_add_rate <= 0")
    assert not claims.can_fail(tautology)


def test_rule_arithmetic_comparisons_and_functions():
    numbers = {"a": 4.0, "b.c": 2.0}
    assert claims.check_rule("a / b.c == 2 and max(a, b.c) == a and abs(-a) == 4", numbers)
    assert claims.check_rule("1 < b.c < a", numbers)
    assert not claims.check_rule("not a > b.c", numbers)
    with pytest.raises(ValueError, match="divides by zero"):
        claims.check_rule("a / (b.c - 2) > 1", numbers)


def test_the_record_entry_has_page_text_status_and_numbers():
    claims.claim("Add at {roofline.best_add_rate:.0f} GB/s.", "roofline.best_add_rate > 1")
    entry = claims.claims()[0].to_dict()
    assert {"page", "text", "status", "numbers", "rule"} <= set(entry)
    assert entry["text"] == "Add at 51 GB/s."
