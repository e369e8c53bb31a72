"""gpulesson.timing.bench against torch.utils.benchmark on the same 2048 x 2048 fp32 matmul.

Prints each tool's median rate (GFLOP/s) at the same shape and thread count, and
their ratio; rounds alternate which tool goes first, so that a busy machine slows both.
The ratio should be within 0.9-1.1. Run from the repository root:

    python -m tests.benchmarks.bench_matmul_vs_torch [--n 2048] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics

import torch
from torch.utils import benchmark

from gpulesson.timing.bench import measure_matmul
from gpulesson.timing.results import matmul_flops


def torch_rate(n: int, threads: int, min_run_time_s: float) -> float:
    """FLOP/s from torch.utils.benchmark's blocked_autorange median for a @ b."""
    a = torch.randn(n, n)
    b = torch.randn(n, n)
    timer = benchmark.Timer(stmt="a @ b", globals={"a": a, "b": b}, num_threads=threads)
    return matmul_flops(n) / timer.blocked_autorange(min_run_time=min_run_time_s).median


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2048, help="matrix size (default 2048)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    parser.add_argument("--min-run-time", type=float, default=1.0, help="seconds per tool")
    parser.add_argument("--threads", type=int, default=None, help="default: torch's setting")
    args = parser.parse_args()
    threads = args.threads or torch.get_num_threads()
    print(
        f"{args.n} x {args.n} fp32 matmul on the CPU, {threads} threads, torch {torch.__version__}"
    )
    ratios = []
    for round_index in range(1, args.rounds + 1):
        if round_index % 2:  # alternate who goes first, so a drifting load hits both alike
            ours = measure_matmul(args.n, "cpu", "fp32", threads, args.min_run_time).flop_per_s
            theirs = torch_rate(args.n, threads, args.min_run_time)
        else:
            theirs = torch_rate(args.n, threads, args.min_run_time)
            ours = measure_matmul(args.n, "cpu", "fp32", threads, args.min_run_time).flop_per_s
        ratios.append(ours / theirs)
        print(
            f"round {round_index}: gpulesson {ours / 1e9:.1f} GFLOP/s, "
            f"torch.utils.benchmark {theirs / 1e9:.1f} GFLOP/s, ratio {ours / theirs:.3f}"
        )
    ratio = statistics.median(ratios)
    verdict = "within" if 0.9 <= ratio <= 1.1 else "OUTSIDE"
    print(f"median ratio gpulesson / torch.utils.benchmark: {ratio:.3f} ({verdict} 0.9-1.1)")


if __name__ == "__main__":
    main()
