"""Lessons tell the truth: sources cited, claims checked, GPU figures labelled with their origin.

Site-wide rules (every lesson): a closing ``## Sources`` section with at least three
well-formed links, each also cited in the lesson's body; a ``claim(`` in every lesson with
executed output; a predict-the-number question in every quiz. Then the GPU-figure blocks
of the lessons that show GPU numbers, run against the fixture bundles: their figures carry
the bundle's stamp, never this build's name, and their GPU claims are checked against the
bundle instead of being left unchecked. Blocks that run as the build runs them are read
from the strict build's record (``tests/lesson_blocks.py``), not run again.
"""

from __future__ import annotations

import contextlib
import functools
import io
import re
import shutil
from pathlib import Path

import pytest

from gpulesson.course.why_gpus import gpu_peaks_markdown
from gpulesson.results import datasheets
from gpulesson.results.bundle import load
from gpulesson.results.compare import datasheet_fraction
from gpulesson.site import claims, content, facts, gpu_figures
from gpulesson.site.course_rules import sources_of, well_formed
from tests.conftest import REPO
from tests.lesson_blocks import (
    built_page,
    claims_after,
    fences_after,
    page_blocks,
    run_claims_after,
)

LESSONS = REPO / "docs" / "lessons"
ALL_LESSONS = sorted(p.stem for p in LESSONS.glob("*.md"))
FIXTURES = REPO / "tests" / "fixtures" / "bundles"


def _text(stem: str) -> str:
    return (LESSONS / f"{stem}.md").read_text(encoding="utf-8")


def test_the_sources_parser_reads_inline_and_reference_links_and_finds_citations():
    page = (
        "# L\n\nA fact [x][a] and [y](https://b.org/y).\n\n## Sources\n\n"
        "- [A][a]\n- [B](https://b.org/y)\n- [C](https://c.org)\n\n[a]: https://a.org/a\n"
    )
    section, links, cited = sources_of(page)
    assert links == ["https://b.org/y", "https://c.org", "https://a.org/a"]
    assert set(cited) == {"https://a.org/a", "https://b.org/y"}  # C is not cited in the body
    with pytest.raises(ValueError, match="not '## Sources'"):
        sources_of("# L\n\n## Sources\n\n## Exercises\n")


@pytest.mark.parametrize("stem", ALL_LESSONS)
def test_every_lesson_ends_with_sources_of_three_well_formed_links(stem):
    _, links, _ = sources_of(_text(stem))
    assert len(set(links)) >= 3, f"{stem}: {len(set(links))} links under ## Sources"
    bad = [url for url in links if not well_formed(url)]
    assert bad == [], f"{stem}: malformed links {bad}"


@pytest.mark.parametrize("stem", ALL_LESSONS)
def test_every_source_is_cited_where_its_fact_is_used(stem):
    _, links, cited = sources_of(_text(stem))
    uncited = sorted(set(links) - set(cited))
    assert uncited == [], f"{stem}: sources never cited in the lesson's body: {uncited}"


# Lessons whose executed blocks publish no measured or published figure: example rates,
# example probe inputs and unit arithmetic, rendered as ```describe sentences, not checked.
NOTHING_MEASURED = {
    "where-to-run": "example rates and the probe's verdicts on example inputs",
    "software-stack": "the probe's report of this machine, and GB/GiB arithmetic on an example",
}


@pytest.mark.parametrize("stem", ALL_LESSONS)
def test_every_lesson_with_executed_output_states_checked_claims(stem):
    text = _text(stem)
    if 'exec="on"' not in text:
        pytest.skip(f"{stem} has no executed block")
    if stem in NOTHING_MEASURED:
        # It may check nothing only while it measures nothing: no measured or published fact.
        assert "facts.MEASURED" not in text and "facts.PUBLISHED" not in text, stem
        assert "gpu_rows." not in text and "gpu_figures." not in text, stem
        return
    assert "```claim" in text or "claim(" in text, (
        f"{stem} prints measured numbers but checks nothing"
    )


@pytest.mark.parametrize("stem", ALL_LESSONS)
def test_every_quiz_asks_for_a_number_the_page_computed(stem):
    questions = content.load(REPO / "docs").quizzes[stem]
    templated = [q for q in questions if q.facts]
    assert templated, f"{stem}.quiz.yml has no predict-the-number question"


@pytest.mark.parametrize(
    "stem", ["why-gpus", "timing", "roofline", "software-stack", "where-to-run"]
)
def test_the_quiz_reads_facts_a_block_of_its_own_page_publishes(stem):
    text = _text(stem)
    for q in content.load(REPO / "docs").quizzes[stem]:
        for name in q.facts:
            assert f'"{name}"' in text, f"{stem}: the quiz reads {name}, no block publishes it"


# --- running a lesson's executed blocks -----------------------------------------------------

_BLOCK = re.compile(r'^```python exec="on"[^\n]*id="([^"]+)"[^\n]*\n(.*?)^```', re.S | re.M)


def block(stem: str, block_id: str) -> str:
    """The code of the executed block ``block_id`` of lesson ``stem``."""
    for found_id, code in _BLOCK.findall(_text(stem)):
        if found_id == block_id:
            return code
    raise AssertionError(f"no block {block_id!r} in {stem}.md")


def run_claims(stem: str, block_id: str) -> None:
    """Run a python block of claims, or the claim blocks that follow python block ``block_id``."""
    if any(kind == "claim" for kind, *_ in _following(stem, block_id)):
        run_claims_after(stem, block_id)
    else:
        run_block(stem, block_id)


def _following(stem: str, block_id: str) -> list[tuple]:
    blocks = page_blocks(stem)
    start = next(i for i, b in enumerate(blocks) if b[1] == block_id)
    return blocks[start + 1 : start + 2]


def run_block(stem: str, block_id: str) -> str:
    """Run one block as the build does (its page's facts so far kept) and return its output."""
    facts.begin_block(block_id)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block(stem, block_id), f"{stem}:{block_id}", "exec"), {})  # noqa: S102
    facts.end_block()
    return out.getvalue()


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """A results folder holding the two fixture bundles as reference bundles."""
    (tmp_path / "reference").mkdir()
    for name in ("fixture_t4.json", "fixture_h100.json"):
        shutil.copy(FIXTURES / name, tmp_path / "reference" / name)
    return tmp_path


def _use_bundles(monkeypatch, root: Path) -> None:
    """Lesson blocks see ``root`` as results/ on a build without a GPU."""
    original = gpu_figures.reference
    monkeypatch.setattr(gpu_figures, "reference", functools.partial(original, root, on_gpu=False))
    # blocks that read an entry's GPU rows (why-gpu-peak): the bundles under root, no GPU
    monkeypatch.setattr(gpu_figures, "build_has_gpu", lambda: False)
    reads = gpu_figures.gpu_measurements
    monkeypatch.setattr(gpu_figures, "gpu_measurements", functools.partial(reads, root=root))
    import gpulesson.timing.bench as bench

    monkeypatch.setattr(bench, "accelerator", lambda: None)


@pytest.fixture
def page():
    """Start a lesson's page of facts (``page(stem)``); forget every fact after the test."""

    def begin(stem: str) -> None:
        facts.reset()
        facts.begin_page(f"lessons/{stem}.md")

    yield begin
    facts.reset()


# (lesson, block that shows bundle figures, facts it publishes -> bundle measurement, scale,
#  block that states the GPU claims, facts the claims block needs from earlier blocks)
BUNDLE_BLOCKS = [
    (
        "timing",
        "timing-reference",
        {
            "timing.gpu_inflation": ("stopwatch.inflation", 1.0),
            "timing.gpu_launch_us": ("launch_overhead.eager", 1e6),
            "timing.gpu_graph_us": ("launch_overhead.cuda_graph", 1e6),
        },
        "timing-reference",
        {},
    ),
    (
        "roofline",
        "roof-link-reference",
        {
            "roofline.gpu_on_device_gbs": ("memory_bandwidth", 1e-9),
            "roofline.gpu_pinned_gbs": ("h2d.pinned", 1e-9),
            "roofline.gpu_pageable_gbs": ("h2d.pageable", 1e-9),
        },
        "roof-link-reference",
        {},
    ),
    (
        "why-gpus",
        "why-gpu-peak",
        {
            "why.gpu_fp32_tflops": ("matmul_peak.fp32", 1e-12),
            "why.gpu_half_tflops": ("matmul_peak.bf16", 1e-12),
        },
        "why-gpu-peak",
        {},
    ),
]


@pytest.mark.parametrize(
    ("stem", "block_id", "published", "claims_block", "earlier"),
    BUNDLE_BLOCKS,
    ids=[b[1] for b in BUNDLE_BLOCKS],
)
def test_a_cpu_build_shows_the_newest_bundles_figures_under_its_stamp_never_as_its_own(
    stem, block_id, published, claims_block, earlier, results, monkeypatch, page
):
    _use_bundles(monkeypatch, results)
    page(stem)
    for name, value in earlier.items():
        facts.publish(name, value)
    out = run_block(stem, block_id)
    ref = gpu_figures.reference()
    newest = load(FIXTURES / "fixture_h100.json")  # created a day after the T4 fixture
    assert ref.device == newest.provenance.device_name
    stamp = gpu_figures.stamp_markdown(ref)
    assert out.startswith(stamp)
    assert ref.device in out and ref.date in out and f"results/reference/{ref.file}" in out
    figures = out[len(stamp) :]
    assert "this build" not in figures.lower()  # the figures are the bundle's, never ours
    for fact, (measurement, scale) in published.items():
        assert facts.value(fact) == pytest.approx(newest.measurement(measurement).value * scale)
    # The GPU claims are now checked against the bundle's figures, not left unchecked.
    run_claims(stem, claims_block)
    gpu_claims = [c for c in claims.claims() if c.needs == "cuda"]
    assert gpu_claims and all(c.status == claims.HOLDS for c in gpu_claims), gpu_claims
    assert all(claims.can_fail(c) for c in gpu_claims)


@pytest.mark.parametrize(
    ("stem", "block_id", "published", "claims_block", "earlier"),
    BUNDLE_BLOCKS,
    ids=[b[1] for b in BUNDLE_BLOCKS],
)
def test_with_no_bundle_and_no_gpu_nothing_is_shown_as_measured_on_a_gpu(
    stem, block_id, published, claims_block, earlier, tmp_path, monkeypatch, page
):
    _use_bundles(monkeypatch, tmp_path)  # an empty results folder
    page(stem)
    for name, value in earlier.items():
        facts.publish(name, value)
    out = run_block(stem, block_id)
    assert "reference result bundle, not from this build" not in out
    assert not set(published) & set(facts.page_facts())
    run_claims(stem, claims_block)
    gpu_claims = [c for c in claims.claims() if c.needs == "cuda"]
    assert gpu_claims and {c.status for c in gpu_claims} == {claims.NOT_CHECKED}
    assert all(claims.to_markdown(c) == claims.WAITING for c in gpu_claims)  # no blanks


def test_a_failing_bundle_figure_shows_the_warning_instead_of_the_sentence(
    results, monkeypatch, page
):
    _use_bundles(monkeypatch, results)
    page("timing")
    run_block("timing", "timing-reference")
    facts.publish("timing.gpu_graph_us", 100.0, "µs")  # a graph slower than eager: wrong
    out = "\n".join(run_claims_after("timing", "timing-reference"))
    assert "the numbers do not bear this out" in out
    assert [c.status for c in claims.claims() if "CUDA graph" in c.text] == [claims.FAILS]


def test_the_peak_table_holds_each_measured_dtype_against_the_dense_datasheet_peak():
    bundle = load(FIXTURES / "fixture_h100.json")
    peaks = [m for m in bundle.measurements if m.entry == "matmul_peak"]
    table = gpu_peaks_markdown(bundle.provenance.device_name, bundle.datasheet, peaks)
    for m in peaks:
        dense = bundle.datasheet.dense_flop_per_s(m.dtype)
        row = f"| {m.dtype} | {m.value / 1e12:,.1f} | {dense / 1e12:,.1f} | "
        assert row + f"{datasheet_fraction(m, bundle.datasheet):.0%} |" in table
    assert "half the printed ones" in table  # the H100 page prints sparsity figures
    t4 = load(FIXTURES / "fixture_t4.json")
    t4_table = gpu_peaks_markdown(t4.provenance.device_name, t4.datasheet, t4.measurements)
    assert "| bf16 | 20.0 | — | — |" in t4_table  # no bf16 tensor cores on a T4: no peak


# --- the corrections the truth issue asked for, as the pages render them --------------------


def test_roofline_bandwidth_and_compute_roofs_are_the_best_rates_on_the_page(built_site, page):
    run = built_page(built_site, "roofline")
    out = run.printed["roof-measure"]
    assert "| memory bandwidth |" in out
    roof = facts.value("roofline.bandwidth_roof")
    rates = [facts.value(f"roofline.{n}_gbs") for n in ("copy", "add", "softmax", "bf16_add")]
    assert roof == max(rates)
    matmuls = [facts.value(f"roofline.{n}_gflops") for n in ("small_mm", "large_mm")]
    assert facts.value("roofline.peak_gflops") == max(matmuls)
    assert all(facts.value(f"roofline.{n}_share") <= 1.0 + 1e-9 for n in ("add", "softmax"))
    shown = "\n".join(run.printed[f] for f in fences_after("roofline", "roof-measure"))
    # The roofs are the page's best rates by construction: described, not checked.
    assert f"The bandwidth roof, {roof:.1f} GB/s, is the fastest" in shown
    made = claims_after(run, "roofline", "roof-measure")
    mine = [c for c in made if c.needs is None]
    assert [c.rule for c in mine] == ["roofline.add_gflops < 0.1 * roofline.peak_gflops"]
    for c in mine:  # a teaching claim: holds, or says "not shown", as this build's medians say
        holds = claims.check_rule(c.rule, c.numbers)
        assert c.teaching and c.status == (claims.HOLDS if holds else claims.NOT_SHOWN)
        assert c.kinds == {n: facts.MEASURED for n in c.numbers}
        assert c.flip_margin is not None
    gpu = [c for c in made if c.needs == "cuda"]
    assert gpu and {c.status for c in gpu} == {claims.NOT_CHECKED}  # this build has no GPU


def test_the_datasheet_table_shows_gddr_near_a_terabyte_and_no_bf16_on_a_t4(built_site, page):
    run = built_page(built_site, "roofline")
    out = run.printed["roof-datasheets"]
    t4 = next(line for line in out.splitlines() if line.startswith("| NVIDIA T4 |"))
    assert t4.split(" | ")[3] == "—"  # the bf16 column
    assert datasheets.get("t4").dense_flop_per_s("bf16") is None
    assert facts.value("roofline.rtx4090_gbs") >= 900
    assert facts.get("roofline.rtx4090_gbs").kind == facts.CONSTANT  # a datasheet figure
    (shown,) = [run.printed[f] for f in fences_after("roofline", "roof-datasheets")]
    assert "rated at 1,008 GB/s, about 1 TB/s" in shown and "3.3 times as much" in shown
    # two datasheet figures: described, not checked
    assert claims_after(run, "roofline", "roof-datasheets") == []


def test_a_notebooks_cpu_runtime_is_case_0_not_case_3(built_site, page):
    run = built_page(built_site, "where-to-run")
    out = run.printed["where-notebook-probe"]
    first = out.splitlines()[2]
    assert first.startswith("| Hosted notebook, CPU runtime") and "| 0 `no_nvidia_gpu` |" in first
    assert facts.value("where.cpu_runtime_case") == 0
    (shown,) = [run.printed[f] for f in fences_after("where-to-run", "where-notebook-probe")]
    assert shown.startswith("A notebook's CPU runtime is case 0 of")
    answer = _text("where-to-run").split("Worked answer")[1]  # exercise 1's answer
    assert "the CPU runtime is case 0" in answer and "not case 3" in answer


def test_bf16_advice_names_the_t4_and_the_emulation_check():
    text = _text("roofline")
    assert "is_bf16_supported" in text and "including_emulation" in text and "T4" in text
