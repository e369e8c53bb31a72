"""Count a training step's FLOPs, time the step, and print achieved FLOP/s and MFU.

The FLOPs come from torch.utils.flop_counter.FlopCounterMode over one forward and
backward pass of a small GPT (attention written as plain matmuls, so the counter sees
it on every device). The time is the median of several whole steps (zero_grad,
forward, backward, AdamW) after a warm-up, with a barrier before every clock reading.
MFU is achieved FLOP/s over a peak: --peak-tflops (your GPU's dense datasheet figure
for the dtype), or without it the best matmul this script measures here, which makes
the share one of the achievable rate, not of the datasheet. Runs on CUDA, MPS or CPU.

    python flops_and_mfu.py
    python flops_and_mfu.py --peak-tflops 989.5 --batch 16   # H100 SXM, dense bf16
"""

import argparse
import math
import statistics
import time

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.flop_counter import FlopCounterMode

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


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


def default_dtype(device: torch.device) -> str:
    """bf16 on a GPU that has it, fp16 on an older CUDA GPU, fp32 elsewhere."""
    if device.type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return "fp32"


class Block(nn.Module):
    """Pre-LayerNorm transformer block; attention as two matmuls the counter can see."""

    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln_1, self.ln_2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.qkv, self.proj = nn.Linear(hidden, 3 * hidden), nn.Linear(hidden, hidden)
        self.fc, self.out = nn.Linear(hidden, 4 * hidden), nn.Linear(4 * hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln_1(x)).split(c, dim=2)
        # (b, t, c) -> (b, heads, t, head_size)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)  # (b, heads, t, t)
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        attn = F.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1) @ v
        x = x + self.proj(attn.transpose(1, 2).reshape(b, t, c))
        return x + self.out(F.gelu(self.fc(self.ln_2(x))))


class TinyGPT(nn.Module):
    """Token and position embeddings, blocks, a final LayerNorm, a head tied to the embedding."""

    def __init__(self, vocab: int, seq: int, hidden: int, heads: int, layers: int) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, hidden), nn.Embedding(seq, hidden)
        self.blocks = nn.Sequential(*(Block(hidden, heads) for _ in range(layers)))
        self.ln_f = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, vocab, bias=False)
        self.head.weight = self.wte.weight

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        logits = self.head(self.ln_f(self.blocks(self.wte(idx) + self.wpe(pos))))
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def best_matmul_flop_per_s(device: torch.device, dtype: torch.dtype, repeats: int = 5) -> float:
    """The best median rate of a few square matmuls: 2n^3 FLOPs each, barriers around the clock."""
    sizes = (512, 1024) if device.type == "cpu" else (2048, 4096, 8192)
    best = 0.0
    for n in sizes:
        a = torch.randn(n, n, device=device, dtype=dtype)
        b = torch.randn(n, n, device=device, dtype=dtype)
        a @ b  # warm-up
        times = []
        for _ in range(repeats):
            barrier(device)
            start = time.perf_counter()
            a @ b
            barrier(device)
            times.append(time.perf_counter() - start)
        best = max(best, 2 * n**3 / statistics.median(times))
    return best


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line and exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def rate(flop_per_s: float) -> str:
    """A FLOP/s figure in TFLOP/s, or GFLOP/s below one TFLOP/s."""
    if flop_per_s >= 1e12:
        return f"{flop_per_s / 1e12:,.1f} TFLOP/s"
    return f"{flop_per_s / 1e9:,.1f} GFLOP/s"


def positive(text: str) -> int:
    """argparse type: a whole number of at least 1."""
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


def main() -> None:
    parser = Parser(description=__doc__.splitlines()[0])
    for name, default in (("layers", 4), ("hidden", 256), ("heads", 4), ("seq", 128)):
        parser.add_argument(f"--{name}", type=positive, default=default, metavar="N")
    parser.add_argument("--batch", type=positive, default=4, metavar="N")
    parser.add_argument("--vocab", type=positive, default=2048, metavar="N")
    parser.add_argument("--steps", type=positive, default=5, help="timed steps (default 5)")
    parser.add_argument("--dtype", choices=sorted(DTYPES), help="default: bf16 on GPUs with it")
    parser.add_argument("--peak-tflops", type=float, help="the device's dense peak, TFLOP/s")
    args = parser.parse_args()
    if args.hidden % args.heads:
        parser.error(f"--hidden {args.hidden} is not divisible by --heads {args.heads}")
    if args.peak_tflops is not None and not (0 < args.peak_tflops < math.inf):
        parser.error(f"--peak-tflops {args.peak_tflops} must be a positive number, e.g. 989.5")
    device = pick_device()
    dtype = args.dtype or default_dtype(device)
    if device.type == "cpu" and dtype == "fp16":
        parser.error("--dtype fp16 needs a GPU: on a CPU use fp32 or bf16")

    torch.manual_seed(0)
    model = TinyGPT(args.vocab, args.seq, args.hidden, args.heads, args.layers).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    idx = torch.randint(0, args.vocab, (args.batch, args.seq), device=device)
    targets = torch.randint(0, args.vocab, (args.batch, args.seq), device=device)
    autocast = dtype != "fp32"

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=DTYPES[dtype], enabled=autocast):
            loss = model(idx, targets)
        loss.backward()
        optimizer.step()

    try:
        with FlopCounterMode(display=False) as counter:  # counting is also the warm-up
            step()
        step()
        times = []
        for _ in range(args.steps):
            barrier(device)
            start = time.perf_counter()
            step()
            barrier(device)
            times.append(time.perf_counter() - start)
    except torch.OutOfMemoryError:
        parser.error(f"the step does not fit on {device}: lower --batch or --seq")

    flops = counter.get_total_flops()
    params = sum(p.numel() for p in model.parameters())
    tokens = args.batch * args.seq
    median_s = statistics.median(times)
    achieved = flops / median_s
    name = torch.cuda.get_device_name() if device.type == "cuda" else device.type
    print(f"device: {device} ({name}), dtype {dtype}")
    print(f"model: {params / 1e6:.2f}M parameters, {args.layers} layers; {tokens} tokens a step")
    six_nd = 6 * params * tokens
    print(f"FLOPs per step (counted): {flops:.3g}; 6ND = {six_nd:.3g} (ratio {flops / six_nd:.3f})")
    print(f"step time: median {median_s:.4f} s of {len(times)} (min {min(times):.4f} s)")
    print(f"achieved: {rate(achieved)}, {tokens / median_s:,.0f} tokens/s")
    if args.peak_tflops is not None:
        peak = args.peak_tflops * 1e12
        print(f"MFU: {achieved / peak:.2%} of the given peak, {rate(peak)}")
    else:
        peak = best_matmul_flop_per_s(device, DTYPES[dtype])
        print(
            f"share of the best {dtype} matmul measured here ({rate(peak)}): "
            f"{achieved / peak:.1%} (give --peak-tflops for MFU against the datasheet)"
        )


if __name__ == "__main__":
    main()
