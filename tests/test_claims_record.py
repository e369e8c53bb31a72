"""Every claim in the build record can fail, rests on a measurement, and is shown quietly.

The strict build's ``build-record.json`` lists every claim of every page with the kind of
each fact its rule reads and its flip margin (:func:`gpulesson.site.claims.flip_margin`).
These tests read that record, the one fixture for every lesson's claims.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from gpulesson.site import claims, facts

REPO = Path(__file__).resolve().parent.parent
LESSONS = REPO / "docs" / "lessons"
ALL_LESSONS = sorted(p.stem for p in LESSONS.glob("*.md"))
_PUBLISH = re.compile(r"\bfacts\.publish\((?P<args>[^()]*(?:\([^()]*\)[^()]*)*)\)", re.S)


@pytest.fixture(scope="module")
def record(built_site: Path) -> dict:
    return json.loads((built_site / "build-record.json").read_text(encoding="utf-8"))


def _checked(record: dict) -> list[dict]:
    return [c for c in record["claims"] if c["status"] != claims.NOT_CHECKED]


def test_every_checked_claim_can_fail_and_rests_on_a_measured_or_published_fact(record):
    checked = _checked(record)
    assert len(checked) >= 50
    no_margin = [(c["page"], c["rule"]) for c in checked if c["flip_margin"] is None]
    assert no_margin == []  # a claim no change of its inputs can flip checks nothing
    alone = [
        (c["page"], c["rule"])
        for c in checked
        if not {c["kinds"][n] for n in claims.fact_names(c["rule"])} & set(claims.INDEPENDENT)
    ]
    assert alone == []


@pytest.mark.parametrize("stem", ALL_LESSONS)
def test_every_claim_of_every_lesson_can_fail_and_has_a_finite_flip_margin(record, stem):
    """Each claim the build made on the page, named ``page#number`` when it fails.

    The claims are only known once the build has run, after collection, so the test is
    parametrised by lesson (every one, not only those with page tests) and checks each of
    the page's claims in the record; a claim a GPU build checks (``not_checked`` here) has
    no margin on this build but must still be able to fail.
    """
    page = f"lessons/{stem}.md"
    assert {c["page"] for c in record["claims"]} <= {f"lessons/{s}.md" for s in ALL_LESSONS}
    made = [claims.Claim(**c) for c in record["claims"] if c["page"] == page]
    if "```claim" in (LESSONS / f"{stem}.md").read_text(encoding="utf-8"):
        assert made, f"{page} states claims but the record holds none"
    wrong = {}
    for c in made:
        why = [] if claims.can_fail(c) else ["cannot fail"]
        if c.status != claims.NOT_CHECKED and not (
            c.flip_margin is not None and math.isfinite(c.flip_margin)
        ):
            why.append(f"flip margin {c.flip_margin}")
        if why:
            wrong[f"{page}#{c.number}"] = (c.rule, why)
    assert wrong == {}


def test_every_margin_recomputes_from_the_recorded_numbers(record):
    """The margin is the rule's own: moving a measured input by it flips the verdict."""
    for c in _checked(record):
        margin = claims.flip_margin(c["rule"], c["numbers"], c["kinds"])
        assert margin == pytest.approx(c["flip_margin"], rel=1e-6), (c["page"], c["rule"])


def test_no_page_says_checked_on_this_build_and_each_mark_links_to_its_entry(built_site: Path):
    pages = sorted((built_site / "lessons").glob("*/index.html"))
    assert len(pages) >= 17
    for page in pages:
        html = page.read_text(encoding="utf-8")
        assert "(checked on this build)" not in html, page
        for number in re.findall(r'class="gl-claim gl-claim-holds" href="#gl-check-(\d+)"', html):
            assert f'id="gl-check-{number}"' in html, (page, number)


def test_every_fact_a_lesson_publishes_states_its_kind():
    missing = []
    for md in sorted(LESSONS.glob("*.md")):
        for match in _PUBLISH.finditer(md.read_text(encoding="utf-8")):
            if "kind=" not in match["args"]:
                missing.append(f"{md.name}: facts.publish({match['args'][:50]}...)")
    assert missing == [], "state each fact's kind=facts.MEASURED|PUBLISHED|...: " + "\n".join(
        missing
    )


def test_the_record_names_a_kind_for_every_number_behind_a_claim(record):
    for c in record["claims"]:
        assert set(c["kinds"]) == set(c["numbers"]), (c["page"], c["rule"])
        assert set(c["kinds"].values()) <= set(facts.KINDS)


def test_a_page_shows_at_most_one_spread_warning(built_site: Path):
    """Noise warnings of a page's timed tables are gathered into one (spread_notes)."""
    for page in sorted((built_site / "lessons").glob("*/index.html")):
        html = page.read_text(encoding="utf-8")
        assert html.count('<p class="admonition-title">Spread warning</p>') <= 1, page
