"""transformers' GPT-2 measured like the course's, and the estimate with --impl transformers."""

from __future__ import annotations

import os
import socket

import pytest
import torch

from gpulesson.course.memory import impl_comparison_to_markdown, saved_to_markdown
from gpulesson.memory import transformers_gpt2
from gpulesson.memory.budget import IMPLS, TransformerShape, estimate
from gpulesson.memory.gpt2 import GPT2Config
from gpulesson.memory.impl_accuracy import build_cases, impl_summary, run_impl_comparison
from gpulesson.memory.measure import measure_transformers_gpt2
from gpulesson.memory.saved import first_block_saved
from gpulesson.results import entries_memory
from gpulesson.results.suite import Context, Device
from tests.conftest import keep_calls

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

TINY = GPT2Config(vocab_size=256, seq_len=64, hidden=64, heads=4, layers=2)


def _refuse_connections(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError(f"network access attempted: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt to open a connection fails the test."""
    _refuse_connections(monkeypatch)


def test_the_model_is_built_from_a_config_offline(no_network):
    model = transformers_gpt2.build_model(TINY)
    hf = model.model
    assert hf.lm_head.weight is hf.transformer.wte.weight  # tied head
    assert hf.config.activation_function == "gelu_new"
    assert (hf.config.resid_pdrop, hf.config.embd_pdrop, hf.config.attn_pdrop) == (0, 0, 0)
    # the same parameters as the course's GPT-2 of this shape, so weights, gradients and
    # optimizer state are priced alike
    shape = TransformerShape(vocab=256, seq=64, hidden=64, heads=4, layers=2)
    assert model.num_parameters() == shape.parameters()
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    ids = torch.randint(0, 256, (2, 16))
    loss = model(ids, ids)
    assert loss.ndim == 0 and torch.isfinite(loss)


#: The small model both fake-tensor tests below measure, with SGD at batch 2.
SMALL = GPT2Config(vocab_size=128, seq_len=32, hidden=32, heads=2, layers=2)


@pytest.fixture(scope="module")
def small_sdpa_fake():
    """``measure_transformers_gpt2`` of SMALL (SDPA attention, the default) with fake tensors,
    offline: measured once, read by the two tests that compare it."""
    with pytest.MonkeyPatch.context() as mp:
        _refuse_connections(mp)
        return measure_transformers_gpt2(SMALL, batch=2, mode="fake", optimizer="sgd")


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_fake_tensors_measure_what_real_cpu_tensors_measure(attention, no_network, small_sdpa_fake):
    config = GPT2Config(
        vocab_size=128, seq_len=32, hidden=32, heads=2, layers=2, attention=attention
    )
    if config == SMALL:
        fake = small_sdpa_fake
    else:
        fake = measure_transformers_gpt2(config, batch=2, mode="fake", optimizer="sgd")
    real = measure_transformers_gpt2(config, batch=2, mode="cpu", optimizer="sgd")
    assert real.method != fake.method
    assert fake.phase_peaks_bytes == real.phase_peaks_bytes


def test_without_the_mask_decision_fake_tensors_would_keep_a_mask_per_layer(
    monkeypatch, small_sdpa_fake
):
    """Why real_run_masks exists: transformers cannot read fake position ids."""
    patched = small_sdpa_fake
    monkeypatch.setattr(transformers_gpt2, "real_run_masks", _unchanged)
    unpatched = measure_transformers_gpt2(SMALL, batch=2, mode="fake", optimizer="sgd")
    assert unpatched.peak_bytes > patched.peak_bytes


def _unchanged():
    import contextlib

    return contextlib.nullcontext()


def test_a_moved_mask_function_fails_loudly_naming_the_version(monkeypatch):
    import transformers
    import transformers.masking_utils as masking_utils

    monkeypatch.delattr(masking_utils, "find_packed_sequence_indices")
    with pytest.raises(transformers_gpt2.TransformersAPIError) as err:
        with transformers_gpt2.real_run_masks():
            pass
    assert f"transformers {transformers.__version__}" in str(err.value)
    assert "find_packed_sequence_indices" in str(err.value)


def test_the_estimate_with_impl_transformers_is_within_10_percent_and_the_default_is_not():
    rows = run_impl_comparison(build_cases(), mode="fake")
    assert {r.case.impl for r in rows} == {"transformers"}
    assert {r.case.config.attention for r in rows} == {"sdpa", "eager"}
    assert {r.case.optimizer for r in rows} == {"sgd", "adamw"}
    hf = impl_summary(rows, "transformers")
    assert hf.max_abs_error <= 0.10 and hf.meets_target
    # the default, fitted to the course's GPT-2, underestimates transformers' every time
    default = impl_summary(rows, "gpulesson")
    assert default.highest_error < -0.10 and not default.meets_target


def test_the_extra_saved_tensors_are_gelu_new_s_three():
    config = GPT2Config(vocab_size=64, seq_len=24, hidden=32, heads=2, layers=1)
    saved = first_block_saved(config, batch=2)
    unit = 2 * 24 * 32 * 4  # one batch x seq x hidden fp32 tensor

    def units(impl, module=None):
        return sum(s.storage_bytes for s in saved[impl] if module in (None, s.module)) / unit

    extra = units("transformers") - units("gpulesson")
    assert extra == pytest.approx(12)  # three (batch x seq x 4 hidden) tensors
    assert units("transformers", "mlp.act") - units("gpulesson", "mlp") == pytest.approx(extra)
    made_by = {s.made_by for s in saved["transformers"] if s.module == "mlp.act"}
    assert {"TanhBackward0", "MulBackward0", "AddBackward0"} <= made_by
    # and the estimate's block term agrees
    shape = TransformerShape(vocab=64, seq=24, hidden=32, heads=2, layers=1, batch=2)
    by_impl = {
        impl: estimate(shape=shape, preset="fp32", impl=impl).activations_bytes for impl in IMPLS
    }
    # the head also keeps the shifted int64 labels: 8 bytes a token
    assert by_impl["transformers"] - by_impl["gpulesson"] == 12 * unit + 8 * 2 * 24


def test_the_hf_memory_entry_gives_the_comparison_table_its_rows_back(monkeypatch, no_network):
    from gpulesson.memory import impl_accuracy
    from gpulesson.memory.measure import AccuracyCase

    small = GPT2Config(vocab_size=64, seq_len=16, hidden=32, heads=2, layers=1)
    cases = [
        AccuracyCase(config=small, batch=2, dtype="fp32", optimizer="adamw", impl="transformers"),
        AccuracyCase(config=small, batch=1, dtype="bf16", optimizer="sgd", impl="transformers"),
    ]
    monkeypatch.setattr(impl_accuracy, "build_cases", lambda: cases)
    kept = keep_calls(monkeypatch, entries_memory, "run_impl_comparison")
    out = entries_memory.run_hf_memory(Context(device=Device.this("cpu"), quick=False))
    assert [m.name.split(".")[0] for m in out] == ["hf_memory", "hf_memory"]
    assert all(m.value == max(m.samples) and len(m.samples) == 3 for m in out)
    ((args, kwargs, direct),) = kept  # what the entry's own call returned
    assert list(args[0]) == cases and kwargs == {"mode": "fake"}
    rows = entries_memory.impl_rows_from_measurements(out[::-1])
    assert rows == direct
    summaries = [impl_summary(rows, impl) for impl in IMPLS]
    assert impl_comparison_to_markdown(rows, summaries) == impl_comparison_to_markdown(
        direct, [impl_summary(direct, impl) for impl in IMPLS]
    )


def test_the_saved_tensors_entry_gives_the_listing_back(monkeypatch, no_network):
    from gpulesson.memory import saved

    small = GPT2Config(vocab_size=32, seq_len=8, hidden=16, heads=2, layers=1)
    monkeypatch.setattr(saved, "SAVED_CONFIG", small)
    out = entries_memory.run_gpt_block_saved(Context(device=Device.this("cpu"), quick=False))
    assert all(m.unit == "bytes" and m.samples == (m.value,) for m in out)
    found = entries_memory.saved_from_measurements(out[::-1])  # order from params
    assert found.config == small and found.batch == saved.SAVED_BATCH
    direct = first_block_saved(small, saved.SAVED_BATCH)
    assert found.saved == direct
    assert saved_to_markdown(found.saved, 64) == saved_to_markdown(direct, 64)
    assert entries_memory.saved_from_measurements([]) is None
    # the lesson's plan is the model its sentences describe
    assert saved.SAVED_CONFIG is small and saved.SAVED_BATCH == 2


def test_the_saved_tensors_entry_runs_on_the_cpu_only():
    (entry,) = [e for e in entries_memory.ENTRIES if e.name == "gpt_block_saved"]
    assert entry.applies(Device.this("cpu"))
    gpu = Device(
        type="cuda", name="gpu", total_bytes=2**34, free_bytes=2**34, count=1, capability=None
    )
    assert not entry.applies(gpu)


def test_each_extra_term_is_named_with_its_share_of_the_peak():
    shape = TransformerShape(vocab=8192, seq=512, hidden=384, heads=6, layers=6, batch=4)
    fp32 = estimate(shape=shape, preset="fp32", optimizer="adamw", impl="transformers")
    bf16 = estimate(shape=shape, preset="bf16-pure", impl="transformers")
    default = estimate(shape=shape, preset="fp32", optimizer="adamw")
    names = [t.name for t in fp32.impl_terms]
    assert names == ["gelu_tanh", "upcast_loss", "shifted_labels", "eager_mask", "block_output"]
    share = {t.name: t.peak_bytes for t in fp32.impl_terms}
    assert share["gelu_tanh"] > 0 and share["upcast_loss"] == 0  # fp32 logits are not copied
    assert {t.name: t.peak_bytes for t in bf16.impl_terms}["upcast_loss"] > 0
    assert default.impl_terms == () and default.impl == "gpulesson"
    # the named shares account for the difference between the two implementations
    assert sum(share.values()) == fp32.total_bytes - default.total_bytes


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"impl": "hf"}, "impl='hf' must be 'gpulesson' or 'transformers'"),
        ({"impl": "transformers", "checkpointing": "full"}, "without checkpointing"),
        ({"impl": "transformers", "loss": "chunked"}, "standard loss"),
        ({"impl": "transformers", "preset": "infer-fp16"}, "training step"),
    ],
)
def test_the_api_refuses_what_impl_transformers_does_not_price(options, match):
    shape = TransformerShape(vocab=512, seq=64, hidden=64, heads=4, layers=2)
    with pytest.raises(ValueError, match=match):
        estimate(shape=shape, **options)


def test_grouped_query_attention_is_refused_for_transformers_gpt2():
    shape = TransformerShape(vocab=512, seq=64, hidden=64, heads=4, layers=2, kv_heads=2)
    with pytest.raises(ValueError, match="one key/value head per head"):
        estimate(shape=shape, impl="transformers")
