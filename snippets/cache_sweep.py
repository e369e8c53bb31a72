"""Read bandwidth against working-set size: see your machine's caches as steps.

Reads a working set of a few KiB to well past the last cache many times over in one call
(x.expand(R, n).sum() views the same n floats R times without copying), so a small working
set is measured at its cache's speed and not at the cost of launching many small calls.
Each size's figure is the median over interleaved rounds, in one thread on a CPU (timed by
the thread's CPU time, so a busy machine's other processes do not count). Where the
bandwidth drops, the working set stopped fitting a cache. Needs only torch; runs on CUDA,
Apple MPS or CPU.
"""

import argparse
import statistics
import time

import torch

KIB, MIB = 2**10, 2**20


def pick_device(name: str | None) -> torch.device:
    """The device asked for, else cuda, then mps, then cpu."""
    if name:
        return torch.device(name)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def barrier(device: torch.device) -> None:
    """Wait for queued GPU work; CPU work is already finished."""
    if device.type == "cuda":
        torch.cuda.synchronize()
    elif device.type == "mps":
        torch.mps.synchronize()


def read_seconds(view: torch.Tensor, device: torch.device) -> float:
    """One full read of ``view``: CPU time of this thread on a CPU, wall time on a GPU."""
    if device.type == "cpu":
        start = time.thread_time()
        view.sum()
        return time.thread_time() - start
    barrier(device)
    start = time.perf_counter()
    view.sum()
    barrier(device)
    return time.perf_counter() - start


def sizes(smallest: int, largest: int) -> list[int]:
    """Working-set sizes at half-doublings, multiples of 1 KiB."""
    found, k = [], 0
    while (size := int(smallest * 2 ** (k / 2)) // KIB * KIB) <= largest:
        found.append(size)
        k += 1
    return found


def size_text(n: int) -> str:
    return f"{n / MIB:.3g} MiB" if n >= MIB else f"{n / KIB:.3g} KiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "mps", "cpu"), help="default: the best one")
    parser.add_argument("--smallest-kib", type=int, default=8, help="first working set (KiB)")
    parser.add_argument("--largest-mib", type=int, default=64, help="last working set (MiB)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per size")
    parser.add_argument("--sample-mib", type=int, help="bytes read per sample (default 64 CPU)")
    args = parser.parse_args()
    if args.smallest_kib < 1 or args.largest_mib < 1 or args.rounds < 1:
        parser.error("--smallest-kib, --largest-mib and --rounds must be at least 1")
    if args.largest_mib * MIB < args.smallest_kib * KIB:
        parser.error("--largest-mib must be at least --smallest-kib")
    device = pick_device(args.device)
    sample = (args.sample_mib or (64 if device.type == "cpu" else 4096)) * MIB
    working = sizes(args.smallest_kib * KIB, args.largest_mib * MIB)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        views = []
        for size in working:
            n = max(1, size // 4)
            views.append(torch.ones(n, device=device).expand(max(1, sample // size), n))
        samples = [[] for _ in working]
        for _ in range(args.rounds):
            for i, view in enumerate(views):
                samples[i].append(read_seconds(view, device))
    finally:
        torch.set_num_threads(threads)
    print(f"Read bandwidth on {device.type}, one thread, median of {args.rounds} rounds")
    print(f"{'working set':>12}  {'GB/s':>8}")
    for size, view, times in zip(working, views, samples, strict=True):
        print(f"{size_text(size):>12}  {view.numel() * 4 / statistics.median(times) / 1e9:8.1f}")


if __name__ == "__main__":
    main()
