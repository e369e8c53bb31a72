"""The build keeps what every block showed, so page tests read the build, not a rerun.

The strict build (``built_site``) records each executed block's Markdown and each claim
and describe block's in ``build-blocks.json`` and every fact in ``build-record.json``;
:func:`tests.lesson_blocks.built_page` reads them. For a lesson whose blocks are pure
arithmetic the build's record must equal a run of the same blocks in this process.
"""

from __future__ import annotations

import json

from gpulesson.site import block_outputs, claims, facts
from tests.conftest import REPO
from tests.lesson_blocks import built_page, exec_blocks, page_blocks, run_page


def test_a_deterministic_lesson_reads_the_same_from_the_build_as_from_a_rerun(built_site):
    built = built_page(built_site, "budget")
    rerun = run_page("budget")
    assert {k: built.printed[k] for k in rerun.printed} == rerun.printed
    assert set(built.printed) - set(rerun.printed) == {"quiz-budget"}  # the page's quiz
    assert {n: (f.value, f.unit, f.kind, f.block_id) for n, f in built.facts.items()} == {
        n: (f.value, f.unit, f.kind, f.block_id)
        for n, f in rerun.facts.items()
        if not n.startswith(claims.FACT_PREFIX)  # the claims: compared below
    }
    assert [(c.rule, c.status, c.text) for c in built.claims] == [
        (c.rule, c.status, c.text) for c in rerun.claims
    ]
    facts.reset()


def test_every_lesson_block_is_in_the_build_s_record(built_site):
    shown = json.loads((built_site / block_outputs.FILE).read_text(encoding="utf-8"))
    for path in sorted((REPO / "docs" / "lessons").glob("*.md")):
        expected = [block_id for _, block_id, _, _ in page_blocks(path.stem)]
        recorded = [k for k in shown[f"lessons/{path.stem}.md"] if k in expected]
        assert recorded == expected, path.stem  # every block, in page order
        assert {i for i, _ in exec_blocks(path.stem)} <= set(recorded)


def test_the_record_lists_facts_with_their_kind_and_block_but_not_the_claims_twice(built_site):
    record = json.loads((built_site / "build-record.json").read_text(encoding="utf-8"))
    names = {(f["page"], f["name"]) for f in record["facts"]}
    assert ("lessons/decoding.md", "decoding.ridge") in names
    assert all(f["kind"] in facts.KINDS and f["block_id"] for f in record["facts"])
    assert not [n for _, n in names if n.startswith(claims.FACT_PREFIX)]


def test_the_recorder_numbers_fences_by_kind_in_page_order():
    block_outputs.reset()
    block_outputs.begin_page("a.md")
    for kind in ("claim", "describe", "claim"):
        block_outputs.record_fence(kind, kind)
    block_outputs.record_python("a-1", "| x |")
    block_outputs.begin_page("a.md")  # built again (mkdocs serve): starts empty
    block_outputs.record_fence("describe", "again")
    assert block_outputs.outputs() == {"a.md": {"describe-1": "again"}}
    block_outputs.reset()
