"""The first lessons' blocks read the suite: each entry's rows give the page its result back.

why-gpus (``matmul_sweep``, ``matmul_peak``), timing (``launch_overhead``, ``stopwatch``) and
roofline (``roofline``; ``host_copies`` with ``memory_bandwidth``) measure through
:func:`gpulesson.site.build_bundle.measure`. Each test runs an entry with a tiny plan,
catches the timing the entry wrapped, and checks that the ``*_from_measurements`` function
rebuilds exactly what the lesson's renderer takes, and that the rows make a valid bundle.
"""

from __future__ import annotations

import dataclasses
import html
import json

import pytest

from gpulesson.course.roofline import link_markdown, roofline_markdown
from gpulesson.course.timing import illusion_markdown, launch_markdown
from gpulesson.course.why_gpus import comparison_markdown
from gpulesson.results import bundle, entries_device, entries_matmul, entries_roofline
from gpulesson.results.bundle import Bundle, SuiteRun
from gpulesson.results.measurements import seconds, throughput
from gpulesson.results.provenance import collect
from gpulesson.results.suite import Context, Device
from gpulesson.site import build_bundle, facts
from gpulesson.timing import bench
from gpulesson.timing.launch import TINY_OP
from gpulesson.timing.results import (
    LaunchOverhead,
    LaunchTiming,
    LinkBandwidth,
    MatmulResult,
    OpResult,
    SweepComparison,
)
from gpulesson.units import GIB, MIB
from tests.conftest import quick_cpu_bundle
from tests.lesson_blocks import exec_blocks

CPU = Device(
    type="cpu", name="cpu", total_bytes=8 * GIB, free_bytes=4 * GIB, count=0, capability=None
)
TINY = entries_device.DevicePlan(64, 0.005, 4 * MIB, 0, 0)


def _caught(monkeypatch, module, name):
    """Wrap ``module.name`` so a test sees what it returned."""
    original = getattr(module, name)
    seen = []

    def wrapper(*args, **kwargs):
        seen.append(original(*args, **kwargs))
        return seen[-1]

    monkeypatch.setattr(module, name, wrapper)
    return seen


def _valid(measurements, device="cpu") -> Bundle:
    """A bundle of ``measurements``, through JSON and the schema and consistency checks."""
    made = Bundle(
        provenance=collect(device, SuiteRun(quick=True, wall_s=1.0, entries=("x",))),
        measurements=tuple(measurements),
    )
    data = json.loads(bundle.to_json(made))
    bundle.validate(data)
    assert bundle.consistency_problems(data) == []
    return bundle.from_dict(data)


# --- timing: stopwatch, launch_overhead --------------------------------------------------


def test_the_stopwatch_entry_gives_the_timing_page_its_illusion_back(monkeypatch):
    monkeypatch.setitem(entries_device.PLANS, ("cpu", True), TINY)
    seen = _caught(monkeypatch, entries_device, "async_illusion")
    out = entries_device.run_stopwatch(Context(device=CPU, quick=True))
    (measured,) = seen
    back = entries_device.illusion_from_measurements(_valid(out).measurements)
    assert back == measured  # honest, naive (no closing barrier) and the CPU baseline
    assert back.cpu is back.honest and back.naive.closing_barrier is False
    assert illusion_markdown(back) == illusion_markdown(measured)
    assert entries_device.illusion_from_measurements(out[1:]) is None


def test_the_full_cpu_timings_keep_the_timing_lessons_run_time():
    full = Context(device=CPU, quick=False)
    assert entries_device._timer_run_time_s(full) == 0.2  # the lesson's default, unchanged
    assert entries_device._plan(full).min_run_time_s == 0.1  # the bandwidth copy's
    assert entries_device._plan(full).illusion_n == bench.plan_for("cpu").illusion_n
    quick = Context(device=CPU, quick=True)
    assert entries_device._timer_run_time_s(quick) == entries_device._plan(quick).min_run_time_s


def test_the_launch_entry_gives_the_timing_page_its_launch_back(monkeypatch):
    monkeypatch.setitem(entries_device.PLANS, ("cpu", True), TINY)
    seen = _caught(monkeypatch, entries_device, "measure_launch_overhead")
    out = entries_device.run_launch_overhead(Context(device=CPU, quick=True))
    (measured,) = seen
    back = entries_device.launch_from_measurements(_valid(out).measurements)
    assert back == measured and back.graph is None
    assert launch_markdown(back) == launch_markdown(measured)
    assert entries_device.launch_from_measurements(()) is None


def test_a_cuda_graph_row_comes_back_as_the_replay():
    eager = LaunchTiming("cuda", "eager", 4, (5e-6, 6e-6, 7e-6), 1000)
    graph = LaunchTiming("cuda", "cuda-graph", 4, (1e-6, 2e-6, 3e-6), 100_000)
    r = LaunchOverhead(device="cuda", op=TINY_OP, eager=eager, graph=graph)
    rows = [
        seconds(t, name=f"launch_overhead.{name}", entry="launch_overhead", label=name,
                params={"op": r.op})
        for t, name in ((eager, "eager"), (graph, "cuda_graph"))
    ]  # fmt: skip
    assert entries_device.launch_from_measurements(_valid(rows, "cuda").measurements) == r


# --- roofline: roofline, host_copies + memory_bandwidth ----------------------------------


def test_the_roofline_entry_gives_the_roofline_page_its_roof_back(monkeypatch):
    monkeypatch.setitem(entries_roofline.QUICK, "cpu", (2 * MIB, 64, 0.005))
    roofs = _caught(monkeypatch, entries_roofline, "measure_roofline")
    adds = _caught(monkeypatch, entries_roofline, "measure_add")
    out = entries_roofline.run_roofline(Context(device=CPU, quick=True))
    assert [m.name for m in out] == [f"roofline.{s}" for s in entries_roofline.OPS]
    (roof,), (bf16_add,) = roofs, adds
    assert bf16_add.dtype == "bf16" and bf16_add.flops == roof.ops[0].flops  # same elements
    back = entries_roofline.roofline_from_measurements(_valid(out).measurements)
    assert back == (roof, bf16_add)
    assert roofline_markdown(back[0]) == roofline_markdown(roof)
    assert entries_roofline.roofline_from_measurements(out[:-1]) is None


def test_the_full_roofline_plan_is_the_lessons():
    full = entries_roofline.plan(Context(device=CPU, quick=False))
    assert full == bench.plan_for("cpu")
    starved = Device("cpu", "cpu", GIB, 100 * MIB, 0, None)  # 50 MiB budget
    assert entries_roofline.plan(Context(device=starved, quick=False)).stream_bytes == 16 * MIB


def test_the_roofline_entry_makes_a_valid_bundle(tmp_path, monkeypatch):
    monkeypatch.setitem(entries_roofline.QUICK, "cpu", (2 * MIB, 64, 0.005))
    bundle = quick_cpu_bundle(tmp_path / "roof.json", "roofline")
    roof, bf16_add = entries_roofline.roofline_from_measurements(bundle.measurements)
    assert [op.name for op in roof.ops] == [
        "elementwise add (fp32)",
        "softmax (rows of 1024)",
        "matmul n=64",
        "matmul n=64",
    ]
    assert roof.bandwidth.name == "copy" and bf16_add.name == "elementwise add (bf16)"


def _op(name, bytes_moved, samples, device="mps"):
    return OpResult(name, device, "fp32", 4, samples, 0, bytes_moved, 10)


def test_host_copies_and_bandwidth_give_the_roofline_page_its_link_back(monkeypatch):
    gpu = Device("mps", "Apple M", 16 * GIB, 8 * GIB, 1, None)
    monkeypatch.setitem(entries_device.PLANS, ("mps", True), dataclasses.replace(TINY, copy_n=512))
    pageable = _op("host-to-device copy, pageable", 2 * 512 * 512 * 4, (1e-3, 2e-3, 3e-3))
    on_device = _op("copy", 2 * 256 * MIB, (4e-3, 5e-3, 6e-3))
    monkeypatch.setattr(entries_device, "measure_transfer", lambda *a: pageable)
    monkeypatch.setattr(entries_device, "measure_bandwidth", lambda *a: on_device)
    d2h = _op("device-to-host copy, pageable", 512 * 512 * 4, (1e-3,) * 3)
    monkeypatch.setattr(entries_device, "measure_device_to_host", lambda *a: d2h)
    context = Context(device=gpu, quick=True)
    rows = entries_device.run_host_copies(context) + entries_device.run_memory_bandwidth(context)
    link = entries_device.link_from_measurements(_valid(rows, "mps").measurements)
    assert link == LinkBandwidth("mps", pageable, None, on_device)
    assert link_markdown(link).splitlines()[2].startswith("| host to device, pageable | 2 |")
    # CUDA adds the pinned copy; a CPU has no host link at all
    pinned = _op("host-to-device copy, pinned", pageable.bytes_moved, (5e-4,) * 3, "mps")
    pinned_row = throughput(pinned, name="h2d.pinned", entry="host_copies", unit="B/s", label="x")
    assert entries_device.link_from_measurements([*rows, pinned_row]).pinned == pinned
    assert entries_device.link_from_measurements(rows[-1:]) is None


# --- why-gpus: matmul_sweep ---------------------------------------------------------------


def test_the_sweep_entry_gives_the_why_gpus_page_its_cpu_sweep_back(monkeypatch):
    monkeypatch.setitem(entries_matmul.SWEEP_QUICK, "cpu", (0.5, 128, 0.005))
    seen = _caught(monkeypatch, entries_matmul, "sweep")
    out = entries_matmul.run_matmul_sweep(Context(device=CPU, quick=True))
    (swept,) = seen
    assert [m.name for m in out] == [f"matmul_sweep.fp32.n{r.n}" for r in swept]
    back = entries_matmul.comparison_from_measurements(_valid(out).measurements)
    assert back == SweepComparison(cpu=swept, gpu=(), gpu_device=None)
    assert back.best_cpu == max(swept, key=lambda r: r.flop_per_s)


def test_the_full_sweep_plan_is_the_lessons():
    plan = bench.plan_for("cpu")
    full = entries_matmul.sweep_plan(Context(device=CPU, quick=False))
    assert full == (plan.sweep_budget_s, plan.sweep_max_n, plan.min_run_time_s)


def test_a_gpu_sweep_comes_back_with_its_copy_columns(monkeypatch):
    gpu = Device("cuda", "GPU", 80 * GIB, 80 * GIB, 1, (9, 0))
    swept = tuple(
        MatmulResult("cuda", "fp32", n, 4, (n * 1e-6, n * 2e-6, n * 3e-6), 7) for n in (64, 128)
    )
    monkeypatch.setattr(entries_matmul, "sweep", lambda *a, **k: swept)

    def transfer(n, device, dtype, pinned, run):
        kind = "pinned" if pinned else "pageable"
        return OpResult(f"host-to-device copy, {kind}", device, dtype, 4, (n * 1e-5,) * 5, 0,
                        2 * n * n * 4, 3)  # fmt: skip

    monkeypatch.setattr(entries_matmul, "measure_transfer", transfer)
    gpu_rows = entries_matmul.run_matmul_sweep(Context(device=gpu, quick=False))
    assert len(gpu_rows) == 3 * len(swept)  # the sweep, then pageable and pinned copies
    cpu_rows = [m for m in gpu_rows if ".fp32." in m.name]  # stand-ins for the CPU's rows
    back = entries_matmul.comparison_from_measurements(
        cpu_rows, _valid(gpu_rows, "cuda").measurements
    )
    assert back.gpu == swept and back.gpu_device == "cuda"
    assert back.pageable == tuple(transfer(r.n, "cuda", "fp32", False, 0) for r in swept)
    assert back.pinned == tuple(transfer(r.n, "cuda", "fp32", True, 0) for r in swept)
    table = comparison_markdown(back)
    assert "copy A, B to GPU, pageable (ms)" in table and "| 128 |" in table


# --- the blocks: they render what the build measured, and measure nothing themselves ------


def _run_served(stem: str, block: str, available: dict) -> tuple[str, list, dict]:
    """Run a block as the build does after an earlier block measured ``available``."""
    import contextlib
    import io

    code = dict(exec_blocks(stem))[block]
    facts.reset()
    facts.begin_page(f"lessons/{stem}.md")
    facts.begin_block(block)
    build_bundle.begin_block(available)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, block, "exec"), {"__name__": "__lesson__"})  # noqa: S102
    published = {name: f.value for name, f in facts.page_facts().items()}
    reads = build_bundle.end_reads()
    ran = build_bundle.end_block()
    facts.reset()
    return out.getvalue(), ran, published | {"_reads": sorted(reads)}


def _served(entry: str, rows) -> dict:
    data = {
        "device": "cpu",
        "entry": entry,
        "wall_s": 1.0,
        "measurements": [bundle.measurement_to_dict(m) for m in rows],
        "skipped": [],
    }
    return {build_bundle.key("cpu", entry): data}


def test_the_timing_blocks_render_the_builds_measurements_and_time_nothing(monkeypatch):
    monkeypatch.setitem(entries_device.PLANS, ("cpu", True), TINY)
    monkeypatch.setattr(bench, "accelerator", lambda: None)
    context = Context(device=CPU, quick=True)
    launch_rows = entries_device.run_launch_overhead(context)
    out, ran, published = _run_served(
        "timing", "timing-launch", _served("launch_overhead", launch_rows)
    )
    assert ran == [] and published["_reads"] == ["measured:cpu/launch_overhead"]
    assert out.strip() == launch_markdown(entries_device.launch_from_measurements(launch_rows))
    assert published["timing.launch_s"] == launch_rows[0].value
    stopwatch_rows = entries_device.run_stopwatch(context)
    out, ran, published = _run_served(
        "timing", "timing-illusion", _served("stopwatch", stopwatch_rows)
    )
    assert ran == [] and published["_reads"] == ["measured:cpu/stopwatch"]
    illusion = entries_device.illusion_from_measurements(stopwatch_rows)
    assert out.strip() == illusion_markdown(illusion)
    assert published["timing.cpu_inflation"] == pytest.approx(illusion.inflation)


def test_the_timing_lab_animates_the_builds_stopwatch_rows_on_a_cuda_build(monkeypatch):
    # It timed the illusion a second time itself on a CUDA build; now it reads the rows the
    # illusion block above asked for (here CPU rows standing in for a GPU's) and times nothing.
    monkeypatch.setitem(entries_device.PLANS, ("cpu", True), TINY)
    monkeypatch.setattr(bench, "accelerator", lambda: "cuda")
    rows = entries_device.run_stopwatch(Context(device=CPU, quick=True))
    served = {
        key.replace("cpu/", "cuda/"): data for key, data in _served("stopwatch", rows).items()
    }
    out, ran, published = _run_served("timing", "timing-lab", served)
    assert ran == [] and published["_reads"] == ["measured:cuda/stopwatch"]
    illusion = entries_device.illusion_from_measurements(rows)
    measured = json.loads(html.unescape(out.split('data-measured="')[1].split('"')[0]))
    assert measured["launch_s"] == illusion.naive.median_s
    assert measured["kernel_s"] == pytest.approx(illusion.kernel_s)
    assert measured["cpu_s"] == illusion.cpu.median_s
    monkeypatch.setattr(bench, "accelerator", lambda: None)  # a CPU build: teaching figures
    out, ran, published = _run_served("timing", "timing-lab", {})
    assert ran == [] and published["_reads"] == [] and "data-measured" not in out


def test_the_why_gpus_sweep_block_renders_the_builds_sweep(monkeypatch):
    monkeypatch.setitem(entries_matmul.SWEEP_QUICK, "cpu", (0.5, 128, 0.005))
    monkeypatch.setattr(bench, "accelerator", lambda: None)
    rows = entries_matmul.run_matmul_sweep(Context(device=CPU, quick=True))
    out, ran, published = _run_served("why-gpus", "why-sweep", _served("matmul_sweep", rows))
    assert ran == [] and published["_reads"] == ["measured:cpu/matmul_sweep"]
    comparison = entries_matmul.comparison_from_measurements(rows)
    assert out.startswith(comparison_markdown(comparison))
    assert published["why.cpu_best_n"] == comparison.best_cpu.n
    assert published["why.cpu_first_n"] == 64


def test_the_roofline_block_renders_the_builds_roof(monkeypatch):
    monkeypatch.setitem(entries_roofline.QUICK, "cpu", (2 * MIB, 128, 0.005))
    monkeypatch.setattr(bench, "accelerator", lambda: None)
    rows = entries_roofline.run_roofline(Context(device=CPU, quick=True))
    out, ran, published = _run_served("roofline", "roof-measure", _served("roofline", rows))
    assert ran == [] and published["_reads"] == ["measured:cpu/roofline"]
    assert "| memory bandwidth |" in out and "elementwise add (bf16)" in out
    by_name = {m.name: m for m in rows}
    assert published["roofline.copy_gbs"] == pytest.approx(by_name["roofline.copy"].value / 1e9)
    streams = [by_name[f"roofline.{s}"].value for s in ("copy", "add", "softmax", "bf16_add")]
    assert published["roofline.bandwidth_roof"] == pytest.approx(max(streams) / 1e9)
