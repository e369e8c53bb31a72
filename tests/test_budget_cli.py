"""``gpulesson budget`` as a user runs it: totals, JSON, verdicts, notes, exit codes.

In-process through the shared ``run_cli`` fixture; one subprocess smoke test
runs the console entry point for real.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO

GPT2_CONFIG = ["--vocab", "50257", "--seq", "1024", "--hidden", "768", "--heads", "12"]
GPT2_CONFIG += ["--layers", "12"]
BIG = "1" + "0" * 400  # 10**400


def budget(run_cli, *args: str):
    return run_cli("budget", *args)


@pytest.mark.parametrize(
    ("preset", "total"),
    [("bf16", 84e9), ("fp16-fp32-grads", 98e9), ("mixed-fp32-master", 112e9), ("amp", 112e9)],
)
def test_params_and_preset_give_the_per_parameter_arithmetic(run_cli, preset, total):
    result = budget(run_cli, "--params", "7e9", "--preset", preset, "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["total_bytes"] == total
    assert data["activations_bytes"] == 0


def test_amp_is_the_default_preset_and_gives_112_gb(run_cli):
    result = budget(run_cli, "--params", "7e9", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["preset"] == "amp"
    assert (data["weights_bytes"], data["gradients_bytes"], data["optimizer_bytes"]) == (
        28e9,
        28e9,
        56e9,
    )
    assert data["total_bytes"] == 112e9
    assert "default amp" in budget(run_cli, "--help").stdout


def test_config_json_has_activations_and_card_verdicts(run_cli):
    result = budget(
        run_cli,
        *GPT2_CONFIG,
        "--batch",
        "8",
        "--attention",
        "eager",
        "--card",
        "8GiB",
        "80GB",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["activations_bytes"] > 0 and data["optimizer_bytes"] > 0
    assert [c["fits"] for c in data["cards"]] == [False, True]
    assert data["cards"][0]["card_bytes"] == 8 * 2**30


def test_text_output_has_ledger_verdict_and_notes(run_cli):
    result = budget(run_cli, "--params", "7B", "--preset", "qlora", "--card", "24GiB")
    assert result.returncode == 0, result.stderr
    assert "peak (optimizer step)" in result.stdout
    assert "card 24GiB: fits" in result.stdout
    assert "headroom rule" in result.stdout
    assert "note: adapters: 0.10% of the parameters are trainable" in result.stdout


def test_sharding_flags(run_cli):
    result = budget(
        run_cli,
        *("--params", "13e9", "--preset", "mixed-fp32-master", "--gpus", "8", "--zero", "2"),
        "--json",
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["total_bytes"] == 48.75e9


def test_kv_heads_gives_the_gqa_cache(run_cli):
    config = ["--vocab", "128256", "--seq", "8192", "--hidden", "4096", "--heads", "32"]
    config += ["--layers", "32", "--batch", "1", "--preset", "infer-fp16", "--json"]
    gqa = budget(run_cli, *config, "--kv-heads", "8")
    mha = budget(run_cli, *config)
    assert gqa.returncode == mha.returncode == 0, gqa.stderr + mha.stderr
    assert json.loads(gqa.stdout)["kv_cache_bytes"] == 2**30
    assert json.loads(mha.stdout)["kv_cache_bytes"] == 4 * 2**30


def test_chunked_loss_prices_less_than_the_standard_one(run_cli):
    args = [*GPT2_CONFIG, "--batch", "16", "--preset", "fp32", "--json"]
    standard = json.loads(budget(run_cli, *args).stdout)
    chunked = json.loads(budget(run_cli, *args, "--loss", "chunked", "--loss-chunks", "8").stdout)
    assert chunked["loss"] == "chunked" and chunked["loss_chunks"] == 8
    assert chunked["total_bytes"] < standard["total_bytes"]


def test_params_with_a_different_config_is_said_in_text_and_json(run_cli):
    args = ["--params", "7e9", *GPT2_CONFIG]
    text = budget(run_cli, *args)
    data = json.loads(budget(run_cli, *args, "--json").stdout)
    assert text.returncode == 0, text.stderr
    assert data["weights_bytes"] == 28e9  # --params prices the weights
    note = "the model shape, which has 124,439,808 parameters, prices the activations"
    assert note in text.stdout
    assert any(note in n for n in data["notes"])


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--params", "0"], "--params '0'"),
        (["--params=-7e9"], "-7e9"),
        (["--params", "nan"], "nan"),
        (["--params", "seven"], "seven"),
        (["--params", "1e-300"], "--params '1e-300' is less than one parameter"),
        (["--params", "7e9", "--preset", "huge"], "unknown preset 'huge'"),
        (["--params", "7e9", "--preset", "lora", "--trainable-fraction", "2"], "at most 1"),
        (["--vocab", "100"], "--seq"),
        (["--params", "7e9", "--card", "0GB"], "0GB"),
        (["--params", "7e9", "--card", "1e300GiB"], "--card '1e300GiB': size '1e300GiB' is too"),
        (["--params", "7e9", "--card", "1e-30GiB"], "--card '1e-30GiB'"),
        (["--params", "7e9", "--gpus", "0"], "--gpus"),
        (["--params", "7e9", "--gpus", BIG], "--gpus 100000000000...(401 digits) is too large"),
        (["--params", "7e9", "--vocab", BIG], "--vocab 100000000000...(401 digits) is too large"),
        ([*GPT2_CONFIG[:2], "--seq", BIG], "--seq 100000000000...(401 digits) is too large"),
        ([*GPT2_CONFIG, "--batch", BIG], "--batch 100000000000...(401 digits) is too large"),
        ([*GPT2_CONFIG, "--preset", "lora", "--lora-rank", BIG], "--lora-rank 100000000000..."),
        ([*GPT2_CONFIG, "--kv-heads", "5"], "kv_heads=5 does not divide heads=12"),
        (["--params", "7e9", "--kv-heads", "8"], "--kv-heads needs a transformer config"),
        (["--params", "7e9", "--loss-chunks", "4"], "--loss-chunks needs --loss chunked"),
        (
            ["--params", "7e9", "--preset", "qlora", "--trainable-fraction", "nan"],
            "--trainable-fraction 'nan' must be a share above 0 and at most 1, e.g. 0.001",
        ),
        ([], "--params"),
        ([*GPT2_CONFIG[:-1], "3000000"], "--layers 3000000 is too large: at most 10,000, because"),
        ([*GPT2_CONFIG[:-1], "1e300"], "--layers '1e300' is not a whole number"),
        (
            [*GPT2_CONFIG, "--preset", "qlora", "--lora-rank", "1024"],
            "--lora-rank 1024 is larger than --hidden 768, the smallest dimension",
        ),
        (
            ["--params", "7e9", "--tokens", "1e11", "--gpu", "a100-80gb", "--mfu", "1e-300"],
            "--mfu 1e-300 is below 0.0001, the least MFU priced",
        ),
        (
            ["--params", "7e9", "--tokens", "1e11", "--gpu", "a100-80gb", "--mfu", "0.4"]
            + ["--price-per-gpu-hour", "1e308"],
            "--price-per-gpu-hour 1e308 is more than 1,000 US dollars per GPU-hour",
        ),
    ],
)
def test_bad_input_exits_2_with_one_line(run_cli, args, fragment):
    result = budget(run_cli, *args)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], result.stderr
    assert "e.g. 7e9" not in lines[0] or "--params" in lines[0]


def test_card_errors_name_the_option_not_the_api_argument(run_cli):
    result = budget(run_cli, "--params", "7e9", "--card", "1e-30GiB")
    assert "card_bytes" not in result.stderr and "--card" in result.stderr


def test_the_console_script_runs_and_a_bad_argument_never_imports_torch():
    code = (
        "import sys\n"
        "from gpulesson.cli import main\n"
        "rc = main(['budget', '--params', 'nan'])\n"
        "print(rc, 'torch' in sys.modules)\n"
    )
    bad = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert bad.stdout.split() == ["2", "False"], bad.stdout + bad.stderr
    assert bad.stderr.count("\n") == 1 and "--params 'nan'" in bad.stderr
    good = subprocess.run(
        [sys.executable, "-m", "gpulesson", "budget", "--params", "7e9", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert good.returncode == 0, good.stderr
    assert json.loads(good.stdout)["total_bytes"] == 112e9


ISSUE_CONFIG = ["--vocab", "8192", "--seq", "512", "--hidden", "384", "--heads", "6"]
ISSUE_CONFIG += ["--layers", "6", "--batch", "4", "--preset", "fp32", "--optimizer", "adamw"]


def test_impl_transformers_names_each_extra_term_in_text_and_json(run_cli):
    default = json.loads(budget(run_cli, *ISSUE_CONFIG, "--json").stdout)
    result = budget(run_cli, *ISSUE_CONFIG, "--impl", "transformers", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert (default["impl"], data["impl"]) == ("gpulesson", "transformers")
    assert default["impl_terms"] == []
    terms = {t["name"]: t for t in data["impl_terms"]}
    assert {"gelu_tanh", "upcast_loss"} <= set(terms)
    assert all(t["meaning"] for t in terms.values())
    assert terms["gelu_tanh"]["peak_bytes"] > 0
    assert data["total_bytes"] - default["total_bytes"] == sum(
        t["peak_bytes"] for t in terms.values()
    )
    text = budget(run_cli, *ISSUE_CONFIG, "--impl", "transformers").stdout
    assert "of the peak, impl transformers adds:" in text
    assert "gelu_tanh" in text and "upcast_loss" in text
    assert "GPT2LMHeadModel" in text  # the note names the model the terms follow
    assert "gelu_tanh" not in budget(run_cli, *ISSUE_CONFIG).stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--impl", "hf"], "invalid choice: 'hf'"),
        (["--impl", "transformers", "--checkpointing", "full"], "without checkpointing"),
        (["--impl", "transformers", "--loss", "chunked"], "standard loss"),
        (["--impl", "transformers", "--preset", "infer-fp16"], "training step"),
        (["--impl", "transformers", "--kv-heads", "2"], "one key/value head per head"),
    ],
)
def test_impl_bad_input_is_one_line_and_exit_2(run_cli, args, message):
    config = ["--vocab", "512", "--seq", "64", "--hidden", "64", "--heads", "4", "--layers", "2"]
    result = budget(run_cli, *config, *args)
    assert result.returncode == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr
