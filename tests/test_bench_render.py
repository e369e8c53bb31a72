"""gpulesson.timing render, teaching and peak: teaching figures, CPU peak model, tables, JSON."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

from gpulesson.course.timing import launch_correction_markdown, launch_markdown
from gpulesson.course.why_gpus import cpu_peak_markdown, flops_markdown
from gpulesson.timing import peak, teaching
from gpulesson.timing import render as bench_render
from gpulesson.timing.results import (
    LaunchOverhead,
    LaunchTiming,
    MatmulResult,
    flop_counts,
    matmul_flops,
)


def _result(n: int, seconds: float, threads: int = 2) -> MatmulResult:
    return MatmulResult(device="cpu", dtype="fp32", n=n, threads=threads, samples_s=(seconds,))


# --- teaching figures: the source's 5 ms, corrected ---------------------------------------


def test_the_sources_example_still_gives_its_own_ratios():
    t = teaching.TeachingTiming(
        kernel_s=teaching.SOURCE_KERNEL_S, launch_s=teaching.SOURCE_LAUNCH_S
    )
    assert t.gpu_honest_s == pytest.approx(0.205)
    assert t.naive_speedup == pytest.approx(1000)
    assert t.honest_speedup == pytest.approx(5.0 / 0.205)
    assert t.illusion == pytest.approx(1000 / (5.0 / 0.205))
    assert t.job_naive_s == pytest.approx(36.0)


def test_the_default_launch_is_the_cited_microseconds_not_5_ms():
    low, high = teaching.EAGER_LAUNCH_S_RANGE
    assert 1e-6 <= low < high <= 1e-5
    assert teaching.TeachingTiming().launch_s == high
    assert teaching.SOURCE_LAUNCH_S / high == pytest.approx(500)
    assert all(url.startswith("https://") for _, url in teaching.LAUNCH_SOURCES)


def test_launch_correction_puts_the_source_beside_the_cited_range():
    c = teaching.launch_correction()
    assert c.source.launch_s == teaching.SOURCE_LAUNCH_S
    assert sorted(t.launch_s for t in c.corrected) == list(teaching.EAGER_LAUNCH_S_RANGE)
    # naive speedup = CPU time / launch; illusion = (kernel + launch) / launch
    assert c.naive_speedup_range == pytest.approx((5.0 / 10e-6, 5.0 / 5e-6))
    kernel = 2 * 5000**3 / 8.1e12  # a T4's datasheet fp32 peak, "Single-Precision 8.1 TFLOPS"
    assert c.illusion_range == pytest.approx(((kernel + 10e-6) / 10e-6, (kernel + 5e-6) / 5e-6))
    page = launch_correction_markdown(c)
    assert "Teaching estimate" in page and "launch 10 µs" in page and "launch 5 µs" in page
    assert "a T4's datasheet fp32 peak" in page
    assert "| speedup, naive | 5 s / naive | 1,000x | 500,000x | 1,000,000x |" in page
    assert "says 5 x 10^5 to 1 x 10^6" in page and "3.09 x 10^3 to 6.17 x 10^3 times" in page


def test_launch_markdown_labels_a_cpu_figure_as_not_a_launch():
    eager = LaunchTiming(
        device="cpu", mode="eager", threads=2, samples_s=(3e-6, 3e-6, 3e-6), calls_per_sample=9
    )
    cpu = launch_markdown(LaunchOverhead(device="cpu", op="add", eager=eager))
    assert "not a kernel launch" in cpu and "3 µs" in cpu and "| 3 | 0 | 3 | 9 |" in cpu
    gpu_eager = LaunchTiming(
        device="cuda", mode="eager", threads=2, samples_s=(6e-6,), calls_per_sample=9
    )
    graph = LaunchTiming(
        device="cuda", mode="cuda-graph", threads=2, samples_s=(2e-6,), calls_per_sample=900
    )
    gpu = launch_markdown(LaunchOverhead(device="cuda", op="add", eager=gpu_eager, graph=graph))
    assert "not a kernel launch" not in gpu
    assert "6 µs per call" in gpu and "833 times less than the source's 5 ms" in gpu
    assert "CUDA graph replay" in gpu and "costs 2 µs" in gpu


# --- FLOP counts and JSON --------------------------------------------------------------


def test_flop_counts_and_their_table():
    assert matmul_flops(5000) == 2.5e11
    counts = flop_counts((5000, 4000))
    assert counts[1].relative_to_first == pytest.approx(0.512)
    page = flops_markdown(counts)
    assert "2.5 x 10^11" in page and "0.512x" in page
    with pytest.raises(ValueError, match="no sizes"):
        flop_counts(())


def test_json_carries_every_promised_field():
    data = json.loads(bench_render.to_json([_result(64, 1e-5)], "cpu", "fp32"))
    (m,) = data["measurements"]
    for key in ("device", "dtype", "n", "threads", "median_s", "flops", "flop_per_s"):
        assert key in m
    assert m["flops"] == 2 * 64**3 and m["samples_s"] == [1e-5]
    assert "how_to_compare" in data


def test_renderers_need_no_torch():
    import subprocess

    code = "import sys, gpulesson.timing.render; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


# --- the CPU peak model -----------------------------------------------------------------

ZEN3_CPUINFO = textwrap.dedent(
    """\
    processor	: 0
    model name	: AMD EPYC
    physical id	: 0
    core id		: 0
    cpu MHz		: 2445.426
    flags		: fpu sse2 avx fma avx2

    processor	: 1
    model name	: AMD EPYC
    physical id	: 0
    core id		: 1
    cpu MHz		: 2445.426
    flags		: fpu sse2 avx fma avx2

    processor	: 2
    physical id	: 0
    core id		: 1
    flags		: fpu sse2 avx fma avx2
    """
)


def test_cpu_facts_count_cores_not_hyperthreads_and_only_usable_ones():
    facts = peak.parse_cpu_facts(ZEN3_CPUINFO, "x86_64", {0, 1, 2})
    assert facts.cores == 2  # processors 1 and 2 are two threads of core 1
    assert peak.parse_cpu_facts(ZEN3_CPUINFO, "x86_64", {0}).cores == 1
    assert facts.clock_hz == pytest.approx(2.445426e9) and "cpu MHz" in facts.clock_source
    assert facts.model == "AMD EPYC" and {"avx2", "fma"} <= facts.flags
    with_max = peak.parse_cpu_facts(ZEN3_CPUINFO, "x86_64", {0}, max_freq_khz="3500000\n")
    assert with_max.clock_hz == 3.5e9 and "maximum" in with_max.clock_source


def test_cpu_facts_without_core_ids_or_clock_say_so():
    facts = peak.parse_cpu_facts("processor : 0\nFeatures : fp asimd\n", "aarch64", {0, 1, 2})
    assert facts.cores == 3 and "core ids not revealed" in facts.cores_source
    assert facts.clock_hz is None and "not revealed" in facts.clock_source
    p = peak.cpu_peak(facts, "fp32", threads=2)
    assert p.simd == "asimd" and p.simd_lanes == 4 and p.fma
    assert p.per_fma_unit_flop_per_s is None and p.bounds_flop_per_s == ()
    assert p.unknown_terms == ("FMA units per core", "clock")


@pytest.mark.parametrize(
    ("flags", "dtype", "lanes"),
    [
        ({"avx512f", "avx2"}, "fp32", 16),
        ({"avx512f"}, "fp64", 8),
        ({"avx2"}, "fp32", 8),
        ({"avx2"}, "bf16", 8),  # no native bf16: converted, fp32 lanes
        ({"avx512f", "avx512_bf16"}, "bf16", 32),
        ({"sse2"}, "fp32", 4),
        ({"neon"}, "fp32", 4),
    ],
)
def test_simd_lanes_follow_the_flags_and_the_dtype(flags, dtype, lanes):
    assert peak.simd_lanes(frozenset(flags), dtype)[1] == lanes


def test_simd_lanes_unknown_without_a_known_flag_and_for_an_unknown_dtype():
    assert peak.simd_lanes(frozenset({"fpu"}), "fp32")[:2] == (None, None)
    with pytest.raises(ValueError, match="fp8"):
        peak.simd_lanes(frozenset({"avx2"}), "fp8")


def test_cpu_peak_is_cores_times_lanes_times_two_times_clock_per_fma_unit():
    facts = peak.parse_cpu_facts(ZEN3_CPUINFO, "x86_64", {0, 1})
    p = peak.cpu_peak(facts, "fp32", threads=8)
    assert p.cores == 2  # threads beyond the cores add no FMA units
    assert p.per_fma_unit_flop_per_s == pytest.approx(2 * 8 * 2 * 2.445426e9)
    assert [u for u, _ in p.bounds_flop_per_s] == [1, 2]
    assert peak.cpu_peak(facts, "fp32", threads=1).cores == 1


@pytest.mark.parametrize(
    ("gflops", "verdict", "needle"),
    [
        (50.0, "below_one_unit", "cannot tell whether the cores have one FMA unit or two"),
        (140.0, "needs_two_units", "so these cores have at least two"),
        (200.0, "above_bounds", "ran above the clock the machine reported"),
    ],
)
def test_cpu_roof_prose_follows_the_measured_rate(gflops, verdict, needle):
    facts = peak.parse_cpu_facts(ZEN3_CPUINFO, "x86_64", {0, 1})
    roof = peak.cpu_roof(gflops * 1e9, "a test sweep", threads=2, facts=facts)
    assert roof.verdict == verdict
    assert roof.fma_units_implied == pytest.approx(gflops * 1e9 / (2 * 8 * 2 * 2.445426e9))
    page = cpu_peak_markdown(roof)
    assert needle in page and f"{gflops:,.1f} GFLOP/s" in page
    assert "| FMA units per core | not revealed |" in page
    assert "| peak per FMA unit (GFLOP/s) | 78.3 | 2 x 8 x 2 x 2.45 GHz |" in page
    assert f"| best measured matmul (GFLOP/s) | {gflops:,.1f} | a test sweep |" in page


def test_cpu_roof_without_a_clock_uses_the_measured_rate_only():
    facts = peak.parse_cpu_facts("processor : 0\nflags : avx2\n", "x86_64", {0})
    roof = peak.cpu_roof(1e10, "a test", threads=1, facts=facts)
    assert roof.verdict == "unknown" and roof.fma_units_implied is None
    page = cpu_peak_markdown(roof)
    assert "does not reveal its clock" in page and "| clock | not revealed |" in page


def test_cpu_roof_needs_a_positive_measured_rate():
    with pytest.raises(ValueError, match="must be positive"):
        peak.cpu_roof(0.0, "nothing", threads=1)


def test_this_machines_cpu_facts_are_read():
    facts = peak.read_cpu_facts()
    assert facts.arch
    if sys.platform == "linux":
        assert facts.cores is not None and facts.cores >= 1
