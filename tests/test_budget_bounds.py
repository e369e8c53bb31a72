"""The budget's bounds: every count, the MFU, the price and the LoRA rank have a range.

The API (``gpulesson.memory.budget.estimate``, ``compute.plan_training``,
``memory.cost.run_cost_usd``) raises ``ValueError`` naming the value, the limit and why;
``gpulesson budget`` prints that as one line and exits 2; nothing it prints, at the
largest values it accepts, is ``inf`` or ``nan``. The speed of the refusal is measured
by ``tests/benchmarks/bench_budget_bounds.py``; here a subprocess only has to finish.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys

import pytest

from gpulesson.memory import budget, compute, cost, shape
from gpulesson.memory.budget import TransformerShape
from tests.conftest import REPO

CONFIG = ["--vocab", "50257", "--seq", "1024", "--hidden", "768", "--heads", "12"]
MAX = str(shape.MAX_COUNT)
INF_OR_NAN = re.compile(r"\b(inf|infinity|nan)\b", re.IGNORECASE)


def one_line_refusal(result) -> str:
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


# --- layers and the other counts -----------------------------------------------------------


def test_the_layer_limit_is_stated_with_its_reason():
    limit = shape.count_limit("layers")
    assert limit.maximum == shape.MAX_LAYERS < shape.MAX_COUNT
    assert "arXiv:2203.00555" in limit.why  # the published depth the bound is set against
    assert all(shape.count_limit(n).maximum == shape.MAX_COUNT for n in ("vocab", "seq", "batch"))


def test_the_api_refuses_too_many_layers_naming_value_maximum_and_why():
    with pytest.raises(ValueError) as error:
        TransformerShape(50257, 1024, 768, 12, 3_000_000)
    message = str(error.value)
    assert message.startswith("layers=3000000 is too large: at most 10,000, because")
    assert "block at a time" in message
    # the largest accepted depth is priced
    deepest = budget.estimate(shape=TransformerShape(512, 64, 64, 4, shape.MAX_LAYERS))
    assert deepest.activations_bytes > 0


@pytest.mark.parametrize("name", ["vocab", "seq", "hidden", "heads", "batch"])
def test_the_api_refuses_each_count_past_2_to_the_53(name):
    dims = {"vocab": 512, "seq": 64, "hidden": 64, "heads": 4, "layers": 2, "batch": 1}
    with pytest.raises(ValueError, match=rf"^{name}=9007199254740993 is too large: at most 2\^53"):
        TransformerShape(**{**dims, name: shape.MAX_COUNT + 1})


def test_layers_3000000_is_refused_with_exit_2_naming_flag_value_maximum_and_why(run_cli):
    line = one_line_refusal(run_cli("budget", *CONFIG, "--layers", "3000000"))
    assert line.startswith("gpulesson budget: error: --layers 3000000 is too large: at most 10,000")
    assert "because the estimate walks the backward pass one block at a time" in line


@pytest.mark.parametrize(
    ("flag", "value", "fragment"),
    [
        ("--layers", "10001", "--layers 10001 is too large: at most 10,000"),
        ("--layers", "1e300", "--layers '1e300' is not a whole number"),
        ("--layers", "9" * 5000, "--layers 999999999999...(5000 digits) is too large"),
        ("--hidden", str(2**53 + 1), "--hidden 9007199254740993 is too large: at most 2^53"),
        ("--heads", str(2**53 + 1), "--heads 9007199254740993 is too large: at most 2^53"),
        ("--vocab", str(2**53 + 1), "--vocab 9007199254740993 is too large: at most 2^53"),
        ("--seq", str(2**53 + 1), "--seq 9007199254740993 is too large: at most 2^53"),
        ("--batch", str(2**53 + 1), "--batch 9007199254740993 is too large: at most 2^53"),
        ("--gpus", str(2**53 + 1), "--gpus 9007199254740993 is too large: at most 2^53"),
        ("--accumulation", str(2**53 + 1), "--accumulation 9007199254740993 is too large"),
    ],
)
def test_each_count_flag_past_its_maximum_is_one_line_and_exit_2(run_cli, flag, value, fragment):
    args = dict(zip(CONFIG[::2], CONFIG[1::2], strict=True)) | {"--layers": "12", flag: value}
    line = one_line_refusal(run_cli("budget", *(x for kv in args.items() for x in kv)))
    assert fragment in line
    if "too large" in fragment:
        assert "because" in line  # the reason comes with the maximum


def test_the_help_states_each_shape_maximum(run_cli):
    text = " ".join(run_cli("budget", "--help").stdout.split())
    assert "layers (at most 10,000)" in text
    assert "hidden (at most 2^53 (9.0e+15))" in text


def test_a_huge_layer_count_finishes_in_a_fresh_process():
    """The issue's command: it ran 30 s and 2.5 GB; now it must finish (timed in the bench)."""
    result = subprocess.run(
        [sys.executable, "-m", "gpulesson", "budget", *CONFIG, "--layers", "3000000"],
        capture_output=True,
        text=True,
        timeout=10,
        cwd=REPO,
    )
    assert result.returncode == 2
    assert "--layers 3000000 is too large" in result.stderr


# --- at the largest values accepted, nothing is inf or NaN -----------------------------------


LARGEST = [
    *("--params", MAX, "--vocab", MAX, "--seq", MAX, "--hidden", MAX, "--heads", MAX),
    *("--layers", str(shape.MAX_LAYERS), "--batch", MAX, "--accumulation", MAX),
]
PRICED = [*("--tokens", MAX, "--gpu", "t4", "--gpus", MAX, "--mfu", str(compute.MIN_MFU))]
PRICED += ["--price-per-gpu-hour", str(compute.MAX_PRICE_USD_PER_GPU_HOUR), "--card", "80GB"]


def _numbers(data):
    if isinstance(data, dict):
        for value in data.values():
            yield from _numbers(value)
    elif isinstance(data, list):
        for value in data:
            yield from _numbers(value)
    elif isinstance(data, int | float) and not isinstance(data, bool):
        yield data


@pytest.mark.parametrize(
    "extra",
    [[*PRICED], ["--attention", "eager", "--checkpointing", "full", *PRICED], ["--zero", "3"]],
    ids=["amp", "eager-checkpointed", "zero3"],
)
def test_the_largest_accepted_values_print_no_inf_or_nan(run_cli, extra):
    args = [*LARGEST, *extra]
    if "--zero" in extra:
        args += ["--gpus", "2"]
    text = run_cli("budget", *args)
    assert text.returncode == 0, text.stderr
    assert not INF_OR_NAN.search(text.stdout), text.stdout
    if "--tokens" in extra:
        assert "cost: $" in text.stdout
    result = run_cli("budget", *args, "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)  # json.dumps writes Infinity or NaN for a bad float
    assert all(math.isfinite(x) for x in _numbers(data))
    assert data["total_bytes"] > 0


# --- MFU and price ---------------------------------------------------------------------------


@pytest.mark.parametrize("mfu", ["1e-300", "5e-5", "1e-320"])
def test_an_mfu_below_the_least_priced_is_refused_not_inf_hours(run_cli, mfu):
    args = ["--params", "7e9", "--tokens", "1.4e11", "--gpu", "a100-80gb", "--mfu", mfu]
    line = one_line_refusal(run_cli("budget", *args))
    assert f"--mfu {mfu} is below 0.0001, the least MFU priced" in line


def test_the_least_mfu_and_largest_price_are_priced_finitely(run_cli):
    args = ["--params", "7e9", "--tokens", "1.4e11", "--gpu", "a100-80gb", "--json"]
    args += ["--mfu", str(compute.MIN_MFU), "--price-per-gpu-hour", "1000"]
    result = run_cli("budget", *args)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert all(math.isfinite(x) for x in _numbers(data))
    assert data["price_usd_per_gpu_hour"] == 1000


@pytest.mark.parametrize("price", ["1e308", "1000.01", "1e400"])
def test_a_price_past_the_bound_is_refused_not_inf_dollars(run_cli, price):
    args = ["--params", "7e9", "--tokens", "1.4e11", "--gpu", "a100-80gb", "--mfu", "0.4"]
    line = one_line_refusal(run_cli("budget", *args, "--price-per-gpu-hour", price))
    assert "--price-per-gpu-hour" in line and "$inf" not in line
    if price != "1e400":  # 1e400 is not a finite number: the finite-price refusal
        assert "more than 1,000 US dollars per GPU-hour" in line


def test_the_api_refuses_the_same_mfu_and_price():
    flops = compute.training_flops(7e9, 1.4e11)
    with pytest.raises(ValueError, match=r"mfu=1e-300 is below 0\.0001, the least MFU priced"):
        compute.plan_training(flops, gpu="a100-80gb", gpus=8, mfu=1e-300)
    with pytest.raises(ValueError, match=r"price_usd_per_gpu_hour=1e\+308 is more than 1,000"):
        compute.plan_training(flops, gpu="a100-80gb", gpus=8, mfu=0.4, price_usd_per_gpu_hour=1e308)
    plan = compute.plan_training(flops, gpu="a100-80gb", gpus=8, mfu=compute.MIN_MFU)
    assert math.isfinite(plan.hours) and plan.hours > 1e6


def test_the_api_refuses_a_gpu_count_or_attention_shape_past_the_limits():
    flops = compute.training_flops(7e9, 1.4e11)
    with pytest.raises(ValueError, match=r"^gpus=100000000000\.\.\.\(401 digits\) is too large"):
        compute.plan_training(flops, gpu="a100-80gb", gpus=10**400, mfu=0.4)  # was OverflowError
    deep = compute.AttentionShape(layers=shape.MAX_LAYERS + 1, seq=1024, hidden=768)
    with pytest.raises(ValueError, match=r"^layers=10001 is too large: at most 10,000"):
        compute.attention_flops(deep, tokens=1.4e11)


# --- LoRA rank -------------------------------------------------------------------------------


def test_a_lora_rank_above_hidden_is_refused_naming_both(run_cli):
    args = [*CONFIG, "--layers", "12", "--preset", "lora", "--lora-rank", "769"]
    line = one_line_refusal(run_cli("budget", *args))
    assert "--lora-rank 769 is larger than --hidden 768" in line
    assert "smallest dimension of the adapted matrices" in line
    with pytest.raises(ValueError, match=r"lora_rank=769 is larger than hidden=768"):
        budget.estimate(
            shape=TransformerShape(50257, 1024, 768, 12, 12), preset="lora", lora_rank=769
        )


def test_a_lora_rank_at_hidden_that_outgrows_the_model_is_refused(run_cli):
    """rank 768 on every matrix of GPT-2 small: 18 x 768^2 x 12 adapters > 124M parameters."""
    args = [*CONFIG, "--layers", "12", "--preset", "lora", "--lora-rank", "768"]
    line = one_line_refusal(run_cli("budget", *args, "--lora-targets", "all"))
    assert "trains 127,401,984 adapter parameters, more than the model's 124,439,808" in line
    ok = run_cli("budget", *args, "--json")  # the attention projections alone still fit
    assert ok.returncode == 0, ok.stderr
    data = json.loads(ok.stdout)
    assert data["trainable_parameters"] == 12 * 4 * 768 * 2 * 768 < data["parameters"]


def test_a_small_rank_trains_fewer_parameters_than_the_model():
    b = budget.estimate(
        shape=TransformerShape(50257, 1024, 768, 12, 12), preset="lora", lora_rank=8
    )
    assert 0 < b.trainable_parameters < b.parameters


# --- the cost calculator's inputs ------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((1e308, 3, 10), r"rate_usd_per_h=1e\+308 is too large: at most 1,000"),
        ((1.0, 1e308, 10), r"hours_per_run=1e\+308 is too large: at most 10,000"),
        ((1.0, 3, 10**6), r"runs=1000000 is too large: at most 10,000"),
        ((math.nan, 3, 10), r"rate_usd_per_h=nan is not a finite number"),
        ((1.0, 0, 10), r"hours_per_run=0 must be above 0"),
        ((1.0, 3, 2.5), r"runs=2.5 must be a whole number"),
        ((-1.0, 3, 10), r"rate_usd_per_h=-1.0 must be at least 0"),
    ],
)
def test_run_cost_refuses_what_the_cost_lab_refuses(args, message):
    with pytest.raises(ValueError, match=message):
        cost.run_cost_usd(*args)


def test_the_largest_cost_accepted_is_finite():
    top = cost.COST_LIMITS
    usd = cost.run_cost_usd(top["rate"].maximum, top["hours"].maximum, int(top["runs"].maximum))
    assert usd == 1e11 and math.isfinite(usd)
