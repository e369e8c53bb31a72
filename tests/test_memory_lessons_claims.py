"""The memory lessons' checks: what they call checked rests on a measurement.

memory, budget, capacity and fix-ladder price runs with a calculator
(``gpulesson.memory.budget``); a sentence over its figures alone is rendered from the facts,
not checked. What these pages check compares a measurement (a real AdamW step, the fake-tensor
tracker's step, autocast's kept activations) with the calculator or with another measurement.
Each page is read whole from the strict build's record, the memory page's measured steps
included.
"""

from __future__ import annotations

import ast
import math

import pytest

from gpulesson.site import claims, facts
from tests.lesson_blocks import built_page, exec_blocks, page_blocks

STEMS = ("memory", "budget", "capacity", "fix-ladder")
# Facts of these pages that are measured on this build; every other fact is the calculator's
# (predicted), a cited figure (constant) or arithmetic over those (derived).
MEASURED = {
    "memory": {
        "memory.step_weights_bytes",
        "memory.step_grads_bytes",
        "memory.step_moments_bytes",
        "memory.step_bytes_per_param",
        "memory.measured_forward_bytes",
        "memory.measured_backward_bytes",
        "memory.measured_optimizer_step_bytes",
        "memory.measured_peak_persistent_bytes",
        "memory.measured_peak_activations_bytes",
        "memory.timeline_peak_bytes",
        "memory.gpt2_worst_error_pct",
        "memory.hf_worst_error_pct",
        "memory.hf_default_worst_error_pct",
        "memory.hf_default_highest_error_pct",
        "memory.hf_extra_block_units",
        "memory.hf_gelu_units",
        "memory.gpt2_gelu_units",
    },
    "budget": {"budget.torch_amp_bytes_per_param", "budget.torch_bf16_bytes_per_param"},
    "capacity": {
        "capacity.fp16_grad_bytes",
        "capacity.fp16_weight_bytes",
        "capacity.torch_amp_bytes_per_param",
    },
    "fix-ladder": {
        "ladder.amp_measured_ratio",
        "ladder.amp_device",
        "ladder.amp_dtype",
        "ladder.timeline_ckpt_peak_bytes",
        "ladder.timeline_plain_peak_bytes",
    },
}


@pytest.fixture(autouse=True)
def _fresh_facts():
    facts.reset()
    yield
    facts.reset()


@pytest.fixture(scope="module")
def runs(built_site):
    """Each page as the strict build ran it, whole, in page order."""
    done = {stem: built_page(built_site, stem) for stem in STEMS}
    facts.reset()
    return done


def _publish_calls(code: str) -> list[ast.Call]:
    return [
        node
        for node in ast.walk(ast.parse(code))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "publish"
    ]


@pytest.mark.parametrize("stem", STEMS)
def test_every_fact_states_its_kind_and_no_block_prints_a_claim(stem):
    for block_id, code in exec_blocks(stem):
        assert "claim(" not in code, f"{stem}#{block_id}: write the claim as a ```claim block"
        for call in _publish_calls(code):
            stated = {k.arg for k in call.keywords}
            assert "kind" in stated, f"{stem}#{block_id}: line {call.lineno} states no kind"


@pytest.mark.parametrize("stem", STEMS)
def test_only_what_this_build_measures_is_called_measured(runs, stem):
    measured = {n for n, f in runs[stem].facts.items() if f.kind == facts.MEASURED}
    measured = {n for n in measured if not n.startswith(claims.FACT_PREFIX)}
    assert measured == MEASURED[stem]


@pytest.mark.parametrize("stem", STEMS)
def test_every_claim_holds_rests_on_a_measurement_and_can_fail(runs, stem):
    page = runs[stem].claims
    assert len(page) == sum(kind == "claim" for kind, *_ in page_blocks(stem))
    assert [c.text for c in page if c.status != claims.HOLDS] == []
    for c in page:
        assert set(c.kinds.values()) & {facts.MEASURED, facts.PUBLISHED}, c.rule
        assert c.flip_margin is not None and math.isfinite(c.flip_margin), c.rule
        assert c.flip_margin < 100, f"{c.rule}: a {c.flip_margin:.0f}-fold margin means little"
    assert any(c.teaching for c in page), f"{stem} states no teaching claim"


def test_a_real_adamw_step_keeps_what_the_calculator_charges_amp(runs):
    values = runs["memory"].values()
    assert values["memory.step_bytes_per_param"] == values["memory.amp_bytes_per_param"] == 16
    assert values["memory.step_moments_bytes"] == 2 * values["memory.step_weights_bytes"]
    budget = runs["budget"].values()
    per_param = [budget[f"budget.torch_{r}_bytes_per_param"] for r in ("bf16", "amp")]
    assert per_param == [8, 16]  # bf16-pure keeps half of AMP's bytes


def test_the_measured_step_peaks_in_the_backward_pass_with_activations_on_top(runs):
    values = runs["memory"].values()
    backward = values["memory.measured_backward_bytes"]
    assert backward > values["memory.measured_forward_bytes"]
    assert backward > values["memory.measured_optimizer_step_bytes"]
    assert backward == values["memory.timeline_peak_bytes"]
    activations = values["memory.measured_peak_activations_bytes"]
    assert activations > values["memory.measured_peak_persistent_bytes"]


def test_calculator_sentences_are_rendered_not_checked(runs):
    """A describe block shows its numbers and makes no claim record."""
    shown = runs["budget"].printed
    describes = [v for k, v in shown.items() if k.startswith("describe-")]
    assert describes and all("gl-claim" not in text for text in describes)
    assert any("{" not in text and "GiB" in text for text in describes)
