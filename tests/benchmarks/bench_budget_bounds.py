"""How long ``gpulesson budget`` takes at and past its bounds, start-up included.

The issue: ``gpulesson budget --layers 3000000 ...`` ran past 30 s at 2.5 GB (one
result per layer). Now a count past its maximum is refused before any arithmetic and
the layers are at most ``gpulesson.memory.shape.MAX_LAYERS``. Each case below runs
``python -m gpulesson budget`` in a fresh process (Python start-up and imports
included, as a reader runs it), three times; the script prints the median and the
slowest run, the exit status, and whether the slowest is within the target. The
cases: the issue's 3,000,000 layers (refused), ten times that, 10^400 layers, the
largest depth accepted with the default model and with ``--impl transformers`` (which
evaluates the step six more times, once per feature it names), and the same depth
priced with ``--tokens``. A baseline (``--params 7e9``) shows what start-up alone costs.

Target: at most 2 s per run on the project's 2-core machine. Run from the repository root:

    python -m tests.benchmarks.bench_budget_bounds
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

from gpulesson.memory.shape import MAX_LAYERS

TARGET_S = 2.0
RUNS = 3
CONFIG = ("--vocab", "50257", "--seq", "1024", "--hidden", "768", "--heads", "12")
PRICED = ("--tokens", "1.4e11", "--gpu", "a100-80gb", "--mfu", "0.4")

# name -> the arguments after `gpulesson budget`, and the exit status expected.
CASES: dict[str, tuple[tuple[str, ...], int]] = {
    "baseline: --params 7e9": (("--params", "7e9"), 0),
    "the issue: --layers 3000000": ((*CONFIG, "--layers", "3000000"), 2),
    "--layers 30000000": ((*CONFIG, "--layers", "30000000"), 2),
    "--layers 10^400": ((*CONFIG, "--layers", "1" + "0" * 400), 2),
    f"--layers {MAX_LAYERS} (the largest)": ((*CONFIG, "--layers", str(MAX_LAYERS)), 0),
    f"--layers {MAX_LAYERS} --impl transformers": (
        (*CONFIG, "--layers", str(MAX_LAYERS), "--impl", "transformers", "--preset", "fp32"),
        0,
    ),
    f"--layers {MAX_LAYERS} --tokens --gpu --json": (
        (*CONFIG, "--layers", str(MAX_LAYERS), *PRICED, "--json"),
        0,
    ),
}


def run_once(args: tuple[str, ...]) -> tuple[float, int]:
    """One run of ``python -m gpulesson budget ARGS``: (seconds, exit status)."""
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "gpulesson", "budget", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
        timeout=600,
    )
    return time.perf_counter() - start, result.returncode


def main() -> int:
    print(
        f"{len(CASES)} cases; {RUNS} fresh-process runs each; cores: {os.cpu_count()}; "
        f"target: slowest run <= {TARGET_S:.1f} s\n"
    )
    print(f"{'case':<44} {'median s':>9} {'slowest s':>10} {'exit':>5}  within target")
    failures = 0
    for name, (args, expected) in CASES.items():
        times, statuses = [], set()
        for _ in range(RUNS):
            seconds, status = run_once(args)
            times.append(seconds)
            statuses.add(status)
        slowest = max(times)
        ok = slowest <= TARGET_S and statuses == {expected}
        failures += not ok
        shown = ",".join(str(s) for s in sorted(statuses))
        print(
            f"{name:<44} {statistics.median(times):>9.3f} {slowest:>10.3f} {shown:>5}  "
            f"{'yes' if ok else 'NO'}"
        )
    print(f"\n{len(CASES) - failures} of {len(CASES)} cases within {TARGET_S:.1f} s.")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
