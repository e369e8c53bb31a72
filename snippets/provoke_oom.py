"""Provoke a CUDA out-of-memory error on purpose, safely, and read its numbers.

Allocates 1 GiB blocks until the allocator refuses, printing allocated and
reserved memory after each block, then prints the error and a short reading of
the numbers in it. Safe by construction: it first caps this process with
torch.cuda.set_per_process_memory_fraction (default 2 GiB, --limit-gib), so it
fails long before the card is full and other programs keep their memory; when
it is done it frees every block, empties the cache and lifts the cap.

On a machine without CUDA (CPU or Apple MPS) it refuses and exits with status 2:
exhausting host or unified memory can freeze the whole machine instead of
raising a clean exception. Needs only torch.
"""

import argparse
import re
import sys

import torch

GIB = 2**30


def read_numbers(message: str) -> dict[str, float]:
    """The sizes in a CUDA OOM message, in GiB, keyed by what they measure."""
    units = {"bytes": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}
    size = r"(\d+(?:\.\d+)?) (bytes|KiB|MiB|GiB)"
    patterns = {
        "requested": r"Tried to allocate " + size,
        "total": r"total capac\w* of " + size,
        "free": r"of which " + size + " is free",
        "cap": size + r" allowed",
        "allocated": size + r" is allocated by PyTorch",
        "cache": size + r" is reserved by PyTorch but unallocated",
    }
    numbers = {}
    for name, pattern in patterns.items():
        match = re.search(pattern, " ".join(message.split()))
        if match:
            numbers[name] = float(match.group(1)) * units[match.group(2)] / GIB
    return numbers


def reading(numbers: dict[str, float]) -> list[str]:
    """A few lines that say what the numbers mean.

    Before raising, PyTorch's caching allocator releases the cached blocks no tensor
    uses and retries, so a cache still large enough means the memory is in pieces
    (fragmentation); free memory on the card without such a cache points outside the
    allocator (a cap, another process), where expandable_segments cannot help.
    """
    lines = [f"  {name:<10} {value:8.2f} GiB" for name, value in numbers.items()]
    requested = numbers.get("requested")
    if requested is None:
        return lines + ["  (this message states no sizes)"]
    if numbers.get("cache", 0.0) >= requested:
        lines.append(
            "  The allocator's reserved-but-unallocated cache could hold the request, but not "
            "in one piece: fragmentation."
        )
    elif "cap" in numbers:
        lines.append(
            "  This process hit its cap, whatever the card still has free: the cap is "
            "exhausted. Without a cap the same happens when the card itself is full."
        )
    elif numbers.get("free", 0.0) >= requested:
        lines.append(
            "  The card reports enough free memory but the cache cannot hold the request: "
            "the cause is outside PyTorch's allocator (a cap, another process), not "
            "fragmentation."
        )
    else:
        lines.append("  Neither free memory nor the cache could hold it: exhaustion.")
    return lines


def provoke(limit_gib: float, block_gib: float) -> None:
    """Allocate blocks under a cap until OOM; always free them and lift the cap."""
    device = torch.device("cuda")
    total = torch.cuda.get_device_properties(device).total_memory
    fraction = min(limit_gib * GIB / total, 1.0)
    print(f"Card: {torch.cuda.get_device_name(device)}, {total / GIB:.2f} GiB")
    print(f"Cap for this process: {fraction * total / GIB:.2f} GiB ({fraction:.3f} of the card)")
    torch.cuda.set_per_process_memory_fraction(fraction, device)
    elements = int(block_gib * GIB) // 4  # float32 is 4 bytes per element
    blocks = []
    try:
        while True:
            blocks.append(torch.empty(elements, dtype=torch.float32, device=device))
            print(
                f"block {len(blocks)}: allocated {torch.cuda.memory_allocated(device) / GIB:.2f}"
                f" GiB, reserved {torch.cuda.memory_reserved(device) / GIB:.2f} GiB"
            )
    except torch.cuda.OutOfMemoryError as error:
        message = str(error)
        print(f"\nOut of memory after {len(blocks)} blocks of {block_gib:g} GiB. The message:")
        print(message.splitlines()[0] if message else repr(error))
        print("\nReading its numbers:")
        print("\n".join(reading(read_numbers(message))))
    finally:
        del blocks
        torch.cuda.empty_cache()
        torch.cuda.set_per_process_memory_fraction(1.0, device)
        print(
            f"\nCleaned up: allocated {torch.cuda.memory_allocated(device) / GIB:.2f} GiB, "
            f"reserved {torch.cuda.memory_reserved(device) / GIB:.2f} GiB, cap lifted."
        )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="Exit status: 0 after a provoked OOM on CUDA; 2 when there is no CUDA device "
        "(the script refuses rather than exhaust host or unified memory).",
    )
    parser.add_argument(
        "--limit-gib", type=float, default=2.0, help="cap for this process in GiB (default 2)"
    )
    parser.add_argument(
        "--block-gib", type=float, default=1.0, help="size of each block in GiB (default 1)"
    )
    args = parser.parse_args()
    if args.limit_gib <= 0 or args.block_gib <= 0:
        parser.error("--limit-gib and --block-gib must be positive, e.g. --limit-gib 2")
    if not torch.cuda.is_available():
        backend = "Apple MPS" if torch.backends.mps.is_available() else "the CPU"
        print(
            f"No CUDA device: this machine runs on {backend}. Refusing to provoke an "
            "out-of-memory error here: exhausting host or unified memory can freeze the "
            "machine or get processes killed, with no clean exception to read. Run this "
            "on a CUDA GPU (a hosted notebook with a GPU attached is enough).",
            file=sys.stderr,
        )
        return 2
    provoke(args.limit_gib, args.block_gib)
    return 0


if __name__ == "__main__":
    sys.exit(main())
