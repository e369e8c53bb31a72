"""The first five lessons check measurements, describe arithmetic, and never branch on a rule.

why-gpus, software-stack, where-to-run, timing and roofline state their checks as ``claim``
blocks whose rules read a measured or published fact, and their arithmetic on quoted or
example figures as ``describe`` blocks. Each test reads the claims, facts and Markdown the
strict build's run of a lesson's blocks left (``tests/lesson_blocks.py``), or runs a
block's claims itself on facts it sets, or runs pages under a stubbed reference bundle.
"""

from __future__ import annotations

import functools
import shutil

import pytest

from gpulesson.memory.cost import card_rates
from gpulesson.site import claims, facts, gpu_figures
from tests.conftest import REPO
from tests.lesson_blocks import built_page, page_blocks, run_claims_after, run_page

STEMS = ("why-gpus", "software-stack", "where-to-run", "timing", "roofline")
LESSONS = REPO / "docs" / "lessons"
FIXTURES = REPO / "tests" / "fixtures" / "bundles"


@pytest.fixture(autouse=True)
def _fresh_facts():
    facts.reset()
    yield
    facts.reset()


def _text(stem: str) -> str:
    return (LESSONS / f"{stem}.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("stem", STEMS)
def test_no_python_block_states_a_claim(stem):
    text = _text(stem)
    assert "import claim" not in text and "claim(" not in text, stem


@pytest.mark.parametrize("stem", ["why-gpus", "timing", "roofline"])
def test_every_checked_claim_rests_on_a_measurement_and_teaching_claims_follow_it(built_site, stem):
    run = built_page(built_site, stem)
    fences = [options for kind, _, _, options in page_blocks(stem) if kind == "claim"]
    assert any(o.get("teaching") == "yes" for o in fences), f"{stem}: no teaching claim"
    checked = [c for c in run.claims if c.status != claims.NOT_CHECKED]
    assert checked
    for c in checked:
        rule_kinds = {c.kinds[n] for n in claims.fact_names(c.rule)}
        assert rule_kinds & set(claims.INDEPENDENT), (c.rule, c.kinds)
        assert c.flip_margin is not None, c.rule
        holds = claims.check_rule(c.rule, c.numbers)
        failed = claims.NOT_SHOWN if c.teaching else claims.FAILS
        assert c.status == (claims.HOLDS if holds else failed), c.rule


def test_the_why_gpus_sweep_is_one_teaching_claim_and_one_description():
    blocks = page_blocks("why-gpus")
    start = next(i for i, b in enumerate(blocks) if b[1] == "why-sweep")
    after = []
    for block in blocks[start + 1 :]:
        if block[0] == "python":
            break
        after.append(block)
    kinds = [(kind, options.get("teaching"), options.get("needs")) for kind, _, _, options in after]
    assert kinds == [("describe", None, None), ("claim", "yes", None), ("claim", "yes", "cuda")]
    facts.begin_page("lessons/why-gpus.md")
    facts.publish("why.cpu_first_n", 64, kind=facts.MEASURED)
    facts.publish("why.cpu_best_n", 1024, kind=facts.MEASURED)
    for best, status in ((90.0, claims.HOLDS), (40.0, claims.NOT_SHOWN)):
        facts.publish("why.cpu_first_gflops", 30.0, "GFLOP/s", kind=facts.MEASURED)
        facts.publish("why.cpu_best_gflops", best, "GFLOP/s", kind=facts.MEASURED)
        facts.publish("why.cpu_climb", best / 30.0, "x", kind=facts.MEASURED)
        shown = run_claims_after("why-gpus", "why-sweep")
        assert f"rate went from 30 GFLOP/s at n = 64 to {best:.1f} GFLOP/s" in shown[0]
        made = [c for c in claims.claims() if c.teaching and c.needs is None][-1]
        assert made.status == status  # a flat sweep says "not shown", never the opposite
    assert "Not shown on this build" in shown[1]


def test_the_cpu_claim_waits_on_a_gpu_build_and_the_gpu_claims_on_a_cpu_one():
    facts.begin_page("lessons/timing.md")
    facts.publish("timing.inflation", 1500.0, "x", kind=facts.MEASURED)
    facts.publish("timing.gpu_inflation", 1500.0, "x", kind=facts.MEASURED)  # a GPU build
    (cpu_claim,) = run_claims_after("timing", "timing-illusion")
    assert cpu_claim == claims.WAITING
    (made,) = claims.claims()
    assert made.needs == "cpu" and made.status == claims.NOT_CHECKED


@pytest.fixture(scope="module")
def measured_once() -> dict[str, dict]:
    """This machine's suite entries, measured by the first run of the pages and read by the
    next (as a build measures each entry once): the bundles differ, the machine does not."""
    return {}


@pytest.mark.parametrize("bundle", ["fixture_t4.json", "fixture_h100.json"])
def test_gpu_claims_hold_on_each_reference_bundle_with_a_margin_noise_cannot_cross(
    bundle, tmp_path, monkeypatch, measured_once
):
    (tmp_path / "reference").mkdir()
    shutil.copy(FIXTURES / bundle, tmp_path / "reference" / bundle)
    original = gpu_figures.reference
    monkeypatch.setattr(
        gpu_figures, "reference", functools.partial(original, tmp_path, on_gpu=False)
    )
    monkeypatch.setattr(gpu_figures, "build_has_gpu", lambda: False)  # why-gpu-peak's rows
    reads = gpu_figures.gpu_measurements
    monkeypatch.setattr(gpu_figures, "gpu_measurements", functools.partial(reads, root=tmp_path))
    checked = []
    for stem in ("timing", "roofline", "why-gpus"):  # run under the stub: not the build's pages
        run = run_page(stem, measured_once)
        checked += [c for c in run.claims if c.needs == "cuda" and c.status != "not_checked"]
    assert len(checked) >= 6
    assert [c.text for c in checked if c.status != claims.HOLDS] == []
    assert min(c.flip_margin for c in checked) >= 0.05, [(c.rule, c.flip_margin) for c in checked]


def test_where_to_run_answers_exercise_2_from_the_example_rates(built_site):
    run = built_page(built_site, "where-to-run")
    values = run.values()
    assert run.claims == []  # example rates and example probe inputs: described, not checked
    big = next(r for r in card_rates() if r.vram_gb == 80)
    runs, hours, lost = values["where.ex_runs"], values["where.ex_hours"], values["where.ex_lost"]
    question = _text("where-to-run").split("2. You plan ")[1].split("\n\n")[0]
    assert question.startswith(f"{runs} runs of {{q: {hours} hours}} on the {{q: 80 GB}} example")
    assert lost == 4 and "if four runs are preempted halfway" in question
    (answer,) = [out for out in run.printed.values() if out.startswith("On demand: $")]
    on_demand, spot = big.on_demand_usd_per_h * hours * runs, big.spot_usd_per_h * hours * runs
    waste = big.spot_usd_per_h * hours / 2 * lost
    for dollars in (on_demand, spot, waste, spot + waste):
        assert f"${dollars:.2f}" in answer
    assert values["where.spot_total_usd"] <= values["where.on_demand_total_usd"]


def test_software_stack_describes_the_gb_gib_gap_from_the_units(built_site):
    run = built_page(built_site, "software-stack")
    assert run.claims == []
    (shown,) = [out for out in run.printed.values() if out.startswith("The same bytes read")]
    assert "25.8 in GB and 24.0 in GiB: a GiB is 7.4% larger" in shown
    assert run.facts["stack.card_bytes"].kind == facts.CONSTANT
