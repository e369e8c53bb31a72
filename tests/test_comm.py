"""Bytes each GPU sends per optimizer step (gpulesson.memory.comm), and `gpulesson budget`."""

from __future__ import annotations

import json

import pytest

from gpulesson.memory import comm
from gpulesson.memory.budget import estimate
from gpulesson.results import datasheets


@pytest.mark.parametrize("gpus", [2, 3, 8, 64])
def test_a_ring_all_reduce_sends_a_reduce_scatter_plus_an_all_gather(gpus):
    size = 1_000_000
    all_reduce = comm.ring_all_reduce_bytes(size, gpus)
    halves = 2 * comm.sent_fraction("reduce-scatter", gpus) * size
    assert all_reduce == pytest.approx(halves)
    assert all_reduce == pytest.approx(2 * (gpus - 1) / gpus * size)
    assert size <= all_reduce < 2 * size  # never below the message, never twice it


def test_one_gpu_sends_nothing_whatever_the_stage():
    c = comm.step_comm(gpus=1, zero=0, gradient_bytes=1e9, parameter_bytes=1e9)
    assert c.sent_bytes == 0 and c.collectives == () and c.ratio_to_data_parallel == 1.0


def test_the_zero_paper_volumes_with_one_dtype():
    # ZeRO (arXiv:1910.02054) section 7.2: stages 1 and 2 send what data parallel sends,
    # stage 3 one and a half times that, when gradients and parameters share a dtype.
    g = 14e9
    sent = {
        z: comm.step_comm(gpus=8, zero=z, gradient_bytes=g, parameter_bytes=g).sent_bytes
        for z in (0, 1, 2, 3)
    }
    assert sent[0] == round(2 * 7 / 8 * g) == 24_500_000_000
    assert sent[1] == sent[2] == sent[0]
    assert sent[3] == round(1.5 * sent[0])


def test_stages_price_gradients_and_parameters_in_their_own_dtypes():
    # fp32 gradients, bf16 weights gathered: stage 2 sends (N-1)/N x (G + P), not 2G.
    c = comm.step_comm(gpus=4, zero=2, gradient_bytes=4e9, parameter_bytes=2e9)
    assert c.sent_bytes == round(3 / 4 * (4e9 + 2e9))
    assert [(x.collective, x.tensor) for x in c.collectives] == [
        ("reduce-scatter", "gradients"),
        ("all-gather", "parameters"),
    ]


def test_accumulation_repeats_only_what_each_micro_batch_needs():
    base = {"gpus": 8, "gradient_bytes": 1e9, "parameter_bytes": 1e9, "accumulation_steps": 4}
    one = {**base, "accumulation_steps": 1}
    # Stage 0 syncs once per optimizer step (DDP's no_sync in the other micro-batches).
    assert comm.step_comm(zero=0, **base).sent_bytes == comm.step_comm(zero=0, **one).sent_bytes
    # Stage 2 keeps only its shard of the gradients: it reduce-scatters every micro-batch.
    s2 = comm.step_comm(zero=2, **base)
    assert s2.sent_bytes == round(7 / 8 * (4 * 1e9 + 1e9))
    # Stage 3 gathers the weights twice and scatters the gradients in every micro-batch.
    assert comm.step_comm(zero=3, **base).sent_bytes == 4 * comm.step_comm(zero=3, **one).sent_bytes


def test_budget_comm_follows_the_recipe():
    amp = comm.budget_comm(estimate(7e9, gpus=8, zero=3))  # fp32 weights and gradients
    assert amp.gradient_bytes == amp.parameter_bytes == 28e9
    assert amp.sent_bytes == 3 * round(7 / 8 * 28e9)
    zero_recipe = comm.budget_comm(estimate(7e9, preset="mixed-fp32-master", gpus=8, zero=1))
    assert zero_recipe.sent_bytes == round(7 / 8 * (14e9 + 14e9))  # 16-bit both
    # LoRA trains and gathers after the step only its adapters, but stage 3 gathers the base.
    lora = comm.budget_comm(estimate(7e9, preset="lora", gpus=8, zero=2))
    assert lora.sent_bytes < 0.01 * amp.sent_bytes
    assert comm.budget_comm(estimate(7e9, preset="infer-fp16")) is None


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"gpus": 0, "zero": 0}, "gpus=0"),
        ({"gpus": 8, "zero": 5}, "zero=5"),
        ({"gpus": 8, "zero": 0, "gradient_bytes": float("nan")}, "gradient_bytes=nan"),
        ({"gpus": 8, "zero": 0, "parameter_bytes": -1}, "parameter_bytes=-1"),
        ({"gpus": 8, "zero": 2, "accumulation_steps": 0}, "accumulation_steps=0"),
    ],
)
def test_bad_values_are_refused_with_the_value(kwargs, fragment):
    args = {"gradient_bytes": 1.0, "parameter_bytes": 1.0, **kwargs}
    with pytest.raises(ValueError, match=fragment.replace("(", r"\(")):
        comm.step_comm(**args)


def test_transfer_time_is_bytes_over_one_direction_of_the_link():
    h100 = datasheets.get("h100-sxm").interconnect
    assert h100.nvlink_stated_gb_per_s == 900 and h100.pcie_stated_gb_per_s == 128
    assert comm.transfer_s(450e9, h100.nvlink_one_way_bytes_per_s) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="bus_bytes_per_s=-1"):
        comm.transfer_s(1, -1)


def test_the_cli_reports_comm_bytes_per_step_for_zero_3(run_cli):
    r = run_cli("budget", "--params", "7e9", "--gpus", "8", "--zero", "3", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["comm_bytes_per_step"] == 73_500_000_000  # 3 x 7/8 x 28 GB (fp32, amp)
    assert data["comm_data_parallel_bytes"] == 49_000_000_000
    assert data["comm_formula"] == "A x (N-1)/N x (2P + G)"
    assert sum(c["sent_bytes"] for c in data["comm_collectives"]) == data["comm_bytes_per_step"]


def test_the_cli_text_has_the_communication_line_only_with_several_gpus(run_cli):
    many = run_cli("budget", "--params", "7e9", "--gpus", "8")
    one = run_cli("budget", "--params", "7e9")
    assert many.returncode == one.returncode == 0, many.stderr + one.stderr
    assert "each GPU sends 49.00 GB (data parallel over 8 GPUs: 2(N-1)/N x G" in many.stdout
    assert "all-reduce of the gradients (backward) x1" in many.stdout
    assert "communication" not in one.stdout
    single = json.loads(run_cli("budget", "--params", "7e9", "--json").stdout)
    assert single["comm_bytes_per_step"] == 0 and single["comm_collectives"] == []


def test_inference_reports_no_step_communication(run_cli):
    r = run_cli("budget", "--params", "7e9", "--preset", "infer-fp16", "--gpus", "2", "--json")
    assert r.returncode == 0, r.stderr
    assert "comm_bytes_per_step" not in json.loads(r.stdout)


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--gpus", "0", "--zero", "3"], "--gpus '0' must be a positive whole number"),
        (["--gpus", "eight", "--zero", "3"], "--gpus 'eight' is not a whole number"),
        (["--zero", "3"], "ZeRO stage 3 shards across GPUs: give gpus of 2 or more"),
    ],
)
def test_bad_gpu_counts_exit_2_with_one_line(run_cli, args, fragment):
    r = run_cli("budget", "--params", "7e9", *args, "--json")
    assert r.returncode == 2
    assert fragment in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_a_pcie_cards_nvlink_bridge_joins_pairs_so_a_larger_ring_has_no_nvlink_row():
    from gpulesson.memory.comm import link_times

    pair = [t.link for t in link_times(1e9, ("h100-pcie", "a100-80gb-pcie"), gpus=2)]
    assert pair == ["NVLink", "PCIe Gen5 x16", "NVLink", "PCIe Gen4 x16"]
    eight = [t.link for t in link_times(1e9, ("h100-pcie", "a100-80gb-pcie", "h100-sxm"), gpus=8)]
    assert eight == ["PCIe Gen5 x16", "PCIe Gen4 x16", "NVLink", "PCIe Gen5 x16"]
    with pytest.raises(ValueError, match="gpus=0"):
        link_times(1e9, ("h100-sxm",), gpus=0)
