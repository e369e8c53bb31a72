"""Checked claims: a sentence is checked against the page's facts, and a failure shows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpulesson.site import claims, facts


@pytest.fixture(autouse=True)
def _page():
    facts.reset()
    facts.begin_page("lessons/roofline.md")
    facts.begin_block("roofline-table")
    facts.publish("roofline.bandwidth_roof", 32.0, "GB/s")
    facts.publish("roofline.best_add_rate", 51.0, "GB/s")
    facts.end_block()
    yield
    facts.reset()


def test_a_claim_that_holds_renders_its_sentence_with_the_numbers_filled_in():
    out = claims.claim(
        "The add reaches {roofline.best_add_rate:.0f} GB/s.", "roofline.best_add_rate > 10"
    )
    assert out.startswith("The add reaches 51 GB/s.")
    assert "gl-claim-holds" in out
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


def test_a_gpu_claim_without_gpu_facts_is_recorded_as_not_checked_and_not_shown():
    out = claims.claim("The GPU wins by {bench.gpu_x:.0f}x.", "bench.gpu_x >= 10", needs="cuda")
    assert out == claims.WAITING and "–" not in out  # never a sentence with blanks
    recorded = claims.claims()[0]
    assert recorded.status == claims.NOT_CHECKED and recorded.text == "The GPU wins by –x."


def test_a_gpu_claim_shows_once_its_measured_fact_exists_with_its_kind():
    facts.publish("bench.gpu_x", 40.0, "x")
    facts.publish("bench.peak", 10.0, "x", kind=facts.PREDICTED)
    out = claims.claim(
        "The GPU wins by {bench.gpu_x:.0f}x.", "bench.gpu_x >= bench.peak", needs="cuda"
    )
    assert out.startswith("The GPU wins by 40x.") and "gl-claim-holds" in out
    assert claims.claims()[0].kinds == {"bench.gpu_x": "measured", "bench.peak": "predicted"}


NO_COMPILER = "torch.compile found no C++ <compiler>: install g++ or clang"


def test_a_claim_on_a_withheld_fact_shows_the_reason_in_place_of_its_sentence():
    facts.withhold("roofline.fused_x", NO_COMPILER, "x")
    out = claims.claim(
        "Fused, {roofline.fused_x:.1f}x at {roofline.best_add_rate:.0f} GB/s.",
        "roofline.fused_x > 1.5",
        teaching=True,
    )
    assert out.startswith('??? note "Not checked on this build: it reads a figure this build')
    assert "torch.compile found no C++ &lt;compiler&gt;: install g++ or clang" in out
    assert "Fused" not in out  # never a sentence with blanks
    recorded = claims.claims()[0]
    assert (recorded.status, recorded.withheld) == (claims.NOT_CHECKED, NO_COMPILER)
    assert recorded.numbers == {"roofline.best_add_rate": 51.0} and claims.can_fail(recorded)
    item = claims.checks_html([recorded], "record.json")
    assert "not checked on this build: torch.compile found no C++ &lt;compiler&gt;" in item
    sentence = "It ran {roofline.fused_x:.1f}x faster."
    assert claims.describe(sentence) == claims.WITHHELD


def test_a_withheld_fact_travels_with_its_reason_and_cannot_be_read_as_a_number():
    facts.begin_block("fusion")
    facts.withhold("roofline.fused_x", NO_COMPILER, "x")
    (sent,) = [f.to_dict() for f in facts.end_block()]
    assert sent["value"] is None and sent["withheld"] == NO_COMPILER
    assert "withheld" not in facts.get("roofline.best_add_rate").to_dict()  # the record as before
    digest = facts.page_digest()  # a later block's cache key: another reason, another key
    facts.withhold("roofline.fused_x", "compiling saved nothing", "x")
    assert facts.page_digest() != digest
    facts.reset()
    facts.begin_page("lessons/roofline.md")
    facts.replay([sent])  # from the execution cache
    assert facts.get("roofline.fused_x").withheld == NO_COMPILER
    facts.restore([sent])  # into the block worker
    with pytest.raises(ValueError, match="not measured on this build: torch.compile found"):
        facts.value("roofline.fused_x")
    with pytest.raises(ValueError, match="withheld without a reason"):
        facts.withhold("roofline.other", " ")


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


def test_claims_travel_as_facts_so_the_cache_and_the_worker_carry_them():
    facts.begin_block("roofline-claims")
    claims.claim("Add at {roofline.best_add_rate:.0f} GB/s.", "roofline.best_add_rate > 1")
    published = [f.to_dict() for f in facts.end_block()]
    assert [f["name"] for f in published] == ["claim#1"]
    facts.reset()  # a later, cached build: the block is replayed, not run
    facts.begin_page("lessons/roofline.md")
    facts.replay(published)
    assert [c.text for c in claims.claims()] == ["Add at 51 GB/s."]
    assert claims.claims()[0].status == claims.HOLDS


# --- a real strict build: the admonition, the record, and the publish build that stops ------

PAGE = """# Claims

```python exec="on" id="measure"
from gpulesson.site import facts
facts.publish("demo.rate", {rate}, "GB/s")
print("| rate (GB/s) |\\n|---:|\\n| {rate} |")
```

```claim rule="demo.rate > 10"
The rate is {{demo.rate:.0f}} GB/s,
above 10 GB/s.
```

```claim rule="demo.rate > 20" teaching="yes"
The rate clears 20 GB/s: {{demo.rate:.0f}} GB/s.
```

```describe
Described, not checked: {{demo.rate:.1f}} GB/s.
```
"""


def _claims_project(tmp_path: Path, rate: float) -> Path:
    from tests.test_exec_cache import _project

    return _project(tmp_path, {"index.md": PAGE.format(rate=rate)})


@pytest.mark.site
def test_a_real_build_shows_a_failing_claim_and_a_publish_build_stops(tmp_path):
    from tests.test_exec_cache import _run_build

    project = _claims_project(tmp_path, 50.0)
    result = _run_build(project, tmp_path / "cache")
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads((project / "site" / "build-record.json").read_text())
    statuses = [(c["page"], c["status"], c["teaching"]) for c in record["claims"]]
    assert statuses == [("index.md", "holds", False), ("index.md", "holds", True)]
    assert record["claims"][0]["numbers"] == {"demo.rate": 50.0}
    assert record["claims"][0]["kinds"] == {"demo.rate": "measured"}
    assert record["claims"][0]["flip_margin"] == pytest.approx(0.8, rel=1e-6)  # 50 -> 10
    html = (project / "site" / "index.html").read_text()
    assert 'href="#gl-check-1"' in html and 'id="gl-check-1"' in html and "What this page" in html
    assert "Described, not checked: 50.0 GB/s." in html and "checked on this build" not in html

    project = _claims_project(tmp_path, 5.0)  # the number under the claim changes
    result = _run_build(project, tmp_path / "cache")
    assert result.returncode == 0, result.stderr[-3000:]
    html = (project / "site" / "index.html").read_text()
    assert "the numbers do not bear this out" in html and "demo.rate = 5 GB/s" in html
    assert "index.md: claim does not hold on this build: The rate is 5 GB/s" in result.stderr
    record = json.loads((project / "site" / "build-record.json").read_text())
    assert [c["status"] for c in record["claims"]] == ["fails", "not_shown"]
    assert "Not shown on this build" in html

    for cache in ("cache", "fresh-cache"):  # from the cache, and fresh: the same verdict
        result = _run_build(project, tmp_path / cache, GPULESSON_REQUIRE_DEVICE="cpu")
        assert result.returncode != 0
        assert "2 checked claims do not hold on this cpu build" in result.stderr
        assert "index.md: The rate is 5 GB/s, above 10 GB/s." in result.stderr
