"""Time one size x size matmul on the CPU and on the GPU, honestly and naively.

The honest GPU time has a barrier (synchronize) before the clock starts and
before it stops; the naive one leaves out the second barrier, so it measures
only how long Python took to queue the work. Needs only torch; runs on CUDA,
Apple MPS or CPU (where there is no queue, so both times agree). Before
allocating anything it checks that the matrices fit in the memory available.
"""

import argparse
import math
import os
import statistics
import time

import torch

GIB = 2**30
FP32_BYTES = 4
USABLE_SHARE = 0.9  # leave a tenth of the free memory to the allocator and everyone else


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


def host_available_bytes() -> int | None:
    """Host memory free for new data: MemAvailable on Linux, free pages elsewhere, or None."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024  # the file counts kB
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None  # this system does not say; the check is skipped


def memory_problem(n: int, device: torch.device) -> str | None:
    """Why n x n fp32 matrices would not fit, or None when they do (or nobody says).

    The CPU timing holds a, b and a @ b (3 matrices) in host memory. On CUDA the
    GPU timing holds 3 more on the GPU; on Apple MPS those share host memory (5 in all).
    """
    matrix_bytes = n * n * FP32_BYTES
    checks = [(3, host_available_bytes(), "host memory")]
    if device.type == "cuda":
        checks.append((3, torch.cuda.mem_get_info(device)[0], "GPU memory"))
    elif device.type == "mps":
        checks = [(5, host_available_bytes(), "memory (MPS shares the host's)")]
    for count, available, where in checks:
        if available is None:
            continue
        usable = available * USABLE_SHARE
        if count * matrix_bytes > usable:
            fit = math.isqrt(int(usable // (count * FP32_BYTES)))
            fix = f"e.g. --size {2 ** int(math.log2(fit))}" if fit >= 1 else "free memory first"
            return (
                f"--size {n} needs {count * matrix_bytes / GIB:.1f} GiB for {count} {n} x {n} "
                f"fp32 matrices, but only {usable / GIB:.1f} GiB of {where} is usable "
                f"({USABLE_SHARE:.0%} of {available / GIB:.1f} GiB available): "
                f"use a smaller --size, {fix}"
            )
    return None


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


class Parser(argparse.ArgumentParser):
    """argparse whose errors are one line (the problem and the fix) and exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def main() -> None:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=4000, help="matrix size n (default 4000)")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs each (default 5)")
    args = parser.parse_args()
    if args.size < 1 or args.repeats < 1:
        parser.error("--size and --repeats must be at least 1, e.g. --size 1024 --repeats 5")
    device = pick_device()
    problem = memory_problem(args.size, device)
    if problem:
        parser.error(problem)

    n = args.size
    flops = 2 * n**3  # n*n outputs, each n multiplies and n adds
    a_cpu = torch.randn(n, n)
    b_cpu = torch.randn(n, n)
    cpu_s = time_matmul(a_cpu, b_cpu, args.repeats)
    print(f"matrix size {n}, {flops:.3g} FLOPs per matmul, median of {args.repeats} runs")
    threads = torch.get_num_threads()
    print(f"CPU ({threads} threads): {cpu_s * 1e3:.3f} ms, {flops / cpu_s / 1e9:.1f} GFLOP/s")

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
