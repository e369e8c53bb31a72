"""The measurement suite: its registry, the runner, and entries on this CPU at tiny sizes."""

from __future__ import annotations

import importlib
import sys

import pytest
import torch

import gpulesson.results
from gpulesson.results import entries_device, entries_matmul, entries_memory, suite
from gpulesson.results.bundle import Measurement, measurement_to_dict
from gpulesson.results.suite import Context, Device, SuiteEntry, run_suite

CPU = Device(
    type="cpu", name="cpu", total_bytes=8 * 2**30, free_bytes=4 * 2**30, count=0, capability=None
)
H100 = Device(
    type="cuda",
    name="H100",
    total_bytes=80 * 2**30,
    free_bytes=79 * 2**30,
    count=1,
    capability=(9, 0),
)
TWO_GPUS = Device(type="cuda", name="A100", total_bytes=1, free_bytes=1, count=2, capability=(8, 0))


def test_the_registry_holds_the_issue_s_entries_once_each_in_run_order():
    names = [e.name for e in suite.entries()]
    assert names == [
        "cuda_context",  # first: before anything else allocates on the GPU
        "stopwatch",
        "launch_overhead",
        "memory_bandwidth",
        "host_copies",
        "all_reduce",
        "matmul",
        "matmul_peak",
        "matmul_sweep",  # the why-GPUs lesson's sweep, then the roofline lesson's operations
        "roofline",
        "gpt_memory",
        "oom",
        "gpt_memory_step",  # the memory lesson's step, op by op, transformers', saved tensors
        "gpt_memory_timeline",
        "hf_memory",
        "gpt_block_saved",
        "decode",  # the lessons' own rows follow, in course order of their modules
        "all_reduce_gloo",
        "train_step",
        "amp_step",
        "tf32_accuracy",
        "autocast_trace",
        "profile_step",
        "profile_trace",  # the same step with its Chrome trace, kept by the site build
        "loader",
        "fusion",
        "alignment",
        "copy_call",
        "syncs",  # the feeding lesson's sync debug mode report (CUDA)
        "cache_sweep",
        "strided",
        "attention",
        "fp8_matmul",
    ]
    for entry in suite.entries():
        assert entry.description and entry.needs


def test_which_entries_apply_where():
    applies = {
        e.name: (e.applies(CPU), e.applies(H100), e.applies(TWO_GPUS)) for e in suite.entries()
    }
    assert applies["cuda_context"] == (False, True, True)
    assert applies["host_copies"] == (False, True, True)
    assert applies["all_reduce"] == (False, False, True)
    assert applies["matmul_peak"] == (True, True, True)
    assert applies["matmul_sweep"] == applies["roofline"] == (True, True, True)


def test_a_failing_entry_is_reported_and_the_rest_still_run():
    def boom(context: Context) -> list[Measurement]:
        raise RuntimeError("kaput")

    def one(context: Context) -> list[Measurement]:
        return [
            Measurement(name="x", entry="ok", unit="s", value=1.0, samples=(1.0,), samples_unit="s")
        ]

    entries = (
        SuiteEntry(name="never", description="d", applies=lambda d: False, needs="a TPU", run=boom),
        SuiteEntry(name="bad", description="d", applies=lambda d: True, needs="x", run=boom),
        SuiteEntry(name="ok", description="d", applies=lambda d: True, needs="x", run=one),
    )
    started, done = [], []
    result = run_suite(
        Context(device=CPU, quick=True),
        entries,
        on_start=lambda e: started.append(e.name),
        on_done=lambda e, s: done.append(e.name),
    )
    assert [s.reason for s in result.skipped] == ["needs a TPU"]
    assert [(e.entry, e.reason) for e in result.errors] == [("bad", "error: RuntimeError: kaput")]
    assert result.ran == ("ok",) and [m.name for m in result.measurements] == ["x"]
    assert started == done == ["bad", "ok"]


def test_select_keeps_run_order_and_refuses_unknown_names():
    assert [e.name for e in suite.select(["oom", "stopwatch"])] == ["stopwatch", "oom"]
    with pytest.raises(ValueError, match="unknown suite entry 'mfu'"):
        suite.select(["mfu"])


def test_the_memory_budget_bounds_buffers():
    context = Context(device=CPU, quick=True)
    assert context.memory_budget_bytes == 2 * 2**30
    assert context.fits(2**30) and not context.fits(3 * 2**30)


def test_tensor_core_dtypes_only_where_the_hardware_has_them():
    assert entries_matmul.dtypes_for(H100, quick=False)[-1] == "fp8"
    t4 = Device("cuda", "T4", 1, 1, 1, (7, 5))
    assert entries_matmul.dtypes_for(t4, quick=False) == ("fp32", "fp16")
    l4 = Device("cuda", "L4", 1, 1, 1, (8, 9))
    assert "fp8" in entries_matmul.dtypes_for(l4, quick=True)


def test_every_plan_exists_for_every_device_and_mode():
    for device in ("cpu", "mps", "cuda"):
        for quick in (True, False):
            assert (device, quick) in entries_matmul.PLANS
            assert (device, quick) in entries_device.PLANS


def test_the_shape_search_starts_from_the_squares_and_stops_at_its_budget():
    found = entries_matmul.search_best_shape(
        "cpu", "fp32", (32, 64), 16, budget_s=1e-6, min_run_time_s=0.002, budget_bytes=2**30
    )
    assert (found.tried, found.m, found.n, found.k) == (1, 32, 32, 32)
    assert found.best.flops == 2 * 32**3


def test_the_shape_search_tries_the_neighbours_that_fit_in_memory():
    # 12 KiB holds the 32^3 operands; of its neighbours only those shrinking a dimension fit
    found = entries_matmul.search_best_shape(
        "cpu",
        "fp32",
        (32,),
        16,
        budget_s=600.0,
        min_run_time_s=0.002,
        budget_bytes=entries_matmul.operand_bytes(32, 32, 32, "fp32"),
    )
    assert found.tried == 4  # 32^3, then 16 x 32 x 32 in each of the three places
    assert found.best.flops == 2 * found.m * found.n * found.k
    with pytest.raises(ValueError, match="fits in 100 bytes"):
        entries_matmul.search_best_shape("cpu", "fp32", (64,), 16, 1.0, 0.005, budget_bytes=100)


def test_candidates_are_neighbours_first_then_the_grid_largest_first():
    shapes = list(entries_matmul.candidate_shapes((32, 64), 16, (64, 64, 64)))
    assert shapes[:2] == [(80, 64, 64), (48, 64, 64)]
    grid = shapes[-8:]
    assert grid[0] == (64, 64, 64) and grid[-1] == (32, 32, 32)


def test_fp8_shapes_go_through_scaled_mm():
    result = entries_matmul.time_shape(64, 48, 32, "fp8", "cpu", min_run_time_s=0.005)
    assert result.flops == 2 * 64 * 48 * 32
    assert result.bytes_moved == (64 * 32 + 32 * 48) * 1 + 64 * 48 * 2


def test_tiny_entries_produce_valid_measurements_on_this_cpu(monkeypatch):
    monkeypatch.setitem(
        entries_device.PLANS, ("cpu", True), entries_device.DevicePlan(64, 0.005, 4 * 2**20, 0, 0)
    )
    context = Context(device=Device.this("cpu"), quick=True)
    measured = entries_device.run_stopwatch(context) + entries_device.run_memory_bandwidth(context)
    names = [m.name for m in measured]
    assert names == [
        "stopwatch.honest",
        "stopwatch.naive",
        "stopwatch.inflation",
        "memory_bandwidth",
    ]
    bandwidth = measured[-1]
    assert bandwidth.params["bytes"] == 2 * 4 * 2**20 and bandwidth.limit == "memory_bandwidth"
    assert bandwidth.value == pytest.approx(bandwidth.params["bytes"] / bandwidth.spread.median)
    for m in measured:
        measurement_to_dict(m)  # serialisable


def test_the_oom_entry_provokes_and_diagnoses_a_host_oom():
    [m] = entries_memory.run_oom(Context(device=Device.this("cpu"), quick=True))
    assert m.value == entries_memory.HOST_OOM_BYTES
    assert m.params["kind"] == "cpu_oom" and m.params["read_from_message"] is True
    assert m.params["error_type"] == "RuntimeError"


def test_the_gpt_memory_entry_sits_beside_the_estimate(monkeypatch):
    monkeypatch.setattr(entries_memory, "QUICK_CASES", 1)
    [m] = entries_memory.run_gpt_memory(Context(device=Device.this("cpu"), quick=True))
    assert m.name.startswith("gpt_memory.v512_s64")
    assert m.params["method"].startswith("FakeTensorMode")
    assert abs(m.params["estimate_error"]) < 0.10  # the lesson's target for tuned shapes
    assert m.limit is None  # fake tensors: no device memory was used


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_context_memory_is_measured_on_a_gpu():
    [m] = entries_device.run_cuda_context(Context(device=Device.this("cuda"), quick=True))
    assert 50 * 2**20 < m.value < 4 * 2**30  # a context is hundreds of MiB, not nothing


SUITE = "gpulesson.results.suite"


def test_one_entry_is_found_by_importing_its_own_module_only(monkeypatch):
    # As in a fresh process: neither the suite nor an entry module imported yet (monkeypatch
    # puts the modules this session imported back afterwards).
    for name in [m for m in sys.modules if m.startswith(("gpulesson.results.entries_", SUITE))]:
        monkeypatch.delitem(sys.modules, name)
        monkeypatch.delattr(gpulesson.results, name.rpartition(".")[2], raising=False)
    importlib.import_module(SUITE).entry("decode")
    found = sorted(m for m in sys.modules if m.startswith("gpulesson.results.entries_"))
    assert found == ["gpulesson.results.entries_decode"]


def test_a_module_whose_entries_differ_from_the_registry_is_named(monkeypatch):
    listed = dict(suite.ENTRY_MODULES)
    listed["gpulesson.results.entries_decode"] = ("decode", "decode_twice")
    monkeypatch.setattr(suite, "ENTRY_MODULES", listed)
    with pytest.raises(ValueError, match="entries_decode defines entries \\['decode'\\] but"):
        suite.entries()
    with pytest.raises(ValueError, match="make them the same"):
        suite.entry("decode")
