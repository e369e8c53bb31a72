"""`gpulesson budget --tokens --gpu --gpus --mfu --price-per-gpu-hour`: FLOPs, hours, cost."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gpulesson.results import datasheets
from tests.conftest import REPO

RUN = ("--params", "7e9", "--tokens", "1.4e11")


def budget_json(run_cli, *args: str) -> dict:
    result = run_cli("budget", *args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_the_issue_s_check_train_flops_is_6_params_tokens(run_cli):
    data = budget_json(run_cli, *RUN)
    assert data["train_flops"] == 6 * 7e9 * 1.4e11 == 5.88e21
    assert data["tokens"] == 1.4e11 and data["forward_flops"] == 2 * 7e9 * 1.4e11
    assert "hours" not in data and "cost_usd" not in data
    assert data["total_bytes"] == 112e9  # the memory side is unchanged


def test_gpu_gpus_and_mfu_add_hours_and_the_labelled_example_cost(run_cli):
    data = budget_json(run_cli, *RUN, "--gpu", "a100-80gb", "--gpus", "8", "--mfu", "0.4")
    peak = datasheets.get("a100-80gb").dense_flop_per_s("fp16")  # amp computes in fp16
    assert data["peak_dtype"] == "fp16" and data["peak_flop_per_s"] == peak
    assert data["hours"] == pytest.approx(5.88e21 / (8 * peak * 0.4) / 3600)
    assert data["gpu_hours"] == pytest.approx(8 * data["hours"])
    rate = datasheets.example_rates().for_gpu("a100-80gb").on_demand_usd_per_h
    assert data["price_usd_per_gpu_hour"] == rate
    assert data["cost_usd"] == pytest.approx(data["gpu_hours"] * rate)
    assert "example" in data["price_source"] and "not a quote" in data["price_source"]


def test_the_issue_s_example_with_a_given_price(run_cli):
    args = ("--tokens", "1e12", "--gpu", "h100-sxm", "--gpus", "8", "--mfu", "0.4")
    data = budget_json(run_cli, "--params", "7e9", *args, "--price-per-gpu-hour", "2.5")
    assert data["train_flops"] == 6 * 7e9 * 1e12
    assert data["cost_usd"] == pytest.approx(data["gpu_hours"] * 2.5)
    assert data["price_source"] == "given"
    text = run_cli("budget", "--params", "7e9", *args, "--price-per-gpu-hour", "2.5")
    assert text.returncode == 0
    assert f"cost: ${data['cost_usd']:,.0f} at $2.50 per GPU-hour" in text.stdout
    assert f"{data['hours']:,.1f} hours" in text.stdout
    assert "model FLOPs" in text.stdout and "4.2e+22" in text.stdout


def test_a_gpu_without_an_example_rate_gets_hours_and_no_invented_cost(run_cli):
    data = budget_json(run_cli, *RUN, "--gpu", "h100-sxm", "--mfu", "0.4")
    assert data["hours"] > 0 and data["cost_usd"] is None and data["price_source"] is None
    text = run_cli("budget", *RUN, "--gpu", "h100-sxm", "--mfu", "0.4").stdout
    assert "no example rate for h100-sxm: give --price-per-gpu-hour" in text


def test_checkpointing_adds_hardware_flops_but_not_model_flops(run_cli):
    plain = budget_json(run_cli, *RUN, "--gpu", "l4", "--mfu", "0.4")
    ckpt = budget_json(run_cli, *RUN, "--gpu", "l4", "--mfu", "0.4", "--checkpointing", "full")
    assert ckpt["train_flops"] == plain["train_flops"] and ckpt["hours"] == plain["hours"]
    assert ckpt["hardware_flops"] == pytest.approx(8 / 6 * plain["train_flops"])


def test_a_config_adds_attention_and_lora_drops_the_frozen_weight_gradients(run_cli):
    config = ("--vocab", "32000", "--seq", "4096", "--hidden", "4096", "--heads", "32")
    data = budget_json(run_cli, *RUN, *config, "--layers", "32")
    assert data["attention_flops"] == 12 * 32 * 4096 * 4096 * 1.4e11
    assert data["train_flops"] == pytest.approx(5.88e21 + data["attention_flops"])
    lora = budget_json(run_cli, *RUN, "--preset", "lora", "--trainable-fraction", "0.001")
    assert lora["train_flops"] == pytest.approx((4 + 2 * 0.001) * 7e9 * 1.4e11)


def test_the_fp32_recipe_is_priced_at_the_fp32_peak(run_cli):
    data = budget_json(run_cli, *RUN, "--preset", "fp32", "--gpu", "a100-80gb", "--mfu", "0.4")
    assert data["peak_dtype"] == "fp32" and data["peak_flop_per_s"] == 19.5e12


def test_the_library_cli_prices_without_the_docs_folder(run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no docs/ here: the rates are package data
    data = budget_json(run_cli, *RUN, "--gpu", "t4", "--mfu", "0.4")
    assert data["price_usd_per_gpu_hour"] == 0.30


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("--tokens", "-1"), "--tokens '-1' is not a positive count of tokens"),
        (("--tokens", "nan"), "--tokens 'nan' is not a positive count of tokens"),
        (("--tokens", "1e999"), "--tokens '1e999' is not a positive count of tokens"),
        (("--tokens", "1e17"), "--tokens '1e17' is too large"),
        (("--tokens", "0.2"), "less than one token"),
        (("--tokens", "1e11", "--gpu", "h300", "--mfu", "0.4"), "--gpu: unknown GPU id 'h300'"),
        (("--tokens", "1e11", "--gpu", "a100-80gb"), "--gpu needs --mfu"),
        (("--tokens", "1e11", "--mfu", "0.4"), "--mfu needs --gpu"),
        (("--tokens", "1e11", "--price-per-gpu-hour", "2"), "--price-per-gpu-hour needs --gpu"),
        (("--gpu", "a100-80gb", "--mfu", "0.4"), "--gpu prices training time: give --tokens"),
        (("--mfu", "0.4"), "--mfu prices training time: give --tokens"),
        (("--tokens", "1e11", "--gpu", "l4", "--mfu", "1.5"), "--mfu 1.5 must be a share above 0"),
        (("--tokens", "1e11", "--gpu", "l4", "--mfu", "0"), "--mfu 0 must be a share above 0"),
        (("--tokens", "1e11", "--gpu", "l4", "--mfu", "x"), "--mfu x must be a share above 0"),
        (("--tokens", "1e11", "--gpu", "l4", "--mfu", "40"), "for 40% write 0.4"),
        (
            ("--tokens", "1e11", "--gpu", "l4", "--mfu", "0.4", "--price-per-gpu-hour", "-2"),
            "--price-per-gpu-hour '-2' must be a price of at least 0",
        ),
        (
            ("--tokens", "1e11", "--gpu", "l4", "--mfu", "0.4", "--price-per-gpu-hour", "inf"),
            "--price-per-gpu-hour 'inf' must be a price",
        ),
        (("--tokens", "1e11", "--gpu", "apple-m4", "--mfu", "0.4"), "--gpu: Apple M4 (apple-m4)"),
        (("--tokens", "1e11", "--preset", "infer-fp16"), "preset infer-fp16 does not train"),
        (("--tokens", "1e11", "--gpu", "l4", "--mfu", "0.4", "--gpus", "0"), "--gpus '0'"),
    ],
)
def test_bad_compute_input_exits_2_with_one_line(run_cli, args, fragment):
    result = run_cli("budget", "--params", "7e9", *args)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], result.stderr


def test_the_compute_flags_never_import_torch():
    code = (
        "import sys\n"
        "from gpulesson.cli import main\n"
        "rc = main(['budget', '--params', '7e9', '--tokens', '1.4e11', '--gpu', 'a100-80gb',"
        " '--mfu', '0.4', '--json'])\n"
        "print('TORCH', 'torch' in sys.modules, file=sys.stderr)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert run.returncode == 0, run.stderr
    assert "TORCH False" in run.stderr
    assert json.loads(run.stdout)["cost_usd"] > 0
