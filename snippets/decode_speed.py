"""Time greedy decoding of a small random transformer with a KV cache, by batch size.

Each decode step reads every weight once and every cached key and value of every
sequence, so tokens/s cannot beat batch x bandwidth / bytes per step. This script
prints the measured tokens/s next to that bound, for the bandwidth you give with
--bandwidth-gbs (your GPU's datasheet figure) or, without it, a copy bandwidth it
measures on the device. Runs on CUDA, Apple MPS and CPU.

    python decode_speed.py --batches 1,8,32 --bandwidth-gbs 3350
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F
from torch import nn


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


class Block(nn.Module):
    """A pre-LayerNorm transformer block whose attention reads and writes a KV cache."""

    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.ln_2 = nn.LayerNorm(hidden)
        self.fc = nn.Linear(hidden, 4 * hidden)
        self.out = nn.Linear(4 * hidden, hidden)

    def forward(self, x: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, start: int):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln_1(x)).split(c, dim=2)
        # (b, t, c) -> (b, heads, t, head_dim)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        end = start + t
        k_cache[:, :, start:end] = k  # keep this step's keys and values for later steps
        v_cache[:, :, start:end] = v
        mask = None
        if t > 1:  # the prompt: each position sees itself and what came before it
            mask = torch.ones(t, end, dtype=torch.bool, device=x.device).tril(diagonal=start)
        y = F.scaled_dot_product_attention(
            q, k_cache[:, :, :end], v_cache[:, :, :end], attn_mask=mask
        )
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.out(F.gelu(self.fc(self.ln_2(x))))


class TinyLM(nn.Module):
    """Token and position embeddings, blocks, a final LayerNorm and a tied output head."""

    def __init__(self, vocab: int, hidden: int, heads: int, layers: int, max_tokens: int):
        super().__init__()
        self.tok = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(max_tokens, hidden)
        self.blocks = nn.ModuleList(Block(hidden, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(hidden)

    def forward(
        self, idx: torch.Tensor, caches: list[tuple[torch.Tensor, torch.Tensor]], start: int
    ):
        positions = torch.arange(start, start + idx.shape[1], device=idx.device)
        x = self.tok(idx) + self.pos(positions)
        for block, (k_cache, v_cache) in zip(self.blocks, caches, strict=True):
            x = block(x, k_cache, v_cache, start)
        return self.ln_f(x) @ self.tok.weight.T  # logits: (batch, t, vocab)


def weight_bytes(model: TinyLM) -> int:
    """Bytes one decode step reads of the weights: all of them, one row of the position table."""
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    table = model.pos.weight
    return total - table.numel() * table.element_size() + table[0].numel() * table.element_size()


@torch.no_grad()
def decode_step_times(
    model: TinyLM, batch: int, prompt: int, tokens: int, warmup: int, device: torch.device
) -> tuple[list[float], int]:
    """Prefill a random prompt, then time each greedy step; (seconds per step, KV bytes read)."""
    first = model.blocks[0]
    hidden, heads = first.ln_1.normalized_shape[0], first.heads
    dtype = first.qkv.weight.dtype
    capacity = prompt + warmup + tokens
    shape = (batch, heads, capacity, hidden // heads)
    caches = [
        (
            torch.zeros(shape, device=device, dtype=dtype),
            torch.zeros(shape, device=device, dtype=dtype),
        )
        for _ in model.blocks
    ]
    idx = torch.randint(0, model.tok.num_embeddings, (batch, prompt), device=device)
    logits = model(idx, caches, 0)  # the prefill: the whole prompt in one pass
    position = prompt
    samples = []
    for step in range(warmup + tokens):
        token = logits[:, -1:].argmax(dim=-1)  # greedy: the most likely next token
        synchronize(device)
        start = time.perf_counter()
        logits = model(token, caches, position)
        synchronize(device)
        if step >= warmup:
            samples.append(time.perf_counter() - start)
        position += 1
    per_token = 2 * len(model.blocks) * hidden * torch.empty((), dtype=dtype).element_size()
    mean_context = prompt + warmup + (tokens + 1) / 2  # positions the timed steps attend to
    return samples, int(per_token * batch * mean_context)


def copy_bandwidth(device: torch.device, n_bytes: int, repeats: int = 5) -> float:
    """Bytes per second of a large copy (read + write), the median of a few."""
    src = torch.ones(n_bytes // 4, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)
    times = []
    for _ in range(repeats):
        synchronize(device)
        start = time.perf_counter()
        dst.copy_(src)
        synchronize(device)
        times.append(time.perf_counter() - start)
    return 2 * n_bytes / statistics.median(times)


class Parser(argparse.ArgumentParser):
    """argparse whose errors are one line (the problem and the fix) and exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def parse_batches(text: str) -> list[int]:
    """'1,4,16' -> [1, 4, 16]; ValueError for anything else."""
    batches = [int(part) for part in text.split(",")]
    if not batches or min(batches) < 1:
        raise ValueError(text)
    return batches


def main() -> None:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="1,4,16", help="batch sizes, comma-separated")
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--prompt", type=int, default=16, help="prompt tokens per sequence")
    parser.add_argument("--tokens", type=int, default=16, help="decode steps timed per batch")
    parser.add_argument("--dtype", choices=DTYPES, help="default: fp16 on a GPU, fp32 on CPU")
    parser.add_argument(
        "--bandwidth-gbs",
        type=float,
        help="memory bandwidth in GB/s for the bound (default: measure a copy on the device)",
    )
    args = parser.parse_args()
    try:
        batches = parse_batches(args.batches)
    except ValueError:
        parser.error(f"--batches {args.batches!r} must be positive whole numbers, e.g. 1,4,16")
    sizes = (args.layers, args.hidden, args.heads, args.vocab, args.prompt, args.tokens)
    if min(sizes) < 1:
        parser.error("--layers, --hidden, --heads, --vocab, --prompt and --tokens must be >= 1")
    if args.hidden % args.heads:
        parser.error(f"--hidden {args.hidden} is not divisible by --heads {args.heads}")
    if args.bandwidth_gbs is not None and not args.bandwidth_gbs > 0:
        parser.error(f"--bandwidth-gbs {args.bandwidth_gbs} must be positive, e.g. 3350")

    device = pick_device()
    dtype = DTYPES[args.dtype or ("fp32" if device.type == "cpu" else "fp16")]
    warmup = 2
    torch.manual_seed(0)
    model = TinyLM(
        args.vocab, args.hidden, args.heads, args.layers, args.prompt + warmup + args.tokens
    )
    model = model.to(device=device, dtype=dtype).eval()
    weights = weight_bytes(model)
    if args.bandwidth_gbs is None:
        bandwidth = copy_bandwidth(device, 64 * 2**20 if device.type == "cpu" else 2**30)
        source = "measured copy"
    else:
        bandwidth = args.bandwidth_gbs * 1e9
        source = "given"
    print(
        f"{device.type}, {str(dtype).removeprefix('torch.')}: {weights / 1e6:,.1f} MB of weights, "
        f"bandwidth {bandwidth / 1e9:,.1f} GB/s ({source})"
    )
    print(f"{'batch':>6} {'tokens/s':>10} {'per seq':>9} {'MB/step':>9} {'bound':>10} {'share':>6}")
    for batch in batches:
        samples, kv_bytes = decode_step_times(
            model, batch, args.prompt, args.tokens, warmup, device
        )
        step_s = statistics.median(samples)
        bytes_per_step = weights + kv_bytes
        bound = batch * bandwidth / bytes_per_step  # tokens/s if reading bytes were all
        measured = batch / step_s
        print(
            f"{batch:>6} {measured:>10,.1f} {1 / step_s:>9,.1f} {bytes_per_step / 1e6:>9,.2f} "
            f"{bound:>10,.1f} {measured / bound:>6.0%}"
        )


if __name__ == "__main__":
    main()
