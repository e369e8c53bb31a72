"""The suite's train_step entry: the lesson's own step function, sized per device, for MFU."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpulesson.memory.compute_step import count_gpt_step
from gpulesson.memory.gpt2 import GPT2Config
from gpulesson.results import datasheets, entries_compute, suite
from gpulesson.results.bundle import load, measurement_to_dict, to_dict, validate
from gpulesson.results.compare import datasheet_fraction
from gpulesson.results.measurements import throughput
from gpulesson.results.suite import Context, Device
from gpulesson.timing.results import OpResult
from tests.conftest import REPO, quick_cpu_bundle

CPU = Device("cpu", "cpu", 8 * 2**30, 4 * 2**30, 0, None)
H100 = Device("cuda", "NVIDIA H100 80GB HBM3", 80 * 2**30, 79 * 2**30, 1, (9, 0))
T4 = Device("cuda", "Tesla T4", 15 * 2**30, 14 * 2**30, 1, (7, 5))
SMALL = GPT2Config(vocab_size=128, seq_len=32, hidden=64, heads=4, layers=2, attention="eager")


def test_train_step_is_registered_and_runs_everywhere():
    entry = next(e for e in suite.entries() if e.name == "train_step")
    assert entry.applies(CPU) and entry.applies(H100)
    assert [e.name for e in suite.select(["train_step"])] == ["train_step"]


def test_the_step_is_sized_by_device_dtype_and_memory():
    cpu = entries_compute.plan_for(Context(CPU, quick=True))
    assert cpu.config.hidden == 256 and cpu.dtype == "fp32"  # the lesson's own step
    h100 = entries_compute.plan_for(Context(H100, quick=False))
    assert (h100.config.hidden, h100.config.attention, h100.batch, h100.dtype) == (
        768,
        "sdpa",
        8,
        "bf16",
    )
    t4 = entries_compute.plan_for(Context(T4, quick=False))
    assert t4.dtype == "fp16" and t4.batch < 8  # half of 14 GiB free holds a smaller batch
    mps = entries_compute.plan_for(Context(replace(CPU, type="mps", name="mps"), quick=True))
    assert mps.config.attention == "eager"  # the counter has no formula for MPS's SDPA


@pytest.fixture(scope="module")
def small_cpu_rows():
    """The train_step entry's rows on this CPU (``--quick``) for the SMALL model at batch 2:
    measured once, read by the tests of the rows and of their round trip."""
    with pytest.MonkeyPatch.context() as mp:
        small = replace(entries_compute.PLANS[("cpu", True)], config=SMALL, batch=2)
        mp.setitem(entries_compute.PLANS, ("cpu", True), small)
        return tuple(entries_compute.run_train_step(Context(CPU, quick=True)))


def test_a_cpu_run_records_counted_flops_over_the_median_as_a_peak_flops_row(small_cpu_rows):
    m, *matmuls = small_cpu_rows
    assert (m.name, m.entry, m.unit, m.dtype, m.limit) == (
        "train_step.fp32",
        "train_step",
        "FLOP/s",
        "fp32",
        "peak_flops",
    )
    assert m.params["flop"] == count_gpt_step(SMALL, 2).counted_flops  # one code path
    assert m.params["tokens_per_step"] == 2 * 32 and m.params["attention"] == "eager"
    assert m.value == pytest.approx(m.params["flop"] / m.spread.median)
    assert measurement_to_dict(m)["headline"] is True
    # the lesson's plan on a CPU: one thread, and the matmul timed before and after the step
    assert m.params["threads"] == 1
    assert sorted(x.name for x in matmuls) in (
        ["train_step.matmul", "train_step.matmul_reading0"],
        ["train_step.matmul", "train_step.matmul_reading1"],
    )
    fastest = next(x for x in matmuls if x.name == "train_step.matmul")
    assert fastest.value == max(x.value for x in matmuls) and fastest.params["n"] == 1024


def test_the_cpu_mfu_round_trips_through_bundle_measurements(small_cpu_rows):
    from gpulesson.memory.compute_step import cpu_mfu
    from gpulesson.timing.peak import CpuFacts

    rows = small_cpu_rows
    bundle = load(REPO / "tests" / "fixtures" / "bundles" / "fixture_h100.json")
    checked = validate(to_dict(replace(bundle, measurements=tuple(rows))))
    chip = CpuFacts(
        arch="x86_64",
        model=None,
        cores=1,
        cores_source="t",
        clock_hz=2e9,
        clock_source="t",
        flags=frozenset({"avx2", "fma"}),
    )
    back = entries_compute.cpu_mfu_from_measurements(checked.measurements, chip)
    assert back is not None
    step = back.step
    assert step.count.config == SMALL and step.count == count_gpt_step(SMALL, 2)
    assert step.timing.samples_s == rows[0].samples and step.timing.threads == 1
    assert step.flop_per_s == pytest.approx(rows[0].value)
    by_reading = sorted(rows[1:], key=lambda x: x.params["reading"])
    assert [r.samples_s for r in back.matmuls] == [x.samples for x in by_reading]
    assert back.matmul.flop_per_s == pytest.approx(max(x.value for x in rows[1:]))
    assert back == cpu_mfu(step, back.matmuls, chip)  # the readings the page renders
    assert entries_compute.cpu_mfu_from_measurements(rows[:1]) is None


def test_measure_writes_a_valid_cpu_train_step_bundle(tmp_path, monkeypatch):
    small = replace(entries_compute.PLANS[("cpu", True)], config=SMALL, batch=2)
    monkeypatch.setitem(entries_compute.PLANS, ("cpu", True), small)
    bundle = quick_cpu_bundle(tmp_path / "bundle.json", "train_step")
    cpu = entries_compute.cpu_mfu_from_measurements(bundle.measurements)
    assert cpu is not None and cpu.readings[0].peak_kind == "matmul"


def test_the_gpu_rows_come_from_the_entries_rows_as_from_the_bundle():
    from gpulesson.memory.compute_step import gpu_mfu
    from gpulesson.results.compare import Sourced

    bundle = load(REPO / "tests" / "fixtures" / "bundles" / "fixture_h100.json")
    step = throughput(
        OpResult(
            name="GPT-2 training step",
            device="cuda",
            dtype="bf16",
            threads=1,
            samples_s=(1.0,),
            flops=400 * 10**12,
            bytes_moved=0,
        ),
        name="train_step.bf16",
        entry="train_step",
        unit="FLOP/s",
        label="step",
        dtype="bf16",
        limit="peak_flops",
    )
    ref = Sourced(replace(bundle, measurements=(*bundle.measurements, step)), "reference", "x.json")
    peak = tuple(m for m in bundle.measurements if m.entry == "matmul_peak")
    found = entries_compute.gpu_mfu_from_measurements((step,), peak, ref)
    assert found == gpu_mfu(ref, has_gpu=False) and len(found.readings) == 2
    none = entries_compute.gpu_mfu_from_measurements(None, None, ref)
    assert none.readings == () and "x.json has no train_step row" in none.source
    nothing = entries_compute.gpu_mfu_from_measurements(None, None, None)
    assert nothing == gpu_mfu(None, has_gpu=False)


def test_on_a_gpu_bundle_the_datasheet_fraction_is_the_step_s_mfu():
    bundle = load(REPO / "tests" / "fixtures" / "bundles" / "fixture_h100.json")
    timing = OpResult(
        name="GPT-2 training step",
        device="cuda",
        dtype="bf16",
        threads=1,
        samples_s=(1.0, 1.0, 1.0),
        flops=350 * 10**12,
        bytes_moved=0,
    )
    row = throughput(
        timing,
        name="train_step.bf16",
        entry="train_step",
        unit="FLOP/s",
        label="step",
        dtype="bf16",
        limit="peak_flops",
    )
    assert datasheet_fraction(row, datasheets.get("h100-sxm")) == pytest.approx(350 / 989.5)
    with_step = replace(bundle, measurements=(*bundle.measurements, row))
    assert validate(to_dict(with_step)).measurement("train_step.bf16").value == 350e12
