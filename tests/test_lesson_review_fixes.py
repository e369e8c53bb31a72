"""Issue 23, item 8: what a second expert reading of the lessons found, checked on the pages.

Each test reads the claims, facts and Markdown the strict build's run of the lesson it
checks left (``tests/lesson_blocks.py``), or reads the lesson's text where the fix is a
sentence with its source.
"""

from __future__ import annotations

import pytest

from gpulesson.site import claims, facts
from tests.conftest import REPO
from tests.lesson_blocks import built_page, fences_after

LESSONS = REPO / "docs" / "lessons"


def _text(stem: str) -> str:
    return (LESSONS / f"{stem}.md").read_text(encoding="utf-8")


@pytest.fixture(autouse=True)
def _fresh_facts():
    facts.reset()
    yield
    facts.reset()


def _claim(run, fragment: str) -> claims.Claim:
    (found,) = [c for c in run.claims if fragment in c.text]
    return found


# --- fix-ladder ---------------------------------------------------------------------------


def test_fix_ladder_calls_the_mixed_precision_estimate_a_floor_from_the_measurement(built_site):
    run = built_page(built_site, "fix-ladder")
    made = _claim(run, "That price is a floor")
    assert made.status == claims.HOLDS and made.teaching
    assert made.kinds["ladder.amp_measured_ratio"] == facts.MEASURED
    values = run.values()
    assert values["ladder.amp_estimated_ratio"] < values["ladder.amp_measured_ratio"] < 1
    assert "about half" not in made.text
    assert run.unmet_claims() == []


def test_fix_ladder_says_what_empty_cache_and_accumulation_cost():
    text = _text("fix-ladder")
    assert "can not increase the amount\n   of GPU memory available for PyTorch" in text
    assert "gc.collect()" in text and "reference cycle" in text
    assert "divide\n   by the total token count" in text
    assert "huggingface.co/blog/gradient_accumulation" in text


# --- feeding ------------------------------------------------------------------------------


def test_feeding_names_both_start_method_defaults_and_the_spinning_wait():
    text = _text("feeding")
    assert "Python 3.10 to 3.13 it is forked" in text and "Python 3.14" in text
    assert "forkserver" in text and "#contexts-and-start-methods" in text
    assert "exactly as\nwaiting on a GPU does" not in text
    assert "cudaDeviceScheduleBlockingSync" in text and "cudaSetDeviceFlags" in text
    assert "`torch.nan_to_num`\n        is no check" in text
    assert "torch.isnan(loss).any()" in text


# --- decoding -----------------------------------------------------------------------------


def test_decoding_limits_the_16_bit_multiplies_to_weight_only_quantization():
    text = _text("decoding")
    assert "for **weight-only** quantization" in text
    assert "W8A8" in text and "FP8 Tensor Core 3,958 teraFLOPS\\*" in text
    quiz = (LESSONS / "decoding.quiz.yml").read_text(encoding="utf-8")
    assert "(only the weights)" in quiz and "With weight-only quantization" in quiz


# --- multi-gpu ----------------------------------------------------------------------------


def test_multi_gpu_links_table_sends_the_rings_bytes_and_pcie_cards_ring_over_pcie(built_site):
    run = built_page(built_site, "multi-gpu")
    values = run.values()
    assert values["multigpu.links_sent_gb"] == pytest.approx(2 * 7 / 8 * 28)
    assert values["multigpu.links_sent_gb"] == values["multigpu.ring_8_gb"]
    table = run.printed["multi-gpu-links"]
    assert "| NVIDIA H100 PCIe 80GB | NVLink |" not in table
    assert "| NVIDIA A100 80GB PCIe | NVLink |" not in table
    assert "| NVIDIA H100 SXM5 80GB | NVLink |" in table
    assert "NVLink Bridge joins 2 cards" in table
    assert "24.5 GB" not in _text("multi-gpu")
    (described,) = [out for out in run.printed.values() if "of the 8-GPU ring above" in out]
    assert "Those are the 49 GB of the 8-GPU ring above" in described
    assert run.facts["multigpu.links_sent_gb"].kind == facts.PREDICTED


def test_multi_gpu_says_what_tensor_parallelism_leaves_whole_and_that_the_bubble_is_ideal():
    text = _text("multi-gpu")
    assert "weights and most activations shrink by t" not in text
    assert "sbh(10 + 24/t + 5as/(ht))" in text and "arxiv.org/abs/2205.05198" in text
    assert "GPipe's idealised estimate" in text


# --- oom ----------------------------------------------------------------------------------


def test_oom_reads_the_mixed_case_as_fragmentation_and_links_the_ladder_once_per_verdict(
    built_site,
):
    run = built_page(built_site, "oom")
    assert run.values()["oom.mixed_is_fragmentation"] == 1
    assert run.facts["oom.mixed_is_fragmentation"].kind == facts.DERIVED
    mixed = run.printed["oom-example-mixed"]
    assert "Verdict: fragmentation" in mixed and "together they hold 2.33 GiB" in mixed
    described = " ".join(out for block_id, out in run.printed.items() if "describe" in block_id)
    assert "together they come to 2.33 GiB, and `gpulesson diagnose` reads it as fragmentation" in (
        described
    )
    assert "reads it as exhaustion" in described and "even together, cannot" in described
    for block_id, out in run.printed.items():
        if "What to do, in order:" in out:
            assert out.count("[fix ladder](../fix-ladder/)") == 1, block_id
            assert "**Gradient accumulation**" not in out, block_id


def test_oom_checks_only_the_message_this_build_raised_not_the_examples_it_wrote(built_site):
    """The example messages' numbers are constants: described. The one check reads host RAM's
    real refusal, raised by this build's torch, against the request the block made."""
    run = built_page(built_site, "oom")
    (made,) = run.claims
    assert made.teaching and made.status == claims.HOLDS
    assert made.rule == "oom.host_read_bytes == oom.host_asked_bytes"
    assert made.kinds["oom.host_read_bytes"] == facts.MEASURED
    assert run.values()["oom.host_kind"] == "cpu_oom"
    assert "DefaultCPUAllocator" in run.printed["oom-host-ram-real"]
    example_kinds = {f.kind for n, f in run.facts.items() if n.startswith("oom.exhaustion_")}
    assert example_kinds <= {facts.CONSTANT, facts.DERIVED}


# --- roofline -----------------------------------------------------------------------------


def test_roofline_states_the_bf16_speedup_as_twice_the_bandwidth_ratio_without_a_branch(built_site):
    run = built_page(built_site, "roofline")
    # Half the bytes make the speedup twice the bandwidth ratio by arithmetic: a description.
    (shown,) = [out for out in run.printed.values() if "twice the bandwidth ratio" in out]
    assert "gl-claim" not in shown
    assert not [c for c in run.claims if "twice the bandwidth ratio" in c.text]
    values = run.values()
    assert values["roofline.bf16_speedup"] == pytest.approx(
        2 * values["roofline.bf16_bandwidth_ratio"], rel=0.02
    )
    assert "within the 2x" not in _text("roofline")


def test_a_compute_side_op_far_from_its_roof_is_not_labelled_compute_bound():
    from types import SimpleNamespace

    from gpulesson.course.roofline import _regime

    assert _regime(SimpleNamespace(regime="compute-bound", share_of_ceiling=0.9)) == (
        "compute-bound"
    )
    low = _regime(SimpleNamespace(regime="compute-bound", share_of_ceiling=0.3))
    assert "compute-bound" not in low and "30%" in low


# --- timing and why-gpus: the teaching example ---------------------------------------------


def test_the_teaching_kernel_runs_at_a_cited_t4_peak_not_below_it():
    from gpulesson.results import datasheets
    from gpulesson.timing import teaching

    t4 = datasheets.get("t4").dense_flop_per_s("fp32")
    example = teaching.TeachingTiming()
    assert example.gpu_flop_per_s == pytest.approx(t4)
    assert 2 * 5000**3 / teaching.SOURCE_KERNEL_S < t4  # the source's figure: too slow
    correction = teaching.launch_correction()
    assert all(t.kernel_s == pytest.approx(2 * 5000**3 / t4) for t in correction.corrected)


def test_the_timing_page_claims_hold_with_the_corrected_kernel(built_site):
    run = built_page(built_site, "timing")
    # The teaching example is arithmetic on quoted figures: described, not checked.
    (shown,) = [out for out in run.printed.values() if "three orders of magnitude" in out]
    assert "gl-claim" not in shown and "3,087 times or more" in shown
    assert run.facts["timing.teach_illusion_10us"].kind == facts.PREDICTED
    assert run.facts["timing.source_launch_us"].kind == facts.CONSTANT
    made = _claim(run, "more than a hundred")  # this build's launch against the source's
    assert made.teaching and made.status in (claims.HOLDS, claims.NOT_SHOWN)
    assert run.unmet_claims() == []  # not shown only where the page says so
    assert made.kinds == {"timing.launch_us": "measured", "timing.source_launch_us": "constant"}
    assert "kernel_s=0.20" not in _text("timing")
    assert "T4's datasheet fp32 peak" in run.printed["timing-teaching"]


# --- software-stack and capacity ----------------------------------------------------------


def test_software_stack_says_minor_version_compatibility_excludes_ptx_jit():
    text = _text("software-stack")
    assert "One thing it does\nnot cover is PTX JIT compilation" in text
    assert "minor-version-compatibility.html" in text


def test_capacity_shows_that_autograd_gives_fp16_weights_fp16_gradients(built_site):
    run = built_page(built_site, "capacity")
    (shown,) = [run.printed[f] for f in fences_after("capacity", "capacity-sgd-grad")]
    assert "do not come out of stock PyTorch" in shown and "gl-claim-holds" in shown
    values = run.values()
    assert values["capacity.fp16_grad_bytes"] == values["capacity.fp16_weight_bytes"] == 2
