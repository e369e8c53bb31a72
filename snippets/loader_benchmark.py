"""Is your training step waiting for data? Time a DataLoader loop by num_workers.

Each item costs real CPU work (a text is generated and tokenized in pure Python, as a
tokenizer or an image decoder would cost), and each step is a stand-in for the GPU: the
host sleeps, as it does while a GPU computes. For every worker count the script prints
batches per second, the share of each batch the step sat idle waiting for data, and how
long the first batch of each epoch took (starting worker processes costs time, unless
persistent_workers=True keeps them). On CUDA the batches are pinned and copied with
non_blocking=True. Needs only torch; runs on CUDA, Apple MPS or CPU. To measure your
own data, replace TextDataset with your Dataset.
"""

import argparse
import random
import re
import statistics
import time

import torch
from torch.utils.data import DataLoader, Dataset

WORD = re.compile(r"\w+|[^\w\s]")


def pick_device() -> torch.device:
    """cuda, then mps, then cpu."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


class TextDataset(Dataset):
    """Item i: `words` random words (seeded by i) cut into known pieces, as token ids."""

    def __init__(self, items: int, words: int, seq_len: int = 256) -> None:
        rng = random.Random(0)
        letters = "abcdefghijklmnopqrstuvwxyz"
        self.vocab_words = [
            "".join(rng.choice(letters) for _ in range(rng.randint(3, 11))) for _ in range(400)
        ]
        pieces = {w[:k] for w in self.vocab_words for k in range(1, 5)} | set(letters)
        pieces |= {"##" + w[i : i + 2] for w in self.vocab_words for i in range(1, len(w))}
        pieces |= {"##" + c for c in letters}
        self.vocab = {p: i + 2 for i, p in enumerate(sorted(pieces))}  # 0 = pad, 1 = unknown
        self.items, self.words, self.seq_len = items, words, seq_len

    def __len__(self) -> int:
        return self.items

    def __getitem__(self, index: int) -> torch.Tensor:
        rng = random.Random(index)
        text = " ".join(rng.choice(self.vocab_words) for _ in range(self.words))
        ids = []
        for word in WORD.findall(text):  # greedy longest match, WordPiece style
            start = 0
            while start < len(word):
                for end in range(len(word), start, -1):
                    piece = word[start:end] if start == 0 else "##" + word[start:end]
                    if piece in self.vocab:
                        ids.append(self.vocab[piece])
                        start = end
                        break
                else:
                    ids.append(1)
                    break
        ids = ids[: self.seq_len] + [0] * max(0, self.seq_len - len(ids))
        return torch.tensor(ids)


def run_loop(loader: DataLoader, device: torch.device, epochs: int, step_s: float):
    """Fetch, copy to the device, 'step'; return (seconds per batch, first-batch seconds)."""
    per_batch, firsts = [], []
    for _ in range(epochs):
        last = time.perf_counter()  # iter() starts the workers unless they persist
        gaps = []
        for i, batch in enumerate(loader):
            batch = batch.to(device, non_blocking=True)  # async only from pinned memory
            now = time.perf_counter()
            (firsts if i == 0 else gaps).append(now - last)
            last = now
            time.sleep(step_s)  # stand-in for the GPU step: the host waits, the cores idle
        per_batch.append(sum(gaps) / len(gaps))
    return statistics.median(per_batch), firsts


class Parser(argparse.ArgumentParser):
    """argparse whose errors are one line (the problem and the fix) and exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def main() -> None:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--workers",
        type=int,
        nargs="+",
        default=[0, 1, 2],
        help="num_workers values to time (default: 0 1 2)",
    )
    parser.add_argument("--batch-size", type=int, default=16, help="items per batch (16)")
    parser.add_argument("--batches", type=int, default=10, help="batches per epoch (10)")
    parser.add_argument("--epochs", type=int, default=2, help="epochs per setting (2)")
    parser.add_argument("--words", type=int, default=300, help="words per item: CPU work (300)")
    parser.add_argument(
        "--step-ms",
        type=float,
        default=None,
        help="the stand-in step per batch in ms (default: one batch's load time)",
    )
    parser.add_argument(
        "--persistent", action="store_true", help="keep worker processes alive between epochs"
    )
    args = parser.parse_args()
    if min(args.workers) < 0:
        parser.error(f"--workers {min(args.workers)}: use 0 (main process) or more, e.g. 0 1 2")
    if args.batch_size < 1 or args.batches < 2 or args.epochs < 1 or args.words < 1:
        parser.error("use --batch-size >= 1, --batches >= 2, --epochs >= 1 and --words >= 1")
    if args.step_ms is not None and args.step_ms < 0:
        parser.error(f"--step-ms {args.step_ms}: a step cannot take negative time; try 10")

    device = pick_device()
    data = TextDataset(items=args.batch_size * args.batches, words=args.words)
    data[0]  # warm-up
    start = time.perf_counter()
    for i in range(args.batch_size):
        data[i]
    load_s = time.perf_counter() - start
    step_s = load_s if args.step_ms is None else args.step_ms / 1e3
    pin = device.type == "cuda"  # pinned memory is what lets non_blocking copies overlap
    print(
        f"device {device.type}; one batch of {args.batch_size} loads in {load_s * 1e3:.1f} ms "
        f"in the main process; the step sleeps {step_s * 1e3:.1f} ms; pin_memory={pin}"
    )
    print(f"{'workers':>8} {'batches/s':>10} {'step idle':>10} {'1st batch, each epoch (ms)':>28}")
    rates = {}
    for workers in args.workers:
        loader = DataLoader(
            data,
            batch_size=args.batch_size,
            num_workers=workers,
            pin_memory=pin,
            persistent_workers=args.persistent and workers > 0,
        )
        per_batch_s, firsts = run_loop(loader, device, args.epochs, step_s)
        del loader  # ends the workers, persistent ones included
        rates[workers] = 1 / per_batch_s
        idle = max(0.0, 1 - step_s / per_batch_s)
        first_ms = ", ".join(f"{f * 1e3:.0f}" for f in firsts)
        print(f"{workers:>8} {rates[workers]:>10.1f} {idle:>10.0%} {first_ms:>28}")
    best = max(rates, key=rates.get)
    print(
        f"Most batches/s: {best} workers ({rates[best]:.1f}/s); the step alone allows "
        f"{1 / step_s:.1f}/s when no batch is ever late."
    )


if __name__ == "__main__":
    main()
