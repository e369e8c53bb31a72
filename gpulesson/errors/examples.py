"""Example error messages, constructed for the lessons, keyed by a short name.

One job: hold the teaching examples. They follow PyTorch's wordings; the
numbers are made up, and every page that shows one labels it as an example.

Used by the lessons ``lessons/oom.md``, ``lessons/fix-ladder.md`` and
``lessons/cuda-errors.md`` (through :mod:`gpulesson.errors.render`).

>>> "Tried to allocate 2.00 GiB" in EXAMPLES["fragmentation"]
True
"""

from __future__ import annotations

# Example messages for the lessons. They follow PyTorch's wordings; the numbers are
# made up for teaching and every page that shows one labels it as an example.
EXAMPLES: dict[str, str] = {
    "exhaustion": (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. "
        "GPU 0 has a total capacity of 15.77 GiB of which 412.00 MiB is free. "
        "Including non-PyTorch memory, this process has 15.36 GiB memory in use. "
        "Of the allocated memory 14.80 GiB is allocated by PyTorch, and 180.25 MiB is "
        "reserved by PyTorch but unallocated."
    ),
    "fragmentation": (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
        "GPU 0 has a total capacity of 23.68 GiB of which 1.10 GiB is free. "
        "Including non-PyTorch memory, this process has 22.30 GiB memory in use. "
        "Of the allocated memory 18.90 GiB is allocated by PyTorch, and 3.05 GiB is "
        "reserved by PyTorch but unallocated. If reserved but unallocated memory is large "
        "try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation."
    ),
    "too_large": (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 96.00 GiB. "
        "GPU 0 has a total capacity of 79.19 GiB of which 71.30 GiB is free. "
        "Including non-PyTorch memory, this process has 7.40 GiB memory in use. "
        "Of the allocated memory 6.90 GiB is allocated by PyTorch, and 20.00 MiB is "
        "reserved by PyTorch but unallocated."
    ),
    "shared_card": (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 256.00 MiB. "
        "GPU 0 has a total capacity of 39.39 GiB of which 120.00 MiB is free. "
        "Process 4242 has 33.10 GiB memory in use. "
        "Including non-PyTorch memory, this process has 6.15 GiB memory in use. "
        "Of the allocated memory 5.60 GiB is allocated by PyTorch, and 60.00 MiB is "
        "reserved by PyTorch but unallocated."
    ),
    "torch_1x": (
        "RuntimeError: CUDA out of memory. Tried to allocate 512.00 MiB (GPU 0; "
        "11.17 GiB total capacity; 10.31 GiB already allocated; 98.25 MiB free; "
        "10.58 GiB reserved in total by PyTorch)"
    ),
    "mps": (
        "RuntimeError: MPS backend out of memory (MPS allocated: 17.20 GB, other "
        "allocations: 0.75 GB, max allowed: 18.13 GB). Tried to allocate 256.00 MB on "
        "private pool. Use PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.0 to disable upper limit for "
        "memory allocations (may cause system failure)."
    ),
    "host_ram": (
        "RuntimeError: [enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: "
        "can't allocate memory: you tried to allocate 34359738368 bytes. Error code 12 "
        "(Cannot allocate memory)"
    ),
    "device_assert": (
        "../aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: "
        "block: [0,0,0], thread: [3,0,0] Assertion `t >= 0 && t < n_classes` failed.\n"
        "RuntimeError: CUDA error: device-side assert triggered\n"
        "CUDA kernel errors might be asynchronously reported at some other API call, so the "
        "stacktrace below might be incorrect.\n"
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1"
    ),
    "illegal_access": (
        "RuntimeError: CUDA error: an illegal memory access was encountered\n"
        "CUDA kernel errors might be asynchronously reported at some other API call, so the "
        "stacktrace below might be incorrect."
    ),
    "no_kernel_image": (
        "UserWarning: NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible "
        "with the current PyTorch installation.\nThe current PyTorch install supports CUDA "
        "capabilities sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90.\n"
        "RuntimeError: CUDA error: no kernel image is available for execution on the device"
    ),
    "driver_too_old": (
        "RuntimeError: The NVIDIA driver on your system is too old (found version 11040). "
        "Please update your GPU driver by downloading and installing a new version from the "
        "URL: http://www.nvidia.com/Download/index.aspx"
    ),
    "no_driver": (
        "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an "
        "NVIDIA GPU and installed a driver from http://www.nvidia.com/Download/index.aspx"
    ),
    "cpu_only_wheel": "AssertionError: Torch not compiled with CUDA enabled",
}
