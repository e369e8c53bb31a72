"""How large each timed measurement is on each kind of device: one table, read by three modules.

One job: the sizes. :data:`PLANS` holds, per device kind (``cpu``, ``mps``, ``cuda``), the
sizes of the matmul benchmarks (``bench``: :class:`gpulesson.timing.bench.DevicePlan`),
of the shape-alignment timings (``alignment``:
:class:`gpulesson.timing.alignment.AlignmentPlan`) and of the decode sweep, full and
``--quick`` (``decode``, ``decode_quick``: :class:`gpulesson.timing.decode.DecodePlan`, its
``config`` the fields of :class:`gpulesson.memory.gpt2.GPT2Config`). Each of those modules
builds its own frozen plans from its rows here, so a new device kind, or a resized
measurement, is one edit in one place.

Why the sizes are what they are:

- ``bench``: the CPU plan keeps the three lessons' benchmarks within a few seconds on a
  2-core machine; the GPU plans are sized so launch overhead is negligible.
- ``alignment``: a CPU build times small shapes in fp32 on one thread (two threads
  spin-wait on a shared 2-core machine and the neighbours' readings swing apart); a GPU
  the sizes the lesson names, in the dtypes tensor cores serve. The vocabulary projection
  is a GPT-2-small output layer: 768 wide on a GPU, narrower on a CPU to stay fast.
- ``decode``: the CPU plan keeps the lesson's sweep to a few seconds on 2 cores (the
  prefills of the large batches cost most, hence the short prompt), on one thread: when
  the other core is busy, two threads spin-wait on each other and readings swing tenfold.
  The CPU model's fp32 weights (about 110 MB) are over three times this machine class's
  last-level cache, so every step streams them from memory; the CUDA model's fp16 weights
  (about 5.4 GB) take about a millisecond to read on an H100, long against the ~160
  kernel launches of an eager step. ``decode_quick`` sizes are for
  ``gpulesson measure --quick``.

>>> DEVICE_KINDS
('cpu', 'mps', 'cuda')
>>> sizes("cpu", "bench")["illusion_n"], sizes("cuda", "alignment")["square_n"]
(1024, 4096)
>>> sizes("tpu", "bench")
Traceback (most recent call last):
...
ValueError: device='tpu' must be cpu, mps or cuda
"""

from __future__ import annotations

from typing import Any

from gpulesson.units import GIB, MIB

DEVICE_KINDS = ("cpu", "mps", "cuda")
MEASUREMENTS = ("bench", "alignment", "decode", "decode_quick")

PLANS: dict[str, dict[str, dict[str, Any]]] = {
    "cpu": {
        "bench": {
            "sweep_budget_s": 2.5,
            "sweep_max_n": 2048,
            "min_run_time_s": 0.1,
            "illusion_n": 1024,
            "stream_bytes": 64 * MIB,
            "small_matmul_n": 64,
            "large_matmul_n": 1024,
        },
        "alignment": {
            "square_n": 512,
            "tokens": 32,
            "hidden": 64,
            "dtypes": ("fp32",),
            "rounds": 7,
            "calls_per_sample": 1,
            "threads": 1,
        },
        "decode": {
            "config": {"vocab_size": 4096, "seq_len": 64, "hidden": 512, "heads": 8, "layers": 8},
            "dtype": "fp32",
            "batches": (1, 4, 16, 64),
            "prompt_tokens": 4,
            "new_tokens": 6,
            "warmup_steps": 1,
            "bandwidth_bytes": 64 * MIB,
            "matmul_n": 1024,
            "threads": 1,
        },
        "decode_quick": {
            "config": {"vocab_size": 4096, "seq_len": 64, "hidden": 512, "heads": 8, "layers": 8},
            "dtype": "fp32",
            "batches": (1, 16),
            "prompt_tokens": 4,
            "new_tokens": 6,
            "warmup_steps": 1,
            "bandwidth_bytes": 64 * MIB,
            "matmul_n": 512,
            "threads": 1,
        },
    },
    "mps": {
        "bench": {
            "sweep_budget_s": 6.0,
            "sweep_max_n": 8192,
            "min_run_time_s": 0.1,
            "illusion_n": 4096,
            "stream_bytes": 256 * MIB,
            "small_matmul_n": 64,
            "large_matmul_n": 4096,
        },
        "alignment": {
            "square_n": 4096,
            "tokens": 2048,
            "hidden": 768,
            "dtypes": ("fp32", "fp16"),
            "rounds": 7,
            "calls_per_sample": 3,
        },
        "decode": {
            "config": {
                "vocab_size": 32000,
                "seq_len": 128,
                "hidden": 2048,
                "heads": 16,
                "layers": 8,
            },
            "dtype": "fp16",
            "batches": (1, 8, 32, 128),
            "prompt_tokens": 16,
            "new_tokens": 16,
            "warmup_steps": 3,
            "bandwidth_bytes": 256 * MIB,
            "matmul_n": 4096,
        },
        "decode_quick": {
            "config": {
                "vocab_size": 32000,
                "seq_len": 128,
                "hidden": 2048,
                "heads": 16,
                "layers": 4,
            },
            "dtype": "fp16",
            "batches": (1, 32),
            "prompt_tokens": 16,
            "new_tokens": 8,
            "warmup_steps": 2,
            "bandwidth_bytes": 256 * MIB,
            "matmul_n": 2048,
        },
    },
    "cuda": {
        "bench": {
            "sweep_budget_s": 8.0,
            "sweep_max_n": 16384,
            "min_run_time_s": 0.1,
            "illusion_n": 4096,
            "stream_bytes": 1024 * MIB,
            "small_matmul_n": 64,
            "large_matmul_n": 8192,
        },
        "alignment": {
            "square_n": 4096,
            "tokens": 8192,
            "hidden": 768,
            "dtypes": ("fp32", "bf16", "fp16"),
            "rounds": 9,
            "calls_per_sample": 5,
        },
        "decode": {
            "config": {
                "vocab_size": 32000,
                "seq_len": 128,
                "hidden": 5120,
                "heads": 40,
                "layers": 8,
            },
            "dtype": "fp16",
            "batches": (1, 16, 64, 256),
            "prompt_tokens": 32,
            "new_tokens": 16,
            "warmup_steps": 3,
            "bandwidth_bytes": GIB,
            "matmul_n": 8192,
        },
        "decode_quick": {
            "config": {
                "vocab_size": 32000,
                "seq_len": 128,
                "hidden": 2048,
                "heads": 16,
                "layers": 8,
            },
            "dtype": "fp16",
            "batches": (1, 16, 64),
            "prompt_tokens": 16,
            "new_tokens": 8,
            "warmup_steps": 2,
            "bandwidth_bytes": 512 * MIB,
            "matmul_n": 4096,
        },
    },
}


def sizes(device: str, measurement: str) -> dict[str, Any]:
    """The sizes of one measurement on one device kind, as keyword fields of its plan."""
    if device not in PLANS:
        raise ValueError(f"device={device!r} must be {', '.join(DEVICE_KINDS[:-1])} or cuda")
    if measurement not in MEASUREMENTS:
        raise ValueError(f"measurement={measurement!r} must be one of {', '.join(MEASUREMENTS)}")
    return dict(PLANS[device][measurement])
