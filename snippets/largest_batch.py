"""Find the largest batch that fits: double until it fails, then bisect.

On CUDA each trial is a real training step (forward, backward, AdamW update) of
a small MLP, under an optional cap (--limit-gib, via
torch.cuda.set_per_process_memory_fraction); an out-of-memory error means "does
not fit", and the peak memory of each step that fits is printed.

Without CUDA (CPU or Apple MPS) nothing is allocated: each trial compares a
teaching estimate of the step's memory with --budget-gib. The estimate is plain
arithmetic, printed with its terms: weights, gradients and two AdamW moments
in float32 (16 bytes per parameter), plus each layer's input and output kept
for the backward pass (4 bytes per value per sample, two tensors per layer). It
is an estimate, not a measurement: it leaves out the CUDA context, allocator
rounding and temporary buffers. Needs only torch.
"""

import argparse
import math
from collections.abc import Callable

import torch

GIB = 2**30
BYTES_FP32 = 4
MAX_GIB = 2**20  # 1 PiB: far beyond any card, small enough to count in bytes exactly
MAX_WIDTH = 2**20
MAX_DEPTH = 10_000
MAX_BATCH = 2**40


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line on stderr and exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def shown(value: object) -> str:
    """A value for an error message; a very long number is cut to its first digits."""
    text = str(value)
    return text if len(text) <= 20 else f"{text[:12]}...({len(text)} digits)"


def make_model(width: int, depth: int) -> torch.nn.Sequential:
    """depth Linear+ReLU layers of width x width."""
    layers: list[torch.nn.Module] = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers)


def estimate_bytes(width: int, depth: int, batch: int) -> tuple[int, int]:
    """Teaching estimate of one training step: (fixed bytes, activation bytes)."""
    params = depth * (width * width + width)
    fixed = params * 4 * BYTES_FP32  # weights + gradients + AdamW exp_avg + exp_avg_sq
    activations = batch * depth * 2 * width * BYTES_FP32  # each layer's input and output
    return fixed, activations


def largest_batch(fits: Callable[[int], bool], max_batch: int) -> int:
    """Double from 1 until a batch does not fit, then bisect; 0 when batch 1 fails."""
    good, bad = 0, None
    batch = 1
    while batch <= max_batch:
        if not fits(batch):
            bad = batch
            break
        good = batch
        batch *= 2
    if bad is None:
        return good  # every batch up to max_batch fits
    while bad - good > 1:
        middle = (good + bad) // 2
        if fits(middle):
            good = middle
        else:
            bad = middle
    return good


def cuda_fits(model: torch.nn.Module, width: int) -> Callable[[int], bool]:
    """A predicate that runs one real training step at a batch size."""
    device = torch.device("cuda")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def fits(batch: int) -> bool:
        optimizer.zero_grad(set_to_none=True)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
        try:
            x = torch.randn(batch, width, device=device)
            loss = model(x).square().mean()
            loss.backward()
            optimizer.step()
            torch.cuda.synchronize(device)
        except torch.cuda.OutOfMemoryError:
            print(f"batch {batch:>8}: does not fit (out of memory)")
            return False
        finally:
            x = loss = None  # drop references before the next trial
            optimizer.zero_grad(set_to_none=True)
        peak = torch.cuda.max_memory_allocated(device)
        print(f"batch {batch:>8}: fits, peak allocated {peak / GIB:.3f} GiB")
        return True

    return fits


def estimate_fits(width: int, depth: int, budget_bytes: int) -> Callable[[int], bool]:
    """A predicate that compares the teaching estimate with a budget."""

    def fits(batch: int) -> bool:
        fixed, activations = estimate_bytes(width, depth, batch)
        ok = fixed + activations <= budget_bytes
        verdict = "fits" if ok else "does not fit"
        print(
            f"batch {batch:>8}: estimate {(fixed + activations) / GIB:.3f} GiB "
            f"({fixed / GIB:.3f} fixed + {activations / GIB:.3f} activations): {verdict}"
        )
        return ok

    return fits


def main() -> None:
    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=1024, help="layer width (default 1024)")
    parser.add_argument("--depth", type=int, default=4, help="number of layers (default 4)")
    parser.add_argument(
        "--limit-gib", type=float, default=None, help="CUDA: cap this process at this many GiB"
    )
    parser.add_argument(
        "--budget-gib",
        type=float,
        default=2.0,
        help="without CUDA: memory budget for the estimate, in GiB (default 2)",
    )
    parser.add_argument(
        "--max-batch", type=int, default=2**20, help="stop doubling here (default 1048576)"
    )
    parser.add_argument(
        "--estimate", action="store_true", help="use the estimate even when CUDA is available"
    )
    args = parser.parse_args()
    for name, value, limit in (
        ("--width", args.width, MAX_WIDTH),
        ("--depth", args.depth, MAX_DEPTH),
        ("--max-batch", args.max_batch, MAX_BATCH),
    ):
        if not 1 <= value <= limit:
            parser.error(f"{name} {shown(value)} must be a whole number from 1 to {limit}")
    for name, value in (("--budget-gib", args.budget_gib), ("--limit-gib", args.limit_gib)):
        if value is not None and not (math.isfinite(value) and 0 < value <= MAX_GIB):
            parser.error(
                f"{name} {value:g} must be a finite number of GiB above 0 and at most "
                f"{MAX_GIB} (1 PiB), e.g. 2"
            )
    if torch.cuda.is_available() and not args.estimate:
        device = torch.device("cuda")
        if args.limit_gib is not None:
            total = torch.cuda.get_device_properties(device).total_memory
            torch.cuda.set_per_process_memory_fraction(min(args.limit_gib * GIB / total, 1.0))
            print(f"Capped this process at {args.limit_gib:g} GiB.")
        model = make_model(args.width, args.depth).to(device)
        print(f"Measuring on {torch.cuda.get_device_name(device)}: real training steps.")
        try:
            best = largest_batch(cuda_fits(model, args.width), args.max_batch)
        finally:
            del model
            torch.cuda.empty_cache()
            torch.cuda.set_per_process_memory_fraction(1.0)
        print(f"Largest batch that fits (measured): {best}")
        return
    where = "CUDA skipped (--estimate)" if torch.cuda.is_available() else "No CUDA device"
    print(
        f"{where}: nothing is allocated. Each trial compares a teaching estimate "
        f"with a budget of {args.budget_gib:g} GiB."
    )
    budget = int(args.budget_gib * GIB)
    best = largest_batch(estimate_fits(args.width, args.depth, budget), args.max_batch)
    print(f"Largest batch under the budget (estimate, not a measurement): {best}")
    if best == 0:
        print("Even batch 1 is over budget: the weights and optimizer state alone do not fit.")


if __name__ == "__main__":
    main()
