"""gpulesson.memory.budget: the sources' arithmetic, phase peak, levers, capacity, planner."""

from __future__ import annotations

import json
import math

import pytest

from gpulesson.memory import budget
from gpulesson.memory import render as budget_render
from gpulesson.memory.budget import GB, GIB, TransformerShape, estimate

GPT2_SMALL = TransformerShape(vocab=50257, seq=1024, hidden=768, heads=12, layers=12, batch=8)


@pytest.mark.parametrize(
    ("preset", "total_gb"),
    [
        ("bf16", 84),
        ("fp16-fp32-grads", 98),
        ("mixed-fp32-master", 112),
        ("fp32", 112),
        ("sgd", 42),
        ("infer-fp16", 14),
        ("infer-int8", 7),
        ("infer-4bit", 3.5),
    ],
)
def test_presets_reproduce_the_sources_for_7b(preset, total_gb):
    assert estimate(7e9, preset=preset).total_bytes == int(total_gb * GB)


def test_ledger_terms_for_the_112_gb_recipe():
    b = estimate(7e9, preset="mixed-fp32-master")
    assert (b.weights_bytes, b.gradients_bytes, b.optimizer_bytes, b.master_bytes) == (
        14 * GB,
        14 * GB,
        56 * GB,
        28 * GB,
    )
    assert b.activations_bytes == 0


def test_qlora_is_about_3_6_gb_and_trains_a_thousandth():
    b = estimate(7e9, preset="qlora")
    assert b.trainable_parameters == 7_000_000
    assert b.gradients_bytes == 14_000_000 and b.optimizer_bytes == 56_000_000
    assert round(b.total_bytes / GB, 1) == 3.6


def test_nf4_constants_cost_more_than_the_flat_half_byte():
    assert (
        estimate(7e9, preset="qlora-nf4").weights_bytes
        > estimate(7e9, preset="qlora").weights_bytes
    )
    assert budget.DTYPE_BYTES["nf4"] == pytest.approx(0.5625)


def test_lora_rank_counts_adapters_from_the_shape():
    b = estimate(shape=GPT2_SMALL, preset="lora", lora_rank=8, lora_targets="attn")
    assert b.trainable_parameters == 12 * 4 * 8 * 2 * 768


def test_optimizer_and_state_dtype_overrides():
    assert estimate(1e9, preset="bf16", optimizer="sgd").optimizer_bytes == 0
    assert estimate(1e9, preset="bf16", optimizer="sgd-momentum").optimizer_bytes == 4 * 10**9
    assert estimate(1e9, preset="bf16", state_dtype="bf16").optimizer_bytes == 4 * 10**9
    adam8 = estimate(1e9, preset="bf16", optimizer="adam8bit").optimizer_bytes
    assert 2 * 10**9 < adam8 < 2.1 * 10**9


def test_peak_is_a_phase_not_the_sum_of_terms():
    b = estimate(shape=GPT2_SMALL, preset="bf16")
    terms = (
        b.weights_bytes
        + b.gradients_bytes
        + b.optimizer_bytes
        + b.activations_bytes
        + b.temporaries_bytes
    )
    assert b.peak_phase == "backward"
    assert b.total_bytes == max(p.total_bytes for p in b.phases)
    assert b.total_bytes < terms


def test_headroom_is_outside_the_total():
    b = estimate(7e9, preset="bf16")
    assert b.total_bytes == 84 * GB
    assert b.with_headroom_bytes == b.total_bytes + b.cuda_context_bytes + b.allocator_slack_bytes
    assert b.cuda_context_bytes > 0 and b.allocator_slack_bytes > 0


def test_eager_attention_and_checkpointing_move_activations():
    sdpa = estimate(shape=GPT2_SMALL, preset="bf16")
    eager = estimate(shape=GPT2_SMALL, preset="bf16", attention="eager")
    ckpt = estimate(shape=GPT2_SMALL, preset="bf16", checkpointing="full")
    assert eager.activations_bytes > sdpa.activations_bytes > ckpt.activations_bytes
    # the eager s^2 term: batch x heads x seq^2 x 2 bytes per layer, at least
    assert eager.activations_bytes - sdpa.activations_bytes >= 12 * 8 * 12 * 1024**2 * 2


def test_zero_stages_shard_one_more_term_each():
    base = estimate(7e9, preset="mixed-fp32-master")
    z1 = estimate(7e9, preset="mixed-fp32-master", gpus=8, zero=1)
    z2 = estimate(7e9, preset="mixed-fp32-master", gpus=8, zero=2)
    z3 = estimate(7e9, preset="mixed-fp32-master", gpus=8, zero=3)
    assert (
        z1.optimizer_bytes == base.optimizer_bytes // 8
        and z1.gradients_bytes == base.gradients_bytes
    )
    assert (
        z2.gradients_bytes == base.gradients_bytes // 8 and z2.weights_bytes == base.weights_bytes
    )
    assert z3.weights_bytes == base.weights_bytes // 8


def test_accumulation_keeps_micro_batch_memory_and_multiplies_the_batch():
    small = TransformerShape(50257, 1024, 768, 12, 12, batch=2)
    b = estimate(shape=small, preset="bf16", accumulation_steps=4, gpus=2, zero=1)
    assert b.effective_batch == 16
    assert b.activations_bytes == estimate(shape=small, preset="bf16").activations_bytes


def test_inference_has_a_kv_cache():
    b = estimate(7e9, shape=TransformerShape(32000, 4096, 4096, 32, 32, 1), preset="infer-fp16")
    assert b.kv_cache_bytes == 2 * 32 * 4096 * 4096 * 2
    assert b.gradients_bytes == b.optimizer_bytes == 0


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"params": 0}, "params=0"),
        ({"params": -1}, "params=-1"),
        ({"params": math.nan}, "params=nan"),
        ({"params": "lots"}, "not a number"),
        ({"params": 7e9, "preset": "nope"}, "unknown preset"),
        ({"params": 7e9, "preset": "qlora", "trainable_fraction": 1.5}, "at most 1"),
        ({"params": 7e9, "zero": 2}, "gpus"),
        ({"params": 7e9, "optimizer": "lion"}, "lion"),
        ({}, "parameter count"),
    ],
)
def test_bad_input_raises_value_error_naming_it(kwargs, fragment):
    params = kwargs.pop("params", None)
    with pytest.raises(ValueError, match=fragment):
        estimate(params, **kwargs)


def test_capacity_table_matches_the_sources():
    rows = budget.capacity()
    assert [r.card_bytes for r in rows] == [c * GB for c in (8, 12, 16, 24, 80)]
    assert [round(r.inference_params / 1e9, 1) for r in rows] == [4, 6, 8, 12, 40]
    assert [round(r.sgd_params / 1e9, 1) for r in rows] == [1.3, 2.0, 2.7, 4.0, 13.3]
    assert [round(r.adam_params / 1e9, 1) for r in rows] == [0.6, 0.9, 1.1, 1.7, 5.7]
    assert all(r.adam_params_headroom < r.adam_params for r in rows)


def test_gb_and_gib_cards_differ():
    assert budget.max_params(24 * GIB, "infer-fp16") > budget.max_params(24 * GB, "infer-fp16")


def test_fits_applies_the_headroom_rule():
    b = estimate(7e9, preset="infer-fp16")  # 14 GB
    assert budget.fits(b, 17 * GB).fits  # 0.9 x 17 - 1 = 14.3 GB usable
    assert not budget.fits(b, 16 * GB).fits  # 0.9 x 16 - 1 = 13.4 GB usable


def test_json_has_the_ledger_at_the_top_level():
    data = json.loads(budget_render.to_json(estimate(shape=GPT2_SMALL, preset="bf16")))
    for key in (
        "total_bytes",
        "weights_bytes",
        "gradients_bytes",
        "optimizer_bytes",
        "activations_bytes",
        "peak_phase",
        "phases",
    ):
        assert key in data
    assert data["total_bytes"] == max(p["total_bytes"] for p in data["phases"])


def test_renderers_name_their_units():
    b = estimate(7e9, preset="bf16")
    assert "| term | GB |" in budget_render.to_markdown(b)
    assert "84.00 GB" in budget_render.to_text(b)
    assert "| 8 | 7.45 |" in budget_render.capacity_markdown(budget.capacity())
    assert "98.0" in budget_render.recipes_markdown(7e9, ("fp16-fp32-grads",))


def test_planner_data_reproduces_the_calculator():
    data = json.loads(json.dumps(budget.planner_data()))
    assert data["cards_bytes"] == [8 * GB, 12 * GB, 16 * GB, 24 * GB, 80 * GB]
    for name in ("bf16", "fp16-fp32-grads", "mixed-fp32-master", "sgd", "infer-fp16"):
        r = data["recipes"][name]
        opt = r["optimizer"][r["optimizer_default"]] if r["optimizer_default"] else 0
        total = 7e9 * (r["weights"] + r["gradients"] + opt + r["master"])
        assert total == estimate(7e9, preset=name).total_bytes
    q = data["recipes"]["qlora"]
    n = 7e9 * data["default_trainable_fraction"]
    total = 7e9 * q["weights"] + n * (
        q["adapter_weights"] + q["gradients"] + q["optimizer"]["adamw"] + q["master"]
    )
    assert round(total) == estimate(7e9, preset="qlora").total_bytes
