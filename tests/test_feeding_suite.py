"""The feeding lesson's suite entries: where they apply, their rows on this CPU, and a page's view.

The rows are made by the functions the lesson calls, at small sizes; a bundle's rows read
back into the same results the page renders.
"""

from __future__ import annotations

import re

import pytest
import torch

from gpulesson.results import entries_feeding, suite
from gpulesson.results.bundle import (
    Measurement,
    Skipped,
    consistency_problems,
    load,
    measurement_to_dict,
)
from gpulesson.results.compare import Sourced
from gpulesson.results.suite import Context, Device
from gpulesson.timing import alignment, loader
from tests.conftest import REPO

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


def test_the_entries_are_registered_in_the_suite_once():
    assert "gpulesson.results.entries_feeding" in suite.ENTRY_MODULES
    names = [e.name for e in suite.entries()]
    assert {"loader", "fusion", "alignment", "copy_call"} <= set(names)


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


def test_loader_rows_name_each_setting_and_keep_their_samples(monkeypatch):
    monkeypatch.setattr(entries_feeding, "QUICK_LOADER", TINY_LOADER)
    rows = entries_feeding.run_loader(Context(device=CPU, quick=True))
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
    _valid(rows)


def test_fusion_rows_are_eager_compiled_and_the_compile():
    rows = entries_feeding.run_fusion(Context(device=CPU, quick=True))
    assert [m.name for m in rows] == ["fusion.eager", "fusion.compiled", "fusion.compile"]
    assert rows[2].params["max_abs_diff"] <= 1e-4
    _valid(rows)


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
    rows = entries_feeding.gpu_rows(ref.bundle, entries_feeding.COPY_ROWS, ())
    assert [m.name for m in rows] == ["h2d.pageable", "h2d.pinned"]  # the fixture predates the rest
    figures = entries_feeding.copy_figures(rows)
    assert figures["gpu_h2d_pinned_gb_s"][0] == pytest.approx(rows[1].value / 1e9)
    table, missing = entries_feeding.reference_rows(ref, ["launch_overhead.eager", "fusion.eager"])
    assert [r.name for r in table.rows] == ["launch_overhead.eager"]
    assert missing == ("fusion.eager",)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA machine measures its own rows")
def test_a_cpu_build_without_a_bundle_has_no_gpu_rows():
    assert entries_feeding.gpu_rows(None, entries_feeding.COPY_ROWS, ()) == ()
    assert entries_feeding.gpu_alignment(None) == []
    assert entries_feeding.gpu_alignment(load(FIXTURE)) == []  # the fixture has no such rows


@pytest.mark.gpu
def test_the_cuda_rows_are_measured_by_the_suite_s_functions():
    rows = entries_feeding.gpu_rows(
        None, entries_feeding.COPY_ROWS, (entries_feeding.run_copy_call,)
    )
    assert [m.name for m in rows] == ["copy_call.pageable", "copy_call.pinned", "copy_call.copy"]
    _valid(list(rows))
