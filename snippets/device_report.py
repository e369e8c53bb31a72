"""Print what PyTorch can see: CUDA build, GPUs and their memory, Apple MPS.

Run it before trusting any runtime (your laptop, a hosted notebook, a rented
instance). Needs only torch. Memory is shown in GB (10**9 bytes) and GiB (2**30).
"""

import argparse
import platform

import torch


def report_lines() -> list[str]:
    """One line per fact, in the order to read them."""
    lines = [
        f"Python: {platform.python_version()}",
        f"torch: {torch.__version__}",
        f"torch built with CUDA: {torch.version.cuda}  (None means a CPU-only build)",
        f"CUDA available: {torch.cuda.is_available()}",
    ]
    if torch.cuda.is_available():
        for index in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(index)
            lines.append(
                f"GPU {index}: {props.name}, {props.total_memory / 1e9:.1f} GB "
                f"({props.total_memory / 2**30:.1f} GiB), "
                f"compute capability {props.major}.{props.minor}"
            )
    lines.append(f"MPS built: {torch.backends.mps.is_built()}")
    lines.append(f"MPS available: {torch.backends.mps.is_available()}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args()
    print("\n".join(report_lines()))


if __name__ == "__main__":
    main()
