"""Measure all-reduce bus bandwidth by message size with torch.distributed.

Run as it is, it starts --procs processes (default 2) on this machine, which all-reduce
CPU tensors over loopback with the gloo backend. Launched by torchrun on a machine with
several NVIDIA GPUs, each process drives its own GPU through NCCL:

    python allreduce_bench.py --sizes 64KiB,1MiB,16MiB
    torchrun --nproc-per-node 8 allreduce_bench.py

For each size it prints the time per all-reduce (the slowest rank's), the algorithm
bandwidth (size / time) and the bus bandwidth (algorithm bandwidth x 2(N-1)/N), as
NVIDIA's nccl-tests define them: compare the bus bandwidth with one direction of your
link. Every wait has a timeout, so a rank that never arrives ends the run with an error
instead of hanging it. Apple MPS has no collective backend: there it uses the CPU.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta

import torch
import torch.distributed as dist

UNITS = {"": 1, "b": 1, "kib": 2**10, "mib": 2**20, "gib": 2**30}


def pick_device() -> torch.device:
    """Return cuda if an NVIDIA GPU is usable, else mps on Apple Silicon, else cpu."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def parse_sizes(text: str) -> list[int]:
    """Read '64KiB,1MiB' into bytes: each a positive multiple of 4 (fp32 values)."""
    sizes = []
    for part in text.split(","):
        match = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", part)
        unit = match.group(2).lower() if match else ""
        if not match or unit not in UNITS:
            raise ValueError(f"--sizes {text!r}: write sizes like 64KiB,1MiB,16MiB")
        size = int(match.group(1)) * UNITS[unit]
        if size <= 0 or size % 4:
            raise ValueError(f"--sizes {text!r}: each size must be a positive multiple of 4 bytes")
        sizes.append(size)
    return sorted(set(sizes))


def label(size: int) -> str:
    """64 KiB, 16 MiB: the size as a reader says it."""
    for unit, factor in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} B"


def synchronize(device: torch.device) -> None:
    """Wait until queued work on the device is finished (a no-op on CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_rank(args: argparse.Namespace) -> None:
    """One rank (started by torchrun or by launch()): join the group, time, report on rank 0."""
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    use_nccl = args.backend == "nccl" or (
        args.backend == "auto" and torch.cuda.is_available() and dist.is_nccl_available()
    )
    device = torch.device("cpu")
    if use_nccl:
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(device)
    dist.init_process_group(
        "nccl" if use_nccl else "gloo",
        rank=rank,
        world_size=world,
        timeout=timedelta(seconds=args.timeout_s),  # a collective waits at most this long
    )
    barrier_ids = [device.index] if use_nccl else None
    rows = []
    try:
        for size in args.sizes:
            buffer = torch.zeros(size // 4, device=device)
            calls = max(1, (4 * 2**20) // size)  # small messages: several calls per sample
            for _ in range(args.warmup):
                dist.all_reduce(buffer)
            readings = []
            for _ in range(args.repeats):
                dist.barrier(device_ids=barrier_ids)
                start = time.perf_counter()
                for _ in range(calls):
                    dist.all_reduce(buffer)
                synchronize(device)
                readings.append((time.perf_counter() - start) / calls)
            slowest = torch.tensor(readings, device=device)
            dist.all_reduce(slowest, op=dist.ReduceOp.MAX)  # the slowest rank, per sample
            seconds = statistics.median(slowest.tolist())
            algbw = size / seconds
            rows.append((size, seconds, algbw, algbw * 2 * (world - 1) / world))
        dist.barrier(device_ids=barrier_ids)
    finally:
        dist.destroy_process_group()
    if rank == 0:
        backend = "nccl" if use_nccl else "gloo"
        where = f"{world} GPUs" if use_nccl else f"{world} processes on the CPU"
        print(f"all-reduce of fp32 tensors, backend {backend}, {where}")
        print(f"median of {args.repeats} samples, each the slowest rank's")
        print(f"{'message':>10} {'time (us)':>12} {'algbw (GB/s)':>14} {'busbw (GB/s)':>14}")
        for size, seconds, algbw, busbw in rows:
            us, alg, bus = seconds * 1e6, algbw / 1e9, busbw / 1e9
            print(f"{label(size):>10} {us:>12,.1f} {alg:>14.3f} {bus:>14.3f}")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(args: argparse.Namespace, argv: list[str]) -> int:
    """Start --procs copies of this script as ranks on loopback; relay rank 0's report."""
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    env["WORLD_SIZE"] = str(args.procs)
    env["GLOO_SOCKET_IFNAME"] = "lo0" if sys.platform == "darwin" else "lo"  # loopback only
    procs = []
    deadline = time.monotonic() + args.timeout_s + 10
    try:
        for rank in range(args.procs):
            out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
            rank_env = dict(env, RANK=str(rank), LOCAL_RANK=str(rank))
            cmd = [sys.executable, os.path.abspath(__file__), *argv, "--backend", "gloo"]
            proc = subprocess.Popen(
                cmd, env=rank_env, stdin=subprocess.DEVNULL, stdout=out, stderr=err
            )
            procs.append((proc, out, err))
        while any(p.poll() is None for p, _, _ in procs):
            failed = [(r, p, e) for r, (p, _, e) in enumerate(procs) if p.poll() not in (None, 0)]
            if failed or time.monotonic() > deadline:
                reason = "did not finish in time"
                if failed:
                    rank, proc, err = failed[0]
                    err.seek(0)
                    lines = err.read().decode(errors="replace").strip().splitlines() or ["?"]
                    reason = f"rank {rank} exited with status {proc.returncode}: {lines[-1]}"
                print(
                    f"allreduce_bench.py: {reason}; the other ranks were stopped", file=sys.stderr
                )
                return 1
            time.sleep(0.05)
        for rank, (proc, _out, err) in enumerate(procs):
            if proc.returncode != 0:
                err.seek(0)
                lines = err.read().decode(errors="replace").strip().splitlines() or ["?"]
                print(f"allreduce_bench.py: rank {rank} failed: {lines[-1]}", file=sys.stderr)
                return 1
        procs[0][1].seek(0)
        print(procs[0][1].read().decode(), end="")
        if pick_device().type != "cpu":
            print("(this measured the CPU over loopback; use torchrun for your GPUs' links)")
        return 0
    finally:
        for proc, out, err in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            out.close()
            err.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--procs", type=int, default=2, help="processes to start (default 2)")
    parser.add_argument(
        "--sizes", default="64KiB,256KiB,1MiB,4MiB,16MiB,64MiB", help="message sizes"
    )
    parser.add_argument("--repeats", type=int, default=10, help="timed samples per size")
    parser.add_argument("--warmup", type=int, default=3, help="untimed calls per size")
    parser.add_argument("--timeout-s", type=float, default=60.0, help="longest wait, seconds")
    parser.add_argument("--backend", choices=("auto", "gloo", "nccl"), default="auto")
    argv = sys.argv[1:]
    args = parser.parse_args(argv)
    try:
        args.sizes = parse_sizes(args.sizes)
    except ValueError as exc:
        parser.exit(2, f"allreduce_bench.py: {exc}\n")
    if args.procs < 2:
        parser.exit(2, f"allreduce_bench.py: --procs {args.procs}: an all-reduce needs 2 or more\n")
    if args.repeats < 1 or args.warmup < 0:
        parser.exit(2, "allreduce_bench.py: --repeats must be >= 1 and --warmup >= 0\n")
    if not 0 < args.timeout_s < 86400:
        parser.exit(2, f"allreduce_bench.py: --timeout-s {args.timeout_s} must be 0 to 86400\n")
    if args.backend == "nccl" and not (torch.cuda.is_available() and dist.is_nccl_available()):
        parser.exit(2, "allreduce_bench.py: --backend nccl needs CUDA GPUs: use gloo\n")
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        run_rank(args)  # started by torchrun, or by launch() below
        return
    if args.backend == "nccl":
        parser.exit(2, "allreduce_bench.py: for NCCL, launch with torchrun --nproc-per-node N\n")
    sys.exit(launch(args, argv))


if __name__ == "__main__":
    main()
