"""The feeding lesson's suite entries: where they apply, their rows on this CPU, and a page's view.

The rows are made by the functions the lesson calls, at small sizes; a bundle's rows read
back into the same results the page renders.
"""

from __future__ import annotations

import dataclasses
import json
import re

import pytest
import torch

from gpulesson.results import entries_feeding, entries_syncs, suite
from gpulesson.results.bundle import (
    Measurement,
    Skipped,
    consistency_problems,
    load,
    measurement_from_dict,
    measurement_to_dict,
)
from gpulesson.results.compare import Sourced
from gpulesson.results.suite import Context, Device
from gpulesson.timing import alignment, fusion, loader, syncs
from tests.conftest import REPO, keep_calls, quick_cpu_bundle

CPU = Device(
    type="cpu", name="cpu", total_bytes=8 * 2**30, free_bytes=4 * 2**30, count=0, capability=None
)
H100 = Device("cuda", "H100", 80 * 2**30, 79 * 2**30, 1, (9, 0))
MPS = Device("mps", "mps", 16 * 2**30, 8 * 2**30, 0, None)
NAME = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_]+)*$")
FIXTURE = REPO / "tests" / "fixtures" / "bundles" / "fixture_h100.json"
TINY_LOADER = loader.LoaderPlan(
    items=16, words_per_item=20, batch_size=4, batches_per_epoch=2, epochs=2, item_repeats=2
)


def _valid(measured: list[Measurement]) -> None:
    data = {"measurements": [measurement_to_dict(m) for m in measured]}
    assert consistency_problems(data) == []
    assert all(NAME.match(m.name) for m in measured), [m.name for m in measured]


#: The lesson's functions the loader and fusion entries call, kept by ``feeding_run``.
MEASURING = (
    "measure_loader",
    "measure_overhead_rounds",
    "measure_launch_overhead",
    "measure_fusion",
)


@pytest.fixture(scope="module")
def feeding_run(tmp_path_factory: pytest.TempPathFactory):
    """One ``gpulesson measure --quick --only loader,fusion --out FILE`` on this CPU: the
    bundle file, read back (schema, consistency and plausibility checked), for the tests of
    both entries' rows; and each call the entries made of the lesson's functions
    (``keep_calls``: args, kwargs, result), for the round trips."""
    out = tmp_path_factory.mktemp("feeding") / "bundle.json"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(entries_feeding, "QUICK_LOADER", TINY_LOADER)
        kept = {name: keep_calls(mp, entries_feeding, name) for name in MEASURING}
        bundle = quick_cpu_bundle(out, "loader,fusion")
    return bundle, kept


@pytest.fixture(scope="module")
def loader_and_fusion(feeding_run):
    """The bundle of :func:`feeding_run`."""
    return feeding_run[0]


def _entry_rows(bundle, entry: str) -> list[Measurement]:
    return [m for m in bundle.measurements if m.entry == entry]


def _through_json(measured: list[Measurement]) -> list[Measurement]:
    """The measurements as a bundle file holds them, read back."""
    data = json.loads(json.dumps([measurement_to_dict(m) for m in measured]))
    return [measurement_from_dict(m) for m in data]


def test_the_entries_are_registered_in_the_suite_once():
    assert "gpulesson.results.entries_feeding" in suite.ENTRY_MODULES
    assert "gpulesson.results.entries_syncs" in suite.ENTRY_MODULES
    names = [e.name for e in suite.entries()]
    assert {"loader", "fusion", "alignment", "copy_call", "syncs"} <= set(names)
    assert len(names) == len(set(names))


def test_which_entries_apply_where():
    applies = {
        e.name: (e.applies(CPU), e.applies(H100), e.applies(MPS)) for e in entries_feeding.ENTRIES
    }
    assert applies == {
        "loader": (True, True, True),
        "fusion": (True, True, False),
        "alignment": (True, True, True),
        "copy_call": (False, True, False),
    }
    (sync_entry,) = entries_syncs.ENTRIES
    assert (sync_entry.applies(CPU), sync_entry.applies(H100), sync_entry.applies(MPS)) == (
        False,
        True,
        False,
    )


def test_loader_rows_name_each_setting_and_keep_their_samples(loader_and_fusion):
    rows = _entry_rows(loader_and_fusion, "loader")
    assert [m.name for m in rows] == [
        "loader.item",
        "loader.w0",
        "loader.w1",
        "loader.w2",
        "loader.w2_persistent",
    ]
    persistent = rows[-1]
    assert persistent.params["persistent_workers"] is True
    assert persistent.params["later_first_batch_s"] > 0
    assert len(persistent.samples) == TINY_LOADER.epochs
    # every clock reading of the run: a first batch and the gaps, per epoch
    assert len(persistent.series.points) == TINY_LOADER.epochs * TINY_LOADER.batches_per_epoch
    _valid(rows)


def test_the_full_loader_plan_is_the_lesson_s():
    assert entries_feeding.FULL_LOADER == loader.LoaderPlan(epochs=5)


def test_the_loader_entry_round_trips_through_bundle_measurements(feeding_run):
    ((args, kwargs, measured),) = feeding_run[1]["measure_loader"]  # the entry's own run
    assert args == () and kwargs == {"plan": TINY_LOADER}
    rows = entries_feeding.loader_measurements(measured)
    back = entries_feeding.loader_from_measurements(_through_json(rows))
    assert back == measured  # same runs, samples, gaps, first batches: the same page
    assert loader.headline_figures(back) == loader.headline_figures(measured)
    for run, again in zip(measured.runs, back.runs, strict=True):
        assert again.gaps_s == run.gaps_s and again.first_batch_s == run.first_batch_s
    assert entries_feeding.loader_from_measurements(rows[:1]) is None  # no run rows
    assert entries_feeding.loader_from_measurements([]) is None


def test_fusion_rows_are_eager_compiled_and_the_compile(loader_and_fusion):
    rows = _entry_rows(loader_and_fusion, "fusion")
    assert [m.name for m in rows] == [
        "fusion.eager",
        "fusion.compiled",
        "fusion.compile",
        "fusion.tiny_op",
        "fusion.rounds.chain_op",
        "fusion.rounds.bare_op",
        "fusion.rounds.ratio",
    ]
    assert rows[2].params["max_abs_diff"] <= 1e-4
    # the lesson's plan: one thread for the chain, the tiny op and the rounds
    assert {m.params["threads"] for m in rows if "threads" in m.params} == {1}
    assert len(rows[-1].samples) == entries_feeding.FUSION_PLANS[True].rounds
    _valid(rows)


def test_the_fusion_entry_round_trips_through_bundle_measurements(feeding_run):
    assert entries_feeding.FUSION_PLANS[False] == entries_feeding.FusionPlan()  # the lesson's
    kept = feeding_run[1]  # what the entry's own calls returned: measured once, on this CPU
    ((_, _, rounds),) = kept["measure_overhead_rounds"]
    ((_, _, tiny),) = kept["measure_launch_overhead"]
    ((_, _, chain),) = kept["measure_fusion"]
    rows = entries_feeding.fusion_measurements(chain, tiny, rounds)
    _valid(rows)
    back = entries_feeding.fusion_from_measurements(_through_json(rows))
    assert back == entries_feeding.FusionFigures(fusion=chain, tiny_op=tiny, rounds=rounds)
    assert fusion.headline_figures(back.fusion) == fusion.headline_figures(chain)
    assert back.rounds.median_ratio == rows[-1].value
    # a bundle made before the tiny op and the rounds were part of the entry
    old = entries_feeding.fusion_from_measurements(rows[:3])
    assert old.fusion == chain and old.tiny_op is None and old.rounds is None
    assert entries_feeding.fusion_from_measurements(rows[3:]) is None


def test_a_chain_that_could_not_be_compiled_round_trips_as_its_eager_row_and_the_reason(
    feeding_run,
):
    ((_, _, chain),) = feeding_run[1]["measure_fusion"]
    failed = dataclasses.replace(
        chain, compiled=None, compile_s=None, max_abs_diff=None, compile_error="no C++ compiler"
    )
    rows = entries_feeding.fusion_measurements(failed)
    _valid(rows)
    assert [m.name for m in rows] == ["fusion.eager"]
    assert rows[0].params["compile_error"] == "no C++ compiler"
    back = entries_feeding.fusion_from_measurements(_through_json(rows))
    assert back == entries_feeding.FusionFigures(fusion=failed, tiny_op=None, rounds=None)
    # an eager row alone, without the reason, is a bundle cut short: nothing to render
    whole = entries_feeding.fusion_measurements(chain)
    assert entries_feeding.fusion_from_measurements(whole[:1]) is None


def test_a_bundle_of_the_loader_and_fusion_entries_validates(loader_and_fusion):
    bundle = loader_and_fusion
    assert bundle.provenance.suite.entries == ("loader", "fusion")
    c = entries_feeding.loader_from_measurements(bundle.measurements)
    assert c is not None and [r.num_workers for r in c.runs] == [0, 1, 2, 2]
    f = entries_feeding.fusion_from_measurements(bundle.measurements)
    assert f is not None and f.tiny_op is not None and f.rounds is not None


def test_the_sync_rows_read_back_into_the_checks_they_came_from():
    checks = tuple(
        syncs.SyncCheck(name=p.name, hidden_sync=p.hidden_sync, warnings=int(p.hidden_sync))
        for p in syncs.PROBES
    )
    rows = entries_syncs.sync_measurements(checks)
    _valid(rows)
    assert [m.name for m in rows] == list(entries_syncs.ROW_NAMES)
    assert entries_syncs.checks_from_measurements(_through_json(rows)) == checks
    assert syncs.headline_figures(entries_syncs.checks_from_measurements(rows)) == (
        syncs.headline_figures(checks)
    )
    assert entries_syncs.checks_from_measurements([]) == ()


def test_alignment_rows_read_back_into_the_comparison_they_came_from(monkeypatch):
    tiny = alignment.AlignmentPlan(
        square_n=32, tokens=4, hidden=8, dtypes=("fp32",), rounds=3, calls_per_sample=1, threads=1
    )
    monkeypatch.setitem(alignment.PLANS, "cpu", tiny)
    rows = entries_feeding.run_alignment(Context(device=CPU, quick=False))
    names = [m.name for m in rows]
    assert names == [
        "alignment.fp32.n31",
        "alignment.fp32.n32",
        "alignment.fp32.n33",
        "alignment.fp32.vocab50257",
        "alignment.fp32.vocab50304",
    ]
    _valid(rows)
    square = entries_feeding.shapes_from_rows(rows, "fp32", "n")
    assert square is not None and square.aligned.shape.m == 32
    direct = square.aligned.flop_per_s
    assert direct == pytest.approx(rows[1].value)
    assert entries_feeding.shapes_from_rows(rows, "bf16", "n") is None


def test_both_lessons_read_the_plan_s_comparisons_back_from_the_alignment_rows(
    monkeypatch, tmp_path
):
    tiny = alignment.AlignmentPlan(
        square_n=32, tokens=4, hidden=8, dtypes=("fp32",), rounds=3, calls_per_sample=1, threads=1
    )
    monkeypatch.setitem(alignment.PLANS, "cpu", tiny)
    rows = entries_feeding.run_alignment(Context(device=CPU, quick=False))
    found = entries_feeding.alignment_comparisons(rows)
    planned = alignment.measure_plan("cpu")  # what feeding-align measured before the suite
    assert [k for k, _, _ in found] == [k for k, _, _ in planned] == ["square", "vocab"]
    assert [list(f) for _, _, f in found] == [list(f) for _, _, f in planned]
    for (kind, c, figures), (_, p, _) in zip(found, planned, strict=True):
        assert [t.shape for t in c.timings] == [t.shape for t in p.timings]
        assert (c.device, c.dtype, c.calls_per_sample, c.threads) == (
            p.device,
            p.dtype,
            p.calls_per_sample,
            p.threads,
        )
        assert all(len(t.samples_s) == tiny.rounds for t in c.timings)
        assert figures == alignment.headline_figures(c, kind)
    square = found[0][1]  # the rows inside-gpu's block renders
    assert square == entries_feeding.shapes_from_rows(rows, "fp32", "n")
    assert square.aligned.flop_per_s == pytest.approx(rows[1].value)
    bundle = quick_cpu_bundle(tmp_path / "bundle.json", "alignment")
    assert [k for k, _, _ in entries_feeding.alignment_comparisons(bundle.measurements)] == [
        "square",
        "vocab",
    ]
    assert entries_feeding.alignment_comparisons(load(FIXTURE).measurements) == []  # none there


def test_shapes_that_do_not_fit_the_budget_are_skipped_with_the_numbers(monkeypatch):
    tiny = alignment.AlignmentPlan(
        square_n=32, tokens=4, hidden=8, dtypes=("fp32",), rounds=3, calls_per_sample=1, threads=1
    )
    monkeypatch.setitem(alignment.PLANS, "cpu", tiny)
    small = Device("cpu", "cpu", 2**20, 2 * 50_000, 0, None)  # a 50,000-byte budget
    rows = entries_feeding.run_alignment(Context(device=small, quick=True))
    skipped = [r for r in rows if isinstance(r, Skipped)]
    assert [s.reason.split()[0] for s in skipped] == ["vocab"]
    assert "more than this run's budget of 50000" in skipped[0].reason


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA machine measures its own rows")
def test_a_page_reads_a_bundle_s_rows_and_names_the_ones_it_lacks():
    ref = Sourced(load(FIXTURE), "reference", FIXTURE.name)
    rows = entries_feeding.rows_named(ref.bundle.measurements, entries_feeding.COPY_ROWS)
    assert [m.name for m in rows] == ["h2d.pageable", "h2d.pinned"]  # the fixture predates the rest
    figures = entries_feeding.copy_figures(rows)
    assert figures["gpu_h2d_pinned_gb_s"][0] == pytest.approx(rows[1].value / 1e9)
    table, missing = entries_feeding.reference_rows(ref, ["launch_overhead.eager", "fusion.eager"])
    assert [r.name for r in table.rows] == ["launch_overhead.eager"]
    assert missing == ("fusion.eager",)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA machine measures its own rows")
def test_a_cpu_build_without_a_bundle_has_no_gpu_rows():
    assert entries_feeding.rows_named((), entries_feeding.COPY_ROWS) == ()
    assert entries_feeding.alignment_comparisons(load(FIXTURE).measurements) == []  # none there


@pytest.mark.gpu
def test_the_cuda_rows_are_measured_by_the_suite_s_functions():
    context = Context(device=Device.this("cuda"), quick=False)
    measured = entries_feeding.run_copy_call(context)
    rows = entries_feeding.rows_named(measured, entries_feeding.COPY_ROWS)
    assert [m.name for m in rows] == ["copy_call.pageable", "copy_call.pinned", "copy_call.copy"]
    _valid(list(rows))


@pytest.mark.gpu
def test_the_sync_entry_reports_each_probe_on_cuda():
    rows = entries_syncs.run_syncs(Context(device=Device.this("cuda"), quick=True))
    _valid(rows)
    checks = entries_syncs.checks_from_measurements(rows)
    assert [c.name for c in checks] == [p.name for p in syncs.PROBES]
    assert not any(c.warned for c in checks if not c.hidden_sync)
