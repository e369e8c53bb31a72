"""The memory and scale lessons' pictures: each drawn from the numbers the course computes.

Memory over a step peaks where the memory lesson's measurement peaks (the same function and
configuration), and lower with checkpointing; the pipeline diagram idles the share
``bubble_fraction`` gives; the ring moves ``ring_all_reduce_bytes``; the bars add up to the
budgets' totals; the timelines come from the profiler's events and the loader's readings.
Every figure is well-formed SVG with a text alternative, and escapes what it is given.
"""

from __future__ import annotations

import gzip
import html
import json
import re
import xml.etree.ElementTree as ET
from dataclasses import replace

import pytest

from gpulesson.errors.fix_ladder import ladder_budget_rows
from gpulesson.memory import diagrams, ledger_chart, timeline
from gpulesson.memory.budget import estimate
from gpulesson.memory.capacity import CAPACITY_USES, capacity
from gpulesson.memory.comm import ring_all_reduce_bytes, zero_tradeoffs
from gpulesson.memory.gpt2 import GPT2Config
from gpulesson.memory.measure import MeasuredStep, measure_gpt2
from gpulesson.memory.parallel import bubble_fraction
from gpulesson.memory.torch_tools import CATEGORIES
from gpulesson.results import entries_memory
from gpulesson.results.bundle import MAX_SERIES_POINTS, Measurement
from gpulesson.results.suite import Context, Device
from gpulesson.timing import figures, trace_chart
from gpulesson.timing.loader import LoaderRun
from gpulesson.timing.profile import profile_gpt_step, replay_peak
from gpulesson.units import GB, GIB

# The memory lesson's measured model (docs/lessons/memory.md, block memory-measure-one).
LESSON_CONFIG = GPT2Config(
    vocab_size=512, seq_len=64, hidden=64, heads=4, layers=2, attention="eager"
)
LESSON_BATCH = 4
SMALL = GPT2Config(vocab_size=64, seq_len=16, hidden=32, heads=2, layers=2, attention="eager")


def _svg(html_: str) -> list[ET.Element]:
    """Every SVG in a figure's HTML, parsed as XML (so it is well-formed)."""
    found = re.findall(r"<svg .*?</svg>", html_)
    assert found, "no SVG in the figure"
    return [ET.fromstring(s) for s in found]


def _label(html_: str) -> list[str]:
    return [svg.get("aria-label") or "" for svg in _svg(html_)]


@pytest.fixture(scope="module")
def lesson_trace() -> timeline.StepTrace:
    return timeline.trace_gpt2(LESSON_CONFIG, batch=LESSON_BATCH)


@pytest.fixture(scope="module")
def lesson_measured() -> dict[bool, MeasuredStep]:
    """The memory lesson's step measured with fake tensors: plain (False), checkpointed (True)."""
    return {
        ckpt: measure_gpt2(
            replace(LESSON_CONFIG, checkpointing=ckpt), batch=LESSON_BATCH, mode="fake"
        )
        for ckpt in (False, True)
    }


@pytest.fixture(scope="module")
def timeline_rows() -> list[Measurement]:
    """The timeline entry's full run on this CPU: the lesson's step, plain and checkpointed."""
    return entries_memory.run_gpt_memory_timeline(Context(device=Device.this("cpu"), quick=False))


def test_the_chart_peaks_at_the_memory_lessons_measured_peak(lesson_trace, lesson_measured):
    measured = lesson_measured[False]
    assert lesson_trace.peak_bytes == measured.peak_bytes
    assert lesson_trace.phase_peaks_bytes == measured.phase_peaks_bytes
    assert lesson_trace.peak_phase == measured.peak_phase
    html_ = timeline.memory_chart(lesson_trace, title="t", what="the lesson's GPT-2")
    (label,) = _label(html_)
    assert f"({measured.peak_bytes:,} bytes)" in label
    assert f"peak {measured.peak_bytes / 2**20:,.2f} MiB" in html_


def test_the_trace_rises_through_forward_and_marks_every_phase(lesson_trace):
    rows = lesson_trace.rows
    names = [p.name for p in lesson_trace.phases]
    assert names == list(timeline.PHASES)
    spans = lesson_trace.phases
    assert spans[0].first == 0 and spans[-1].last == len(rows) - 1
    assert all(a.last + 1 == b.first for a, b in zip(spans, spans[1:], strict=False))
    forward = rows[spans[0].first : spans[0].last + 1]
    assert forward[-1].total_bytes > forward[0].total_bytes  # activations pile up
    for row in rows:  # the terms are the total
        assert sum(v for _, v in row.by_term_bytes) == row.total_bytes
    params = {dict(r.by_term_bytes)["parameters"] for r in rows}
    assert len(params) == 1 and params.pop() > 0  # the weights stay all step


def test_checkpointing_lowers_the_peak_the_chart_shows(
    lesson_trace, lesson_measured, timeline_rows
):
    ckpt = entries_memory.timeline_from_measurements(timeline_rows, "ckpt")  # the page's chart
    assert ckpt.peak_bytes == lesson_measured[True].peak_bytes
    assert ckpt.peak_bytes < lesson_trace.peak_bytes


def test_the_timeline_entry_gives_the_chart_the_same_step_back(lesson_trace):
    ms = entries_memory.timeline_measurements(lesson_trace, "plain", batch=LESSON_BATCH)
    terms = [f"gpt_memory_timeline.plain.{entries_memory.slug(t)}" for t in CATEGORIES]
    assert [m.name for m in ms] == ["gpt_memory_timeline.plain", *terms]
    total = ms[0]
    assert total.value == lesson_trace.peak_bytes == max(total.samples)
    assert total.samples == tuple(lesson_trace.phase_peaks_bytes.values())
    assert len(total.series.points) == len(lesson_trace.rows)
    back = entries_memory.timeline_from_measurements(ms)
    assert back.phases == lesson_trace.phases and back.method == lesson_trace.method
    kept = [(r.phase, r.by_term_bytes, r.total_bytes) for r in back.rows]
    assert kept == [(r.phase, r.by_term_bytes, r.total_bytes) for r in lesson_trace.rows]
    chart = timeline.memory_chart(back, title="t", what="the lesson's GPT-2")
    assert chart == timeline.memory_chart(lesson_trace, title="t", what="the lesson's GPT-2")
    assert entries_memory.timeline_from_measurements(ms, "ckpt") is None


def test_the_timeline_entry_measures_the_step_plain_and_checkpointed(
    lesson_measured, timeline_rows
):
    assert entries_memory.LESSON_CONFIG == LESSON_CONFIG  # the entry runs the lesson's step
    assert entries_memory.LESSON_BATCH == LESSON_BATCH
    ms = timeline_rows
    plain = entries_memory.timeline_from_measurements(ms, "plain")
    ckpt = entries_memory.timeline_from_measurements(ms, "ckpt")
    assert ms[0].params["model_checkpointing"] is False
    assert ckpt.peak_bytes == lesson_measured[True].peak_bytes
    assert plain.peak_bytes == lesson_measured[False].peak_bytes


def test_a_long_cuda_curve_keeps_its_peak_and_counts_every_event():
    live = [i % 977 for i in range(12_000)] + [5_000] + [3] * 10
    m = entries_memory.cuda_live_measurement(live)
    assert len(m.series.points) == MAX_SERIES_POINTS and m.value == 5_000
    back = entries_memory.cuda_live_from_measurements([m])
    assert back.events == len(live) and max(back.live_bytes) == 5_000
    short = entries_memory.cuda_live_from_measurements(
        [entries_memory.cuda_live_measurement([1, 4, 2])]
    )
    assert short.live_bytes == (1, 4, 2) and short.events == 3


def test_columns_always_keep_the_peak():
    totals = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5] * 50
    picks = timeline.columns(len(totals), totals, width=37)
    assert len(picks) == 37 and picks == tuple(sorted(picks))
    assert max(totals[i] for i in picks) == max(totals)


def test_a_cuda_snapshot_replays_to_the_same_peak_as_the_profiling_lesson():
    events = [
        {"action": "alloc", "size": 4096},
        {"action": "alloc", "size": 1024},
        {"action": "free_requested", "size": 4096},
        {"action": "free_completed", "size": 4096},
        {"action": "alloc", "size": 8192},
        {"action": "segment_alloc", "size": 2**20},
    ]
    live = timeline.live_from_snapshot({"device_traces": [events]}, baseline_bytes=512)
    assert live == (4608, 5632, 5632, 1536, 9728, 9728)
    assert max(live) == replay_peak(events, 512)
    with pytest.raises(ValueError, match="device_traces"):
        timeline.live_from_snapshot({"device_traces": []})


@pytest.mark.parametrize("stages,microbatches", [(1, 1), (2, 3), (4, 8), (8, 8), (8, 1), (3, 16)])
def test_the_pipeline_diagram_idles_the_pages_bubble(stages, microbatches):
    bubble = bubble_fraction(stages=stages, microbatches=microbatches)
    schedules = [
        diagrams.pipeline_schedule(n, stages=stages, microbatches=microbatches)
        for n in diagrams.SCHEDULES
    ]
    for s in schedules:
        assert s.bubble_share == pytest.approx(bubble, abs=1e-12)
        assert s.makespan == 2 * (microbatches + stages - 1)
        assert len(s.slots) == 2 * stages * microbatches
    gpipe, one_f_one_b = schedules
    assert gpipe.in_flight(0) == microbatches
    assert one_f_one_b.in_flight(0) == min(stages, microbatches)  # 1F1B holds fewer
    html_ = diagrams.pipeline_diagram(schedules, bubble=bubble)
    (label,) = _label(html_)
    assert f"gives {bubble:.1%}" in label and label.count(f"idles {bubble:.1%}") == 2


def test_the_pipeline_diagram_refuses_a_bubble_it_does_not_draw():
    s = [diagrams.pipeline_schedule("gpipe", stages=4, microbatches=8)]
    with pytest.raises(ValueError, match="disagree"):
        diagrams.pipeline_diagram(s, bubble=bubble_fraction(stages=4, microbatches=16))
    with pytest.raises(ValueError, match="stages=0"):
        diagrams.pipeline_schedule("1f1b", stages=0, microbatches=4)


def _cells(lab: str) -> list[dict[str, str]]:
    """Each cell of the pipeline lab: its attributes and its figure's HTML."""
    found = re.findall(r'<div class="gl-pipeline-cell" ([^>]*)>(.*?</figure>)</div>', lab)
    return [
        {
            **dict(re.findall(r'([\w-]+)="([^"]*)"', attrs)),
            "figure": fig,
            "hidden": " hidden" in f" {attrs}",
        }
        for attrs, fig in found
    ]


def test_every_cell_of_the_pipeline_lab_draws_the_pages_bubble():
    lab = diagrams.pipeline_lab()
    cells = _cells(lab)
    grid = [(p, m) for p in diagrams.LAB_STAGES for m in diagrams.LAB_MICROBATCHES]
    assert [(int(c["data-stages"]), int(c["data-microbatches"])) for c in cells] == grid
    for c in cells:
        p, m = int(c["data-stages"]), int(c["data-microbatches"])
        bubble = bubble_fraction(stages=p, microbatches=m)
        assert float(c["data-bubble"]) == bubble  # the page's formula, to the last bit
        assert c["data-bubble-text"] == f"{bubble:.1%}"
        (label,) = _label(c["figure"])
        assert c["data-status"] == html.escape(diagrams.lab_status(p, m))
        assert f"bubble {bubble:.1%}." in diagrams.lab_status(p, m)
        stages, micro = (
            ("stage" if p == 1 else "stages"),
            ("micro-batch" if m == 1 else "micro-batches"),
        )
        assert f"Pipeline schedules for {p} {stages} and {m} {micro}" in label
        assert f"gives {bubble:.1%}" in label and label.count(f"idles {bubble:.1%}") == 2
        for name in diagrams.SCHEDULES:  # the simulation the figure draws idles that share
            s = diagrams.pipeline_schedule(name, stages=p, microbatches=m)
            assert s.bubble_share == pytest.approx(bubble, abs=1e-12)
        assert c["hidden"] == ((p, m) != diagrams.LAB_DEFAULT)


def test_the_pipeline_labs_controls_are_labelled_selects_hidden_without_script():
    lab = diagrams.pipeline_lab()
    controls = lab.split('<div class="gl-pipeline-controls" hidden>', 1)[1].split("</div>", 1)[0]
    for label, name, values in (
        ("Stages", "stages", diagrams.LAB_STAGES),
        ("Micro-batches", "microbatches", diagrams.LAB_MICROBATCHES),
    ):
        select = re.search(
            f'<label for="gl-pipeline-{name}">{label}</label> '
            f'<select id="gl-pipeline-{name}" name="{name}">(.*?)</select>',
            controls,
        )
        assert select, label
        assert re.findall(r'value="(\d+)"', select[1]) == [str(v) for v in values]
    assert '<option value="4" selected>' in controls and '<option value="8" selected>' in controls
    assert "<script" not in lab and not re.search(r"\son[a-z]+=", lab)
    with pytest.raises(ValueError, match="not a cell of the grid"):
        diagrams.pipeline_lab((2, 4), (1, 2), (8, 2))


@pytest.mark.parametrize("gpus", [2, 3, 4, 8])
def test_the_ring_sends_what_ring_all_reduce_bytes_says(gpus):
    steps = diagrams.ring_steps(gpus)
    assert len(steps) == 2 * (gpus - 1)
    after_scatter = steps[gpus - 2].held
    complete = [[c for c, chunk in enumerate(gpu) if len(chunk) == gpus] for gpu in after_scatter]
    assert sorted(c for (c,) in complete) == list(range(gpus))  # one finished chunk each
    assert all(len(chunk) == gpus for gpu in steps[-1].held for chunk in gpu)
    assert diagrams.ring_sent_bytes(28e9, gpus) == pytest.approx(ring_all_reduce_bytes(28e9, gpus))
    (label,) = _label(diagrams.ring_diagram(gpus, 28e9, what="grads"))
    assert f"{ring_all_reduce_bytes(28e9, gpus) / 1e9:,.2f} GB" in label


def test_zero_shards_and_bars_come_from_the_budgets():
    rows = zero_tradeoffs({"params": 7e9, "preset": "amp"}, 8)
    shards = dict(diagrams.zero_shards(rows))
    assert shards[0] == (("weights", 8), ("gradients", 8), ("optimizer state", 8))
    assert shards[1] == (("weights", 8), ("gradients", 8), ("optimizer state", 1))
    assert shards[2] == (("weights", 8), ("gradients", 1), ("optimizer state", 1))
    assert shards[3] == (("weights", 1), ("gradients", 1), ("optimizer state", 1))
    memory, sent = _label(ledger_chart.zero_bars(rows, title="Z"))
    for r in rows:
        assert f"ZeRO-{r.stage} {r.budget.total_bytes / GB:,.2f} GB" in memory
        assert f"ZeRO-{r.stage} {r.comm.sent_bytes / GB:,.2f} GB" in sent
    assert "ZeRO-3 keeps 1 of 8 weights shards" in _label(diagrams.zero_diagram(rows, what="x"))[0]


@pytest.mark.parametrize(
    "preset", ["amp", "mixed-fp32-master", "bf16", "bf16-pure", "lora", "qlora"]
)
def test_a_recipe_bar_is_its_budgets_peak(preset):
    b = estimate(7e9, preset=preset)
    assert sum(v for _, v in ledger_chart.peak_terms(b)) * GB == pytest.approx(b.total_bytes)
    (label,) = _label(ledger_chart.recipe_bars({preset: b}, title="r"))
    assert f"{preset} {b.total_bytes / GB:,.1f} GB" in label


def test_capacity_bars_fill_each_card_and_ladder_bars_show_each_rung():
    rows = capacity(tuple(n * GIB for n in (8, 24, 80)), CAPACITY_USES)
    html_ = ledger_chart.capacity_bars(rows, preset="amp", title="c")
    for r in rows:
        entry = r.entry("amp")
        assert f"{entry.params / 1e9:,.2f} billion" in _label(html_)[0]
        filled = estimate(entry.params, preset="amp").total_bytes
        assert filled == pytest.approx(r.card_bytes, rel=1e-6)
    ladder = ladder_budget_rows()
    (label,) = _label(ledger_chart.ladder_bars(ladder, title="l"))
    assert label.count(" GB") == len(ladder)
    for r in ladder:
        assert f"{r.peak_bytes / GB:,.2f} GB" in label


def test_the_profile_timeline_comes_from_the_profilers_events():
    g = profile_gpt_step(SMALL, 2, trace=True, memory=False, wait=0, warmup=1, active=1)
    t = trace_chart.trace_spans(g.profile.trace_gz)
    regions = [s.label for s in t.spans if s.kind in trace_chart.REGION_KINDS]
    assert regions == list(trace_chart.REGION_KINDS)
    ops = sorted((s for s in t.spans if s.lane.endswith("operators")), key=lambda s: s.start)
    assert all(a.end <= b.start + 1e-12 for a, b in zip(ops, ops[1:], strict=False))  # top level
    assert 0 < t.busy_s <= t.step_s
    raw = json.loads(gzip.decompress(g.profile.trace_gz))
    assert t.ops == sum(1 for e in raw["traceEvents"] if e.get("cat") == "cpu_op")
    (label,) = _label(trace_chart.profile_timeline(t, title="p", what="a step"))
    assert f"{t.step_s * 1e3:,.1f} ms" in label
    with pytest.raises(ValueError, match="Chrome trace"):
        trace_chart.trace_spans(b"not gzip")


def test_the_loader_timeline_adds_up_to_the_measured_gaps():
    run = LoaderRun(
        num_workers=2,
        prefetch_factor=2,
        persistent_workers=False,
        batch_size=8,
        batches_per_epoch=4,
        epochs=2,
        step_s=0.01,
        samples_s=(0.02, 0.02),
        gaps_s=(0.03, 0.005, 0.02, 0.04, 0.04, 0.04),
        first_batch_s=(0.2, 0.1),
        start_method=None,
    )
    spans = trace_chart.loader_spans(run)
    assert spans[-1].end == pytest.approx(sum(run.gaps_s[:3]) + run.step_s)
    waits = sum(s.end - s.start for s in spans if s.kind == "waiting for data")
    assert waits == pytest.approx(0.02 + 0.0 + 0.01)  # a gap shorter than the step waits 0
    (label,) = _label(trace_chart.loader_timeline([run], title="l"))
    assert "first batch after 200 ms" in label


def test_figures_escape_what_they_are_given_and_need_a_text_alternative():
    hostile = '<script>alert(1)</script>"'
    html_ = figures.stacked_bars(
        [figures.Bar(hostile, ((hostile, 1.0),))], unit=hostile, title=hostile, description=hostile
    )
    assert "<script" not in html_
    (svg,) = _svg(html_)
    assert svg.get("role") == "img" and svg.get("aria-label") == hostile
    with pytest.raises(ValueError, match="text alternative"):
        figures.figure("", width=1, height=1, title="t", description=" ")
    with pytest.raises(ValueError, match="not listed"):
        figures.timeline(
            [figures.Span("x", 0, 1, "y")],
            lanes=["a"],
            kinds=["y"],
            x_label="s",
            title="t",
            description="d",
        )


def test_a_cuda_trace_gets_a_row_per_stream():
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "forward", "tid": 1, "ts": 0, "dur": 50},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "tid": 1, "ts": 1, "dur": 5},
        {"ph": "X", "cat": "kernel", "name": "sm90_gemm", "tid": 7, "ts": 10, "dur": 20},
        {"ph": "X", "cat": "kernel", "name": "elementwise", "tid": 7, "ts": 35, "dur": 5},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "tid": 13, "ts": 2, "dur": 3},
    ]
    t = trace_chart.trace_spans(gzip.compress(json.dumps({"traceEvents": events}).encode()))
    assert t.lanes == (
        "thread 1: regions",
        "thread 1: operators",
        "GPU stream 7",
        "GPU stream 13",
    )
    kernels = [(s.label, s.kind) for s in t.spans if s.lane == "GPU stream 7"]
    assert kernels == [("sm90_gemm", "matmul"), ("elementwise", "other operator")]
    assert t.step_s == pytest.approx(50e-6)
