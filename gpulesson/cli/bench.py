"""``gpulesson bench``: time matmuls honestly on this machine, as a table or JSON.

Without ``--sizes`` the sweep doubles n from 64 until the next size would
overrun ``--budget`` seconds (or no longer fit in memory). A progress line
appears on stderr only when stderr is a terminal and the run has lasted more
than ``PROGRESS_AFTER_S``.

Arguments are checked by ``gpulesson.timing.inputs``, which needs no torch: a bad
argument exits 2 with one line before torch is imported. torch and the timing
core are imported in ``run``, once the arguments are good.
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from gpulesson.timing import inputs
from gpulesson.timing.results import MatmulResult

PROGRESS_AFTER_S = 2.0  # shorter runs finish before a progress line would help


def parse_sizes(text: str) -> tuple[int, ...]:
    """Read ``--sizes 64,256,1024``; argparse turns the error into one line.

    >>> parse_sizes("64, 256")
    (64, 256)
    """
    try:
        sizes = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"cannot read sizes {text!r}: give whole numbers separated by commas, like 64,256,1024"
        ) from None
    try:
        return inputs.check_sizes(sizes)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def positive_float(text: str) -> float:
    """A positive number of seconds.

    >>> positive_float("2.5")
    2.5
    """
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds, like 5")
    return value


def thread_count(text: str) -> int:
    """A whole number of CPU threads, from 1 to the CPUs this process may use.

    >>> thread_count("1")
    1
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a whole number of threads: use e.g. --threads 2"
        ) from None
    try:
        return inputs.check_threads(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def register(commands: argparse._SubParsersAction) -> None:
    """Add the ``bench`` subcommand."""
    parser = commands.add_parser(
        "bench",
        help="time n x n matmuls honestly (warm-up, barriers, medians) on cuda, mps or cpu",
        description="Time n x n matmuls with warm-up, a barrier before starting and stopping "
        "the clock, and many samples; print median, spread and achieved FLOP/s.",
    )
    parser.add_argument(
        "--device",
        choices=("auto", *inputs.DEVICES),
        default="auto",
        help="where to run: auto picks cuda, then mps, then cpu (default: auto)",
    )
    parser.add_argument(
        "--sizes",
        type=parse_sizes,
        default=None,
        help="comma-separated matrix sizes, e.g. 64,256,1024 "
        "(default: double from 64 within --budget)",
    )
    parser.add_argument(
        "--dtype",
        choices=inputs.DTYPES,
        default="fp32",
        help="fp32, tf32 (CUDA tensor cores), bf16 or fp16 (default: fp32)",
    )
    parser.add_argument(
        "--budget",
        type=positive_float,
        default=5.0,
        help="seconds the default sweep may take (default: 5)",
    )
    parser.add_argument(
        "--threads",
        type=thread_count,
        default=None,
        help="CPU threads torch may use, at most the CPUs available "
        "(default: torch's current setting)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


class Progress:
    """A one-line progress report on a terminal; silent elsewhere and for short runs."""

    def __init__(self, total: int | None, budget_s: float, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self.total = total
        self.budget_s = budget_s
        self.done = 0
        self.shown = False

    def update(self, result: MatmulResult, elapsed_s: float) -> None:
        """Report one finished size (called by ``bench.sweep``)."""
        self.done += 1
        if not self.enabled or elapsed_s < PROGRESS_AFTER_S:
            return
        if self.total:
            width = 24
            filled = round(width * self.done / self.total)
            bar = "#" * filled + "." * (width - filled)
            line = f"[{bar}] {self.done}/{self.total} sizes, n={result.n}, {elapsed_s:.1f} s"
        else:
            line = f"n={result.n} done, {elapsed_s:.1f} s of a {self.budget_s:g} s budget"
        self.stream.write("\r" + line.ljust(72))
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        """Clear the progress line so the table starts on a clean line."""
        if self.shown:
            self.stream.write("\r" + " " * 72 + "\r")
            self.stream.flush()


def run(args: argparse.Namespace) -> int:
    """Resolve the device, check memory, run the sweep and print the table or JSON."""
    from gpulesson.timing import bench  # torch: only once the arguments are good
    from gpulesson.timing import render as bench_render

    device = bench.resolve_device(args.device)
    dtype = inputs.check_dtype(args.dtype, device)
    progress = Progress(len(args.sizes) if args.sizes else None, args.budget)
    plan = bench.plan_for(device)
    try:
        results = bench.sweep(
            device,
            dtype,
            budget_s=args.budget,
            sizes=args.sizes,
            max_n=plan.sweep_max_n * 2,
            min_run_time_s=plan.min_run_time_s,
            threads=args.threads,
            on_result=progress.update,
        )
    finally:
        progress.close()
    if args.json:
        print(bench_render.to_json(results, device, dtype))
    else:
        print(bench_render.to_text(results))
    return 0
