"""snippets/decode_speed.py times decoding by batch and prints the bandwidth bound beside it."""

from __future__ import annotations

import re

import pytest

from gpulesson.memory.gpt2 import GPT2Config
from gpulesson.timing.decode import build_model, decode_weight_bytes

SMALL = ("--layers", "2", "--hidden", "64", "--heads", "4", "--vocab", "500", "--prompt", "4")
ROW = re.compile(r"^\s*(\d+)\s+([\d,.]+)\s+([\d,.]+)\s+([\d,.]+)\s+([\d,.]+)\s+(\d+)%$")


def _rows(stdout: str) -> list[tuple[float, ...]]:
    found = [ROW.match(line) for line in stdout.splitlines()]
    return [tuple(float(x.replace(",", "")) for x in m.groups()) for m in found if m]


def test_decode_speed_prints_tokens_per_s_and_the_bound_for_the_given_bandwidth(run_snippet):
    wider = ("--layers", "2", "--hidden", "128", "--heads", "4", "--vocab", "4000")
    result = run_snippet(
        "decode_speed.py", *wider, "--tokens", "3", "--batches", "1,4", "--bandwidth-gbs", "100"
    )
    assert result.returncode == 0, result.stderr
    assert "bandwidth 100.0 GB/s (given)" in result.stdout
    rows = _rows(result.stdout)
    assert [r[0] for r in rows] == [1, 4]
    for batch, measured, per_seq, mb_per_step, bound, _share in rows:
        assert measured == pytest.approx(batch * per_seq, rel=0.01)
        assert bound == pytest.approx(batch * 100e9 / (mb_per_step * 1e6), rel=0.005)
    assert rows[1][3] > rows[0][3]  # four sequences read more KV cache than one


def test_decode_speed_counts_the_weights_as_the_package_does(run_snippet):
    result = run_snippet("decode_speed.py", *SMALL, "--tokens", "2", "--batches", "1")
    assert result.returncode == 0, result.stderr
    assert "(measured copy)" in result.stdout
    # The snippet's model is the course's GPT with a position table of prompt + 2 + tokens.
    config = GPT2Config(vocab_size=500, seq_len=4 + 2 + 2, hidden=64, heads=4, layers=2)
    expected = decode_weight_bytes(build_model(config, "cpu", "fp32")) / 1e6
    assert f"{expected:,.1f} MB of weights" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--batches", "1,x"), "--batches '1,x' must be positive whole numbers"),
        (("--batches", "0"), "--batches '0' must be positive whole numbers"),
        (("--hidden", "100", "--heads", "3"), "--hidden 100 is not divisible by --heads 3"),
        (("--tokens", "0"), "must be >= 1"),
        (("--bandwidth-gbs", "-5"), "--bandwidth-gbs -5.0 must be positive"),
    ],
)
def test_decode_speed_refuses_bad_input_in_one_line(run_snippet, args, message):
    result = run_snippet("decode_speed.py", *args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1 and message in result.stderr
