"""gpulesson.timing.profile: what the profiler recorded, read back as frozen rows."""

from __future__ import annotations

import base64
import gzip
import json
import os
import re
import subprocess
import sys
from dataclasses import replace

import pytest
import torch
from torch.profiler import record_function

from gpulesson.course.profiling import (
    first_and_steady_markdown,
    memory_markdown,
    ops_markdown,
    regions_markdown,
    rows_markdown,
    snapshot_markdown,
    trace_download_html,
)
from gpulesson.memory.gpt2 import GPT2Config
from gpulesson.results import entries_profiling, suite
from gpulesson.results.bundle import Bundle, Skipped, load, to_dict, validate
from gpulesson.results.suite import Context, Device
from gpulesson.timing import profile as prof
from gpulesson.timing.profile import (
    MATMUL_OPS,
    REGIONS,
    OpStat,
    StepProfile,
    profile_callable,
    profile_first_and_steady,
    profile_gpt_step,
    replay_peak,
)
from tests.conftest import REPO, quick_cpu_bundle

TINY = GPT2Config(vocab_size=96, seq_len=16, hidden=32, heads=2, layers=2, attention="eager")
CPU = Device("cpu", "cpu", 8 * 2**30, 4 * 2**30, 0, None)


@pytest.fixture(scope="module")
def tiny_step() -> prof.GptStepProfile:
    return profile_gpt_step(TINY, 2, trace=True)


@pytest.fixture(scope="module")
def tiny_pair() -> prof.FirstAndSteady:
    return profile_first_and_steady(TINY, 2)


@pytest.fixture(scope="module")
def profile_bundle(tmp_path_factory: pytest.TempPathFactory) -> Bundle:
    """One ``gpulesson measure --quick --only profile_step --out FILE`` on this CPU, with the
    tiny model: the bundle file read back (schema, consistency and plausibility checked)."""
    out = tmp_path_factory.mktemp("profile") / "bundle.json"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(entries_profiling, "PROFILE_CONFIG", TINY)
        mp.setattr(entries_profiling, "PROFILE_BATCH", 2)
        return quick_cpu_bundle(out, "profile_step")


def _row(
    name: str, self_s: float, *, kind: str = "op", memory: int = 0, on_device: bool = False
) -> OpStat:
    return OpStat(
        name=name,
        kind=kind,
        on_device=on_device,
        calls=2,
        self_cpu_s=self_s,
        total_cpu_s=2 * self_s,
        self_device_s=self_s / 10,
        total_device_s=self_s / 5,
        self_memory_bytes=memory,
        total_memory_bytes=memory,
    )


def test_only_the_active_calls_are_recorded_and_each_op_is_counted():
    a = torch.ones(32, 32)
    calls = []

    def fn() -> None:
        calls.append(1)
        if len(calls) == 1:
            torch.cumsum(a, 0)  # only the first call does this
        (a @ a).relu()

    p = profile_callable(fn, wait=1, warmup=1, active=3)
    assert len(calls) == 5 and len(p.step_samples_s) == 3
    assert p.op("aten::mm").calls == 3 and p.op("aten::relu").calls == 3
    assert not p.has("aten::cumsum")  # the wait step ran unprofiled
    assert (p.wait, p.warmup, p.active) == (1, 1, 3)


@pytest.mark.skipif(torch.cuda.is_available(), reason="with a GPU, kineto's messages stay")
def test_profiling_without_a_gpu_prints_no_profiler_lines_to_the_console(monkeypatch):
    code = (
        "import torch\nfrom gpulesson.timing.profile import profile_callable\n"
        "a = torch.ones(8, 8)\nprofile_callable(lambda: a @ a, wait=0, warmup=1, active=1)\n"
        "profile_callable(lambda: a @ a, wait=0, warmup=1, active=1)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "KINETO_LOG_LEVEL"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert "USDT" not in done.stderr and "profiler_start" not in done.stderr, done.stderr
    monkeypatch.setenv("KINETO_LOG_LEVEL", "0")  # a level the reader set is kept
    prof.quiet_kineto()
    assert os.environ["KINETO_LOG_LEVEL"] == "0"


def test_without_wait_or_warmup_the_first_call_is_the_one_profiled():
    a = torch.ones(8, 8)
    calls = []

    def fn() -> None:
        calls.append(1)
        if len(calls) == 1:
            torch.cumsum(a, 0)

    p = profile_callable(fn, wait=0, warmup=0, active=1)
    assert p.op("aten::cumsum").calls == 1


def test_shares_are_of_all_self_time_and_the_top_op_leads():
    a = torch.ones(96, 96)
    p = profile_callable(lambda: a @ a @ a @ a, wait=0, warmup=1, active=2)
    assert sum(p.share(r) for r in p.ops) == pytest.approx(1.0)
    assert p.top.name == "aten::mm" and p.family_share(MATMUL_OPS) == p.share(p.top)
    assert [p.self_s(r) for r in p.ops] == sorted((p.self_s(r) for r in p.ops), reverse=True)
    assert p.op("aten::mm").total_cpu_s >= p.op("aten::mm").self_cpu_s


def test_labels_are_rows_of_their_own_kind_with_total_time_over_self_time():
    a = torch.ones(384, 384)  # enough work that the matmul, not the label, holds the time

    def fn() -> None:
        with record_function("work"):
            a @ a

    p = profile_callable(fn, wait=0, warmup=1, active=1, labels=("work",))
    work = p.op("work")
    assert work.kind == "label" and p.op("aten::mm").kind == "op"
    assert work.total_cpu_s >= p.op("aten::mm").total_cpu_s > work.self_cpu_s
    assert all(r.kind == "op" for r in p.op_rows)
    assert any(r.name.startswith("ProfilerStep") and r.kind == "label" for r in p.ops)


def test_memory_is_bytes_allocated_minus_freed_in_the_region():
    kept = []

    def fn() -> None:
        with record_function("keep"):
            kept.append(torch.empty(2**18, dtype=torch.float32))  # 1 MiB, kept alive
        with record_function("churn"):
            torch.empty(2**18).add_(1)  # allocated and freed inside

    p = profile_callable(fn, wait=0, warmup=1, active=2, memory=True, labels=("keep", "churn"))
    assert p.memory_per_step_bytes(p.op("keep")) == 2**20
    assert p.memory_per_step_bytes(p.op("churn")) == 0
    assert p.allocated_bytes() >= 2**20


def test_the_thread_count_is_restored():
    before = torch.get_num_threads()
    p = profile_callable(lambda: torch.ones(4).sum(), wait=0, warmup=0, active=1, threads=1)
    assert p.threads == 1 and torch.get_num_threads() == before


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"wait": -1}, "wait=-1 must be a whole number >= 0"),
        ({"warmup": 1.5}, "warmup=1.5 must be a whole number >= 0"),
        ({"active": 0}, "active=0 must be a whole number >= 1"),
        ({"device": "tpu"}, "device 'tpu' is not one of cpu, cuda, mps"),
        ({"threads": 0}, "threads=0 must be a whole number >= 1"),
    ],
)
def test_bad_arguments_raise_with_the_value_and_the_fix(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        profile_callable(lambda: None, **kwargs)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only message")
def test_asking_for_cuda_without_a_gpu_names_the_fix():
    with pytest.raises(ValueError, match="torch sees no CUDA GPU: use cpu"):
        profile_callable(lambda: None, device="cuda")


def test_a_missing_row_lists_what_the_profile_has():
    p = profile_callable(lambda: torch.ones(4, 4) @ torch.ones(4, 4), wait=0, warmup=0, active=1)
    with pytest.raises(ValueError, match=r"no row 'aten::conv2d' in the profile \(largest rows"):
        p.op("aten::conv2d")


def test_the_gpt_step_runs_one_matmul_per_linear_layer_and_two_in_its_backward(tiny_step):
    layers = TINY.layers
    assert tiny_step.calls_per_step("aten::addmm") == 4 * layers  # biased linears, forward
    # the tied output head forward, then two per linear (input and weight gradients)
    assert tiny_step.calls_per_step("aten::mm") == 1 + 2 * (4 * layers + 1)
    assert tiny_step.calls_per_step("aten::bmm") == 2 * layers * 3  # q@k, att@v; x3 with bwd
    assert [r.name for r in tiny_step.profile.regions()] == list(REGIONS)


def test_a_steady_step_frees_the_gradients_and_returns_to_where_it_began(tiny_step):
    p = tiny_step.profile
    assert -tiny_step.region_memory_bytes("zero_grad") == tiny_step.weight_bytes
    assert tiny_step.region_memory_bytes("optimizer.step") == 0
    assert sum(tiny_step.region_memory_bytes(n) for n in REGIONS) == pytest.approx(0, abs=1024)
    assert p.net_memory_bytes() == pytest.approx(0, abs=1024)
    assert p.allocated_bytes() > tiny_step.weight_bytes


def test_adamw_creates_its_two_moments_in_the_first_step_only(tiny_pair):
    first, steady = tiny_pair.first, tiny_pair.steady
    created = first.region_memory_bytes("optimizer.step")
    assert created == pytest.approx(first.adam_state_bytes, rel=0.01)
    assert steady.region_memory_bytes("optimizer.step") == 0
    assert first.parameters == steady.parameters == 8 * first.adam_state_bytes // 64


def test_the_trace_is_a_chrome_trace_with_the_labels_and_without_memory_events(tiny_step):
    trace = tiny_step.profile.trace_json()
    names = {e.get("name") for e in trace["traceEvents"]}
    assert set(REGIONS) <= names and "aten::addmm" in names
    assert "[memory]" not in names
    assert gzip.decompress(tiny_step.profile.trace_gz)[:1] == b"{"


def test_the_lessons_trace_stays_small():
    g = profile_gpt_step(memory=False, trace=True)
    assert 5_000 < g.profile.trace_size_bytes < 150_000  # gzip; the page embeds it


def test_no_trace_means_a_clear_error():
    p = profile_callable(lambda: None, wait=0, warmup=0, active=1)
    with pytest.raises(ValueError, match="trace=True"):
        p.trace_json()


def test_replaying_a_snapshot_counts_completed_frees_only():
    events = [
        {"action": "segment_alloc", "size": 2**21},
        {"action": "alloc", "size": 1000},
        {"action": "alloc", "size": 500},
        {"action": "free_requested", "size": 1000},
        {"action": "alloc", "size": 200},  # the 1000 is not free yet
        {"action": "free_completed", "size": 1000},
        {"action": "alloc", "size": 100},
    ]
    assert replay_peak(events) == 1700
    assert replay_peak(events, baseline_bytes=10) == 1710
    assert replay_peak([]) == 0


# --- renderers -----------------------------------------------------------------------------


def test_the_ops_table_lists_operators_only_with_their_shares(tiny_step):
    p = tiny_step.profile
    text = ops_markdown(p, rows=5)
    lines = text.splitlines()
    assert lines[0] == "| op | calls | self (ms) | total (ms) | share |"
    assert len([x for x in lines if x.startswith("| `")]) == 5
    assert lines[2].startswith(f"| `{p.top.name}` |")
    assert "`forward`" not in text and "ProfilerStep" not in text
    assert "schedule(wait=1, warmup=1, active=1)" in text and "self CPU time" in text


def test_a_cuda_profile_takes_shares_of_the_kernels_time_and_shows_cpu_time_beside_it():
    # Each op's self CUDA time is its kernels' time, which the kernel rows hold again; the
    # "forward" label has a GPU row spanning its kernels. Shares count each kernel once.
    p = StepProfile(
        device="cuda",
        threads=8,
        wait=1,
        warmup=1,
        active=2,
        memory=False,
        ops=(
            _row("forward", 0.03, kind="label", on_device=True),
            _row("aten::mm", 0.02),
            _row("sgemm_kernel", 0.02, kind="kernel", on_device=True),
            _row("aten::add", 0.01),
            _row("elementwise_kernel", 0.01, kind="kernel", on_device=True),
            _row("forward", 0.0, kind="label"),
        ),
        step_samples_s=(0.01, 0.012),
    )
    text = ops_markdown(p)
    assert "| op | calls | self CUDA (ms) | total CUDA (ms) | self CPU (ms) | share |" in text
    assert "| `aten::mm` | 2 | 2 | 4 | 20 | 66.7% |" in text
    assert "kernel" not in text.split("\n\n")[0]  # kernels are not operator rows
    assert p.basis == "self CUDA time" and p.self_sum_s == pytest.approx(0.003)
    assert p.busy_share == pytest.approx(0.003 / 0.022)
    assert p.op("forward").on_device is False  # the CPU-side label row
    assert p.family_share(MATMUL_OPS) == pytest.approx(2 / 3)


def test_chosen_rows_regions_and_memory_tables(tiny_step, tiny_pair):
    p = tiny_step.profile
    rows = rows_markdown(p, ("aten::linear", "backward"))
    assert "| `aten::linear` | 9 |" in rows and "| `backward` | 1 |" in rows
    regions = regions_markdown(p)
    assert [line.split("|")[1].strip() for line in regions.splitlines()[2:6]] == [
        f"`{n}`" for n in REGIONS
    ]
    assert "Median step" in regions
    memory = memory_markdown(p, rows=3)
    first = memory.splitlines()[2]
    assert first.startswith(f"| `{p.by_memory()[0].name}` |")
    pair = first_and_steady_markdown(tiny_pair)
    assert f"{tiny_pair.first.parameters:,} parameters" in pair
    adam = tiny_pair.first.adam_state_bytes / 2**20
    assert f"| `optimizer.step` | {adam:,.2f} | 0.00 |" in pair


def test_the_trace_link_carries_the_trace_itself(tiny_step):
    link = trace_download_html(tiny_step.profile, "step.json.gz")
    match = re.search(r'href="data:application/gzip;base64,([A-Za-z0-9+/=]+)"', link)
    assert match and 'download="step.json.gz"' in link
    assert json.loads(gzip.decompress(base64.b64decode(match.group(1))))["traceEvents"]
    with pytest.raises(ValueError, match="trace=True"):
        trace_download_html(replace(tiny_step.profile, trace_gz=None))


def test_the_snapshot_table_shows_both_peaks_and_each_region():
    s = prof.SnapshotSummary(
        events=10,
        alloc_events=4,
        baseline_bytes=0,
        peak_bytes=3 * 2**20,
        max_allocated_bytes=3 * 2**20,
        phase_peaks_bytes={"forward": 2**20, "backward": 3 * 2**20},
        pickle_bytes=2**19,
    )
    text = snapshot_markdown(s)
    assert "| peak, replaying the events (MiB) | 3.00 |" in text
    assert "| `backward` | 3.00 |" in text


# --- the suite entry -----------------------------------------------------------------------


def test_profile_step_is_registered_and_applies_everywhere():
    entry = next(e for e in suite.entries() if e.name == "profile_step")
    assert entry.applies(CPU)
    assert entries_profiling.active_steps(True) < entries_profiling.active_steps(False)


def test_a_cpu_run_gives_four_valid_rows_from_the_lessons_function(profile_bundle):
    measured = [m for m in profile_bundle.measurements if m.entry == "profile_step"]
    names = [m.name for m in measured]
    assert names[:4] == [
        "profile_step.step",
        "profile_step.top_op_share",
        "profile_step.matmul_share",
        "profile_step.busy_share",
    ]
    step, top, matmul, busy = measured[:4]
    # on a CPU the lesson's plan: one active step with memory on, then repeats without it
    assert step.unit == "s" and len(step.samples) == 1 and min(step.samples) <= step.value
    assert (step.params["active_steps"], step.params["memory"]) == (1, True)
    assert top.params["top_op"] and 0 < top.value <= 1 and 0 < matmul.value <= 1
    assert step.params["layers"] == TINY.layers and step.params["threads"] == 1
    assert set(entries_profiling.FACTS.values()) == set(names[:4])
    assert any(m.name == "profile_step.first.op.optimizer_step" for m in measured)
    repeats = [m for m in measured if ".repeat." in m.name]
    assert [m.name.rsplit(".", 1)[1] for m in repeats] == list(entries_profiling.REPEAT_READINGS)
    assert all(len(m.samples) == 2 and m.params["memory"] is False for m in repeats)
    bundle = validate(to_dict(_bundle(measured)))
    assert bundle.measurement("profile_step.busy_share").value == pytest.approx(busy.value)


def test_the_profile_round_trips_through_bundle_measurements(tiny_step):
    repeats = [entries_profiling.repeat_readings(tiny_step.profile)] * 3
    rows = entries_profiling.profile_measurements(tiny_step, repeats)
    # through a validated bundle's JSON, as a cached build or a reference bundle gives them
    bundle = validate(to_dict(_bundle(rows)))
    run = entries_profiling.profile_run_from_measurements(bundle.measurements)
    assert run is not None and run.recorded is run.step.profile
    assert run.recorded == replace(tiny_step.profile, trace_gz=None)  # every row, exactly
    assert (run.step.config, run.step.parameters) == (TINY, tiny_step.parameters)
    calls = run.recorded.op("aten::addmm").calls
    assert isinstance(calls, int) and calls == tiny_step.profile.op("aten::addmm").calls
    assert prof.table_reading(run.step) == prof.table_reading(tiny_step)
    assert prof.memory_reading(run.step) == prof.memory_reading(tiny_step)
    assert ops_markdown(run.recorded) == ops_markdown(tiny_step.profile)
    assert memory_markdown(run.recorded) == memory_markdown(tiny_step.profile)
    for name, value in entries_profiling.repeat_readings(tiny_step.profile).items():
        assert run.repeats[name] == (value,) * 3
    assert len({m.name for m in rows}) == len(rows)  # op names made unique
    assert entries_profiling.profile_run_from_measurements(rows[:1]) is None


def test_the_first_and_steady_steps_round_trip_through_bundle_measurements(tiny_pair):
    rows = entries_profiling.first_and_steady_measurements(tiny_pair)
    bundle = validate(to_dict(_bundle(rows)))
    pair = entries_profiling.first_and_steady_from_measurements(bundle.measurements)
    assert pair is not None
    assert first_and_steady_markdown(pair) == first_and_steady_markdown(tiny_pair)
    assert prof.first_step_reading(pair) == prof.first_step_reading(tiny_pair)
    assert {r.kind for r in pair.first.profile.ops} == {"label"}  # the regions, kept whole
    assert entries_profiling.first_and_steady_from_measurements(rows[:1]) is None


def test_the_snapshot_round_trips_with_its_curve():
    events = [{"action": "alloc", "size": 2**20}] * 3 + [
        {"action": "free_completed", "size": 2**20}
    ]
    curve, stride = prof.replay_curve(events, 2**19)
    s = prof.SnapshotSummary(
        events=4,
        alloc_events=3,
        baseline_bytes=2**19,
        peak_bytes=prof.replay_peak(events, 2**19),
        max_allocated_bytes=3 * 2**20 + 2**19,
        phase_peaks_bytes={"forward": 2**20, "backward": 3 * 2**20},
        pickle_bytes=2**19,
        curve=curve,
        curve_stride=stride,
    )
    rows = entries_profiling.snapshot_measurements(s)
    bundle = validate(to_dict(_bundle(rows)))
    back = entries_profiling.snapshot_from_measurements(bundle.measurements)
    assert back == s and snapshot_markdown(back) == snapshot_markdown(s)
    assert max(y for _, y in bundle.measurements[0].series.points) == s.peak_bytes
    assert entries_profiling.snapshot_from_measurements(rows[2:]) is None


def test_a_long_snapshot_curve_keeps_its_peak_in_few_points():
    events = [{"action": "alloc" if i % 3 else "free_completed", "size": 7} for i in range(12001)]
    curve, stride = prof.replay_curve(events, 10)
    assert stride == 3 and len(curve) <= 5000 and curve[-1][0] == 12000
    assert max(y for _, y in curve) == prof.replay_peak(events, 10)


def test_the_first_step_is_profiled_on_a_cpu_and_the_snapshot_only_on_cuda():
    cpu = entries_profiling.plan_for(Context(CPU, quick=False))
    assert (cpu.active, cpu.memory, cpu.repeats, cpu.first_step, cpu.snapshot) == (
        1,
        True,
        5,
        True,
        False,
    )
    h100 = Device("cuda", "H100", 80 * 2**30, 79 * 2**30, 1, (9, 0))
    gpu = entries_profiling.plan_for(Context(h100, quick=False))
    assert (gpu.active, gpu.memory, gpu.repeats, gpu.first_step, gpu.snapshot) == (
        entries_profiling.active_steps(False),
        False,
        0,
        False,
        True,
    )
    mps = entries_profiling.plan_for(Context(replace(CPU, type="mps"), quick=True))
    assert not mps.snapshot and not mps.first_step


def test_measure_writes_a_valid_bundle_of_the_profiling_entries(profile_bundle):
    bundle = profile_bundle
    assert bundle.provenance.suite.entries == ("profile_step",)
    run = entries_profiling.profile_run_from_measurements(bundle.measurements)
    assert run is not None and run.step.config == TINY and len(run.repeats["matmul_share"]) == 2
    assert "| `aten::mm` |" in ops_markdown(run.recorded)
    pair = entries_profiling.first_and_steady_from_measurements(bundle.measurements)
    assert pair is not None and set(REGIONS) <= {r.name for r in pair.steady.profile.ops}


def test_the_trace_entry_keeps_the_trace_beside_rows_that_name_it(monkeypatch):
    monkeypatch.setattr(entries_profiling, "PROFILE_CONFIG", TINY)
    monkeypatch.setattr(entries_profiling, "PROFILE_BATCH", 2)
    entry = suite.entry("profile_trace")
    run = suite.run_suite(Context(CPU, quick=True), (entry,))
    (attachment,) = run.attachments
    assert attachment.name == "profile-step.json.gz" and not run.errors
    trace = json.loads(gzip.decompress(attachment.data))
    assert set(REGIONS) <= {e.get("name") for e in trace["traceEvents"]}
    # a bundle holds the rows (the trace's size and hash), not the file
    bundle = validate(to_dict(_bundle(run.measurements)))
    size = bundle.measurement("profile_trace.trace")
    assert size.value == len(attachment.data)
    assert size.params[suite.ATTACHMENT_PARAM] == attachment.name
    g = entries_profiling.traced_profile_from_measurements(
        bundle.measurements, {attachment.name: attachment.data}
    )
    assert g is not None and g.profile.trace_gz == attachment.data
    assert g.config == TINY and set(REGIONS) <= {r.name for r in g.profile.regions()}
    assert g.profile.memory and g.profile.active == 1
    # a trace that is not the one the rows name, or none, gives nothing
    other = gzip.compress(b"{}")
    read = entries_profiling.traced_profile_from_measurements
    for files in ({attachment.name: other}, {}):
        assert read(bundle.measurements, files) is None


def test_the_entry_is_skipped_when_the_step_does_not_fit():
    tight = Context(replace(CPU, free_bytes=2**20), quick=True)
    (skipped,) = entries_profiling.run_profile_step(tight)
    assert isinstance(skipped, Skipped) and "MiB free" in skipped.reason


def _bundle(measured) -> Bundle:

    base = load(REPO / "tests" / "fixtures" / "bundles" / "fixture_h100.json")
    return replace(base, measurements=tuple(measured), schema_version=2)


@pytest.mark.gpu
def test_on_cuda_rows_carry_kernel_time_and_the_snapshot_replays_to_the_counters_peak():
    g = profile_gpt_step(device="cuda", memory=False)
    assert g.profile.basis == "self CUDA time" and g.profile.self_sum_s > 0
    assert 0 < g.profile.busy_share <= 1.5
    s = prof.snapshot_gpt_step()
    assert s.alloc_events > 0 and s.pickle_bytes > 0
    assert s.peak_bytes == pytest.approx(s.max_allocated_bytes, rel=0.05)


class _OldTorchRow:
    """A ``key_averages()`` row as torch 2.2 and 2.3 give it: only the ``cuda_*`` names."""

    key, count, device_type, is_user_annotation = "aten::mm", 2, "CUDA", False
    self_cpu_time_total, cpu_time_total = 10.0, 20.0
    self_cuda_time_total, cuda_time_total = 3_000.0, 4_000.0
    self_cuda_memory_usage, cuda_memory_usage = 2**20, 2**21
    self_cpu_memory_usage = cpu_memory_usage = 0


class _NewTorchRow(_OldTorchRow):
    """torch 2.4+: the ``device_*`` names; reading a deprecated ``cuda_*`` name warns."""

    self_device_time_total, device_time_total = 5_000.0, 6_000.0
    self_device_memory_usage, device_memory_usage = 2**22, 2**23

    def __getattribute__(self, name: str):
        if "cuda" in name:
            raise AssertionError(f"read the deprecated {name}")
        return super().__getattribute__(name)


def test_device_columns_are_read_under_the_name_each_torch_gives_them():
    old = prof._row(_OldTorchRow(), (), "cuda")
    assert (old.self_device_s, old.total_device_s) == (3e-3, 4e-3)
    assert (old.self_memory_bytes, old.total_memory_bytes) == (2**20, 2**21)
    new = prof._row(_NewTorchRow(), (), "cuda")
    assert (new.self_device_s, new.total_device_s) == (5e-3, 6e-3)
    assert (new.self_memory_bytes, new.total_memory_bytes) == (2**22, 2**23)


def test_the_lesson_sorts_by_the_device_column_and_says_what_cpu_time_holds():
    text = (REPO / "docs" / "lessons" / "profiling.md").read_text(encoding="utf-8")
    assert 'sort_by="self_device_time_total"' in text
    assert "launch time" not in text and "cannot keep it busy" not in text
    assert "any time it waited for the GPU" in text


def test_an_op_name_from_a_bundle_is_shown_literally_whatever_it_holds():
    import markdown

    from gpulesson.text import code_span

    for name in ("aten::mm", "x` <img src=x onerror=alert(1)> `y", "a``b"):
        html = markdown.markdown(f"| op |\n|---|\n| {code_span(name)} |", extensions=["tables"])
        assert "<img" not in html and html.count("<code>") == 1
