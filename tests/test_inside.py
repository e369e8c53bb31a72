"""gpulesson.inside: occupancy against NVIDIA's documented cases, waves, the attention byte
counts against the FlashAttention paper, the sweep's step rule on sweeps with and without
steps, the cited limits file, the renderers and the suite entries."""

from __future__ import annotations

import html
import json
import math

import pytest
import torch

from gpulesson.course.inside_gpu import (
    gpus_markdown,
    levels_sentences,
    occupancy_lab_html,
    shapes_markdown,
    sweep_markdown,
    tensor_cores_markdown,
)
from gpulesson.inside import limits
from gpulesson.inside.attention_io import (
    block_columns,
    flash_elements,
    growth_exponent,
    measure_peaks,
    standard_elements,
)
from gpulesson.inside.cache_sweep import (
    CacheLevel,
    Step,
    Sweep,
    SweepPoint,
    edge_size,
    find_steps,
    nearest_edge,
    nearest_edge_factor,
    parse_size,
    smoothed,
    sweep_sizes,
)
from gpulesson.inside.occupancy import occupancy
from gpulesson.inside.strided import measure_strided
from gpulesson.inside.waves import waves

# --- occupancy: cases from NVIDIA's documentation -------------------------------------------
# BPG: CUDA C++ Best Practices Guide, "Calculating Occupancy" (compute capability 7.0, 37
# registers per thread: 75% with 128-thread blocks, 63% with 320-thread blocks). PG: the CUDA
# C++ Programming Guide's table of per-SM limits by compute capability, with the allocation
# rules of cuda_occupancy.h (registers per warp rounded up to 256 in 4 sub-partitions; shared
# memory plus the 1 KB reserved per block from 8.0 on, rounded up to 128 bytes).
CITED = [
    # (cc, threads, registers, shared bytes) -> (blocks per SM, warps per SM, limited by)
    (("7.0", 128, 37, 0), (12, 48, "registers")),  # BPG: 75%
    (("7.0", 320, 37, 0), (4, 40, "registers")),  # BPG: 63% (40 of 64 warps)
    (("7.5", 32, 16, 0), (16, 16, "blocks")),  # PG: 16 blocks per SM on Turing
    (("8.6", 1024, 32, 0), (1, 32, "warps")),  # PG: 1536 threads (48 warps) per SM on 8.6
    (("8.0", 256, 32, 0), (8, 64, "warps")),  # PG: 64K registers fill 64 warps at 32/thread
    (("8.0", 256, 64, 0), (4, 32, "registers")),  # 65,536 / (64 x 256) = 4 blocks
    (("8.0", 128, 32, 48 * 1024), (3, 12, "shared memory")),  # 164 KB / (48 + 1 KB)
    (("9.0", 128, 255, 0), (2, 8, "registers")),  # 255 x 32 -> 8,192 per warp: 2 per sub
    (("8.0", 1024, 65, 0), (0, 0, "registers")),  # 2,304 x 32 warps > 64K: cannot launch
]


@pytest.mark.parametrize(("config", "expected"), CITED, ids=[str(c[0]) for c in CITED])
def test_occupancy_matches_nvidia_s_documented_cases(config, expected):
    cc, threads, regs, shared = config
    o = occupancy(
        cc, threads_per_block=threads, registers_per_thread=regs, shared_per_block_bytes=shared
    )
    assert (o.blocks_per_sm, o.warps_per_sm, o.limited_by) == expected


def test_the_best_practices_guide_percentages():
    a = occupancy("7.0", threads_per_block=128, registers_per_thread=37)
    b = occupancy("7.0", threads_per_block=320, registers_per_thread=37)
    assert a.occupancy == 0.75
    assert b.occupancy == 40 / 64 and abs(b.occupancy - 0.63) < 0.01  # the guide rounds to 63%


def test_one_more_register_per_thread_can_cost_a_quarter_of_the_warps():
    at_32 = occupancy("8.0", threads_per_block=256, registers_per_thread=32)
    at_33 = occupancy("8.0", threads_per_block=256, registers_per_thread=33)
    assert (at_32.warps_per_sm, at_33.warps_per_sm) == (64, 48)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"threads_per_block": 0, "registers_per_thread": 32}, "threads_per_block=0"),
        ({"threads_per_block": 128, "registers_per_thread": 256}, "registers_per_thread=256"),
        (
            {"threads_per_block": 128, "registers_per_thread": 32, "shared_per_block_bytes": -1},
            "shared_per_block_bytes=-1",
        ),
    ],
)
def test_occupancy_refuses_out_of_range_input_naming_it(kwargs, message):
    with pytest.raises(ValueError, match=message):
        occupancy("8.0", **kwargs)


def test_an_unknown_compute_capability_names_the_known_ones():
    with pytest.raises(ValueError, match=r"no compute capability '6.1': use one of 7.0"):
        occupancy("6.1", threads_per_block=128, registers_per_thread=32)


# --- the cited data file ---------------------------------------------------------------------


def test_every_limit_and_gpu_row_cites_a_known_https_source():
    raw = limits.raw()
    rows = [*raw["compute_capabilities"].values(), *raw["gpus"].values(), raw["granularity"]]
    for row in rows:
        assert limits.source_url(row["source"]).startswith("https://")
    with pytest.raises(ValueError, match="unknown source 'nope'"):
        limits.source_url("nope")


def test_the_reference_gpus_have_datasheet_rows_and_sensible_limits():
    for g in limits.gpus():
        cc = limits.compute_capability(g.compute_capability)
        assert g.sm_count > 0 and g.l2_bytes > 2**20
        assert cc.max_warps_per_sm * 32 == cc.max_threads_per_sm
    assert "| NVIDIA H100 SXM5 | 9.0 | 132 | 32 | 64 | 65,536 | 228 | 50 | 3,350 |" in (
        gpus_markdown(limits.gpus())
    )


def test_the_lab_carries_the_same_limits_the_function_uses():
    box = occupancy_lab_html()
    data = json.loads(html.unescape(box.split('data-limits="', 1)[1].split('"', 1)[0]))
    assert set(data) == set(limits.raw()["compute_capabilities"])
    cc = limits.compute_capability("9.0")
    assert data["9.0"]["sharedPerSm"] == cc.shared_per_sm_bytes
    assert data["9.0"]["maxWarps"] == cc.max_warps_per_sm
    assert "<script" not in box and "on" + "input" not in box


# --- waves -----------------------------------------------------------------------------------


def test_4097_needs_an_extra_wave_on_an_h100_and_4096_fills_its_tiles():
    a = waves(4096, 4096, tile_m=256, tile_n=128, sm_count=132)
    b = waves(4097, 4097, tile_m=256, tile_n=128, sm_count=132)
    assert (a.tiles, a.waves, b.tiles, b.waves) == (512, 4, 561, 5)
    assert b.efficiency < a.efficiency <= 1.0


def test_a_tile_count_that_fills_whole_waves_is_fully_efficient():
    w = waves(1024, 1024, tile_m=128, tile_n=128, sm_count=64)
    assert (w.tiles, w.waves, w.efficiency) == (64, 1, 1.0)
    with pytest.raises(ValueError, match="sm_count=0"):
        waves(8, 8, tile_m=8, tile_n=8, sm_count=0)


# --- attention bytes against the paper (Dao et al. 2022, Theorem 2) ---------------------------


class _CountingHBM:
    """Memory that counts every element read from it and written to it."""

    def __init__(self, **tensors: torch.Tensor) -> None:
        self.tensors = dict(tensors)
        self.read = self.written = 0

    def load(self, name: str) -> torch.Tensor:
        self.read += self.tensors[name].numel()
        return self.tensors[name]

    def store(self, name: str, value: torch.Tensor) -> None:
        self.written += value.numel()
        self.tensors[name] = value


def _standard_attention_step_by_step(hbm: _CountingHBM) -> None:
    """The FlashAttention paper's Algorithm 0, one line per step, every operand through HBM."""
    q, k = hbm.load("Q"), hbm.load("K")
    hbm.store("S", q @ k.T)  # 1. load Q, K; compute S = QK^T; write S
    hbm.store("P", torch.softmax(hbm.load("S"), dim=-1))  # 2. read S; P = softmax(S); write P
    hbm.store("O", hbm.load("P") @ hbm.load("V"))  # 3. load P, V; O = PV; write O


@pytest.mark.parametrize(("n", "d"), [(4, 2), (16, 8), (64, 16), (96, 32)])
def test_standard_attention_counts_what_algorithm_0_reads_and_writes(n, d):
    # Dao et al. 2022, Algorithm 0 (standard attention), executed and counted element by
    # element: the count is the function's, and the result is attention's.
    q, k, v = (torch.randn(n, d, dtype=torch.float64) for _ in range(3))
    hbm = _CountingHBM(Q=q, K=k, V=v)
    _standard_attention_step_by_step(hbm)
    assert hbm.read + hbm.written == standard_elements(n, d)
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=1.0)
    assert torch.allclose(hbm.tensors["O"], expected)
    for element_bytes in (2, 4):  # bf16 and fp32: bytes moved are elements x element size
        assert (hbm.read + hbm.written) * element_bytes == standard_elements(n, d) * element_bytes


def test_standard_attention_is_theta_nd_plus_n_squared():
    # Theorem 2's Theta(Nd + N^2): the count over Nd + N^2 stays between two constants at any
    # size, and the N^2 term decides it once N >> d: doubling N then about quadruples it,
    # doubling d barely moves it; while N << d, doubling d about doubles it.
    d = 64
    ratios = [standard_elements(n, d) / (n * d + n * n) for n in (1, 64, 4096, 2**20)]
    assert all(1 <= r <= 8 for r in ratios)
    big = 2**16
    assert standard_elements(2 * big, d) / standard_elements(big, d) == pytest.approx(4, rel=0.01)
    assert standard_elements(big, 2 * d) / standard_elements(big, d) == pytest.approx(1, abs=0.01)
    assert standard_elements(4, 2 * 4096) / standard_elements(4, 4096) == pytest.approx(2, rel=0.01)


@pytest.mark.parametrize(("d", "sram"), [(64, 100 * 1024 // 2), (128, 228 * 1024 // 2)])
def test_flashattention_is_theta_n2_d2_over_m(d, sram):
    # Once N spans many key/value blocks, the count over N^2 d^2 / M settles at the
    # constant of the passes: 3 element reads/writes per pass x 4d per block column.
    ratios = [flash_elements(n, d, sram) / (n * n * d * d / sram) for n in (2**14, 2**16, 2**18)]
    assert all(11 <= r <= 13.5 for r in ratios)
    assert ratios[-1] == pytest.approx(12, rel=0.02)


def test_flashattention_moves_fewer_elements_when_d_squared_is_well_under_m():
    n, d, sram = 16384, 64, 100 * 1024 // 2
    assert d * d < sram
    # 4N^2 against 12 N^2 d^2 / M: FlashAttention saves about M / 3d^2 of the traffic
    saving = standard_elements(n, d) / flash_elements(n, d, sram)
    assert saving == pytest.approx(sram / (3 * d * d), rel=0.05)
    assert block_columns(d, sram) == math.ceil(sram / (4 * d))
    with pytest.raises(ValueError, match="under 4d=256"):
        block_columns(64, 100)


def test_traced_peaks_grow_quadratically_for_explicit_attention_and_linearly_for_sdpa():
    peaks = measure_peaks((128, 256, 512), head_dim=16, heads=1)
    ns = [p.seq_len for p in peaks]
    assert growth_exponent(ns, [p.standard_peak_bytes for p in peaks]) > 1.5
    assert growth_exponent(ns, [p.sdpa_peak_bytes for p in peaks]) == pytest.approx(1.0, abs=0.2)


# --- the sweep's step rule ----------------------------------------------------------------


def _sweep(levels: list[tuple[int, float]], sizes: tuple[int, ...]) -> list[SweepPoint]:
    """A synthetic sweep: the bandwidth of the first level whose size holds the working set."""
    points = []
    for size in sizes:
        bw = next((b for cap, b in levels if size <= cap), levels[-1][1])
        points.append(SweepPoint(working_set_bytes=size, bytes_per_s=bw))
    return points


SIZES = sweep_sizes(8 * 1024, 128 * 2**20)


def test_a_sweep_with_two_cache_levels_has_two_steps_with_edges_at_their_sizes():
    sweep = _sweep([(2**20, 100e9), (8 * 2**20, 70e9), (2**40, 15e9)], SIZES)
    steps = find_steps(sweep)
    assert len(steps) == 2
    # a level ends between the last size that fits and the next, half a doubling apart
    assert nearest_edge_factor(steps, 2**20) <= 2**0.5
    assert nearest_edge_factor(steps, 8 * 2**20) <= 2**0.5


def test_the_edge_is_one_size_inside_a_wide_step_and_can_miss_the_l2_by_8x():
    # A drop that fades from 512 KiB on and falls off at 8 MiB is one step spanning 16x and
    # more: an L2 size anywhere inside that span sat "1.0x" from the old span rule. The edge
    # is where the bandwidth fell halfway down, at the 8 MiB fall: 8x from a 1 MiB L2.
    def bandwidth(size: int) -> float:
        if size <= 2**19:
            return 100e9
        if size <= 8 * 2**20:  # fading: 1.07x down per half-doubling, 1.23x per step span
            return 100e9 / 1.07 ** round(2 * math.log2(size / 2**19))
        return 20e9 if size <= 12 * 2**20 else 15e9

    fading = [SweepPoint(working_set_bytes=s, bytes_per_s=bandwidth(s)) for s in SIZES]
    steps = find_steps(fading)
    assert len(steps) == 1
    (step,) = steps
    assert step.before_bytes <= 2**20 <= step.after_bytes  # a 1 MiB L2 lies inside the span
    assert step.after_bytes / step.before_bytes >= 16  # a wide span
    assert 8 * 2**20 <= step.edge_bytes <= 12 * 2**20
    assert nearest_edge_factor(steps, 2**20) >= 8
    assert not nearest_edge_factor(steps, 2**20) <= 2  # the page's rule fails
    assert nearest_edge_factor(steps, 8 * 2**20) <= 2  # and holds for an 8 MiB L2


def test_the_edge_is_interpolated_on_the_log_size_axis():
    pts = [SweepPoint(working_set_bytes=2**k, bytes_per_s=b) for k, b in ((20, 9.0), (21, 1.0))]
    assert edge_size(pts) == 2**20.5  # halfway down (5.0) lies halfway between the sizes
    quarter = [SweepPoint(working_set_bytes=2**k, bytes_per_s=b) for k, b in ((20, 8.0), (22, 0.0))]
    assert edge_size(quarter) == 2**21
    with pytest.raises(ValueError, match="no drop"):
        edge_size([SweepPoint(working_set_bytes=1, bytes_per_s=1.0)] * 2)


def test_a_flat_or_noisy_sweep_has_no_step_and_the_l2_claim_fails():
    flat = [SweepPoint(working_set_bytes=s, bytes_per_s=50e9) for s in SIZES]
    assert find_steps(flat) == ()
    # noise of +-8% around one level, and one size a busy neighbour slowed 10x
    noisy = [
        SweepPoint(working_set_bytes=s, bytes_per_s=50e9 * (1.08 if i % 2 else 0.92))
        for i, s in enumerate(SIZES)
    ]
    noisy[10] = SweepPoint(working_set_bytes=SIZES[10], bytes_per_s=5e9)
    assert find_steps(noisy) == ()
    assert nearest_edge_factor(find_steps(noisy), 2**20) is None


def test_a_single_step_far_from_l2_is_more_than_a_factor_two_away():
    sweep = _sweep([(16 * 2**20, 80e9), (2**40, 10e9)], SIZES)
    steps = find_steps(sweep)
    assert len(steps) == 1
    assert nearest_edge_factor(steps, 2**20) > 2
    assert nearest_edge(steps, 2**20) is steps[0]


L1 = CacheLevel(level=1, kind="Data", size_bytes=48 * 1024)
L3 = CacheLevel(level=3, kind="Unified", size_bytes=480 * 2**20)


def _step(edge: float) -> Step:
    return Step(
        before_bytes=int(edge / 2),
        after_bytes=int(edge * 2),
        before_bytes_per_s=1.8e11,
        after_bytes_per_s=1.2e11,
        edge_bytes=edge,
    )


def test_the_l1_sentence_follows_what_the_sweep_found():
    shown = levels_sentences([_step(53 * 1024)], [L1, L3], 128 * 2**20)
    assert shown.startswith("L1 shows up too: the sweep has a step with its edge at 53 KiB, 1.10x")
    hidden = levels_sentences([_step(2 * 2**20)], [L1, L3], 128 * 2**20)
    assert hidden.startswith("L1 (48 KiB) shows no step of its own here: the nearest step edge")
    assert "hidden under each call's fixed overhead" in hidden
    assert "L3 is not claimed: the kernel reports 480 MiB" in hidden
    assert "(the largest size swept is 128 MiB)" in hidden
    near_l3 = levels_sentences([_step(400 * 2**20)], [L3], 2**30)
    assert "also lies 1.20x from the 480 MiB L3" in near_l3 and "still does not claim" in near_l3
    assert levels_sentences([], [L1], 2**20).startswith("L1 (48 KiB) shows no step of its own")


def test_the_sweep_table_gives_each_steps_edge_and_the_levels_sentence():
    points = tuple(_sweep([(2**20, 100e9), (2**40, 15e9)], SIZES))
    out = sweep_markdown(Sweep(device="cpu", rounds=1, points=points), [L1, L3])
    edge = find_steps(points)[0].edge_bytes
    assert f"its edge at {edge / 2**20:.3g} MiB" in out
    assert "L1 (48 KiB) shows no step of its own here" in out


def test_smoothing_removes_one_dip_but_keeps_a_level():
    pts = [
        SweepPoint(working_set_bytes=i, bytes_per_s=b) for i, b in enumerate((9, 9, 1, 9, 1, 1, 1))
    ]
    assert [p.bytes_per_s for p in smoothed(pts)] == [9, 9, 9, 1, 1, 1, 1]


def test_sysfs_sizes_parse_and_bad_ones_say_what_was_expected():
    assert parse_size("32K\n") == 32 * 1024
    with pytest.raises(ValueError, match="expected digits with K, M or G"):
        parse_size("lots")


def test_the_sweep_table_escapes_the_device_name():
    from gpulesson.inside.cache_sweep import Sweep

    s = Sweep(device="<b>cpu</b>", rounds=1, points=tuple(_sweep([(2**40, 1e9)], SIZES[:2])))
    assert "<b>" not in sweep_markdown(s, ())


def test_strided_reads_report_every_stride_and_refuse_an_unmeasured_one():
    r = measure_strided("cpu", strides=(1, 4), tensor_bytes=2**20, rounds=1)
    assert [p.stride for p in r.points] == [1, 4]
    assert r.points[1].elements == r.points[0].elements // 4
    with pytest.raises(ValueError, match="stride 16 was not measured: use one of 1, 4"):
        r.bandwidth(16)


# --- the suite entries ------------------------------------------------------------------------


def test_fp8_matmul_applies_only_to_cuda_gpus_from_compute_capability_8_9():
    import torch

    from gpulesson.results.entries_inside import fp8_supported
    from gpulesson.results.suite import Device

    def dev(kind: str, cc: tuple[int, int] | None) -> Device:
        return Device(type=kind, name="x", total_bytes=1, free_bytes=1, count=1, capability=cc)

    assert not fp8_supported(dev("cpu", None))
    assert not fp8_supported(dev("cuda", (8, 0)))  # A100: no fp8 tensor cores
    assert fp8_supported(dev("cuda", (9, 0))) == hasattr(torch, "float8_e4m3fn")


def test_the_sweep_and_stride_entries_keep_their_samples_on_a_cpu():
    from gpulesson.results.entries_inside import run_cache_sweep, run_strided
    from gpulesson.results.suite import Context, Device

    context = Context(device=Device.this("cpu"), quick=True)
    sweep = [m for m in run_cache_sweep(context) if m.name != "cache_sweep.fastest"]
    assert sweep[0].name == "cache_sweep.ws8192" and sweep[-1].name == f"cache_sweep.ws{16 * 2**20}"
    assert all(m.unit == "B/s" and len(m.samples) == 3 and m.value > 0 for m in sweep)
    strided = run_strided(context)
    assert [m.name for m in strided] == [f"strided.s{s}" for s in (1, 2, 4, 8, 16, 32, 64)]
    first = strided[0]
    assert first.value == pytest.approx(first.params["bytes"] / sorted(first.samples)[1])


def _cpu_context(quick: bool):
    from gpulesson.results.suite import Context, Device

    cpu = Device(
        type="cpu",
        name="cpu",
        total_bytes=8 * 2**30,
        free_bytes=4 * 2**30,
        count=0,
        capability=None,
    )
    return Context(device=cpu, quick=quick)


def test_the_sweep_entry_round_trips_the_lesson_s_sweep_and_keeps_its_curve(monkeypatch):
    from gpulesson.inside import cache_sweep
    from gpulesson.results import entries_inside

    measured = {}

    def tiny(device, sizes=None, rounds=None, bytes_per_sample=None):  # the lesson's call, small
        lesson = (cache_sweep.sweep_sizes(8 * 1024, 128 * 2**20), 7, 64 * 2**20)
        assert (device, sizes, rounds, bytes_per_sample) == ("cpu", *lesson)
        sweep = cache_sweep.measure_sweep(
            device, sizes=(8192, 65536, 2**20), rounds=3, bytes_per_sample=2**20
        )
        measured["sweep"] = sweep
        return sweep

    monkeypatch.setattr(entries_inside, "measure_sweep", tiny)
    rows = entries_inside.run_cache_sweep(_cpu_context(quick=False))
    sweep = measured["sweep"]
    assert [m.name for m in rows] == [
        "cache_sweep.ws8192",
        "cache_sweep.ws65536",
        f"cache_sweep.ws{2**20}",
        "cache_sweep.fastest",
    ]
    rebuilt = entries_inside.sweep_from_measurements(rows)
    assert rebuilt == sweep  # the same points, samples, rounds and device: the same table
    assert sweep_markdown(rebuilt, []) == sweep_markdown(sweep, [])
    curve = rows[-1].series
    assert curve is not None and curve.x_unit == "bytes" and curve.y_unit == "B/s"
    assert curve.points == tuple((float(p.working_set_bytes), p.bytes_per_s) for p in sweep.points)
    assert rows[-1].value == max(p.bytes_per_s for p in sweep.points)
    assert entries_inside.sweep_from_measurements(rows[-1:]) is None


def test_the_strided_and_attention_entries_round_trip_what_the_lesson_renders(monkeypatch):
    from gpulesson.course.inside_gpu import (
        attention_peaks_markdown,
        attention_time_markdown,
        strided_markdown,
    )
    from gpulesson.inside import attention_io, strided
    from gpulesson.results import entries_inside

    measured = {}

    def tiny_strided(device, strides=strided.STRIDES, tensor_bytes=None, rounds=None):
        assert (device, tensor_bytes, rounds) == ("cpu", 64 * 2**20, 5)  # the lesson's plan
        measured["strided"] = strided.measure_strided(
            device, strides=(1, 4, 16), tensor_bytes=2**20, rounds=3
        )
        return measured["strided"]

    def tiny_peaks(seq_lens):
        assert tuple(seq_lens) == (256, 512, 1024, 2048)  # the lesson's lengths
        measured["peaks"] = attention_io.measure_peaks((32, 64), head_dim=8)
        return measured["peaks"]

    def tiny_times(device, seq_lens):
        assert (device, tuple(seq_lens)) == ("cpu", (256, 512, 1024))
        measured["times"] = attention_io.time_attention(device, (32, 64), repeats=3)
        return measured["times"]

    monkeypatch.setattr(entries_inside, "measure_strided", tiny_strided)
    monkeypatch.setattr(entries_inside, "measure_peaks", tiny_peaks)
    monkeypatch.setattr(entries_inside, "time_attention", tiny_times)
    context = _cpu_context(quick=False)
    rows = entries_inside.run_strided(context)
    assert [m.name for m in rows] == ["strided.s1", "strided.s4", "strided.s16"]
    back = entries_inside.strided_from_measurements(rows)
    assert back == measured["strided"]
    assert strided_markdown(back) == strided_markdown(measured["strided"])
    assert back.bandwidth(16) == pytest.approx(rows[-1].value)

    rows = entries_inside.run_attention(context)
    assert [m.name for m in rows][:2] == ["attention.peak.standard.n32", "attention.peak.sdpa.n32"]
    peaks = entries_inside.peaks_from_measurements(rows)
    times = entries_inside.times_from_measurements(rows)
    assert peaks == measured["peaks"] and times == measured["times"]
    assert attention_peaks_markdown(peaks) == attention_peaks_markdown(measured["peaks"])
    assert attention_time_markdown(times, "cpu") == attention_time_markdown(
        measured["times"], "cpu"
    )
    assert entries_inside.peaks_from_measurements(rows[:1]) == ()  # one implementation only


def test_the_inside_entries_make_a_bundle_that_validates(run_cli, tmp_path):
    from gpulesson.results import entries_inside
    from gpulesson.results.bundle import load

    out = tmp_path / "bundle.json"
    result = run_cli(
        "measure",
        "--quick",
        "--device",
        "cpu",
        "--only",
        "cache_sweep,strided,attention",
        "--out",
        str(out),
    )
    assert result.returncode == 0, result.stderr
    bundle = load(out)  # schema, consistency and plausibility checked
    sweep = entries_inside.sweep_from_measurements(bundle.measurements)
    assert sweep is not None and sweep.points[-1].working_set_bytes == 16 * 2**20
    fastest = bundle.measurement("cache_sweep.fastest")
    assert fastest is not None and len(fastest.series.points) == len(sweep.points)
    assert entries_inside.strided_from_measurements(bundle.measurements).bandwidth(1) > 0
    peaks = entries_inside.peaks_from_measurements(bundle.measurements)
    times = entries_inside.times_from_measurements(bundle.measurements)
    assert [p.seq_len for p in peaks] == [256, 512, 1024, 2048]
    assert [t.seq_len for t in times] == [256, 512, 1024]


def test_the_attention_rows_validate_in_a_bundle():
    from gpulesson.inside.attention_io import AttentionPeak, AttentionTime
    from gpulesson.results import entries_inside
    from gpulesson.results.bundle import consistency_problems, measurement_to_dict

    rows = entries_inside.attention_measurements(
        [
            AttentionPeak(
                seq_len=8, head_dim=4, heads=1, standard_peak_bytes=512, sdpa_peak_bytes=256
            )
        ],
        [
            AttentionTime(
                seq_len=8,
                standard_s=2.0,
                sdpa_s=1.0,
                standard_samples_s=(1.0, 2.0, 3.0),
                sdpa_samples_s=(1.0, 1.0, 1.0),
            )
        ],
        "cpu",
    )
    assert consistency_problems({"measurements": [measurement_to_dict(m) for m in rows]}) == []


# --- tensor-core multiples and tiles: cited data --------------------------------------------


def test_tensor_core_multiples_come_from_the_matmul_guide_with_its_url():
    rows = limits.tensor_core_multiples()
    assert [m.dtype for m in rows] == ["INT8", "FP16", "TF32", "FP64"]
    url = limits.tensor_core_source()
    assert url == limits.source_url("nvidia-matmul")
    assert url.startswith("https://docs.nvidia.com/deeplearning/performance/")
    # the guide's multiples are one width in bytes across data types (16, and 128 on A100)
    assert {m.bytes for m in rows} == {16} and {m.a100_bytes for m in rows} == {128}
    fp16 = next(m for m in rows if m.dtype == "FP16")
    tiles = limits.cublas_tiles()
    assert tiles[0] == (256, 128) and tiles[-1] == (64, 64)
    assert all(a % fp16.a100_elements == 0 and b % fp16.a100_elements == 0 for a, b in tiles)
    table = tensor_cores_markdown()
    assert "| FP16 | 2 | 8 | 16 | 64 | 128 |" in table and url in table
    assert "256 x 128, 128 x 256" in table


# --- the lesson's charts ---------------------------------------------------------------------


def _chart(html_: str) -> tuple[str, dict]:
    """A chart's aria-label and its Vega-Lite spec."""
    label = html.unescape(html_.split('aria-label="', 1)[1].split('"', 1)[0])
    payload = html_.split('class="gl-chart-spec">', 1)[1].split("</script>", 1)[0]
    return label, json.loads(payload)


def test_the_sweep_chart_marks_each_edge_and_the_caches_it_spans():
    from gpulesson.inside.charts import sweep_chart

    points = tuple(_sweep([(48 * 1024, 180e9), (2 * 2**20, 120e9), (2**40, 14e9)], SIZES))
    sweep = Sweep(device="cpu", rounds=1, points=points)
    l2 = CacheLevel(level=2, kind="Unified", size_bytes=2 * 2**20)
    label, spec = _chart(sweep_chart(sweep, [L1, l2, L3]))
    steps = find_steps(points)
    assert len(steps) == 2
    for s in steps:
        assert f"edge at {s.edge_bytes / 1024:.3g} KiB" in label or (
            f"edge at {s.edge_bytes / 2**20:.3g} MiB" in label
        )
    assert "180 GB/s at 8 KiB" in label and "14.0 GB/s at 128 MiB" in label
    assert "L1 48 KiB, L2 2 MiB, L3 480 MiB (beyond the sizes swept, not drawn)" in label
    rules = [layer for layer in spec["layer"] if layer["mark"]["type"] == "rule"]
    marked = sorted(row["x"] for layer in rules for row in layer["data"]["values"])
    assert marked == sorted([48.0, 2048.0, *(s.edge_bytes / 1024 for s in steps)])
    line = next(layer for layer in spec["layer"] if layer["mark"]["type"] == "line")
    assert line["encoding"]["x"]["scale"]["type"] == "log"
    assert [row["y"] for row in line["data"]["values"]] == [p.bytes_per_s / 1e9 for p in points]


def test_the_sweep_chart_escapes_the_device_and_needs_points():
    from gpulesson.inside.charts import sweep_chart

    points = tuple(_sweep([(2**40, 1e9)], SIZES[:3]))
    html_ = sweep_chart(Sweep(device="<b>x</b>", rounds=1, points=points), ())
    assert "<b>" not in html_ and "no step" in _chart(html_)[0]
    with pytest.raises(ValueError, match="no points"):
        sweep_chart(Sweep(device="cpu", rounds=1, points=()), ())


def test_the_attention_chart_states_the_peaks_it_draws():
    from gpulesson.inside.charts import attention_peaks_chart

    peaks = measure_peaks((128, 256, 512), head_dim=16, heads=1)
    label, spec = _chart(attention_peaks_chart(peaks))
    ns = [p.seq_len for p in peaks]
    std = [p.standard_peak_bytes for p in peaks]
    assert f"as N to the {growth_exponent(ns, std):.2f}" in label
    assert f"{std[-1] / peaks[-1].sdpa_peak_bytes:.0f} times SDPA's" in label
    drawn = {(r["series"], r["x"]): r["y"] for r in spec["data"]["values"]}
    assert drawn[("SDPA", 512)] == peaks[-1].sdpa_peak_bytes / 2**20
    with pytest.raises(ValueError, match="two sequence lengths"):
        attention_peaks_chart(peaks[:1])


@pytest.mark.parametrize("gpu", [False, True], ids=["cpu-build", "cuda-build"])
def test_both_lessons_ask_for_the_same_alignment_rows_and_render_them(monkeypatch, gpu):
    from gpulesson.results import entries_feeding
    from gpulesson.site import build_bundle, facts, gpu_figures
    from gpulesson.timing import alignment, bench
    from tests.lesson_blocks import exec_blocks, run_block

    tiny = alignment.AlignmentPlan(
        square_n=32, tokens=4, hidden=8, dtypes=("fp32",), rounds=3, calls_per_sample=1, threads=1
    )
    monkeypatch.setitem(alignment.PLANS, "cpu", tiny)
    rows = tuple(entries_feeding.run_alignment(_cpu_context(quick=False)))
    asked = []
    monkeypatch.setattr(bench, "accelerator", lambda: "cuda" if gpu else None)
    monkeypatch.setattr(gpu_figures, "build_has_gpu", lambda: gpu)
    monkeypatch.setattr(build_bundle, "applies", lambda entry, device: True)
    monkeypatch.setattr(
        build_bundle, "measure", lambda entry, device: asked.append((entry, device)) or rows
    )
    blocks = dict(exec_blocks("inside-gpu")) | dict(exec_blocks("feeding"))
    facts.reset()
    try:
        facts.begin_page("lessons/inside-gpu.md")
        inside = run_block("inside-gpu", "inside-alignment", blocks["inside-alignment"])
        facts.begin_page("lessons/feeding.md")
        feeding_id = "feeding-align-gpu" if gpu else "feeding-align"
        feeding = run_block("feeding", feeding_id, blocks[feeding_id])
        prefix = "feeding.gpu_" if gpu else "feeding."
        gain = facts.value(f"{prefix}square_gain_fp32")
    finally:
        facts.reset()
    device = "cuda" if gpu else "cpu"
    assert asked == [("alignment", device), ("alignment", device)]  # one entry, one device
    square = entries_feeding.shapes_from_rows(rows, "fp32", "n")
    assert inside.strip() == shapes_markdown(square)
    assert shapes_markdown(square) in feeding and "vocab 50,304" in feeding
    assert gain == pytest.approx(square.aligned_gain)
