"""The feeding lesson's library: loader runs, fusion, shape alignment, sync probes.

Speed claims live on the page and in the suite; these tests check behaviour: what is
measured, that workers start and finish (in the build's block worker too), that the
compiled chain computes what eager does, and that bad input is refused.
"""

from __future__ import annotations

import os

import psutil
import pytest
import torch

from gpulesson.course.feeding import fusion_markdown, loader_markdown
from gpulesson.course.inside_gpu import shapes_markdown
from gpulesson.site.block_runner import BlockRunner
from gpulesson.site.exec_cache import setup_request
from gpulesson.timing import alignment, fusion, loader, syncs
from tests.conftest import REPO

TINY = loader.LoaderPlan(
    items=16, words_per_item=20, batch_size=4, batches_per_epoch=2, epochs=2, item_repeats=2
)


def _descendants() -> list[psutil.Process]:
    return psutil.Process(os.getpid()).children(recursive=True)


# --- the dataset ---------------------------------------------------------------------------


def test_items_are_deterministic_and_differ_from_each_other():
    data = loader.TokenizedText(items=4, words_per_item=30, seq_len=64)
    again = loader.TokenizedText(items=4, words_per_item=30, seq_len=64)
    assert torch.equal(data[2], again[2])
    assert not torch.equal(data[0], data[1])
    assert data[0].shape == (64,) and data[0].dtype == torch.int64


def test_the_tokenizer_cuts_every_word_into_vocabulary_pieces_that_spell_it():
    data = loader.TokenizedText(items=1, words_per_item=1)
    by_id = {i: piece for piece, i in data.vocab.items()}
    for word in data.words[:50]:
        ids = data.tokenize(word)
        assert loader.UNKNOWN_ID not in ids
        assert "".join(by_id[i].removeprefix("##") for i in ids) == word


def test_longer_items_are_cut_to_seq_len_and_short_ones_padded():
    long = loader.TokenizedText(items=1, words_per_item=200, seq_len=16)[0]
    short = loader.TokenizedText(items=1, words_per_item=1, seq_len=16)[0]
    assert (long != loader.PAD_ID).all()
    assert short[-1] == loader.PAD_ID


@pytest.mark.parametrize("kwargs", [{"items": 0}, {"words_per_item": 0}, {"seq_len": 0}], ids=str)
def test_an_empty_dataset_is_refused(kwargs):
    with pytest.raises(ValueError, match="at least 1"):
        loader.TokenizedText(**kwargs)


def test_an_index_past_the_end_raises_index_error():
    with pytest.raises(IndexError):
        loader.TokenizedText(items=2)[2]


# --- settings and runs ----------------------------------------------------------------------


def test_settings_refuse_what_the_dataloader_would_refuse():
    with pytest.raises(ValueError, match="persistent_workers=True needs num_workers > 0"):
        loader.LoaderSetting(num_workers=0, persistent_workers=True)
    with pytest.raises(ValueError, match="num_workers=-1"):
        loader.LoaderSetting(num_workers=-1)
    with pytest.raises(ValueError, match="prefetch_factor=0"):
        loader.LoaderSetting(num_workers=1, prefetch_factor=0)
    assert loader.LoaderSetting(num_workers=3, prefetch_factor=4).effective_prefetch == 4


def test_a_run_keeps_one_first_batch_per_epoch_and_every_gap():
    data = loader.TokenizedText(items=12, words_per_item=10)
    run = loader.measure_setting(
        data,
        loader.LoaderSetting(num_workers=1),
        batch_size=2,
        batches_per_epoch=3,
        epochs=2,
        step_s=0.001,
    )
    assert len(run.first_batch_s) == 2
    assert len(run.gaps_s) == 2 * (3 - 1)
    assert run.repeats == 2  # one sample per epoch: that epoch's mean gap
    assert all(gap >= 0.001 for gap in run.gaps_s)  # every gap includes the step's sleep
    assert 0 <= run.step_idle_share < 1


def test_workers_start_and_finish_persistent_ones_too():
    before = {p.pid for p in _descendants()}
    data = loader.TokenizedText(items=8, words_per_item=5)
    for setting in (
        loader.LoaderSetting(num_workers=2),
        loader.LoaderSetting(num_workers=2, persistent_workers=True),
    ):
        loader.measure_setting(
            data, setting, batch_size=2, batches_per_epoch=2, epochs=2, step_s=0.0
        )
    left = [p for p in _descendants() if p.pid not in before and p.is_running()]
    assert left == []


def test_runs_that_ask_for_more_items_than_the_dataset_has_are_refused():
    data = loader.TokenizedText(items=3)
    with pytest.raises(ValueError, match="need 4 items; the dataset has 3"):
        loader.measure_setting(
            data,
            loader.LoaderSetting(num_workers=0),
            batch_size=2,
            batches_per_epoch=2,
            epochs=1,
            step_s=0.0,
        )
    with pytest.raises(ValueError, match="2 batches per epoch"):
        loader.measure_setting(
            data,
            loader.LoaderSetting(num_workers=0),
            batch_size=1,
            batches_per_epoch=1,
            epochs=1,
            step_s=0.0,
        )


def test_the_comparison_starts_from_no_workers():
    with pytest.raises(ValueError, match="first setting must be LoaderSetting"):
        loader.measure_loader((loader.LoaderSetting(num_workers=1),), TINY)


def test_headline_figures_read_the_runs_they_name():
    result = loader.measure_loader(plan=TINY)
    figures = loader.headline_figures(result)
    assert figures["speedup_w1"][0] == pytest.approx(result.speedup(result.run(1)))
    assert figures["ceiling_per_s"][0] == pytest.approx(1 / result.run(0).step_s)
    assert figures["later_first_kept_ms"][0] == pytest.approx(
        result.run(2, persistent=True).first_batch_s[1] * 1e3
    )
    table = loader_markdown(result)
    assert all(f"| {run.setting.label} |" in table for run in result.runs)
    with pytest.raises(ValueError, match="no run with num_workers=5"):
        result.run(5)


def test_dataloader_workers_start_and_finish_inside_the_build_s_block_worker():
    """A block runs in the build's worker process: its DataLoader workers must end there too."""
    before = {p.pid for p in psutil.Process(os.getpid()).children()}
    runner = BlockRunner(package_parent=REPO)
    try:
        runner.set_up(setup_request(), 120)
        code = (
            "from gpulesson.timing.loader import LoaderPlan, measure_loader\n"
            "plan = LoaderPlan(items=16, words_per_item=20, batch_size=4, batches_per_epoch=2,"
            " epochs=2, item_repeats=2)\n"
            "print(len(measure_loader(plan=plan).runs), 'runs')\n"
        )
        request = {
            "op": "run",
            "code": code,
            "returncode": None,
            "session": None,
            "id": "feeding-test",
            "extra": {},
            "page": "lessons/feeding.md",
            "page_facts": [],
            "cwd": str(REPO),
            "columns": None,
            "counted": [],
            "content": None,
        }
        reply = runner.request(request, 120)
        assert reply.status == "ok" and reply.data["status"] == "ok", reply.data
        assert "4 runs" in reply.data["output"]
        workers = [p for p in psutil.Process(os.getpid()).children() if p.pid not in before]
        assert len(workers) == 1  # the block worker itself
        assert workers[0].children(recursive=True) == []  # no DataLoader worker outlives it
    finally:
        runner.close()


# --- fusion ---------------------------------------------------------------------------------


def test_the_compiled_chain_computes_what_eager_does_and_is_timed_both_ways():
    threads = torch.get_num_threads()
    r = fusion.measure_fusion("cpu", n=64, min_run_time_s=0.01)
    assert r.max_abs_diff <= fusion.CHAIN_TOLERANCE
    assert r.compile_s > 0 and r.ops_per_call == 30 and r.threads == 1
    assert r.eager.repeats >= 5 and r.compiled.repeats >= 5
    assert r.speedup == pytest.approx(r.eager.median_s / r.compiled.median_s)
    assert "fused kernel" in fusion_markdown(r)
    assert torch.get_num_threads() == threads  # timed at one thread, then restored


def test_without_a_c_compiler_the_chain_is_timed_eager_and_the_page_says_why():
    with torch._inductor.config.patch({"cpp.cxx": ("/nonexistent/c++",)}):  # no compiler here
        r = fusion.measure_fusion("cpu", n=64, min_run_time_s=0.01)
    assert (r.compiled, r.compile_s, r.max_abs_diff, r.speedup, r.breakeven_calls) == (None,) * 5
    assert r.eager.repeats >= 5 and r.eager.median_s > 0
    assert "No working C++ compiler" in r.compile_error
    assert r.compile_error.endswith("install g++ or clang and build again")
    missing = fusion.missing_figures(r)
    assert set(missing) == set(fusion.COMPILED_FIGURES) and set(missing.values()) == {
        r.compile_error
    }
    assert not set(missing) & set(fusion.headline_figures(r))
    page = fusion_markdown(r)
    assert "| compiled: one fused kernel | not measured |" in page
    assert '!!! warning "Not compiled on this build"' in page and "pays for itself" not in page


def test_a_compile_that_saves_nothing_leaves_the_break_even_undefined_and_says_so():
    eager = fusion.CallTiming(mode="eager", samples_s=(50e-6,) * 5, calls_per_sample=10)
    slower = fusion.CallTiming(mode="compiled", samples_s=(60e-6,) * 5, calls_per_sample=10)
    r = fusion.FusionResult(
        device="cpu",
        n_elements=256,
        ops_per_call=30,
        threads=1,
        eager=eager,
        compiled=slower,
        compile_s=3.0,
        max_abs_diff=0.0,
    )
    assert r.breakeven_calls is None and "breakeven_calls" not in fusion.headline_figures(r)
    assert list(fusion.missing_figures(r)) == ["breakeven_calls"]
    assert "60 µs against 50 µs" in fusion.missing_figures(r)["breakeven_calls"]
    assert "it saves nothing, so it never pays for itself" in fusion_markdown(r)


def test_overhead_rounds_time_the_bare_op_and_the_chain_back_to_back():
    r = fusion.measure_overhead_rounds(n=16, rounds=3, min_run_time_s=0.002)
    assert len(r.per_op_s) == len(r.bare_op_s) == len(r.ratios) == 3
    assert r.median_ratio == sorted(r.ratios)[1]
    assert all(p > 0 for p in r.per_op_s + r.bare_op_s)
    with pytest.raises(ValueError, match="one round"):
        fusion.measure_overhead_rounds(rounds=0)


def test_the_median_round_ignores_a_burst_in_one_round():
    r = fusion.OverheadRounds(
        device="cpu", n_elements=256, threads=1, per_op_s=(3e-6, 3e-6, 90e-6), bare_op_s=(1e-6,) * 3
    )
    assert r.median_ratio == pytest.approx(3.0)


def test_fusion_refuses_devices_inductor_is_not_used_on_here():
    with pytest.raises(ValueError, match="use device='cpu'"):
        fusion.measure_fusion("mps")
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        fusion.measure_fusion("tpu")
    with pytest.raises(ValueError, match="n=0"):
        fusion.measure_fusion("cpu", n=0)


def test_using_threads_restores_the_count_after_an_error():
    before = torch.get_num_threads()
    with pytest.raises(RuntimeError), fusion.using_threads(1):
        raise RuntimeError
    assert torch.get_num_threads() == before


# --- alignment ------------------------------------------------------------------------------


def test_shapes_are_timed_round_by_round_and_compared_per_flop():
    shapes = alignment.square_neighbours(64)
    r = alignment.measure_shapes(shapes, "cpu", "fp32", rounds=3, calls_per_sample=2, threads=1)
    assert [t.shape.m for t in r.timings] == [63, 64, 65]
    assert all(t.repeats == 3 for t in r.timings)
    assert r.aligned.shape.m == 64 and r.relative(r.aligned) == 1.0
    best_odd = max(t.flop_per_s for t in r.timings if not t.shape.aligned)
    assert r.aligned_gain == pytest.approx(r.aligned.flop_per_s / best_odd)
    assert "64 x 64 x 64" in shapes_markdown(r)


def test_shape_lists_need_exactly_one_aligned_shape():
    odd = alignment.GemmShape(label="a", m=3, k=3, n=3, aligned=False)
    with pytest.raises(ValueError, match="exactly one of them aligned"):
        alignment.measure_shapes((odd, odd))
    with pytest.raises(ValueError, match="n=1"):
        alignment.square_neighbours(1)
    with pytest.raises(ValueError, match="tf32 is a CUDA tensor-core mode"):
        alignment.measure_shapes(alignment.square_neighbours(8), "cpu", "tf32")


def test_the_vocabulary_padding_is_nanogpt_s():
    shapes = alignment.vocab_projection(8, 16)
    assert [s.n for s in shapes] == [50257, 50304]
    assert alignment.PADDED_VOCAB % 64 == 0 and alignment.GPT2_VOCAB % 64 != 0


# --- syncs ----------------------------------------------------------------------------------


def test_every_probe_is_valid_code_on_any_device():
    x = torch.randn(16)
    for probe in syncs.PROBES:
        probe.run(x, x > 0)
    assert sum(p.hidden_sync for p in syncs.PROBES) == 6


def test_sync_detection_and_copy_calls_refuse_a_cpu():
    with pytest.raises(ValueError, match="needs a CUDA device"):
        syncs.find_syncs("cpu")
    with pytest.raises(ValueError, match="pinned host memory needs CUDA"):
        syncs.measure_copy_call("cpu")


@pytest.mark.gpu
def test_on_cuda_the_hidden_syncs_warn_and_their_replacements_do_not():
    checks = syncs.find_syncs("cuda")
    figures = syncs.headline_figures(checks)
    assert figures["free_warned"][0] == 0
    assert figures["syncs_warned"][0] >= figures["syncs_hidden"][0] - 1
    assert torch.cuda.get_sync_debug_mode() == 0  # restored


@pytest.mark.gpu
def test_on_cuda_a_pinned_non_blocking_copy_returns_before_the_copy_is_done():
    r = syncs.measure_copy_call("cuda", n_bytes=64 * 2**20, repeats=5)
    assert r.pinned.median_s < 0.5 * r.copy.median_s
    assert r.pageable.median_s > r.pinned.median_s
