"""Claims written as Markdown blocks: options, kinds, teaching claims, flip margins, the list."""

from __future__ import annotations

import pytest

from gpulesson.site import claim_fence, claims, facts


@pytest.fixture(autouse=True)
def _page():
    facts.reset()
    facts.begin_page("lessons/demo.md")
    facts.begin_block("demo-measure")
    facts.publish("demo.rate", 50.0, "GB/s", kind=facts.MEASURED)
    facts.publish("demo.peak", 80.0, "GB/s", kind=facts.PREDICTED)
    facts.publish("demo.gb", 112.0, "GB", kind=facts.DERIVED)
    facts.publish("demo.half", 56.0, "GB", kind=facts.DERIVED)
    facts.publish("demo.row", 40.0, "GB/s", kind=facts.PUBLISHED)
    facts.end_block()
    yield
    facts.reset()


def _options(language: str, **inputs: str) -> dict:
    options: dict = {}
    assert claim_fence.validator(language, dict(inputs), options, {}, None)
    return options


def test_a_claim_block_is_a_sentence_in_markdown_checked_by_its_rule():
    options = _options("claim", rule="demo.rate < demo.peak")
    out = claim_fence.to_markdown(
        "claim", "The add ran at {demo.rate:.0f} GB/s,\nbelow {demo.peak:.0f} GB/s.\n", options
    )
    assert out.startswith('The add ran at 50 GB/s, below 80 GB/s. <a class="gl-claim')
    (made,) = claims.claims()
    assert made.kinds == {"demo.rate": "measured", "demo.peak": "predicted"}
    assert made.number == 1 and 'href="#gl-check-1"' in out


def test_a_rule_over_derived_and_constant_facts_alone_is_refused_with_the_fix():
    with pytest.raises(ValueError, match=r"demo.gb \(derived\).*```describe"):
        claims.evaluate("Half of {demo.gb:.0f} GB.", "demo.half * 2 == demo.gb")
    with pytest.raises(ValueError, match="cannot fail"):
        claims.evaluate("Peak.", "demo.peak > 1")  # a prediction alone checks nothing


def test_a_published_row_against_a_prediction_is_a_check():
    made = claims.evaluate("Row below peak.", "demo.row < demo.peak")
    assert made.status == claims.HOLDS
    assert made.flip_margin == pytest.approx(1.0, rel=1e-6)  # 40 -> 80 GB/s


def test_a_teaching_claim_the_numbers_do_not_bear_out_says_not_shown_on_this_build():
    options = _options("claim", rule="demo.rate > demo.peak", teaching="yes")
    out = claim_fence.to_markdown("claim", "The add beats the peak.", options)
    assert out.startswith('!!! warning "Not shown on this build')
    assert claims.claims()[0].status == claims.NOT_SHOWN


def test_a_describe_block_renders_from_facts_with_no_mark_and_no_record():
    out = claim_fence.to_markdown("describe", "Rate {demo.rate:.1f} GB/s.", _options("describe"))
    assert out == "Rate 50.0 GB/s." and claims.claims() == []
    waiting = claim_fence.to_markdown(
        "describe", "GPU {gpu.rate:.1f} GB/s.", _options("describe", needs="cuda")
    )
    assert waiting == claims.WAITING  # never a sentence with a blank
    with pytest.raises(ValueError, match="not published"):
        claim_fence.to_markdown("describe", "GPU {gpu.rate:.1f}.", _options("describe"))


@pytest.mark.parametrize(
    ("language", "inputs", "message"),
    [
        ("claim", {}, 'needs rule="..."'),
        ("claim", {"rule": "demo.rate > 1", "colour": "red"}, "option(s) colour"),
        ("describe", {"rule": "demo.rate > 1"}, "option(s) rule"),
        ("claim", {"rule": "demo.rate > 1", "teaching": "maybe"}, 'teaching="yes"'),
        ("claim", {"rule": "demo.rate > 1", "needs": "tpu"}, 'needs="cuda"'),
    ],
)
def test_a_bad_block_header_names_the_page_and_the_fix(language, inputs, message):
    with pytest.raises(claim_fence.ClaimFenceError, match="lessons/demo.md") as error:
        claim_fence.validator(language, inputs, {}, {}, None)
    assert message in str(error.value)


def test_the_flip_margin_is_the_smallest_relative_change_that_flips_the_rule():
    kinds = {"a": "measured", "b": "measured"}
    assert claims.flip_margin("a > 2 * b", {"a": 3.0, "b": 1.0}, kinds) == pytest.approx(1 / 3)
    assert claims.flip_margin("a < 10", {"a": 9.9}, {"a": "measured"}) == pytest.approx(
        0.1 / 9.9, rel=1e-6
    )
    assert claims.flip_margin("a > 0 or a <= 0", {"a": 1.0}, kinds) is None  # cannot fail
    # only measured and published inputs are moved: a constant threshold is not
    assert claims.flip_margin("a > c", {"a": 3.0, "c": 1.0}, {"a": "measured"}) == (
        pytest.approx(2 / 3)
    )


def test_the_checks_list_escapes_every_string_and_links_each_entry():
    made = claims.evaluate("Rate <b>{demo.rate:.0f}</b>.", "demo.rate < demo.peak")
    out = claims.checks_html([made], "../../build-record.json")
    assert "<b>" not in out and "&lt;b&gt;50&lt;/b&gt;" in out
    assert 'id="gl-check-1"' in out and 'href="../../build-record.json"' in out
    assert "demo.rate = 50 GB/s (measured)" in out and "a 60% change" in out


def test_a_quoted_figure_in_a_claim_is_marked_on_the_page_and_plain_in_the_checks_list():
    options = _options("claim", rule="demo.rate < demo.peak")
    out = claim_fence.to_markdown("claim", "{demo.rate:.0f} GB/s on the {q: 24 GiB} card.", options)
    assert out.startswith('50 GB/s on the <span class="gl-q" title="Quoted')
    listed = claims.checks_html(claims.claims(), "build-record.json")
    assert "50 GB/s on the 24 GiB card." in listed and "gl-q" not in listed
