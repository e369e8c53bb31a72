"""gpulesson.precision: formats, autocast trace, TF32 emulation, scaler, hardware, memory."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from gpulesson.course.mixed_precision import gpu_markdown, hardware_markdown, settings_markdown
from gpulesson.memory.gpt2 import GPT2, GPT2Config
from gpulesson.memory.shape import TransformerShape
from gpulesson.precision import formats, gpu, hardware, scaler, tf32, trace
from gpulesson.precision.activations import compare, saved_for_backward
from gpulesson.precision.step import check_precision, precisions_for, time_step
from gpulesson.results import datasheets
from tests.conftest import REPO

# --- formats ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["fp32", "bf16", "fp16"])
def test_the_bit_layout_gives_torchs_own_range(name):
    layout = formats.layout_format(name)
    info = torch.finfo(formats.TORCH_DTYPES[name])
    assert layout.max_value == info.max
    assert layout.smallest_normal == info.tiny
    assert layout.eps == info.eps
    assert layout.smallest_subnormal == formats.smallest_positive(formats.TORCH_DTYPES[name])


def test_rounding_to_7_bits_is_torchs_bf16_cast():
    g = torch.Generator().manual_seed(1)
    x = torch.cat(
        [
            torch.randn(20000, generator=g) * 10.0 ** torch.randint(-30, 30, (20000,), generator=g),
            torch.tensor([1.0 + 2**-8, 1.0 + 3 * 2**-8, -257.0, 3.0e38, -1e-39, 0.0]),
        ]
    )
    expected = x.to(torch.bfloat16).float()
    assert torch.equal(formats.round_to_mantissa(x, 7), expected)


def test_rounding_to_10_bits_is_torchs_fp16_cast_inside_fp16s_normal_range():
    g = torch.Generator().manual_seed(2)
    x = (torch.rand(20000, generator=g) * 2 - 1) * 60000
    x = x[x.abs() > 1e-4]
    assert torch.equal(formats.round_to_mantissa(x, 10), x.half().float())


def test_rounding_keeps_23_bits_as_they_are_and_refuses_bad_input():
    x = torch.tensor([0.1, -3.7])
    assert torch.equal(formats.round_to_mantissa(x, 23), x)
    with pytest.raises(ValueError, match="fp32 tensors"):
        formats.round_to_mantissa(x.double(), 10)
    with pytest.raises(ValueError, match="between 0 and 23"):
        formats.round_to_mantissa(x, 24)


def test_casts_name_what_happened():
    by = {r.format: r for r in formats.cast(65520.0)}
    assert by["fp16"].outcome == "overflow to inf" and by["fp16"].relative_error is None
    assert by["fp32"].outcome == "exact"
    assert {r.format: r.outcome for r in formats.cast(1e-8)}["fp16"] == "underflow to 0"
    assert {r.format: r.outcome for r in formats.cast(1e-6)}["fp16"] == "subnormal"
    bf16 = {r.format: r for r in formats.cast(257.0)}["bf16"]
    assert bf16.stored == 256.0 and bf16.relative_error == pytest.approx(1 / 257)


def test_loss_scaling_rescues_small_gradients_and_overflows_large_ones():
    probes = {p.value: p for p in formats.scaling_probes((1.0, 1e-8), scale=65536.0)}
    assert probes[1e-8].fp16.stored == 0.0
    assert probes[1e-8].fp16_scaled.stored == pytest.approx(1e-8, rel=1e-3)
    assert probes[1.0].fp16_scaled.outcome == "overflow to inf"
    small_scale = formats.scaling_probes((1.0,), scale=1024.0)[0]
    assert small_scale.fp16_scaled.outcome == "exact"
    with pytest.raises(ValueError, match="positive, finite"):
        formats.scaling_probes((1.0,), scale=0.0)


def test_unknown_formats_are_refused():
    with pytest.raises(ValueError, match="unknown format 'fp8'"):
        formats.to_format(torch.tensor([1.0]), "fp8")


# --- the autocast trace -------------------------------------------------------------------


def test_the_cpu_trace_matches_pytorchs_cpu_op_list():
    rows = trace.trace_gpt2("cpu", torch.bfloat16)
    summary = trace.summarize(rows, "cpu", "bfloat16")
    assert summary.checked == len(rows) >= 15
    assert summary.disagreements == 0
    outputs = {(r.op, r.output_dtype) for r in rows}
    assert ("linear", "bfloat16") in outputs and ("matmul", "bfloat16") in outputs
    assert ("cross_entropy", "float32") in outputs
    assert ("softmax", "bfloat16") in outputs  # unlisted on CPU: stays in its input's dtype


def test_the_trace_would_notice_a_wrong_policy(monkeypatch):
    rows = trace.trace_gpt2("cpu", torch.bfloat16)
    wrong = trace.OpPolicy(op="softmax", cuda=trace.FP32, cpu=trace.FP32)
    monkeypatch.setitem(trace.POLICIES, "softmax", wrong)
    assert trace.summarize(rows, "cpu", "bfloat16").disagreements == 1


def test_without_autocast_every_op_stays_fp32_and_rows_name_their_module():
    rows = trace.trace_gpt2("cpu", None)
    assert {r.output_dtype for r in rows} == {"float32"}
    modules = {r.module for r in rows}
    assert {"wte", "blocks.0.attn.c_attn", "lm_head"} <= modules
    assert not {r.op for r in rows} & trace.SHAPE_OPS


def test_tracing_leaves_the_model_without_hooks():
    torch.manual_seed(0)
    model = GPT2(GPT2Config(vocab_size=32, seq_len=8, hidden=16, heads=2, layers=1))
    idx = torch.randint(0, 32, (1, 8))
    trace.trace_forward(model, (idx, idx), "cpu", torch.bfloat16)
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())


def test_the_trace_refuses_a_device_without_autocast():
    model = torch.nn.Linear(2, 2)
    with pytest.raises(ValueError, match="not available for device 'nope'"):
        trace.trace_forward(model, (torch.ones(1, 2),), "nope", torch.bfloat16)


@pytest.mark.gpu
def test_the_cuda_trace_matches_pytorchs_cuda_op_list():
    rows = trace.trace_gpt2("cuda", torch.float16)
    summary = trace.summarize(rows, "cuda", "float16")
    assert summary.disagreements == 0
    assert ("softmax", "float32") in {(r.op, r.output_dtype) for r in rows}


# --- TF32 ---------------------------------------------------------------------------------


def test_matmul_errors_order_fp32_tf32_bf16():
    e = tf32.matmul_errors(128, seed=3)
    assert e.relative_error("fp32") < e.relative_error("tf32_emulated") < e.relative_error("bf16")
    assert e.ratio("tf32_emulated", "fp32") > 10
    with pytest.raises(ValueError, match="no 'tf32' row on cpu"):
        e.relative_error("tf32")
    with pytest.raises(ValueError, match="positive whole number"):
        tf32.matmul_errors(0)


def test_tf32_settings_read_this_torch():
    s = tf32.tf32_settings()
    assert s.torch_version == torch.__version__
    assert s.cuda_matmul_allow_tf32 == torch.backends.cuda.matmul.allow_tf32
    assert "allow_tf32" in settings_markdown(s)


@pytest.mark.gpu
def test_tensor_core_tf32_error_is_near_the_emulation():
    if not tf32.has_tf32_tensor_cores("cuda"):
        pytest.skip("needs compute capability 8.0 or later")
    e = tf32.matmul_errors(2048, "cuda")
    assert e.relative_error("tf32") < 4 * e.relative_error("tf32_emulated")
    assert e.relative_error("fp32") < e.relative_error("tf32")


# --- GradScaler and NaN checks ------------------------------------------------------------


def test_an_overflowing_batch_is_skipped_and_halves_the_scale():
    run = scaler.scaler_run(("normal", "overflow", "normal"))
    taken = [s.step_taken for s in run.steps]
    assert taken == [True, False, True]
    assert [s.grads_finite for s in run.steps] == taken
    assert run.steps[1].scale_after == run.steps[1].scale_before / 2
    assert run.skipped == 1


def test_the_where_sqrt_bug_skips_every_step():
    run = scaler.scaler_run(("normal",) * 3, buggy=True)
    assert run.skipped == 3
    assert [s.scale_after for s in run.steps] == [32768.0, 16384.0, 8192.0]


def test_scaler_runs_refuse_unknown_batches():
    with pytest.raises(ValueError, match="'huge' is not one of"):
        scaler.scaler_run(("huge",))
    with pytest.raises(ValueError, match="at least one batch"):
        scaler.scaler_run(())


def test_nan_checks_see_what_the_loss_hides():
    check = scaler.find_nonfinite()
    assert check.loss_finite
    assert len(check.nonfinite_grads) == check.parameters == 4
    assert check.anomaly is not None and "SqrtBackward0" in check.anomaly


# --- hardware -----------------------------------------------------------------------------


def test_every_nvidia_datasheet_row_has_a_compute_capability():
    # NVIDIA rows with tensor-core peaks (the RTX 5090 row, read from a review, has none)
    nvidia = {
        r.id
        for r in datasheets.all_rows()
        if r.name.startswith("NVIDIA") and set(r.peaks) - {"fp32"}
    }
    assert nvidia == set(hardware.CAPABILITIES)


def test_the_capability_rule_matches_every_datasheet():
    rows = hardware.hardware_rows()
    for row in rows:
        assert row.datasheet_dtypes == row.rule_dtypes, row.id
    assert [r.capability for r in rows] == sorted(r.capability for r in rows)


def test_the_rule_agrees_with_the_matmul_suites_dtypes():
    from gpulesson.results.entries_matmul import dtypes_for
    from gpulesson.results.suite import Device

    for capability in ((7, 5), (8, 0), (8, 6), (8, 9), (9, 0)):
        device = Device("cuda", "x", 1, 1, 1, capability)
        suite = set(dtypes_for(device, quick=False)) - {"fp32"}
        assert suite == set(hardware.tensor_core_dtypes(capability)), capability


def test_hardware_table_shows_none_where_a_datasheet_has_no_peak():
    text = hardware_markdown(hardware.hardware_rows())
    t4 = next(line for line in text.splitlines() if "T4" in line)
    assert "7.5 (sm_75)" in t4 and t4.count("none") == 3


def test_a_peak_the_datasheet_states_with_fp32_accumulate_is_labelled_so():
    rows = hardware.hardware_rows()
    text = hardware_markdown(rows)
    for row in rows:
        line = next(x for x in text.splitlines() if f"| {row.name} |" in x)
        for dtype in row.datasheet_dtypes:
            stated = datasheets.get(row.id).peaks[dtype].stated
            labelled = "fp32 accumulate" in stated.lower()
            assert (dtype in row.fp32_accumulate) is labelled, (row.id, dtype)
        assert line.count("(fp32 acc.)") == len(row.fp32_accumulate), row.id
    rtx3090 = next(r for r in rows if r.id == "rtx-3090")
    assert "fp16" in rtx3090.fp32_accumulate
    assert "| 71 (fp32 acc.) |" in text


def test_the_lesson_says_a_host_branch_on_the_loss_check_syncs():
    text = (REPO / "docs" / "lessons" / "mixed-precision.md").read_text(encoding="utf-8")
    assert "cheap, and catches overflow" not in text
    assert "bad |= ~torch.isfinite(loss)" in text and "every N steps" in text
    assert "FP16 Accumulate 142/284" in text


# --- activations --------------------------------------------------------------------------


SHAPE = TransformerShape(vocab=128, seq=32, hidden=32, heads=2, layers=2, batch=2)


def test_measured_fp32_activations_match_the_budget_estimate():
    c = compare(SHAPE)
    assert c.measured_fp32.activations_bytes == pytest.approx(
        c.estimate_fp32.activations_bytes, rel=0.05
    )
    assert c.estimated_ratio == pytest.approx(0.5, abs=0.01)
    assert 0.5 < c.measured_ratio < 1.0


def test_autocast_weight_copies_are_the_linear_weights_in_16_bits():
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=128, seq_len=32, hidden=32, heads=2, layers=2)
    model = GPT2(config)
    idx = torch.randint(0, 128, (2, 32))
    saved = saved_for_backward(model, (idx, idx), "cpu", torch.bfloat16)
    linear_weights = sum(
        m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear)
    )
    assert saved.weight_copies_bytes == 2 * linear_weights
    plain = saved_for_backward(model, (idx, idx), "cpu", None)
    assert plain.weight_copies_bytes == 0 and plain.by_dtype.keys() <= {"float32", "int64"}


# --- training steps and GPU figures -------------------------------------------------------


def test_precisions_follow_the_tensor_cores():
    assert precisions_for("cuda", (8, 0), quick=False) == ("fp32", "tf32", "bf16", "fp16")
    assert precisions_for("cpu", None, quick=False) == ("fp32", "bf16", "fp16")
    with pytest.raises(ValueError, match="unknown precision 'fp8'"):
        check_precision("fp8", "cpu")


def test_an_fp16_step_reports_its_scaler():
    config = GPT2Config(vocab_size=32, seq_len=8, hidden=16, heads=2, layers=1)
    t = time_step(config, 2, "cpu", "fp16", min_run_time_s=0.01)
    assert t.final_scale is not None and t.steps >= 7
    assert t.tokens == 16 and t.tokens_per_s > 0
    with pytest.raises(ValueError, match="batch=0"):
        time_step(config, 0, "cpu", "fp32")


def test_gpu_rows_with_no_bundle_render_as_a_note_naming_the_measurements():
    assert gpu.from_measurements((), gpu.STEP, this_build=False) == ()
    text = gpu_markdown((), gpu.STEP, "training step")
    assert "needs a GPU" in text and "`amp_step.bf16`" in text


def test_gpu_rows_come_from_a_bundle_with_their_speedups():
    from gpulesson.results.bundle import load

    bundle = load(REPO / "tests" / "fixtures" / "bundles" / "fixture_h100.json")
    rows = gpu.from_measurements(bundle.measurements, gpu.SPEED, this_build=False)
    assert {r.name for r in rows} == {"matmul_peak.fp32", "matmul_peak.bf16"}
    published = gpu.page_facts(rows)
    fp32 = bundle.measurement("matmul_peak.fp32").value
    bf16 = bundle.measurement("matmul_peak.bf16").value
    assert published["mp.bf16_speedup"] == (bf16 / fp32, "x")
    assert "mp.tf32_speedup" not in published  # the fixture has no TF32 row
    assert "TFLOP/s" in gpu_markdown(rows, gpu.SPEED, "matmul")


def test_gpu_rows_rebuilt_from_this_builds_measurements_say_so():
    from gpulesson.results.bundle import load

    bundle = load(REPO / "tests" / "fixtures" / "bundles" / "fixture_h100.json")
    peak = [m for m in bundle.measurements if m.entry == "matmul_peak"]
    rows = gpu.from_measurements(peak, gpu.SPEED, this_build=True)
    assert [r.name for r in rows] == ["matmul_peak.fp32", "matmul_peak.bf16"]  # SPEED's order
    assert {r.source for r in rows} == {"this build"}
    assert rows == tuple(
        dataclasses.replace(r, source="this build")
        for r in gpu.from_measurements(bundle.measurements, gpu.SPEED, this_build=False)
    )
    assert "this build's GPU" in gpu_markdown(rows, gpu.SPEED, "matmul")
    assert gpu.from_measurements((), gpu.SPEED, this_build=True) == ()
