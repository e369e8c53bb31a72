"""``gpulesson budget`` as a user runs it: totals, JSON, verdicts, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpulesson", "budget", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("preset", "total"), [("bf16", 84e9), ("fp16-fp32-grads", 98e9), ("mixed-fp32-master", 112e9)]
)
def test_params_and_preset_give_the_sources_arithmetic(preset, total):
    result = run_cli("--params", "7e9", "--preset", preset, "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["total_bytes"] == total
    assert data["weights_bytes"] == 14e9
    assert data["activations_bytes"] == 0


def test_config_json_has_activations_and_card_verdicts():
    result = run_cli(
        "--vocab",
        "50257",
        "--seq",
        "1024",
        "--hidden",
        "768",
        "--heads",
        "12",
        "--layers",
        "12",
        "--batch",
        "8",
        "--attention",
        "eager",
        "--checkpointing",
        "none",
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


def test_text_output_has_ledger_and_verdict():
    result = run_cli("--params", "7B", "--preset", "qlora", "--card", "24GiB")
    assert result.returncode == 0, result.stderr
    assert "peak (optimizer step)" in result.stdout
    assert "card 24GiB: fits" in result.stdout
    assert "headroom rule" in result.stdout


def test_sharding_flags():
    result = run_cli(
        "--params", "13e9", "--preset", "mixed-fp32-master", "--gpus", "8", "--zero", "2", "--json"
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["total_bytes"] == 48.75e9


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--params", "0"], "--params '0'"),
        (["--params=-7e9"], "-7e9"),
        (["--params", "nan"], "nan"),
        (["--params", "seven"], "seven"),
        (["--params", "7e9", "--preset", "huge"], "unknown preset 'huge'"),
        (["--params", "7e9", "--preset", "lora", "--trainable-fraction", "2"], "at most 1"),
        (["--vocab", "100"], "--seq"),
        (["--params", "7e9", "--card", "0GB"], "0GB"),
        (["--params", "7e9", "--gpus", "0"], "--gpus"),
        ([], "--params"),
    ],
)
def test_bad_input_exits_2_with_one_line(args, fragment):
    result = run_cli(*args)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0]
