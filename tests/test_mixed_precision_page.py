"""The mixed-precision lesson: its blocks run, its claims hold and can fail, its quiz reads them.

The tests read what the strict build's run of the page's blocks left
(``tests/lesson_blocks.py``): every checked claim must hold on this CPU (GPU claims are not
checked here, and must say so), every claim must be able to fail, and the predict-the-number
question must offer the figure the page measured. The three GPU blocks run twice more: as a
CUDA build runs them (the suite's answer stood in for by the H100 fixture bundle's rows) and
as a CPU build with a reference bundle (the suite never asked).
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from gpulesson.course import mixed_precision
from gpulesson.precision import gpu
from gpulesson.results import entries_precision
from gpulesson.results.bundle import Measurement, load
from gpulesson.results.compare import Sourced
from gpulesson.results.measurements import single
from gpulesson.site import build_bundle, claims, content, facts, gpu_figures, quizzes
from tests.conftest import REPO
from tests.lesson_blocks import exec_blocks, page_fixture, run_block, run_claims_after

STEM = "mixed-precision"


page = page_fixture(STEM)


def test_every_block_has_the_lesson_prefix_and_a_unique_id():
    ids = [block_id for block_id, _ in exec_blocks(STEM)]
    assert ids and all(i.startswith("mp-") for i in ids)
    assert len(ids) == len(set(ids))


def test_every_block_prints_something(page):
    empty = [block_id for block_id, text in page.printed.items() if not text.strip()]
    assert not empty


def test_claims_hold_on_this_cpu_and_can_fail(page):
    made = page.claims
    assert len(made) >= 12
    for c in made:
        assert claims.can_fail(c), c.rule
        if c.needs is None:
            assert c.status == claims.HOLDS, (c.text, c.rule, c.numbers)
        elif not torch.cuda.is_available():
            assert c.status in (claims.NOT_CHECKED, claims.HOLDS), c.text


def test_every_check_reads_a_measured_or_published_fact(page):
    for c in page.claims:
        if c.status == claims.NOT_CHECKED:
            continue
        kinds = {c.kinds[name] for name in claims.fact_names(c.rule)}
        assert kinds & set(claims.INDEPENDENT), (c.rule, c.kinds)
        assert c.flip_margin is not None, c.rule


def test_the_formats_limits_are_described_not_checked(page):
    """torch.finfo's limits and the probes' casts follow from the formats: rendered, no mark."""
    rules = " ".join(c.rule for c in page.claims)
    for name in ("mp.fp16_max", "mp.bf16_eps", "mp.cast_", "mp.grad_lost", "mp.hw_", "mp.amp_bpp"):
        assert name not in rules, name
    f = page.values()
    assert f["mp.bf16_eps_over_fp16"] == 8 and 0.99 < f["mp.bf16_max_of_fp32"] < 1
    assert f["mp.amp_bpp"] == f["mp.fp32_bpp"] == 16
    described = [text for block, text in page.printed.items() if block.startswith("describe-")]
    assert any("65,504" in text and "99.6% of fp32's" in text for text in described)
    assert any("16 bytes per parameter" in text for text in described)


def test_the_teaching_claims_rest_on_this_builds_runs(page):
    teaching = {c.rule for c in page.claims if c.teaching}
    assert "mp.trace_lower > 0 and mp.trace_fp32 > 0" in teaching
    assert "mp.err_tf32_over_fp32 > 100 and mp.err_tf32_emulated < mp.err_bf16" in teaching
    assert any(rule.startswith("mp.act_est_ratio < mp.act_meas_ratio") for rule in teaching)
    assert any(rule.startswith("mp.bug_skipped == mp.bug_steps") for rule in teaching)
    assert all(c.status == claims.HOLDS for c in page.claims if c.teaching)


def test_the_trace_agrees_with_pytorchs_op_reference(page):
    f = page.values()
    assert f["mp.trace_disagreements"] == 0 and f["mp.trace_checked"] >= 10
    assert "`linear`" in page.printed["mp-trace"]
    assert "`cross_entropy`" in page.printed["mp-trace"]


def test_gpu_rows_say_they_need_a_gpu_on_a_cpu_build(page):
    if torch.cuda.is_available():
        pytest.skip("a CUDA build measures these rows")
    for block_id in ("mp-gpu-speed", "mp-gpu-accuracy", "mp-gpu-steps"):
        text = page.printed[block_id]
        assert "needs a GPU" in text or "reference result bundle" in text, block_id


def test_the_quiz_offers_the_measured_activation_ratio(page, monkeypatch):
    monkeypatch.chdir(REPO)
    content.reset()  # read this checkout's docs/, not a content cache another test left
    written = quizzes.questions(STEM)
    content.reset()
    templated = [q for q in written if q.facts]
    assert templated, "the quiz needs a predict-the-number question"
    for question in templated:
        values = mixed_precision.activation_ratio_readings(
            {n: page.values()[n] for n in question.facts}
        )
        right = next(o.text for o in question.options if o.correct)
        assert "{measured}" in right or "{value}" in right
        assert values["measured"] == f"{page.values()['mp.act_meas_ratio']:.2f}"


# --- the GPU blocks: this build's GPU through the suite, else a reference bundle ---------

GPU_BLOCKS = ("mp-gpu-speed", "mp-gpu-accuracy", "mp-gpu-steps")
FIXTURE = REPO / "tests" / "fixtures" / "bundles" / "fixture_h100.json"


def _fixture_measurements(entry: str, device: str) -> tuple[Measurement, ...]:
    """What a CUDA build's suite would return: the H100 fixture bundle's rows of ``entry``.

    The fixture has no TF32 matmul row and no ``tf32_accuracy`` or ``amp_step`` rows; those
    are made here (test doubles, in the entries' names and units).
    """
    assert device == "cuda", device
    fixture = load(FIXTURE)
    rows = [m for m in fixture.measurements if m.entry == entry]
    if entry == "matmul_peak":
        fp32 = fixture.measurement("matmul_peak.fp32")
        rows.append(dataclasses.replace(fp32, name="matmul_peak.tf32", value=4 * fp32.value))
    elif entry == "tf32_accuracy":
        rows = entries_precision.accuracy_rows("cpu", 64)
        emulated = next(m for m in rows if m.name == "tf32_accuracy.tf32_emulated")
        rows.insert(1, dataclasses.replace(emulated, name="tf32_accuracy.tf32"))
    elif entry == "amp_step":
        rows = [
            single(seconds, name=f"amp_step.{p}", entry="amp_step", unit="s", label=p)
            for p, seconds in (("fp32", 0.2), ("tf32", 0.1), ("bf16", 0.05), ("fp16", 0.06))
        ]
    return tuple(rows)


def _run_gpu_blocks() -> tuple[dict[str, str], dict[str, object], list[claims.Claim]]:
    """Run the three GPU blocks (and the claims after them) on a fresh page of facts."""
    page = f"lessons/{STEM}.md"
    facts.reset()
    facts.begin_page(page)
    printed: dict[str, str] = {}
    try:
        for block_id, code in exec_blocks(STEM):
            if block_id in GPU_BLOCKS:
                printed[block_id] = run_block(STEM, block_id, code)
                printed[f"{block_id}:claims"] = "\n".join(run_claims_after(STEM, block_id))
        values = {name: fact.value for name, fact in facts.page_facts(page).items()}
        made = [c for c in claims.claims() if c.page == page]
    finally:
        facts.reset()
    return printed, values, made


def test_a_cuda_build_reads_its_gpu_rows_from_the_suite(monkeypatch):
    """On CUDA the blocks ask the suite (once per build) and rebuild their rows from it."""
    asked = []

    def measure(entry: str, device: str) -> tuple[Measurement, ...]:
        asked.append((entry, device))
        return _fixture_measurements(entry, device)

    monkeypatch.setattr(gpu_figures, "build_has_gpu", lambda: True)
    monkeypatch.setattr(build_bundle, "applies", lambda entry, device: True, raising=False)
    monkeypatch.setattr(build_bundle, "measure", measure)
    printed, values, made = _run_gpu_blocks()
    assert asked == [("matmul_peak", "cuda"), ("tf32_accuracy", "cuda"), ("amp_step", "cuda")]
    for block_id in GPU_BLOCKS:
        text = printed[block_id]
        assert "this build's GPU" in text and "reference bundle" not in text, block_id
        assert "needs a GPU" not in text and "not from this build's machine" not in text
    fixture = load(FIXTURE)
    fp32 = fixture.measurement("matmul_peak.fp32").value
    assert values["mp.matmul_peak_fp32"] == fp32
    assert values["mp.tf32_speedup"] == pytest.approx(4.0)
    assert values["mp.bf16_speedup"] == fixture.measurement("matmul_peak.bf16").value / fp32
    assert "`matmul_peak.fp8`" not in printed["mp-gpu-speed"]  # only the rows the table lists
    speed_rows = [line for line in printed["mp-gpu-speed"].splitlines() if "`matmul_peak." in line]
    assert [line.split("`")[-2] for line in speed_rows] == list(gpu.SPEED)
    assert values["mp.tf32_accuracy_tf32"] == values["mp.tf32_accuracy_tf32_emulated"]
    assert values["mp.step_bf16_speedup"] == pytest.approx(4.0)
    assert values["mp.step_fp16_speedup"] == pytest.approx(0.2 / 0.06)
    gpu_claims = [c for c in made if c.needs == "cuda"]
    assert len(gpu_claims) == 3
    assert all(c.status == claims.HOLDS for c in gpu_claims), [(c.rule, c.status) for c in made]


def test_a_cpu_build_shows_the_reference_bundles_rows_and_measures_nothing(monkeypatch):
    """On a CPU build the blocks read the newest reference bundle, stamped; the suite is
    never asked."""

    def measure(entry: str, device: str) -> tuple[Measurement, ...]:
        raise AssertionError(f"a CPU build measured {entry} on {device}")

    ref = Sourced(load(FIXTURE), "reference", FIXTURE.name)
    monkeypatch.setattr(gpu_figures, "build_has_gpu", lambda: False)
    monkeypatch.setattr(gpu_figures, "newest_gpu_bundle", lambda root=None: ref)
    monkeypatch.setattr(build_bundle, "measure", measure)
    printed, values, made = _run_gpu_blocks()
    speed = printed["mp-gpu-speed"]
    assert speed.startswith(gpu_figures.stamp_markdown(ref))
    assert "reference bundle" in speed and "`matmul_peak.bf16`" in speed
    assert values["mp.matmul_peak_fp32"] == ref.bundle.measurement("matmul_peak.fp32").value
    assert "mp.tf32_speedup" not in values  # the fixture has no TF32 row
    for block_id in ("mp-gpu-accuracy", "mp-gpu-steps"):  # the fixture has no such rows
        assert "needs a GPU" in printed[block_id], block_id
    assert all(c.status == claims.NOT_CHECKED for c in made if c.needs == "cuda")
