"""snippets/napkin_budget.py prints the sources' four-ledger bill."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SNIPPET = Path(__file__).resolve().parent.parent / "snippets" / "napkin_budget.py"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SNIPPET), *args], capture_output=True, text=True, timeout=60
    )


def test_napkin_budget_prints_the_four_ledgers():
    result = run("--params", "7e9", "--recipe", "fp16-fp32-grads")
    assert result.returncode == 0, result.stderr
    for line in ("weights", "gradients", "optimizer state", "fp32 master weights"):
        assert line in result.stdout
    assert "98.00 GB" in result.stdout


def test_napkin_budget_agrees_with_the_package():
    from gpulesson.memory.budget import estimate

    for recipe in ("amp", "bf16", "mixed-fp32-master", "sgd", "qlora"):
        result = run("--params", "7e9", "--recipe", recipe)
        expected = estimate(7e9, preset=recipe).total_bytes / 1e9
        assert f"{expected:.2f} GB" in result.stdout, (recipe, result.stdout)


def test_napkin_budget_defaults_to_amp_like_the_package():
    result = run("--params", "7e9")
    assert result.returncode == 0, result.stderr
    assert "recipe amp" in result.stdout and "112.00 GB" in result.stdout


def test_napkin_budget_rejects_bad_sizes():
    for bad in ("-1", "0", "nan"):
        assert run("--params", bad).returncode == 2
    assert run("--params", "7e9", "--recipe", "qlora", "--trainable", "2").returncode == 2
