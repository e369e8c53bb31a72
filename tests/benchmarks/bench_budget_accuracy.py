"""How close is gpulesson.memory.budget to a measured training step? Estimate vs measured peak.

For a grid of small GPT-2 models (fp32 and bf16, eager and SDPA attention, with
and without checkpointing, SGD and AdamW), then for models trained with a
chunked cross-entropy loss (``loss="chunked"``), it prints the estimate, the
measured peak and the error of each, then the median and largest error against
the target (every case within 10%, median at most 5%). Without CUDA it measures with
FakeTensorMode and torch's MemTracker on the CPU; with CUDA, with
torch.cuda.max_memory_allocated().

    .venv/bin/python tests/benchmarks/bench_budget_accuracy.py            # full grid
    .venv/bin/python tests/benchmarks/bench_budget_accuracy.py --quick    # the lesson's grid
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    from gpulesson.memory.measure import (
        TUNED_SHAPES,
        UNTUNED_SHAPES,
        accuracy_summary,
        accuracy_to_markdown,
        build_cases,
        chunked_loss_cases,
        grid,
        run_accuracy,
    )

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only the lesson's build-time grid")
    parser.add_argument("--mode", choices=("auto", "fake", "cuda"), default="auto")
    args = parser.parse_args(argv)
    ok = True
    sets = [("build-time grid", build_cases())]
    if not args.quick:
        sets = [
            ("shapes the estimator was tuned on", grid(TUNED_SHAPES)),
            ("shapes it was not tuned on", grid(UNTUNED_SHAPES, tuned=False)),
            ("a chunked cross-entropy loss", chunked_loss_cases()),
        ]
    for title, cases in sets:
        rows = run_accuracy(cases, mode=args.mode)
        print(f"## {title}\n")
        print(accuracy_to_markdown(rows))
        print()
        ok = ok and bool(accuracy_summary(rows)["meets_target"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
