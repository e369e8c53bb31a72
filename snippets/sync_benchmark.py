"""Time one size x size matmul on the CPU and on the GPU, honestly and naively.

The honest GPU time has a barrier (synchronize) before the clock starts and
before it stops; the naive one leaves out the second barrier, so it measures
only how long Python took to queue the work. Needs only torch; runs on CUDA,
Apple MPS or CPU (where there is no queue, so both times agree).
"""

import argparse
import statistics
import time

import torch


def pick_device() -> torch.device:
    """cuda, then mps, then cpu."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def barrier(device: torch.device) -> None:
    """Wait for queued work to finish; CPU work is already finished."""
    if device.type == "cuda":
        torch.cuda.synchronize()
    elif device.type == "mps":
        torch.mps.synchronize()


def time_matmul(
    a: torch.Tensor, b: torch.Tensor, repeats: int, closing_barrier: bool = True
) -> float:
    """Median seconds of a @ b over `repeats` runs, after two warm-up runs."""
    for _ in range(2):  # warm-up: library start-up and kernel choice are not timed
        a @ b
    barrier(a.device)
    times = []
    for _ in range(repeats):
        barrier(a.device)  # start from an idle device
        start = time.perf_counter()
        a @ b
        if closing_barrier:
            barrier(a.device)  # wait for the multiply itself, not just its launch
        times.append(time.perf_counter() - start)
        barrier(a.device)  # drain the queue before the next run (untimed)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=4000, help="matrix size n (default 4000)")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs each (default 5)")
    args = parser.parse_args()
    if args.size < 1 or args.repeats < 1:
        parser.error("--size and --repeats must be at least 1")

    n = args.size
    flops = 2 * n**3  # n*n outputs, each n multiplies and n adds
    a_cpu = torch.randn(n, n)
    b_cpu = torch.randn(n, n)
    cpu_s = time_matmul(a_cpu, b_cpu, args.repeats)
    print(f"matrix size {n}, {flops:.3g} FLOPs per matmul, median of {args.repeats} runs")
    threads = torch.get_num_threads()
    print(f"CPU ({threads} threads): {cpu_s * 1e3:.3f} ms, {flops / cpu_s / 1e9:.1f} GFLOP/s")

    device = pick_device()
    if device.type == "cpu":
        naive_s = time_matmul(a_cpu, b_cpu, args.repeats, closing_barrier=False)
        print("No GPU found (no CUDA, no MPS): timing the CPU again without the closing barrier.")
        print(f"CPU, naive: {naive_s * 1e3:.3f} ms")
        ratio = cpu_s / naive_s
        print(f"Honest / naive: {ratio:.2f} (expected near 1: CPU work is done when the call")
        print("returns, so any difference here is run-to-run noise, not an illusion)")
        return

    a = a_cpu.to(device)
    b = b_cpu.to(device)
    gpu_s = time_matmul(a, b, args.repeats)
    naive_s = time_matmul(a, b, args.repeats, closing_barrier=False)
    print(f"{device.type} with barriers: {gpu_s * 1e3:.3f} ms, {flops / gpu_s / 1e9:.1f} GFLOP/s")
    print(f"{device.type} naive (no closing barrier): {naive_s * 1e3:.3f} ms")
    print(f"Speedup, honest: {cpu_s / gpu_s:.1f}x")
    print(f"Speedup, naive: {cpu_s / naive_s:.0f}x  <- the async illusion")
    print(f"Honest / naive: {gpu_s / naive_s:.0f}")


if __name__ == "__main__":
    main()
