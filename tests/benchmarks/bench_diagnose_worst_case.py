"""How long ``gpulesson diagnose`` takes on crafted worst-case inputs at the 4 MiB limit.

Each input is built to defeat a naive regular expression (a long run of the
character a pattern repeats, with the character it then needs missing), at
4 MiB, the most the CLI accepts. Each is written to a temporary file and
diagnosed end to end through the CLI entry point (``gpulesson.cli.main``:
argument parsing, reading, diagnosis, rendering, printing to /dev/null), in this
process, three times; the script prints the median and the slowest run of each,
the exit status, and whether the slowest is within the target.

Target: at most 1 s per input on the project's 2-core machine. Process
start-up (Python, and whatever ``gpulesson.cli`` imports) is not part of the
figure; ``--subprocess`` also times one run of ``python -m gpulesson diagnose``
per input, start-up included, and the same for a one-line message as the
baseline. Run from the repository root:

    python -m tests.benchmarks.bench_diagnose_worst_case [--subprocess]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

TARGET_S = 1.0
RUNS = 3
SIZE = 4 * 2**20  # the CLI's MAX_INPUT_BYTES


def _fill(head: str, unit: str, tail: str = "") -> str:
    """``head`` + ``unit`` repeated + ``tail``, SIZE bytes in all (ASCII)."""
    room = SIZE - len(head) - len(tail)
    return head + unit * (room // len(unit)) + tail


# name -> the input. Each names the pattern it attacks.
INPUTS: dict[str, Callable[[], str]] = {
    "newlines then x (line-anchored 'Killed')": lambda: _fill("", "\n", "x"),
    "spaces then x": lambda: _fill("", " ", "x"),
    "sm_ + digits (capability)": lambda: _fill(
        "with CUDA capability sm_", "1", " is not compatible"
    ),
    "sm_ + digits, no ending": lambda: _fill("with CUDA capability sm_", "1"),
    "assert + letters (file name .cu)": lambda: _fill("Assertion `x` failed ", "a"),
    "assert left open": lambda: _fill("Assertion `", "a"),
    "OOM + digits, no unit": lambda: _fill("CUDA out of memory. total capacity; ", "1"),
    "OOM + '1.' repeated": lambda: _fill("CUDA out of memory. Tried to allocate ", "1."),
    "OOM + '1 ' repeated": lambda: _fill("CUDA out of memory. Tried to allocate ", "1 "),
    "OOM message repeated": lambda: _fill(
        "", "CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of "
    ),
    "OOM + 4 MiB number with a unit": lambda: _fill(
        "CUDA out of memory. Tried to allocate ", "9", " GiB"
    ),
    "numpy allocation + letters": lambda: _fill("Unable to allocate ", "a"),
    "host allocation + digits": lambda: _fill("you tried to allocate ", "1", " bytes"),
    "NCCL timeout + OpType repeated": lambda: _fill(
        "Watchdog caught collective operation timeout: WorkNCCL(", "OpType="
    ),
    "NCCL error + 'Last error:' repeated": lambda: _fill("NCCL error in: x, ", "Last error:\n"),
    "MemoryError repeated": lambda: _fill("", " MemoryErro"),
}


def run_once(path: Path) -> tuple[float, int]:
    """One end-to-end run of ``gpulesson diagnose PATH`` in this process: (seconds, status)."""
    from gpulesson.cli import main

    sink = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        status = main(["diagnose", str(path)])
    return time.perf_counter() - start, status


def run_subprocess(path: Path) -> float:
    """One run of ``python -m gpulesson diagnose PATH``, start-up included."""
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "gpulesson", "diagnose", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
        timeout=600,
    )
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--subprocess",
        action="store_true",
        help="also time one `python -m gpulesson diagnose` run per input (start-up included)",
    )
    args = parser.parse_args(argv)
    print(
        f"{len(INPUTS)} inputs of {SIZE:,} bytes; {RUNS} in-process runs each; cores: "
        f"{os.cpu_count()}; target: slowest run <= {TARGET_S:.1f} s\n"
    )
    header = f"{'input':<42} {'median s':>9} {'slowest s':>10} {'exit':>5}  within target"
    if args.subprocess:
        header += "   subprocess s"
    print(header)
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        baseline = Path(tmp) / "baseline.txt"
        baseline.write_text("RuntimeError: CUDA error: out of memory\n")
        for name, build in INPUTS.items():
            path = Path(tmp) / "input.txt"
            path.write_text(build(), encoding="ascii")
            times, status = [], 0
            for _ in range(RUNS):
                seconds, status = run_once(path)
                times.append(seconds)
            slowest = max(times)
            ok = slowest <= TARGET_S
            failures += not ok
            line = (
                f"{name:<42} {statistics.median(times):>9.3f} {slowest:>10.3f} {status:>5}  "
                f"{'yes' if ok else 'NO'}"
            )
            if args.subprocess:
                line += f"   {run_subprocess(path):>12.2f}"
            print(line)
        if args.subprocess:
            print(
                f"\nbaseline: a one-line message through a subprocess takes "
                f"{run_subprocess(baseline):.2f} s (Python and import start-up)"
            )
    print(f"\n{len(INPUTS) - failures} of {len(INPUTS)} inputs within {TARGET_S:.1f} s.")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
