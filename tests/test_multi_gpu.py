"""The all-reduce measurement (gloo on CPU processes), its renderer, and the suite entry."""

from __future__ import annotations

import dataclasses
import time

import pytest

from gpulesson.course.multi_gpu import gpu_needed_markdown, sweep_markdown
from gpulesson.results import entries_allreduce, entries_device
from gpulesson.results.bundle import consistency_problems, load, measurement_to_dict, to_dict
from gpulesson.results.bundle import validate as validate_bundle
from gpulesson.results.suite import Context, Device
from gpulesson.timing import allreduce
from gpulesson.timing.allreduce import (
    KIB,
    AllReduceSweep,
    AllReduceTiming,
    headline_figures,
    measure_gloo_sweep,
    ring_predictions,
    size_name,
)
from gpulesson.units import GIB, MIB
from tests.conftest import REPO, keep_calls

CPU = Device("cpu", "cpu", 8 * GIB, 4 * GIB, 0, None)
ONE_GPU = Device("cuda", "H100", 80 * GIB, 79 * GIB, 1, (9, 0))
EIGHT_GPUS = Device("cuda", "H100", 80 * GIB, 79 * GIB, 8, (9, 0))
FIXTURE = REPO / "tests" / "fixtures" / "bundles" / "fixture_h100.json"


def _sweep(ranks: int = 8, times_s: tuple[float, ...] = (1e-4, 1e-3, 1e-2)) -> AllReduceSweep:
    sizes = (64 * KIB, 4 * MIB, 64 * MIB)
    return AllReduceSweep(
        backend="nccl",
        device="cuda",
        ranks=ranks,
        dtype="fp32",
        threads_per_rank=1,
        link="test",
        check_ok=True,
        wall_s=1.0,
        timings=tuple(
            AllReduceTiming(message_bytes=s, ranks=ranks, samples_s=(t, t * 1.01, t * 0.99))
            for s, t in zip(sizes, times_s, strict=True)
        ),
    )


@pytest.fixture(scope="module")
def quick_gloo():
    """The gloo entry's quick run on this machine (two rank processes, started once): the
    sweep ``measure_gloo_sweep`` returned to it, and the rows it made of that sweep."""
    with pytest.MonkeyPatch.context() as mp:
        kept = keep_calls(mp, entries_allreduce, "measure_gloo_sweep")
        rows = entries_allreduce.run_all_reduce_gloo(Context(device=CPU, quick=True))
    ((_, _, sweep),) = kept
    return sweep, rows


def test_two_cpu_processes_all_reduce_over_loopback_and_sum_right(quick_gloo):
    sweep, _ = quick_gloo  # 64 KiB, 1 MiB and 16 MiB; one warm-up, three repeats
    assert sweep.backend == "gloo" and sweep.ranks == 2 and sweep.check_ok
    assert [t.message_bytes for t in sweep.timings] == [64 * KIB, MIB, 16 * MIB]
    assert [t.calls_per_sample for t in sweep.timings][:2] == [64, 4]
    for t in sweep.timings:
        assert t.repeats == 3 and all(s > 0 for s in t.samples_s)
        # With two ranks 2(N-1)/N is 1: the bus bandwidth is the algorithm bandwidth.
        assert t.bus_bytes_per_s == pytest.approx(t.algorithm_bytes_per_s)
    assert sweep.wall_s < 60


def test_a_rank_whose_partner_never_comes_fails_within_the_group_timeout():
    request = {"ranks": 2, "port": allreduce.free_port(), "sizes_bytes": [4096], "warmup": 0}
    # A short group timeout: torch gives up on the missing partner after about a second.
    request |= {"repeats": 1, "timeout_s": 0.5, "rank": 0}
    started = time.perf_counter()
    with pytest.raises(RuntimeError, match="rank 0 failed: .*"):
        allreduce._run_ranks([request], timeout_s=30)
    assert time.perf_counter() - started < 25  # the group's timeout ended it, not the parent's


def test_the_parent_kills_ranks_that_outlive_its_deadline():
    request = {"ranks": 2, "port": allreduce.free_port(), "sizes_bytes": [4096], "warmup": 0}
    request |= {"repeats": 1, "timeout_s": 600.0, "rank": 0}
    started = time.perf_counter()
    # The rank waits 600 s for a partner that never comes: any deadline finds it alive.
    stopped = "did not finish within 0.5 s; the processes were stopped"
    with pytest.raises(RuntimeError, match=stopped):
        allreduce._run_ranks([request], timeout_s=0.5)
    assert time.perf_counter() - started < 10


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"sizes_bytes": [6]}, "message size 6 bytes is not a positive multiple of 4"),
        ({"sizes_bytes": []}, "no message sizes"),
        ({"sizes_bytes": [4096, 4096]}, "repeat a size"),
        ({"ranks": 1}, "ranks=1: an all-reduce needs at least 2 processes"),
        ({"repeats": 0}, "repeats=0"),
        ({"timeout_s": float("nan")}, "timeout_s=nan"),
    ],
)
def test_bad_arguments_are_refused_before_any_process_starts(kwargs, fragment):
    with pytest.raises(ValueError, match=fragment):
        measure_gloo_sweep(**kwargs)


def test_the_ring_prediction_uses_the_largest_size_s_bus_bandwidth():
    sweep = _sweep()
    predictions = ring_predictions(sweep)
    largest = sweep.largest
    assert largest.bus_bytes_per_s == pytest.approx(64 * MIB / 1e-2 * 2 * 7 / 8)
    assert predictions[-1].measured_over_predicted == pytest.approx(1.0)
    # 64 KiB took 1e-4 s; at the large size's bandwidth it would take 1/1024 of 1e-2 s.
    assert predictions[0].measured_over_predicted == pytest.approx(1e-4 / (1e-2 / 1024))
    figures = headline_figures(sweep)
    assert figures["smallest_over_formula"][0] == pytest.approx(10.24)
    assert figures["second_bytes"][0] == 4 * MIB and figures["check_ok"][0] is True


def test_the_table_shows_measured_and_formula_side_by_side():
    sweep = _sweep(ranks=2)
    table = sweep_markdown(sweep, ring_predictions(sweep))
    assert "| message | calls per sample | time (µs) |" in table
    assert "| 64 KiB | 1 | 100 |" in table
    assert table.splitlines()[-1].endswith("| 1.0 |")
    assert "bus bandwidth of the largest size" in table
    assert "These rows need more than one GPU" in gpu_needed_markdown()


def test_the_all_reduce_entry_applies_only_to_several_cuda_gpus():
    entry = next(e for e in entries_device.ENTRIES if e.name == "all_reduce")
    assert (entry.applies(CPU), entry.applies(ONE_GPU), entry.applies(EIGHT_GPUS)) == (
        False,
        False,
        True,
    )
    assert "more than one CUDA GPU" in entry.needs


def test_the_entry_sizes_sweep_from_64_kib_to_the_plan_within_the_budget():
    quick = entries_device.all_reduce_sizes(Context(device=EIGHT_GPUS, quick=True))
    full = entries_device.all_reduce_sizes(Context(device=EIGHT_GPUS, quick=False))
    assert quick[0] == 64 * KIB and quick[-1] == 64 * MIB
    assert full[-1] == 256 * MIB and len(full) == len(quick) + 1
    assert all(b == 4 * a for a, b in zip(quick, quick[1:], strict=False))
    small = Device("cuda", "T4", 16 * GIB, 40 * MIB, 2, (7, 5))  # 20 MiB budget
    sizes = entries_device.all_reduce_sizes(Context(device=small, quick=False))
    assert sizes[-1] <= 20 * MIB and sizes[0] >= 64 * KIB


def test_the_entry_s_rows_are_consistent_and_read_back_as_a_sweep():
    sweep = _sweep()
    rows = entries_device.all_reduce_measurements(sweep)
    names = [m.name for m in rows]
    assert names == [
        "all_reduce.bus_bandwidth.64kib",
        "all_reduce.bus_bandwidth.4mib",
        "all_reduce.bus_bandwidth.64mib",
        "all_reduce.bus_bandwidth",
    ]
    assert [m.headline for m in rows] == [False, False, False, True]
    assert rows[-1].value == pytest.approx(sweep.largest.bus_bytes_per_s)
    data = {"measurements": [measurement_to_dict(m) for m in rows]}
    assert consistency_problems(data) == []
    fixture = load(FIXTURE)
    bundle = dataclasses.replace(fixture, measurements=tuple(rows))
    back = entries_device.all_reduce_sweep(validate_bundle(to_dict(bundle)))
    assert back is not None and back.ranks == 8 and back.wall_s is None
    assert [t.message_bytes for t in back.timings] == [t.message_bytes for t in sweep.timings]
    assert back.largest.bus_bytes_per_s == pytest.approx(sweep.largest.bus_bytes_per_s)
    assert entries_device.all_reduce_sweep(fixture) is None  # the old single row only


def test_the_gloo_entry_is_the_lesson_s_sweep_and_reads_back_whole(quick_gloo):
    sweep, rows = quick_gloo
    sizes = entries_allreduce.PLANS[True][0]
    assert [t.message_bytes for t in sweep.timings] == list(sizes)
    assert [m.name for m in rows] == [f"all_reduce_gloo.{size_name(s)}" for s in sizes]
    data = {"schema_version": 2, "measurements": [measurement_to_dict(m) for m in rows]}
    assert consistency_problems(data) == []
    back = entries_allreduce.sweep_from_measurements(rows, "all_reduce_gloo", "unused")
    assert back is not None and back.backend == "gloo" and back.device == "cpu"
    assert back.link.startswith("loopback") and back.check_ok and back.ranks == 2
    assert [t.calls_per_sample for t in back.timings] == [
        int(m.params["calls_per_sample"]) for m in rows
    ]
    assert [t.median_s for t in back.timings] == [m.spread.median for m in rows]
    assert [t.samples_s for t in back.timings] == [t.samples_s for t in sweep.timings]
    assert entries_allreduce.sweep_from_measurements(rows, "all_reduce", "x") is None


def test_a_build_with_gpus_shows_nccl_rows_the_suite_measured_not_a_bundle(monkeypatch):
    from gpulesson.site import facts
    from tests.lesson_blocks import run_on_a_cuda_build

    rows = tuple(entries_device.all_reduce_measurements(_sweep()))
    out, asked = run_on_a_cuda_build(monkeypatch, "multi-gpu", "multi-gpu-nccl", rows)
    assert asked == [("all_reduce", "cuda")]
    assert "reference result bundle" not in out  # this build's own figures: no stamp
    assert "8 ranks on cuda, over test;" in out and "| 64 MiB |" in out  # the rows' own link
    assert facts.value("multigpu.nccl_ranks") == 8
    facts.reset()


def test_a_bundle_s_link_and_backend_reach_the_page_as_text():
    hostile = dataclasses.replace(
        _sweep(), link="<img src=x onerror=alert(1)>", backend="nccl*|*", device="cuda[x](y)"
    )
    rows = entries_allreduce.sweep_measurements(hostile, entry="all_reduce", prefix="a")
    back = entries_allreduce.sweep_from_measurements(rows, "a", "unused")
    text = sweep_markdown(back, allreduce.ring_predictions(back))
    assert "<img" not in text and "&lt;img src=x onerror=alert(1)&gt;" in text
    assert "nccl\\*\\|\\*" in text and "cuda\\[x\\](y)" in text
