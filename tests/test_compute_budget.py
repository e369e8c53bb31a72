"""Training compute: 6ND from the matmul FLOPs, checked by PyTorch's counter; MFU; hours; cost."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from gpulesson.memory import compute, compute_step
from gpulesson.memory.gpt2 import GPT2Config
from gpulesson.results import datasheets
from tests.conftest import REPO

SMALL = GPT2Config(vocab_size=128, seq_len=32, hidden=64, heads=4, layers=2, attention="eager")


# --- FLOPs from the matmuls ---------------------------------------------------------------


@pytest.mark.parametrize(("d_in", "d_out", "tokens"), [(8, 4, 3), (64, 256, 17), (1024, 4096, 512)])
def test_a_linear_layer_costs_2_forward_and_4_backward_per_weight_and_token(d_in, d_out, tokens):
    count = compute_step.count_linear(in_features=d_in, out_features=d_out, tokens=tokens)
    assert count.counted_forward_flops == count.formula.forward_flops == 2 * d_in * d_out * tokens
    assert count.counted_backward_flops == count.formula.backward_flops
    assert count.backward_over_forward == 2.0
    assert count.formula.train_flops == 6 * d_in * d_out * tokens


def test_the_counter_finds_6_matmul_weights_per_token_plus_attention_exactly():
    for cfg, batch, seq in ((SMALL, 2, 32), (SMALL, 3, 20), (compute_step.PAGE_CONFIG, 4, None)):
        step = compute_step.count_gpt_step(cfg, batch, seq)
        assert step.counted_flops == step.formula_flops
        assert step.formula_flops == (
            6 * step.matmul_parameters * step.tokens
            + 12 * cfg.layers * step.seq * cfg.hidden * step.tokens
        )


def test_the_page_step_agrees_with_6nd_within_ten_percent():
    step = compute_step.count_gpt_step(compute_step.PAGE_CONFIG, compute_step.PAGE_BATCH)
    assert step.parameters == 3_716_608 and step.tokens == 256
    assert step.six_nd_flops == 6 * step.parameters * step.tokens
    assert 1.0 < step.ratio_to_six_nd < 1.1  # attention adds, the position table subtracts


def test_attention_grows_the_count_past_6nd_as_the_sequence_grows():
    long = replace(compute_step.PAGE_CONFIG, seq_len=1024)
    ratios = [compute_step.count_gpt_step(long, 1024 // t, t).ratio_to_six_nd for t in (64, 1024)]
    assert ratios[1] > 1.5 * ratios[0]


def test_the_counter_misses_cpu_sdpa_so_the_page_counts_eager_attention():
    # torch.utils.flop_counter has formulas for the CUDA flash / efficient / cuDNN kernels
    # only; the CPU kernel of scaled_dot_product_attention counts as zero. If this fails, a
    # newer torch counts it and the lesson's warning should say so.
    gap = compute_step.count_sdpa_gap(SMALL, 2)
    assert gap.missing_flops == gap.eager.attention_flops > 0
    assert gap.eager.counted_flops == gap.eager.formula_flops


def test_checkpointing_runs_each_block_s_forward_again_up_to_what_backward_needs():
    pair = compute_step.count_recompute(SMALL, 2)
    c, tokens = SMALL.hidden, pair.plain.tokens
    # Per block the linear weights are QKV 3C^2, attention out C^2, MLP in 4C^2, MLP out 4C^2.
    # Non-reentrant checkpointing stops recomputing once backward has what it needs, so the
    # MLP's output matmul (whose own input is all its backward needs) is not run again.
    recomputed_weights = SMALL.layers * (3 + 1 + 4) * c * c
    attention_forward = 4 * SMALL.layers * SMALL.seq_len * c * tokens
    assert pair.checkpointed.counted_flops - pair.plain.counted_flops == (
        2 * recomputed_weights * tokens + attention_forward
    )
    assert 1.1 < pair.ratio < 4 / 3  # never the full 8ND / 6ND


def test_matmul_parameters_count_a_tied_matrix_once():
    model = torch.nn.Linear(4, 4, bias=False)
    seq = torch.nn.Sequential(model, torch.nn.ReLU(), model)
    assert compute_step.matmul_parameters(seq) == 16


def test_training_flops_are_6nd_and_each_lever_changes_the_right_term():
    f = compute.training_flops(7e9, 1.4e11)
    assert f.train_flops == 5.88e21 == f.six_nd_flops == f.hardware_flops
    assert f.forward_flops * 2 == f.backward_flops
    lora = compute.training_flops(7e9, 1.4e11, trainable_params=7e6)
    assert lora.train_flops == pytest.approx(4 * 7e9 * 1.4e11 + 2 * 7e6 * 1.4e11)
    ckpt = compute.training_flops(7e9, 1.4e11, checkpointing=True)
    assert ckpt.train_flops == f.train_flops and ckpt.hardware_flops == pytest.approx(
        8 / 6 * 5.88e21
    )
    shape = compute.AttentionShape(layers=32, seq=4096, hidden=4096)
    attn = compute.training_flops(7e9, 1.4e11, attention=shape)
    assert attn.attention_flops == 12 * 32 * 4096 * 4096 * 1.4e11
    assert attn.train_flops == pytest.approx(5.88e21 + attn.attention_flops)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"params": 7e9, "tokens": math.nan}, "tokens=nan must be a positive, finite number"),
        ({"params": -1, "tokens": 1e9}, "params=-1 must be a positive, finite number"),
        ({"params": 7e9, "tokens": "1e9"}, "tokens='1e9' is not a number"),
        (
            {"params": 7e9, "tokens": 1e9, "trainable_params": 8e9},
            "trainable_params=8e+09 is more than params=7e+09",
        ),
        ({"params": 1e300, "tokens": 1e300}, "overflows a float"),
    ],
)
def test_training_flops_refuse_bad_sizes(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("+", r"\+")):
        compute.training_flops(**kwargs)


def test_chinchilla_is_twenty_tokens_per_parameter():
    assert compute.chinchilla_tokens(7e9) == 1.4e11
    assert compute.chinchilla_tokens(70e9) == 1.4e12


# --- MFU, hours and cost ----------------------------------------------------------------


def test_mfu_is_achieved_over_peak_and_refuses_nonsense():
    assert compute.mfu(1.248e14, 3.12e14) == pytest.approx(0.4)
    with pytest.raises(ValueError, match="peak_flop_per_s=0"):
        compute.mfu(1e12, 0)
    for bad in (0, -0.1, 1.01, math.nan, math.inf, True):
        with pytest.raises(ValueError, match="must be a share above 0 and at most 1"):
            compute.check_mfu(bad)
    assert compute.check_mfu(1) == 1.0


def test_hours_are_flops_over_gpus_peak_and_mfu():
    f = compute.training_flops(7e9, 1.4e11)
    plan = compute.plan_training(f, gpu="a100-80gb", gpus=8, mfu=0.4)
    peak = datasheets.get("a100-80gb").dense_flop_per_s("bf16")
    assert plan.peak_flop_per_s == peak == 312e12
    assert plan.seconds == pytest.approx(5.88e21 / (8 * 312e12 * 0.4))
    assert plan.gpu_hours == pytest.approx(8 * plan.hours)
    twice = compute.plan_training(f, gpu="a100-80gb", gpus=16, mfu=0.4)
    assert twice.hours == pytest.approx(plan.hours / 2)
    assert twice.cost_usd == pytest.approx(plan.cost_usd)  # more GPUs: sooner, not cheaper


def test_the_default_price_is_the_labelled_example_rate_and_a_given_one_wins():
    f = compute.training_flops(7e9, 1.4e11)
    example = compute.plan_training(f, gpu="l4", gpus=8, mfu=0.4)
    assert (
        example.price_usd_per_gpu_hour
        == datasheets.example_rates().for_gpu("l4").on_demand_usd_per_h
    )
    assert "example" in example.price_source and "not a quote" in example.price_source
    assert example.cost_usd == pytest.approx(example.gpu_hours * 0.60)
    given = compute.plan_training(f, gpu="l4", gpus=8, mfu=0.4, price_usd_per_gpu_hour=1.0)
    assert given.price_source == "given" and given.cost_usd == pytest.approx(given.gpu_hours)
    unpriced = compute.plan_training(f, gpu="h200", gpus=8, mfu=0.4)
    assert unpriced.cost_usd is None and unpriced.price_source is None
    with pytest.raises(ValueError, match="price_usd_per_gpu_hour=-1"):
        compute.plan_training(f, gpu="l4", gpus=8, mfu=0.4, price_usd_per_gpu_hour=-1)


def test_the_peak_follows_the_recipe_s_compute_dtype():
    assert compute.peak_for(datasheets.get("t4"), "bf16") == ("fp16", 65e12)  # no bf16 on Turing
    assert compute.peak_for(datasheets.get("h100-sxm"), "fp16") == ("fp16", 989.5e12)
    assert compute.peak_for(datasheets.get("h100-sxm"), "fp32") == ("fp32", 67e12)
    with pytest.raises(ValueError, match="pick an NVIDIA id"):
        compute.peak_for(datasheets.get("apple-m4"), "bf16")


# --- the measured step and its readings ---------------------------------------------------


def test_a_timed_step_reports_counted_flops_over_its_median():
    step = compute_step.measure_gpt_step(SMALL, batch=2, min_run_time_s=0.01)
    assert step.count.counted_flops == step.count.formula_flops
    assert step.timing.repeats >= 5
    assert step.flop_per_s == pytest.approx(step.count.counted_flops / step.timing.median_s)
    assert step.tokens_per_s == pytest.approx(2 * SMALL.seq_len / step.timing.median_s)
    with pytest.raises(ValueError, match="dtype='fp8'"):
        compute_step.measure_gpt_step(SMALL, batch=1, dtype="fp8")


def test_the_threads_setting_holds_for_the_measurement_and_is_restored():
    before = torch.get_num_threads()
    step = compute_step.measure_gpt_step(SMALL, batch=1, min_run_time_s=0.01, threads=1)
    assert step.timing.threads == 1
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError, match="threads=0"):
        compute_step.measure_gpt_step(SMALL, batch=1, threads=0)
    assert torch.get_num_threads() == before


def test_cpu_readings_set_the_step_against_the_matmul_and_the_peak_model():
    from gpulesson.timing.peak import CpuFacts, cpu_peak
    from gpulesson.timing.results import MatmulResult

    facts = CpuFacts(
        arch="x86_64",
        model=None,
        cores=2,
        cores_source="t",
        clock_hz=2e9,
        clock_source="t",
        flags=frozenset({"avx2", "fma"}),
    )
    matmul = MatmulResult(device="cpu", dtype="fp32", n=1000, threads=2, samples_s=(0.02,))
    peak = cpu_peak(facts, "fp32", 2)
    rows = compute_step.cpu_readings(40e9, matmul, peak)
    # The one-unit bound (64 GFLOP/s) is below the 100 GFLOP/s matmul measured: ruled out.
    assert [r.peak_flop_per_s for r in rows] == [100e9, 128e9]
    assert [r.peak_kind for r in rows] == ["matmul", "model"]
    assert [round(r.mfu, 3) for r in rows] == [0.4, 0.312]
    assert compute_step.bounds_below_matmul(matmul, peak) == ((1, 64e9),)


def test_no_cpu_reading_exceeds_the_share_of_the_measured_matmul():
    from gpulesson.timing.peak import CpuFacts, cpu_peak
    from gpulesson.timing.results import MatmulResult

    facts = CpuFacts(
        arch="x86_64",
        model=None,
        cores=1,
        cores_source="t",
        clock_hz=2.6e9,
        clock_source="t",
        flags=frozenset({"avx512f", "fma"}),
    )
    # The case: a model bound of 83.2 GFLOP/s and a matmul timed at 180 GFLOP/s.
    matmul = MatmulResult(device="cpu", dtype="fp32", n=1000, threads=1, samples_s=(2e9 / 180e9,))
    peak = cpu_peak(facts, "fp32", 1)
    assert [round(r / 1e9, 1) for _, r in peak.bounds_flop_per_s] == [83.2, 166.4]
    rows = compute_step.cpu_readings(171e9, matmul, peak)
    assert [r.peak_kind for r in rows] == ["matmul"]
    assert max(r.mfu for r in rows) == rows[0].mfu < 1
    assert len(compute_step.bounds_below_matmul(matmul, peak)) == 2


def _bundle_with_step(value: float):
    from gpulesson.results.bundle import Measurement, load

    bundle = load(REPO / "tests" / "fixtures" / "bundles" / "fixture_h100.json")
    step = Measurement(
        name="train_step.bf16",
        entry="train_step",
        unit="FLOP/s",
        value=value,
        samples=(1.0,),
        samples_unit="s",
        dtype="bf16",
        limit="peak_flops",
    )
    return replace(bundle, measurements=(*bundle.measurements, step))


def test_gpu_readings_come_from_a_bundle_s_train_step():
    bundle = _bundle_with_step(400e12)
    rows = compute_step.gpu_readings_from_bundle(bundle)
    assert [r.peak_label.split(" (")[0] for r in rows] == [
        "datasheet dense bf16 peak",
        "best bf16 matmul measured on it",
    ]
    assert rows[0].peak_flop_per_s == 989.5e12
    assert rows[0].mfu == pytest.approx(400 / 989.5)
    assert rows[1].peak_flop_per_s == bundle.measurement("matmul_peak.bf16").value
    assert all(r.device == bundle.provenance.device_name for r in rows)
    older = replace(bundle, measurements=bundle.measurements[:-1])
    assert compute_step.gpu_readings_from_bundle(older) == ()


def test_the_gpu_rows_say_where_they_come_from_or_why_there_are_none():
    from gpulesson.results.compare import Sourced

    bundle = _bundle_with_step(400e12)
    found = compute_step.gpu_mfu(Sourced(bundle, "reference", "x.json"), has_gpu=False)
    assert found.source == "reference bundle x.json"
    assert found.reading("datasheet").mfu == pytest.approx(400 / 989.5)
    assert found.reading("matmul").peak_flop_per_s == bundle.measurement("matmul_peak.bf16").value
    older = Sourced(replace(bundle, measurements=bundle.measurements[:-1]), "reference", "y.json")
    none = compute_step.gpu_mfu(older, has_gpu=False)
    assert none.readings == () and "y.json has no train_step row" in none.source
    assert compute_step.gpu_mfu(None, has_gpu=False).reading("datasheet") is None


def test_the_gpu_dtype_and_batch_follow_the_hardware():
    assert compute_step.gpu_dtype((8, 0)) == "bf16" and compute_step.gpu_dtype((7, 5)) == "fp16"
    config = compute_step.GPU_CONFIG
    assert compute_step.fitting_batch(config, 8, 200 * 2**30) == 8
    small = compute_step.fitting_batch(config, 8, 5 * 2**30)
    assert 1 <= small < 8
    with pytest.raises(ValueError, match="one sequence of GPT-2"):
        compute_step.fitting_batch(config, 8, 2**30)


def test_a_datasheet_quote_with_a_pipe_stays_in_its_cell_of_the_gpu_rows():
    import re

    from gpulesson.course.compute_budget import mfu_markdown
    from gpulesson.results.bundle import Measurement

    sheets = [s for s in datasheets.all_rows() if "|" in getattr(s.peaks.get("bf16"), "stated", "")]
    assert sheets, "no datasheet quote holds a '|' any more: this test checks nothing"
    step = Measurement(
        name="train_step.bf16", entry="train_step", unit="FLOP/s", value=100e12,
        samples=(1.0,), samples_unit="s", dtype="bf16", limit="peak_flops",
    )  # fmt: skip
    for sheet in sheets:
        table = mfu_markdown(compute_step.gpu_readings_from_rows(step, None, sheet.name, sheet))
        rows = [line for line in table.splitlines() if line.startswith("|")]
        cells = [len(re.findall(r"(?<!\\)\|", row)) - 1 for row in rows]
        assert cells == [4, 4, 4], (sheet.name, table)
        assert "\\|" in rows[2]  # the quote's pipe, escaped: the page shows it in the cell
