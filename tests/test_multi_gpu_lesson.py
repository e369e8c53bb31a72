"""The multi-GPU lesson: its blocks run, its claims hold and can fail, its quiz reads its numbers.

The tests read what the strict build's run of the blocks left, the gloo all-reduce of two
CPU processes included (``tests/lesson_blocks.py``). Claims about GPU figures must be "not
checked" on this CPU build without a reference bundle; every other claim must hold, be able
to fail and read a measured or published figure. The ring, link, ZeRO, activation and bubble
figures are the course's formulas: described, not checked.
"""

from __future__ import annotations

import pytest

from gpulesson.course import common, multi_gpu
from gpulesson.site import claims, facts, quizzes
from tests.conftest import REPO
from tests.lesson_blocks import page_fixture

STEM = "multi-gpu"


page = page_fixture(STEM)


def test_every_block_has_a_lesson_id_and_prints_something(page):
    printed = page.printed
    python = [b for b in printed if not b.startswith(("claim-", "describe-", "quiz-"))]
    assert len(python) >= 14
    assert all(block_id.startswith("multi-gpu-") for block_id in python)
    assert all(out.strip() for block_id, out in printed.items() if block_id in python)


def test_cpu_claims_hold_and_could_fail_and_gpu_claims_wait_for_a_gpu(page):
    made = page.claims
    cpu = [c for c in made if c.needs is None]
    gpu = [c for c in made if c.needs is not None]
    assert len(cpu) >= 5 and len(gpu) >= 1
    assert [c.text for c in cpu if c.status != claims.HOLDS] == []
    assert [c.rule for c in cpu if not claims.can_fail(c)] == []
    assert {c.status for c in gpu} <= {claims.HOLDS, claims.NOT_CHECKED}
    for c in cpu:
        rule_kinds = {c.kinds[n] for n in claims.fact_names(c.rule)}
        assert rule_kinds & set(claims.INDEPENDENT), (c.rule, c.kinds)
        assert c.flip_margin is not None and 0.05 < c.flip_margin < 100, (c.rule, c.flip_margin)


def test_the_teaching_claims_rest_on_the_gloo_medians_and_nvidias_nvlink_measurement(page):
    made, values = page.claims, page.facts
    teaching = {c.rule: c for c in made if c.teaching}
    (gloo,) = [c for r, c in teaching.items() if "gloo_smallest_over_formula" in r]
    assert gloo.kinds["multigpu.gloo_smallest_over_formula"] == facts.MEASURED
    assert gloo.kinds["multigpu.gloo_ranks"] == facts.CONSTANT
    (tp,) = [c for r, c in teaching.items() if "pub.p2p.h100_sxm" in r]
    assert tp.kinds["pub.p2p.h100_sxm"] == facts.PUBLISHED
    assert tp.kinds["multigpu.tp_compute_ms"] == facts.PREDICTED
    at_p2p = values["multigpu.tp_sent_gb"].value / values["pub.p2p.h100_sxm"].value * 1e3
    assert values["multigpu.tp_at_p2p_ms"].value == pytest.approx(at_p2p)
    assert values["multigpu.tp_nvlink_ms"].value < at_p2p < values["multigpu.tp_compute_ms"].value


def test_every_fact_states_its_kind_and_the_formulas_are_described(page):
    printed, values = page.printed, page.facts
    text = (REPO / "docs" / "lessons" / f"{STEM}.md").read_text(encoding="utf-8")
    assert text.count("facts.publish(") == text.count("kind=")
    for name in ("ring_8_gb", "zero3_sent_gb", "act_64_gb", "tp_pcie_ms", "bubble_8_8"):
        assert values[f"multigpu.{name}"].kind == facts.PREDICTED, name
    v = {name: f.value for name, f in values.items()}
    assert v["multigpu.ring_8_gb"] < v["multigpu.ring_1024_gb"] < 2 * v["multigpu.grad_gb"]
    assert v["multigpu.zero3_memory_gb"] * 8 == v["multigpu.zero0_memory_gb"]
    assert v["multigpu.zero3_sent_gb"] == 1.5 * v["multigpu.zero0_sent_gb"]
    assert v["multigpu.act_8_gb"] == v["multigpu.act_64_gb"]
    assert v["multigpu.peak_ckpt_gb"] < v["multigpu.card_gb"] < v["multigpu.peak_64_gb"]
    assert 55 < v["multigpu.m_for_10pct_8"] < 70 and v["multigpu.bubble_8_8"] > 0.4
    assert v["multigpu.h100_pcie_over_nvlink"] == pytest.approx(900 / 128)
    assert v["multigpu.after_oom_is_oom"] is True
    assert v["multigpu.broadcast_elapsed_s"] >= v["multigpu.broadcast_timeout_s"] == 1800
    described = " ".join(out for b, out in printed.items() if b.startswith("describe-"))
    assert "Each GPU sends 49.0 GB with 8 GPUs" in described
    assert "about 8 per stage" in described


def test_the_gpu_rows_price_the_gradients_all_reduce_on_8_gpus(page):
    printed, values = page.printed, page.facts
    assert "**Ring all-reduce of the gradients on 8 GPUs**" in printed["multi-gpu-rows"]
    predicted = values["pred.all_reduce_time.h100_sxm"]
    assert predicted.kind == facts.PREDICTED and predicted.unit == "ms"
    assert predicted.value == pytest.approx(values["multigpu.h100_nvlink_ms"].value)


def test_the_gloo_table_sets_the_measurement_beside_the_ring_formula(page):
    printed, values = page.printed, page.facts
    table = printed["multi-gpu-gloo"]
    assert "gloo all-reduce of fp32 tensors, 2 ranks on cpu" in table
    assert "| ring formula (µs) | measured / formula |" in table
    for size in ("64 KiB", "256 KiB", "1 MiB", "4 MiB", "16 MiB", "64 MiB"):
        assert f"| {size} |" in table
    assert values["multigpu.gloo_check_ok"].value is True
    assert values["multigpu.gloo_largest_bytes"].value == 64 * 2**20


def test_without_two_gpus_the_page_says_which_rows_need_them(page):
    import torch

    printed = page.printed
    if torch.cuda.is_available() and torch.cuda.device_count() >= 2:
        pytest.skip("this machine measures the NCCL rows itself")
    out = printed["multi-gpu-nccl"]
    assert "These rows need more than one GPU" in out or "reference result bundle" in out


def test_the_zero_table_and_the_cli_agree(page, run_cli):
    import json

    values = page.facts
    r = run_cli("budget", "--params", "7e9", "--gpus", "8", "--zero", "3", "--json")
    assert json.loads(r.stdout)["comm_bytes_per_step"] / 1e9 == pytest.approx(
        values["multigpu.zero3_sent_gb"].value
    )


def test_the_hang_examples_are_diagnosed_through_the_corpus(page):
    printed = page.printed
    assert "cuda_oom" in printed["multi-gpu-hang-oom"]
    assert "nccl_timeout" in printed["multi-gpu-hang-broadcast"]
    assert "BROADCAST" in printed["multi-gpu-hang-broadcast"]


def test_the_snippet_is_included_and_its_sources_cited():
    text = (REPO / "docs" / "lessons" / f"{STEM}.md").read_text()
    assert '--8<-- "allreduce_bench.py"' in text
    sources = text[text.index("## Sources") :]
    for needed in ("nccl-tests", "1910.02054", "1909.08053", "1811.06965", "2304.11277"):
        assert needed in sources
    assert "cuda-errors.md#when-one-gpu-waits-for-another-nccl-timeouts-and-errors" in text


def test_the_quiz_predicts_a_time_from_the_measured_bandwidth(page):
    values = page.facts
    templated = [q for q in quizzes.questions(STEM) if q.facts]
    assert templated, "a predict-the-number question reads the page's facts"
    for question in templated:
        numbers = {name: values[name].value for name in question.facts}
        filled = quizzes.fill(question, numbers)
        assert sum(o.correct for o in filled.options) == 1
    bus = values["multigpu.gloo_largest_bus_gbs"].value
    size = values["multigpu.gloo_largest_bytes"].value
    readings = multi_gpu.allreduce_time_readings(
        {"multigpu.gloo_largest_bus_gbs": bus, "multigpu.gloo_largest_bytes": size}
    )
    assert readings["ring"] == common.about(4 * size / (bus * 1e9) * 1e3)
