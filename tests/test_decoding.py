"""The decoding lesson's package: the KV-cache decode loop, its timing, the serving arithmetic."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from gpulesson.course import decoding as course_decoding
from gpulesson.course.budget import kv_cache_markdown
from gpulesson.memory.budget import TransformerShape, estimate
from gpulesson.memory.gpt2 import GPT2, GPT2Config
from gpulesson.results import entries_decode
from gpulesson.results.suite import Context, Device
from gpulesson.timing import decode, serving
from gpulesson.timing.results import OpResult
from gpulesson.units import GIB, MIB
from tests.conftest import quick_cpu_bundle

TINY = GPT2Config(vocab_size=50, seq_len=24, hidden=16, heads=4, layers=2)
TINY_PLAN = decode.DecodePlan(
    config=TINY,
    dtype="fp32",
    batches=(1, 3),
    prompt_tokens=4,
    new_tokens=3,
    warmup_steps=1,
    bandwidth_bytes=MIB,
    matmul_n=32,
)


def _model(config: GPT2Config = TINY, attention: str = "sdpa") -> GPT2:
    torch.manual_seed(0)
    return GPT2(dataclasses.replace(config, attention=attention)).eval()


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_cached_logits_match_a_full_forward_at_every_position(attention: str):
    model = _model(attention=attention)
    idx = torch.randint(0, TINY.vocab_size, (3, 11))
    cache = decode.KVCache.allocate(TINY, batch=3, capacity_tokens=11)
    pieces = [decode.forward_cached(model, idx[:, :5], cache)]  # a prefill of 5
    pieces += [decode.forward_cached(model, idx[:, i : i + 1], cache) for i in range(5, 9)]
    pieces.append(decode.forward_cached(model, idx[:, 9:], cache))  # two tokens after a cache
    with torch.no_grad():
        full = model(idx)
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, atol=1e-5, rtol=1e-4)
    assert cache.length == 11


def test_cached_decoding_leaves_the_training_path_alone():
    model = _model()
    idx = torch.randint(0, TINY.vocab_size, (2, 6))
    before = model(idx, idx).item()
    decode.generate(model, idx[:, :2], 4)
    assert model(idx, idx).item() == before
    assert all(p.grad is None for p in model.parameters())


def test_greedy_generation_picks_the_argmax_of_a_full_forward():
    model = _model()
    prompt = torch.randint(0, TINY.vocab_size, (2, 3))
    out = decode.generate(model, prompt, 5)
    assert torch.equal(out[:, :3], prompt)
    with torch.no_grad():
        for i in range(3, 8):
            expected = model(out[:, :i])[:, -1].argmax(dim=-1)
            assert torch.equal(out[:, i], expected)


def test_a_cache_refuses_tokens_it_has_no_room_for():
    model = _model()
    cache = decode.KVCache.allocate(TINY, batch=1, capacity_tokens=4)
    decode.forward_cached(model, torch.zeros(1, 4, dtype=torch.long), cache)
    with pytest.raises(ValueError, match="overflow a cache of 4 positions"):
        decode.forward_cached(model, torch.zeros(1, 1, dtype=torch.long), cache)
    with pytest.raises(ValueError, match="do not match a cache of batch 1"):
        decode.forward_cached(model, torch.zeros(2, 1, dtype=torch.long), cache)
    with pytest.raises(ValueError, match="seq_len=24"):
        decode.KVCache.allocate(TINY, batch=1, capacity_tokens=25)


def test_the_cache_holds_the_formula_s_bytes():
    cache = decode.KVCache.allocate(TINY, batch=3, capacity_tokens=10)
    per_token = decode.kv_bytes_per_token(TINY, 4)
    assert cache.capacity_bytes == per_token * 10 * 3
    formula = serving.kv_cache_bytes(
        layers=TINY.layers, kv_heads=TINY.heads, head_dim=4, tokens=10, batch=3, bytes_per_value=4
    )
    assert cache.capacity_bytes == formula


def test_flops_per_token_agree_with_the_flop_counter():
    from torch.utils.flop_counter import FlopCounterMode

    model = _model()
    cache = decode.KVCache.allocate(TINY, batch=1, capacity_tokens=12)
    decode.forward_cached(model, torch.zeros(1, 7, dtype=torch.long), cache)
    with FlopCounterMode(display=False) as counter:
        decode.forward_cached(model, torch.zeros(1, 1, dtype=torch.long), cache)
    # The counter has no rule for the CPU SDPA kernel, so it counts the matmuls alone:
    # the formula at context 0 (no attention term) must match them exactly.
    assert counter.get_total_flops() == decode.decode_flops_per_token(TINY, 0)
    attention = decode.decode_flops_per_token(TINY, 8) - decode.decode_flops_per_token(TINY, 0)
    assert attention == TINY.layers * 4 * TINY.hidden * 8


def test_measure_decode_keeps_one_sample_per_step_and_counts_the_bytes():
    model = _model()
    t = decode.measure_decode(model, batch=2, prompt_tokens=4, new_tokens=5, warmup_steps=2)
    assert t.repeats == 5 and len(t.prefill_samples_s) == 3
    assert t.mean_context_tokens == pytest.approx((7 + 8 + 9 + 10 + 11) / 5)
    assert t.tokens_per_s == pytest.approx(2 / t.median_s)
    assert t.weight_bytes == decode.decode_weight_bytes(model)
    assert t.bytes_per_step == pytest.approx(t.weight_bytes + 2 * t.kv_bytes_per_token * 9)
    with pytest.raises(ValueError, match="batch=0"):
        decode.measure_decode(model, batch=0)


@pytest.mark.parametrize("warmup_steps", [0, 2])
def test_the_timed_prefills_run_between_the_timed_decode_steps_in_their_own_cache(
    monkeypatch, warmup_steps
):
    model = _model()
    calls: list[tuple[int, int]] = []  # (tokens fed, cache length before the call)
    real = decode.forward_cached
    monkeypatch.setattr(
        decode,
        "forward_cached",
        lambda m, x, c: calls.append((x.shape[1], c.length)) or real(m, x, c),
    )
    t = decode.measure_decode(
        model, batch=1, prompt_tokens=4, new_tokens=6, warmup_steps=warmup_steps, prefill_repeats=3
    )
    assert len(t.prefill_samples_s) == 3 and t.repeats == 6
    # one untimed prefill seeds the decode, then the warm-up steps, all untimed
    assert [n for n, _ in calls[: 1 + warmup_steps]] == [4] + [1] * warmup_steps
    timed = [n for n, _ in calls[1 + warmup_steps :]]
    assert timed == [4, 1, 1, 4, 1, 1, 4, 1, 1], timed  # spread over the decode steps
    # each timed prefill starts from an empty cache; the decode steps' cache is never rewound
    assert [length for n, length in calls[1 + warmup_steps :] if n == 4] == [0, 0, 0]
    steps = [length for n, length in calls[1:] if n == 1]
    assert steps == list(range(4, 4 + warmup_steps + 6))
    assert t.mean_context_tokens == pytest.approx(4 + warmup_steps + 3.5)


def test_a_sweep_sets_each_batch_against_its_two_ceilings():
    threads = torch.get_num_threads()
    one_thread = dataclasses.replace(TINY_PLAN, threads=1)
    sweep = decode.measure_decode_sweep("cpu", one_thread, min_run_time_s=0.01)
    assert torch.get_num_threads() == threads  # restored
    assert {r.threads for r in sweep.rows} == {1} and sweep.peak.threads == 1
    assert [r.batch for r in sweep.rows] == [1, 3]
    assert len(sweep.bandwidths) == 2
    assert sweep.bandwidth_bytes_per_s == max(b.bytes_per_s for b in sweep.bandwidths)
    assert sweep.crossover_batch == pytest.approx(sweep.ridge_flop_per_byte * 4 / 2)
    for b, r in zip(sweep.bounds(), sweep.rows, strict=True):
        assert b.bandwidth_bound_tokens_per_s == pytest.approx(
            r.batch * sweep.bandwidth_bytes_per_s / r.bytes_per_step
        )
        assert b.compute_bound_tokens_per_s == pytest.approx(
            sweep.peak_flop_per_s / r.flops_per_token
        )
        assert b.limit in ("memory", "compute")
    assert decode.headline_figures(sweep)["batch_ratio"] == (3.0, "x")


def _sweep(
    seconds: dict[int, float], bandwidth_s: float = 1.0, kv_bytes_per_token: int = 10**3
) -> decode.DecodeSweep:
    rows = tuple(
        decode.DecodeTiming(
            device="cpu",
            dtype="fp32",
            batch=b,
            threads=1,
            samples_s=(s,),
            prefill_samples_s=(s,),
            prompt_tokens=2,
            weight_bytes=10**9,
            kv_bytes_per_token=kv_bytes_per_token,
            mean_context_tokens=10.0,
            flops_per_token=2e9,
        )
        for b, s in seconds.items()
    )
    copy = OpResult(
        name="copy",
        device="cpu",
        dtype="fp32",
        threads=1,
        samples_s=(bandwidth_s,),
        flops=0,
        bytes_moved=10**10,
    )
    mm = OpResult(
        name="matmul n=8",
        device="cpu",
        dtype="fp32",
        threads=1,
        samples_s=(1.0,),
        flops=10**11,
        bytes_moved=1,
    )
    return decode.DecodeSweep(
        device="cpu",
        dtype="fp32",
        parameters=10**9 // 4,
        config=TINY,
        rows=rows,
        bandwidths=(copy,),
        peak=mm,
    )


def test_bounds_follow_the_roofline_arithmetic():
    sweep = _sweep({1: 0.5, 64: 2.0})
    one, big = sweep.bounds()
    assert one.bandwidth_bound_tokens_per_s == pytest.approx(10**10 / (10**9 + 10**4))
    assert one.limit == "memory" and one.tokens_per_s == 2.0
    assert big.compute_bound_tokens_per_s == pytest.approx(50.0)  # 1e11 / 2e9
    assert big.limit == "compute" and big.share_of_bound == pytest.approx(32 / 50)
    assert sweep.ridge_flop_per_byte == pytest.approx(10.0)
    assert sweep.crossover_batch == pytest.approx(20.0)  # ridge x 4 bytes / 2


def test_headline_figures_check_the_rows_against_the_crossover():
    figures = decode.headline_figures(_sweep({1: 0.5, 64: 2.0}))
    assert figures["misplaced_rows"] == (0.0, "rows")  # crossover 20: 1 memory, 64 compute
    assert figures["gain"] == (16.0, "x") and figures["per_sequence_drop"] == (4.0, "x")
    slow_copy = decode.headline_figures(_sweep({1: 0.5, 64: 2.0}, bandwidth_s=100.0))
    assert slow_copy["crossover_batch"][0] == pytest.approx(2000.0)
    assert slow_copy["misplaced_rows"] == (0.0, "rows")  # 64 is now memory-bound, as expected
    fast_peak = decode.headline_figures(_sweep({2: 0.5, 64: 2.0}, bandwidth_s=0.01))
    assert fast_peak["crossover_batch"][0] == pytest.approx(0.2)
    assert fast_peak["misplaced_rows"] == (0.0, "rows")
    # A cache so large that batch 64 (crossover 20) is bound by memory: the check says so.
    huge_cache = decode.headline_figures(_sweep({1: 0.5, 64: 2.0}, kv_bytes_per_token=10**8))
    assert huge_cache["misplaced_rows"] == (1.0, "rows")


def test_the_decode_table_shows_every_batch_and_its_bounds():
    sweep = _sweep({1: 0.5, 64: 2.0})
    table = course_decoding.decode_markdown(sweep)
    assert "| 1 | 2 | 2 | 4 |" in table and "| 64 | 32 |" in table
    assert "memory |" in table and "compute |" in table
    ceilings = course_decoding.ceilings_markdown(sweep)
    assert "10.0 GB/s" in ceilings and "| crossover batch | 20.0 |" in ceilings
    chart = course_decoding.decode_chart(sweep)
    assert "bandwidth bound" in chart and "compute bound" in chart


def test_gpu_bounds_come_from_the_datasheets():
    rows = serving.gpu_bounds(7e9, ("t4", "h100-sxm"))
    t4 = rows[0]
    assert dict(t4.tokens_per_s)["fp16"] == pytest.approx(320e9 / 14e9)
    assert dict(t4.tokens_per_s)["int4"] == pytest.approx(4 * 320e9 / 14e9)
    assert t4.crossover_batch == pytest.approx(65e12 / 320e9)
    assert t4.compute_bound_tokens_per_s == pytest.approx(65e12 / 14e9)
    assert t4.int4_crossover_batch == pytest.approx(t4.crossover_batch / 4)
    table = course_decoding.gpu_bounds_markdown(rows)
    assert "| NVIDIA T4 | 320 | 65.0 | 22.9 | 4,643 | 203 | 203 |" in table
    quantized = course_decoding.quantized_bounds_markdown(rows)
    assert "| NVIDIA T4 | 22.9 | 45.7 | 91.4 | 51 |" in quantized
    with pytest.raises(ValueError, match="apple-m4"):
        serving.gpu_bounds(7e9, ("apple-m4",))


def test_kv_growth_follows_the_formula_and_the_window_caps_it():
    layouts = serving.attention_layouts(heads=32, kv_heads=8, head_dim=128, window_tokens=4096)
    growth = serving.kv_growth(layouts, layers=32, contexts=(1024, 65536), weight_bytes=16 * 10**9)
    small, large = (dict(r.cache_bytes) for r in growth.rows)
    for n, row in ((1024, small), (65536, large)):
        assert row["MHA"] == serving.kv_cache_bytes(layers=32, kv_heads=32, head_dim=128, tokens=n)
        assert row["GQA"] * 4 == row["MHA"] and row["MQA"] * 8 == row["GQA"]
        assert row["MLA"] == 32 * 576 * n * 2
    assert large["GQA + window"] == small["GQA"] * 4  # capped at 4,096 tokens
    table = course_decoding.kv_growth_markdown(growth)
    assert "| 65,536 | 32 | 8 | 1 | 0.5 | 2.25 | 14.9 |" in table
    chart = course_decoding.kv_growth_chart(growth, ("MHA", "GQA", "GQA + window", "MLA"))
    assert '"series":"weights","colour":"var(--gl-chart-4)"' in chart
    with pytest.raises(ValueError, match="at most 4 names"):
        course_decoding.kv_growth_chart(growth)
    with pytest.raises(ValueError, match="no layout named 'XYZ'"):
        course_decoding.kv_growth_chart(growth, ("XYZ",))
    per_token = course_decoding.attention_layouts_markdown(growth)
    assert "| GQA | 2,048 | 2 x 8 KV heads x 128 | 128.0 | none |" in per_token
    assert (
        "kv_heads=3"
        in pytest.raises(
            ValueError,
            serving.attention_layouts,
            heads=32,
            kv_heads=3,
            head_dim=128,
            window_tokens=1,
        ).value.args[0]
    )


def test_the_budget_estimate_prices_the_same_kv_cache():
    shape = TransformerShape(
        vocab=128256, seq=32768, hidden=4096, heads=32, layers=32, batch=2, kv_heads=8
    )
    budget = estimate(8e9, shape=shape, preset="infer-fp16")
    assert budget.kv_cache_bytes == serving.kv_cache_bytes(
        layers=32, kv_heads=8, head_dim=128, tokens=32768, batch=2
    )
    assert "| GQA | 8 / 32 | 32,768 | 2 | 8.000 |" in kv_cache_markdown({"GQA": budget})


def test_overtake_and_reservation_arithmetic():
    assert serving.overtake_tokens(100, 10) == 11
    r = serving.reservation(80 * GIB, 16 * 10**9, 131072)
    assert r.reserved_bytes == int(0.9 * 80 * GIB)
    assert r.kv_tokens == (r.reserved_bytes - 16 * 10**9) // 131072
    assert "| weights | 14.9 |" in course_decoding.reservation_markdown(r)
    with pytest.raises(ValueError, match="do not fit"):
        serving.reservation(8 * GIB, 16 * 10**9, 131072)
    with pytest.raises(ValueError, match="utilization=1.5"):
        serving.reservation(80 * GIB, 1, 1, utilization=1.5)


def test_bad_sizes_raise_with_the_value():
    with pytest.raises(ValueError, match="tokens=0"):
        serving.kv_cache_bytes(layers=1, kv_heads=1, head_dim=1, tokens=0)
    with pytest.raises(ValueError, match="bandwidth_bytes_per_s=nan"):
        serving.weight_bound_tokens_per_s(1e9, 2, float("nan"))
    with pytest.raises(ValueError, match="device='tpu'"):
        decode.plan_for("tpu")


# --- the suite entry ---------------------------------------------------------------------


def test_the_decode_entry_round_trips_through_bundle_measurements(monkeypatch):
    monkeypatch.setattr(entries_decode, "plan_for", lambda device, quick: TINY_PLAN)
    cpu = Device(
        type="cpu", name="cpu", total_bytes=8 * GIB, free_bytes=4 * GIB, count=0, capability=None
    )
    out = entries_decode.run_decode(Context(device=cpu, quick=True))
    names = [m.name for m in out]
    assert names == [
        "decode.bandwidth",
        "decode.bandwidth_reading1"
        if out[0].params["reading"] == 0
        else "decode.bandwidth_reading0",
        "decode.matmul",
        "decode.b1",
        "decode.b3",
    ]
    b3 = out[-1]
    assert b3.unit == "tokens/s" and b3.value == pytest.approx(3 / b3.spread.median)
    sweep = entries_decode.sweep_from_measurements(out)
    assert sweep is not None and sweep.config == TINY
    assert [r.batch for r in sweep.rows] == [1, 3]
    assert sweep.rows[1].tokens_per_s == pytest.approx(b3.value)
    assert sweep.bandwidth_bytes_per_s == pytest.approx(out[0].value)
    # both copy readings come back, before then after, as the page's table lists them
    assert sorted(b.bytes_per_s for b in sweep.bandwidths) == sorted(m.value for m in out[:2])
    assert sweep.bandwidths[int(out[0].params["reading"])].bytes_per_s == out[0].value
    assert entries_decode.sweep_from_measurements(out[:2]) is None


def test_the_decode_entry_skips_what_does_not_fit():
    tiny = Device(type="cpu", name="cpu", total_bytes=GIB, free_bytes=2, count=0, capability=None)
    (skipped,) = entries_decode.run_decode(Context(device=tiny, quick=True))
    assert skipped.entry == "decode" and "do not fit" in skipped.reason


def test_a_measured_bundle_gives_the_page_its_gpu_rows_back(tmp_path, monkeypatch):
    monkeypatch.setattr(entries_decode, "plan_for", lambda device, quick: TINY_PLAN)
    bundle = quick_cpu_bundle(tmp_path / "bundle.json", "decode")
    sweep = entries_decode.sweep_from_measurements(bundle.measurements)
    assert sweep is not None and [r.batch for r in sweep.rows] == [1, 3]
    assert "| 3 |" in course_decoding.decode_markdown(sweep)


def test_a_cuda_build_shows_the_gpu_decode_rows_the_suite_measured(monkeypatch):
    from gpulesson.site import facts
    from tests.lesson_blocks import run_on_a_cuda_build

    monkeypatch.setattr(entries_decode, "plan_for", lambda device, quick: TINY_PLAN)
    cpu = Device(
        type="cpu", name="cpu", total_bytes=8 * GIB, free_bytes=4 * GIB, count=0, capability=None
    )
    rows = tuple(entries_decode.run_decode(Context(device=cpu, quick=False)))
    out, asked = run_on_a_cuda_build(monkeypatch, "decoding", "decoding-gpu", rows)
    assert asked == [("decode", "cuda")]
    assert "reference result bundle" not in out and "| 3 |" in out
    assert facts.value("decoding.gpu_max_batch") == 3
    facts.reset()
