"""Allocated vs reserved: `del` returns memory to PyTorch's cache, empty_cache() to the driver.

PyTorch's caching allocator keeps freed GPU memory for reuse instead of handing
it back: memory_allocated() counts bytes in live tensors, memory_reserved()
counts what the allocator holds from the driver (live tensors plus its cache).
This script allocates one tensor, deletes it, then empties the cache, and
prints both numbers after each step. On Apple MPS it shows the matching pair
(current_allocated_memory and driver_allocated_memory); on a CPU there is no
caching allocator to show, so it explains that and exits with status 0.
Needs only torch.
"""

import argparse

import torch

MIB = 2**20


def cuda_numbers() -> tuple[int, int]:
    return torch.cuda.memory_allocated(), torch.cuda.memory_reserved()


def mps_numbers() -> tuple[int, int]:
    return torch.mps.current_allocated_memory(), torch.mps.driver_allocated_memory()


def show(step: str, numbers: tuple[int, int]) -> None:
    allocated, reserved = numbers
    print(f"{step:<34} allocated {allocated / MIB:9.1f} MiB   reserved {reserved / MIB:9.1f} MiB")


def demo(device: str, size_mib: int) -> None:
    numbers = cuda_numbers if device == "cuda" else mps_numbers
    sync = torch.cuda.synchronize if device == "cuda" else torch.mps.synchronize
    empty = torch.cuda.empty_cache if device == "cuda" else torch.mps.empty_cache
    empty()
    show("start", numbers())
    x = torch.ones(size_mib * MIB // 4, dtype=torch.float32, device=device)  # 4 bytes each
    sync()
    show(f"after allocating {size_mib} MiB", numbers())
    del x
    show("after del (back in the cache)", numbers())
    empty()
    show("after empty_cache() (to the driver)", numbers())
    print(
        "\ndel lowers 'allocated' at once; 'reserved' stays until empty_cache(), because "
        "the allocator keeps freed blocks to reuse them without asking the driver again."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--size-mib", type=int, default=256, help="size of the tensor in MiB (default 256)"
    )
    args = parser.parse_args()
    if args.size_mib < 1:
        parser.error("--size-mib must be a positive number of MiB, e.g. --size-mib 256")
    if torch.cuda.is_available():
        demo("cuda", args.size_mib)
    elif torch.backends.mps.is_available():
        demo("mps", args.size_mib)
    else:
        print(
            "No GPU here (no CUDA, no MPS), so there is no caching allocator to show: on "
            "the CPU, PyTorch hands freed tensors back to the system allocator at once. "
            "On a CUDA machine this script prints torch.cuda.memory_allocated() (bytes in "
            "live tensors) and torch.cuda.memory_reserved() (bytes the cache holds from the "
            "driver) after an allocation, a del, and torch.cuda.empty_cache()."
        )


if __name__ == "__main__":
    main()
