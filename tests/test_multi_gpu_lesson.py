"""The multi-GPU lesson: its blocks run, its claims hold and can fail, its quiz reads its numbers.

The blocks run in page order as the build runs them (same page, same facts), the gloo
all-reduce of two CPU processes included (a few seconds). Claims about GPU figures must be
"not checked" on this CPU build without a reference bundle; every other claim must hold and
be able to fail.
"""

from __future__ import annotations

import pytest

from gpulesson.site import claims, content, facts, quiz_values, quizzes
from tests.conftest import REPO
from tests.lesson_blocks import run_page

STEM = "multi-gpu"


@pytest.fixture(scope="module")
def page():
    """Run every block once for the module; yield (printed Markdown by id, claims, facts)."""
    run = run_page(STEM)
    yield run.printed, run.claims, run.facts
    facts.reset()
    content.reset()


def test_every_block_has_a_lesson_id_and_prints_something(page):
    printed, _, _ = page
    assert len(printed) >= 16
    assert all(block_id.startswith("multi-gpu-") for block_id in printed)
    assert all(out.strip() for out in printed.values())


def test_cpu_claims_hold_and_could_fail_and_gpu_claims_wait_for_a_gpu(page):
    _, made, _ = page
    cpu = [c for c in made if c.needs is None]
    gpu = [c for c in made if c.needs is not None]
    assert len(cpu) >= 10 and len(gpu) >= 1
    assert [c.text for c in cpu if c.status != claims.HOLDS] == []
    assert [c.rule for c in cpu if not claims.can_fail(c)] == []
    assert {c.status for c in gpu} <= {claims.HOLDS, claims.NOT_CHECKED}


def test_the_gloo_table_sets_the_measurement_beside_the_ring_formula(page):
    printed, _, values = page
    table = printed["multi-gpu-gloo"]
    assert "gloo all-reduce of fp32 tensors, 2 ranks on cpu" in table
    assert "| ring formula (µs) | measured / formula |" in table
    for size in ("64 KiB", "256 KiB", "1 MiB", "4 MiB", "16 MiB", "64 MiB"):
        assert f"| {size} |" in table
    assert values["multigpu.gloo_check_ok"].value is True
    assert values["multigpu.gloo_largest_bytes"].value == 64 * 2**20


def test_without_two_gpus_the_page_says_which_rows_need_them(page):
    import torch

    printed, _, _ = page
    if torch.cuda.is_available() and torch.cuda.device_count() >= 2:
        pytest.skip("this machine measures the NCCL rows itself")
    out = printed["multi-gpu-nccl"]
    assert "These rows need more than one GPU" in out or "reference result bundle" in out


def test_the_zero_table_and_the_cli_agree(page, run_cli):
    import json

    _, _, values = page
    r = run_cli("budget", "--params", "7e9", "--gpus", "8", "--zero", "3", "--json")
    assert json.loads(r.stdout)["comm_bytes_per_step"] / 1e9 == pytest.approx(
        values["multigpu.zero3_sent_gb"].value
    )


def test_the_hang_examples_are_diagnosed_through_the_corpus(page):
    printed, _, _ = page
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
    _, _, values = page
    templated = [q for q in quizzes.questions(STEM) if q.facts]
    assert templated, "a predict-the-number question reads the page's facts"
    for question in templated:
        numbers = {name: values[name].value for name in question.facts}
        filled = quizzes.fill(question, numbers)
        assert sum(o.correct for o in filled.options) == 1
    bus = values["multigpu.gloo_largest_bus_gbs"].value
    size = values["multigpu.gloo_largest_bytes"].value
    readings = quiz_values.allreduce_time_readings(
        {"multigpu.gloo_largest_bus_gbs": bus, "multigpu.gloo_largest_bytes": size}
    )
    assert readings["ring"] == quiz_values.about(4 * size / (bus * 1e9) * 1e3)
