"""Pick the best available PyTorch device: CUDA, then Apple MPS, then CPU.

Copy pick_device() into your own scripts and use .to(device) everywhere,
never .cuda(). Run this file to see which device your machine gets.
"""

import argparse

import torch


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args()
    device = pick_device()
    print(f"Using: {device}")
    x = torch.randn(256, 256).to(device)  # move data with .to(device), never .cuda()
    y = x @ x
    synchronize(device)
    print(f"A 256x256 matmul ran on {y.device}; result sum is finite: {bool(y.sum().isfinite())}")


if __name__ == "__main__":
    main()
