"""Profile a training step with torch.profiler and print the ops that took the time.

Run as a script, it profiles a small MLP's training step (forward, backward, AdamW) on
CUDA, Apple MPS or CPU. Import it to profile your own step:

    from profile_step import pick_device, print_top_ops, profile_callable
    device = pick_device()
    prof = profile_callable(my_step, device, wait=1, warmup=1, active=3)
    print_top_ops(prof, device, top=10)

    python profile_step.py --active 3 --top 10 --trace trace.json
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function, schedule


def pick_device() -> torch.device:
    """Return cuda if an NVIDIA GPU is usable, else mps on Apple Silicon, else cpu."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def synchronize(device: torch.device) -> None:
    """Wait until queued work on the device is finished (a no-op on CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def profile_callable(
    fn: Callable[[], object],
    device: torch.device,
    wait: int = 1,
    warmup: int = 1,
    active: int = 3,
    memory: bool = False,
) -> profile:
    """Call fn wait + warmup + active times under the profiler; record the active calls.

    The wait calls run unprofiled and the warm-up calls are profiled and thrown away, so
    one-off costs (first-call set-up, the optimizer creating its state, the profiler's own
    start) stay out of the table. Returns the profiler: use .key_averages() or
    .export_chrome_trace(path). Each call's wall time is kept in prof.step_times_s.
    """
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)  # kernel times, per op
    plan = schedule(wait=wait, warmup=warmup, active=active, repeat=1)
    times = []
    with profile(activities=activities, schedule=plan, profile_memory=memory) as prof:
        for i in range(wait + warmup + active):
            synchronize(device)
            start = time.perf_counter()
            fn()
            synchronize(device)  # the step's GPU work belongs to the step
            if i >= wait + warmup:
                times.append(time.perf_counter() - start)
            prof.step()  # tell the schedule a step ended
    prof.step_times_s = times
    return prof


def device_field(e, name: str) -> float:
    """A profiler row's device column: torch 2.4 renamed ``*_cuda_*`` to ``*_device_*``."""
    if hasattr(e, name):
        return getattr(e, name)
    return getattr(e, name.replace("device", "cuda"))


def print_top_ops(prof: profile, device: torch.device, top: int = 10) -> None:
    """Print the ops with the most self time: calls, self and total milliseconds, share."""
    on_cuda = device.type == "cuda"

    def self_us(e) -> float:  # CUDA: the op's own kernels; elsewhere: its own CPU time
        return device_field(e, "self_device_time_total") if on_cuda else e.self_cpu_time_total

    def self_mib(e) -> float:  # bytes the op allocated minus freed itself, in 2**20 bytes
        own = device_field(e, "self_device_memory_usage") if on_cuda else e.self_cpu_memory_usage
        return own / 2**20

    memory = bool(getattr(prof, "profile_memory", False))
    rows = sorted(prof.key_averages(), key=self_us, reverse=True)
    everything_us = sum(self_us(e) for e in rows)
    basis = "self CUDA time" if on_cuda else "self CPU time"
    head = f"{'op':44} {'calls':>6} {'self ms':>9} {'total ms':>9} {'share':>7}"
    print(head + (f" {'self MiB':>9}" if memory else ""))
    for e in rows[:top]:
        total_us = device_field(e, "device_time_total") if on_cuda else e.cpu_time_total
        share = self_us(e) / everything_us if everything_us else 0.0
        name = e.key if len(e.key) <= 44 else e.key[:41] + "..."
        line = (
            f"{name:44} {e.count:>6} {self_us(e) / 1e3:>9.3f} {total_us / 1e3:>9.3f} {share:>7.1%}"
        )
        print(line + (f" {self_mib(e):>9.2f}" if memory else ""))
    print(f"Share: each row's {basis} over the {basis} of all rows ({everything_us / 1e3:.3f} ms).")
    if device.type == "mps":
        print(
            "On MPS these are CPU-side times (the ops' launch); the GPU's own time shows in "
            "Xcode Instruments with torch.mps.profiler."
        )


def make_mlp_step(device: torch.device, hidden: int, layers: int, batch: int) -> Callable[[], None]:
    """A small MLP's training step, its regions labelled for the profiler's table and trace."""
    torch.manual_seed(0)
    blocks = []
    for _ in range(layers):
        blocks += [nn.Linear(hidden, 4 * hidden), nn.GELU(), nn.Linear(4 * hidden, hidden)]
    model = nn.Sequential(*blocks).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(batch, hidden, device=device)
    target = torch.randn(batch, hidden, device=device)

    def step() -> None:
        with record_function("forward"):  # a labelled row and a span in the trace
            loss = nn.functional.mse_loss(model(x), target)
        with record_function("backward"):
            loss.backward()
        with record_function("optimizer.step"):
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

    return step


class Parser(argparse.ArgumentParser):
    """argparse whose errors are one line (the problem and the fix) and exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def positive(text: str) -> int:
    """An argparse type: a whole number >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be >= 1")
    return value


def not_negative(text: str) -> int:
    """An argparse type: a whole number >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} must be >= 0")
    return value


def writable(text: str) -> Path:
    """An argparse type: a file path whose folder exists."""
    path = Path(text)
    if not path.parent.is_dir():
        raise argparse.ArgumentTypeError(f"folder {str(path.parent)!r} does not exist")
    return path


def main() -> None:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--wait", type=not_negative, default=1, help="steps run unprofiled")
    parser.add_argument("--warmup", type=not_negative, default=1, help="steps profiled, dropped")
    parser.add_argument("--active", type=positive, default=3, help="steps recorded")
    parser.add_argument("--top", type=positive, default=10, help="rows to print")
    parser.add_argument("--hidden", type=positive, default=512, help="MLP width")
    parser.add_argument("--layers", type=positive, default=4, help="MLP blocks")
    parser.add_argument("--batch", type=positive, default=256, help="rows per batch")
    parser.add_argument("--memory", action="store_true", help="record allocations too")
    parser.add_argument("--trace", type=writable, help="write a Chrome trace (JSON) here")
    parser.add_argument(
        "--snapshot", type=writable, help="CUDA only: write a memory snapshot (pickle) here"
    )
    args = parser.parse_args()
    device = pick_device()
    if args.snapshot and device.type != "cuda":
        parser.error(f"--snapshot needs a CUDA GPU (this machine runs on {device.type}): drop it")

    step = make_mlp_step(device, args.hidden, args.layers, args.batch)
    if args.snapshot:  # every allocation from here on, with its Python stack
        torch.cuda.memory._record_memory_history(max_entries=100_000)
    prof = profile_callable(step, device, args.wait, args.warmup, args.active, args.memory)
    if args.snapshot:
        torch.cuda.memory._dump_snapshot(str(args.snapshot))
        torch.cuda.memory._record_memory_history(enabled=None)

    median_ms = statistics.median(prof.step_times_s) * 1e3
    print(
        f"Profiled {args.active} step(s) on {device.type} after {args.wait} unprofiled and "
        f"{args.warmup} warm-up step(s); median step {median_ms:.3f} ms (profiler on)."
    )
    print_top_ops(prof, device, args.top)
    if args.trace:
        prof.export_chrome_trace(str(args.trace))
        print(f"Trace written to {args.trace}: open it at https://ui.perfetto.dev.")
    if args.snapshot:
        print(
            f"Memory snapshot written to {args.snapshot}: open it in https://pytorch.org/memory_viz."
        )


if __name__ == "__main__":
    main()
