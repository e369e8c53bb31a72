"""Values for predict-the-number quiz questions: right answers, distinct plausible mistakes."""

from __future__ import annotations

import pytest

from gpulesson.course.software_stack import gb_gib_readings
from gpulesson.course.where_to_run import SWEEP_BILL_FACTS, sweep_bill
from gpulesson.memory import cost
from gpulesson.site import content, quizzes
from tests.conftest import REPO

GIB = 2**30


@pytest.mark.parametrize(
    ("n_bytes", "gb", "gib"),
    [(24 * GIB, "25.8", "24.0"), (16 * GIB, "17.2", "16.0"), (80 * GIB, "85.9", "80.0")],
)
def test_gb_gib_readings_gives_the_gb_and_gib_of_a_byte_count(n_bytes, gb, gib):
    r = gb_gib_readings({"stack.card_bytes": n_bytes})
    assert (r["gb"], r["gib"]) == (gb, gib)
    assert r["bytes"] == f"{n_bytes:,}"


@pytest.mark.parametrize("n_bytes", [2**20, 10**9, 3 * GIB + 12345, 24 * GIB, 141 * GIB, 2**45])
def test_gb_gib_readings_keeps_the_four_options_apart(n_bytes):
    r = gb_gib_readings({"x": n_bytes})
    options = [r["gb"], r["gib"], r["wrong_way"], r["mixed"]]
    assert len(set(options)) == 4, options
    assert float(r["gb"].replace(",", "")) > float(r["gib"].replace(",", ""))  # GB count larger


def test_gb_gib_readings_reads_one_fact():
    with pytest.raises(ValueError, match="exactly one fact"):
        gb_gib_readings({"a": 1, "b": 2})


def _bill_facts(spot=0.3, on_demand=0.6, hours=3, runs=10):
    return dict(zip(SWEEP_BILL_FACTS, (spot, on_demand, hours, runs), strict=True))


def test_sweep_bill_is_rate_times_hours_times_runs():
    bill = sweep_bill(_bill_facts(spot=0.8, on_demand=1.6, hours=4, runs=20))
    assert bill["spot"] == "64.00" and bill["on_demand"] == "128.00"
    assert bill["one_run"] == "3.20" and bill["no_hours"] == "16.00"


def test_sweep_bill_options_differ_for_every_example_rate():
    content.load(REPO / "docs")
    for r in cost.card_rates():
        bill = sweep_bill(_bill_facts(r.spot_usd_per_h, r.on_demand_usd_per_h))
        options = [bill["spot"], bill["on_demand"], bill["one_run"], bill["no_hours"]]
        assert len(set(options)) == 4, (r, options)


@pytest.mark.parametrize(
    ("facts", "message"),
    [
        (_bill_facts(hours=10, runs=10), "read alike"),
        (_bill_facts(spot=0.6, on_demand=0.6), "rates that differ"),
        ({"where.runs": 10}, "needs the facts"),
    ],
)
def test_sweep_bill_refuses_facts_that_would_make_two_options_alike(facts, message):
    with pytest.raises(ValueError, match=message):
        sweep_bill(facts)


# --- the lessons' templated questions, filled as a build would ------------------------------

FACTS = {
    "why-gpus": {"why.cpu_best_gflops": 148.4},
    "roofline": {"roofline.ridge": 3.6},
    "software-stack": {"stack.card_bytes": 24 * GIB},
    "where-to-run": _bill_facts(),
    "timing": {"timing.inflation": 0.9},
}


@pytest.mark.parametrize("stem", sorted(FACTS))
def test_each_lesson_has_a_predict_the_number_question_whose_answer_is_the_page_number(
    stem, monkeypatch
):
    monkeypatch.chdir(REPO)
    content.load(REPO / "docs")
    templated = [q for q in quizzes.questions(stem) if q.facts]
    assert templated, f"{stem} has no question filled from the page"
    where = [i for i, q in enumerate(quizzes.questions(stem)) if q.facts]
    filled = quizzes.page_questions(stem, FACTS[stem])
    text = quizzes.to_markdown(filled)
    assert "{" not in text and "}" not in text
    expected = {
        "why-gpus": "About 150 GFLOP/s",
        "roofline": "About 3.6 FLOP/byte",
        "software-stack": "25.8 GB",
        "where-to-run": "$9.00",
        "timing": "About 0.90×",
    }[stem]
    right = [o.text for i in where for o in filled[i].options if o.correct]
    assert expected in right
    # A different number on the page changes the right answer: nothing is typed in.
    changed = {name: value * 2 for name, value in FACTS[stem].items()}
    refilled = quizzes.page_questions(stem, changed)
    assert [o.text for i in where for o in refilled[i].options if o.correct] != right
