"""gpulesson.memory.budget: the sources' arithmetic, the amp norm, phase peak, levers, KV, loss."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from gpulesson.course.budget import (
    levers_markdown,
    logits_markdown,
    recipes_markdown,
    tradeoffs_markdown,
)
from gpulesson.course.capacity import capacity_markdown, verdicts_markdown
from gpulesson.course.memory import to_markdown
from gpulesson.memory import budget, capacity, recipes, terms
from gpulesson.memory import render as budget_render
from gpulesson.memory.budget import TransformerShape, estimate
from gpulesson.memory.planner import planner_data
from gpulesson.units import GB, GIB

GPT2_SMALL = TransformerShape(vocab=50257, seq=1024, hidden=768, heads=12, layers=12, batch=8)


@pytest.mark.parametrize(
    ("preset", "total_gb"),
    [
        ("amp", 112),
        ("bf16", 84),
        ("fp16-fp32-grads", 98),
        ("mixed-fp32-master", 112),
        ("fp32", 112),
        ("bf16-pure", 56),
        ("sgd", 42),
        ("infer-fp16", 14),
        ("infer-int8", 7),
        ("infer-4bit", 3.5),
    ],
)
def test_presets_reproduce_the_sources_for_7b(preset, total_gb):
    assert estimate(7e9, preset=preset).total_bytes == int(total_gb * GB)


def test_amp_is_the_default_and_costs_16_bytes_per_parameter():
    b = estimate(7e9)
    assert b.preset == "amp" == recipes.DEFAULT_TRAINING_PRESET
    assert (b.weights_bytes, b.gradients_bytes, b.optimizer_bytes, b.master_bytes) == (
        28 * GB,
        28 * GB,
        56 * GB,
        0,
    )
    r = b.recipe
    assert (r.weight_dtype, r.grad_dtype, r.state_dtype, r.master_dtype) == ("fp32",) * 3 + (None,)
    assert recipes.DTYPE_BYTES[r.compute_dtype] == 2  # 16-bit activations


@pytest.mark.parametrize(
    ("preset", "per_param"),
    [("amp", 16), ("mixed-fp32-master", 16), ("fp16-fp32-grads", 14), ("bf16", 12)]
    + [("bf16-pure", 8)],
)
def test_bytes_per_parameter_of_the_named_recipes(preset, per_param):
    assert sum(recipes.PRESETS[preset].bytes_per_param().values()) == per_param


def test_every_recipe_says_what_it_gives_up_and_bf16_pure_warns_about_precision():
    for r in recipes.PRESETS.values():
        assert len(r.gives_up) > 20, r.name
    assert "precision" in recipes.PRESETS["bf16-pure"].gives_up
    assert "| amp | 16 |" in tradeoffs_markdown(recipes.PRESETS)


def test_recipes_and_rows_are_built_with_keywords_only():
    with pytest.raises(TypeError):
        recipes.Recipe("x", "fp32", "fp32", "fp32", None, "adamw", "fp32", "s", "g")  # type: ignore[misc]
    with pytest.raises(TypeError):
        capacity.CapacityRow(8 * GB, ())  # type: ignore[misc]
    with pytest.raises(TypeError):
        budget.CardVerdict(1, 2, True, 3)  # type: ignore[misc]


def test_ledger_terms_for_the_mixed_master_recipe():
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
    assert recipes.DTYPE_BYTES["nf4"] == pytest.approx(0.5625)


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
    terms_sum = (
        b.weights_bytes
        + b.gradients_bytes
        + b.optimizer_bytes
        + b.activations_bytes
        + b.temporaries_bytes
    )
    assert b.peak_phase == "backward"
    assert b.total_bytes == max(p.total_bytes for p in b.phases)
    assert b.total_bytes < terms_sum
    peak = next(p for p in b.phases if p.name == "backward")
    assert peak.point.startswith("start of the backward pass")


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


def test_activation_terms_are_the_gpt2_arithmetic():
    shape = TransformerShape(vocab=64, seq=8, hidden=16, heads=2, layers=3, batch=2)
    t = budget.activation_terms(shape, "fp32", "sdpa", "none")
    b, s, c, h, v = 2, 8, 16, 2, 64
    assert t["block_saved"] == 4 * (16 * b * s * c + 4 * b * s) + 4 * b * h * s
    assert t["head_saved"] == 4 * (2 * b * s * c + 2 * b * s + b * s * v) + 16 * b * s
    assert t["saved"] == 3 * t["block_saved"] + t["head_saved"]
    assert budget.activation_terms(shape, "fp32", "sdpa", "full")["block_saved"] == 4 * b * s * c


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


def test_grouped_query_attention_shrinks_the_kv_cache_to_one_gib():
    # 8B-class model: 32 layers, hidden 4096, 32 heads, 8 KV heads, 8,192 tokens, batch 1, fp16
    dims = {"vocab": 128256, "seq": 8192, "hidden": 4096, "heads": 32, "layers": 32, "batch": 1}
    gqa = estimate(8e9, shape=TransformerShape(**dims, kv_heads=8), preset="infer-fp16")
    mha = estimate(8e9, shape=TransformerShape(**dims), preset="infer-fp16")
    assert gqa.kv_cache_bytes == 2 * 32 * 8 * 128 * 8192 * 2 == GIB
    assert mha.kv_cache_bytes == 4 * GIB
    mqa = estimate(8e9, shape=TransformerShape(**dims, kv_heads=1), preset="infer-fp16")
    assert mqa.kv_cache_bytes == GIB // 8


def test_kv_heads_must_divide_the_heads_and_shrink_the_parameter_count():
    with pytest.raises(ValueError, match="kv_heads=5 does not divide heads=32"):
        TransformerShape(32000, 512, 4096, 32, 2, kv_heads=5)
    with pytest.raises(ValueError, match="kv_heads=0"):
        TransformerShape(32000, 512, 4096, 32, 2, kv_heads=0)
    mha = TransformerShape(32000, 512, 4096, 32, 2)
    gqa = TransformerShape(32000, 512, 4096, 32, 2, kv_heads=8)
    # K and V projections shrink from 4096 x 4096 to 4096 x 1024 each (plus biases)
    assert mha.parameters() - gqa.parameters() == 2 * 2 * (4096 * 3072 + 3072)
    b = estimate(shape=gqa, preset="bf16")
    assert any("kv_heads=8" in note and "upper bound" in note for note in b.notes)


def test_a_chunked_loss_drops_the_full_logits():
    shape = dataclasses.replace(GPT2_SMALL, batch=16)
    standard = estimate(shape=shape, preset="fp32", checkpointing="full")
    chunked = estimate(
        shape=shape, preset="fp32", checkpointing="full", loss="chunked", loss_chunks=8
    )
    logits = 16 * 1024 * 50257 * 4
    # saved for backward: the log-softmax is gone
    assert standard.activations_bytes - chunked.activations_bytes == logits
    assert chunked.total_bytes < standard.total_bytes - 2 * logits
    assert chunked.loss == "chunked" and chunked.loss_chunks == 8
    assert any("8 slices of up to 2,048 tokens" in n for n in chunked.notes)
    assert estimate(shape=shape, preset="fp32", loss="chunked").loss_chunks == 8  # the default


def test_logits_terms_name_the_three_tensors_alive_in_the_loss_backward():
    shape = dataclasses.replace(GPT2_SMALL, batch=16)
    tensors = budget.logits_terms(estimate(shape=shape, preset="fp32", checkpointing="full"))
    alive = [t for t in tensors if t.at_loss_backward]
    assert [t.total_bytes for t in alive] == [16 * 1024 * 50257 * 4] * 3
    assert tensors[0].dims == (("batch", 16), ("seq", 1024), ("vocab", 50257))
    assert "16 x 1024 x 50257 x 4 B" in logits_markdown(tensors)
    sliced = budget.logits_terms(estimate(shape=shape, preset="fp32", loss="chunked"))
    assert sliced[0].dims == (("slice tokens", 2048), ("vocab", 50257))
    with pytest.raises(ValueError, match="training budget"):
        budget.logits_terms(estimate(7e9))


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"params": 0}, "params=0"),
        ({"params": -1}, "params=-1"),
        ({"params": math.nan}, "params=nan"),
        ({"params": 1e-300}, "rounds to 0 parameters"),
        ({"params": 1e300}, "too large"),
        ({"params": "lots"}, "not a number"),
        ({"params": 7e9, "preset": "nope"}, "unknown preset"),
        ({"params": 7e9, "preset": "qlora", "trainable_fraction": 1.5}, "at most 1"),
        ({"params": 7e9, "preset": "qlora", "trainable_fraction": math.nan}, "e.g. 0.001"),
        ({"params": 7e9, "zero": 2}, "gpus"),
        ({"params": 7e9, "gpus": 10**400}, "too large"),
        ({"params": 7e9, "optimizer": "lion"}, "lion"),
        ({"params": 7e9, "loss": "fused"}, "loss='fused'"),
        ({"params": 7e9, "loss_chunks": 4}, "applies to loss='chunked'"),
        ({"params": 7e9, "loss": "chunked"}, "give a transformer shape"),
        ({"shape": GPT2_SMALL, "preset": "infer-fp16", "loss": "chunked"}, "no loss"),
        ({"shape": GPT2_SMALL, "loss": "chunked", "loss_chunks": 0}, "loss_chunks=0"),
        ({}, "parameter count"),
    ],
)
def test_bad_input_raises_value_error_naming_it(kwargs, fragment):
    params = kwargs.pop("params", None)
    with pytest.raises(ValueError, match=fragment):
        estimate(params, **kwargs)


def test_shape_counts_beyond_2_to_the_53_are_refused():
    with pytest.raises(ValueError, match="vocab=.*too large"):
        TransformerShape(10**400, 1024, 768, 12, 12)


def test_params_and_shape_that_disagree_get_a_note():
    b = estimate(7e9, shape=GPT2_SMALL)
    assert b.parameters == 7_000_000_000
    assert b.weights_bytes == 28 * GB  # the count prices the weights
    assert any("124,439,808 parameters" in n and "activations" in n for n in b.notes)
    agree = estimate(GPT2_SMALL.parameters(), shape=GPT2_SMALL)
    assert not any("prices the activations" in n for n in agree.notes)


def test_gradients_alive_in_the_backward_pass_never_exceed_all_gradients():
    shape = TransformerShape(vocab=32000, seq=512, hidden=4096, heads=32, layers=32, batch=1)
    for params in (1.5e9, shape.parameters(), 70e9):  # below, equal to, above the shape's count
        b = estimate(params, shape=shape, preset="bf16")
        grads = [p.alive_bytes.get("gradients", 0) for p in b.phases]
        assert max(grads) <= b.gradients_bytes, params
        assert grads[-1] == b.gradients_bytes  # all of them by the optimizer step


def test_capacity_table_matches_the_sources():
    rows = capacity.capacity()
    assert [r.card_bytes for r in rows] == [c * GB for c in (8, 12, 16, 24, 80)]
    assert [round(r.entry("infer-fp16").params / 1e9, 1) for r in rows] == [4, 6, 8, 12, 40]
    assert [round(r.entry("sgd").params / 1e9, 1) for r in rows] == [1.3, 2.0, 2.7, 4.0, 13.3]
    adam = [round(r.entry("amp").params / 1e9, 2) for r in rows]  # 16 B/param, the norm
    assert adam == [0.5, 0.75, 1.0, 1.5, 5.0]
    sources = capacity.capacity(uses=(capacity.CapacityUse(label="14", preset="fp16-fp32-grads"),))
    assert [round(r.entries[0].params / 1e9, 1) for r in sources] == [0.6, 0.9, 1.1, 1.7, 5.7]
    assert all(e.params_with_headroom < e.params for r in rows for e in r.entries)


def test_capacity_headers_come_from_the_data():
    uses = (capacity.CapacityUse(label="AMP training", preset="amp"),)
    text = capacity_markdown(capacity.capacity(uses=uses))
    assert "AMP training, 16 B/param (billion params)" in text
    assert "| 80 | 74.51 | 5.0 |" in text


def test_gb_and_gib_cards_differ():
    assert capacity.max_params(24 * GIB, "infer-fp16") > capacity.max_params(24 * GB, "infer-fp16")
    row = capacity.card_units((24,), "infer-fp16")[0]
    assert row.gib_card_bytes == 24 * GIB and row.gib_card_params > row.gb_card_params


def test_fits_applies_the_headroom_rule():
    b = estimate(7e9, preset="infer-fp16")  # 14 GB
    assert budget.fits(b, 17 * GB).fits  # 0.9 x 17 - 1 = 14.3 GB usable
    assert not budget.fits(b, 16 * GB).fits  # 0.9 x 16 - 1 = 13.4 GB usable
    with pytest.raises(ValueError, match="less than one byte"):
        budget.fits(b, 1e-21)


def test_levers_are_computed_before_rendering():
    table = budget.lever_effects(
        {"params": 7e9, "preset": "bf16"}, {"8-bit Adam": {"optimizer": "adam8bit"}}
    )
    effect = table.effects[0]
    assert effect.peak_change == pytest.approx(effect.budget.total_bytes / (84 * GB) - 1)
    assert "| 8-bit Adam |" in levers_markdown(table)


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
        "loss",
    ):
        assert key in data
    assert data["total_bytes"] == max(p["total_bytes"] for p in data["phases"])
    assert data["shape"]["kv_heads"] is None


def test_renderers_name_their_units_and_take_results():
    b = estimate(7e9, preset="bf16")
    assert "| term | GB |" in to_markdown(b)
    assert "84.00 GB" in budget_render.to_text(b)
    assert "note: source 000" in budget_render.to_text(b)
    assert "| 8 | 7.45 |" in capacity_markdown(capacity.capacity())
    recipes_md = recipes_markdown({"fp16-fp32-grads": estimate(7e9, preset="sgd")})
    assert "| fp16-fp32-grads | fp16 | fp32 | none |" in recipes_md  # the budget's own recipe
    verdicts = verdicts_markdown((budget.fits(b, 80 * GB),))
    assert "does not fit" in verdicts


def test_planner_data_carries_the_estimates_own_tables():
    data = json.loads(json.dumps(planner_data()))
    assert data["cards_bytes"] == [8 * GB, 12 * GB, 16 * GB, 24 * GB, 80 * GB]
    assert data["default_preset"] == "amp"
    assert data["terms"] == json.loads(json.dumps(terms.tables_data()["terms"]))
    assert {t["name"] for t in data["terms"]} == set(terms.TERM_NAMES)
    for name in ("amp", "bf16", "fp16-fp32-grads", "mixed-fp32-master", "sgd", "infer-fp16"):
        r = data["recipes"][name]
        opt = r["optimizer"][r["optimizer_default"]] if r["optimizer_default"] else 0
        total = 7e9 * (r["weights"] + r["gradients"] + opt + r["master"])
        assert total == estimate(7e9, preset=name).total_bytes
