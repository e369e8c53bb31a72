"""How close is gpulesson.memory.budget to a measured training step? Estimate vs measured peak.

For a grid of the course's small GPT-2 models (fp32 and bf16, eager and SDPA
attention, with and without checkpointing, SGD and AdamW), then for models
trained with a chunked cross-entropy loss (``loss="chunked"``), it prints the
estimate, the measured peak and the error of each, then the median and largest
error against the target (every case within 10%, median at most 5%).

Then Hugging Face transformers' ``GPT2LMHeadModel`` (built from a config, random
weights, nothing downloaded): the issue's three steps and a grid of shapes (eager
and SDPA, fp32 and bf16, SGD and AdamW), each measured once and estimated with
``--impl transformers`` and with the default ``--impl gpulesson`` (before and
after the transformers terms), with the median and worst error of each; the
target (every case within 10%) is for ``--impl transformers``.

Without CUDA it measures with FakeTensorMode and torch's MemTracker on the CPU
(what PyTorch's CPU kernels allocate, not a CUDA measurement); with CUDA, with
torch.cuda.max_memory_allocated().

    .venv/bin/python tests/benchmarks/bench_budget_accuracy.py            # everything
    .venv/bin/python tests/benchmarks/bench_budget_accuracy.py --quick    # the lesson's cases
    .venv/bin/python tests/benchmarks/bench_budget_accuracy.py --only transformers
"""

from __future__ import annotations

import argparse
import sys

PARTS = ("gpulesson", "transformers")


def _course(quick: bool, mode: str) -> bool:
    from gpulesson.course.memory import accuracy_to_markdown
    from gpulesson.memory.measure import (
        TUNED_SHAPES,
        UNTUNED_SHAPES,
        accuracy_summary,
        build_cases,
        chunked_loss_cases,
        grid,
        run_accuracy,
    )

    sets = [("the course's GPT-2: build-time grid", build_cases())]
    if not quick:
        sets = [
            ("the course's GPT-2: shapes the estimator was tuned on", grid(TUNED_SHAPES)),
            ("the course's GPT-2: shapes it was not tuned on", grid(UNTUNED_SHAPES, tuned=False)),
            ("the course's GPT-2: a chunked cross-entropy loss", chunked_loss_cases()),
        ]
    ok = True
    for title, cases in sets:
        rows = run_accuracy(cases, mode=mode)
        print(f"## {title}\n")
        print(accuracy_to_markdown(rows))
        print()
        ok = ok and bool(accuracy_summary(rows)["meets_target"])
    return ok


def _transformers(quick: bool, mode: str) -> bool:
    from gpulesson.course.memory import impl_comparison_to_markdown
    from gpulesson.memory.budget import IMPLS
    from gpulesson.memory.impl_accuracy import (
        build_cases,
        grid_cases,
        impl_summary,
        issue_cases,
        run_impl_comparison,
    )

    sets = [("transformers' GPT-2: build-time cases", build_cases())]
    if not quick:
        sets = [
            ("transformers' GPT-2: the issue's three steps", issue_cases()),
            ("transformers' GPT-2: grid", grid_cases()),
        ]
    ok = True
    for title, cases in sets:
        rows = run_impl_comparison(cases, mode=mode)
        summaries = [impl_summary(rows, impl) for impl in reversed(IMPLS)]
        print(f"## {title}\n")
        print(impl_comparison_to_markdown(rows, summaries))
        print()
        ok = ok and summaries[0].meets_target
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only the lesson's build-time cases")
    parser.add_argument("--mode", choices=("auto", "fake", "cuda"), default="auto")
    parser.add_argument("--only", choices=PARTS, help="only the course's model, or transformers'")
    args = parser.parse_args(argv)
    ok = True
    if args.only in (None, "gpulesson"):
        ok = _course(args.quick, args.mode) and ok
    if args.only in (None, "transformers"):
        ok = _transformers(args.quick, args.mode) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
