"""Per-SM limits by compute capability and reference GPUs' SM counts, from ``gpu_limits.json``.

Every figure in the file carries a source key; :func:`source_url` turns it into the URL
the page cites.

>>> cc = compute_capability("8.0")
>>> cc.max_warps_per_sm, cc.shared_per_sm_bytes
(64, 167936)
>>> gpu("h100-sxm").sm_count
132
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

DATA_FILE = Path(__file__).with_name("gpu_limits.json")
KIB = 1024


@cache
def raw() -> dict[str, Any]:
    """The parsed data file."""
    return json.loads(DATA_FILE.read_text(encoding="utf-8"))


def source_url(key: str) -> str:
    """The URL of a source key.

    >>> source_url("ada").startswith("https://")
    True
    """
    sources = raw()["sources"]
    if key not in sources:
        raise ValueError(f"gpu_limits.json: unknown source {key!r}: use one of {sorted(sources)}")
    return sources[key]


@dataclass(frozen=True, kw_only=True)
class Granularity:
    """How the hardware rounds allocations (cuda_occupancy.h)."""

    warp_size: int
    register_allocation_unit_per_warp: int
    register_sub_partitions: int
    shared_allocation_unit_bytes: int


@dataclass(frozen=True, kw_only=True)
class ComputeCapability:
    """One compute capability's per-SM limits."""

    name: str
    max_threads_per_sm: int
    max_blocks_per_sm: int
    registers_per_sm: int
    max_registers_per_thread: int
    max_threads_per_block: int
    shared_per_sm_bytes: int
    reserved_shared_per_block_bytes: int
    granularity: Granularity
    source: str

    @property
    def max_warps_per_sm(self) -> int:
        """Warp slots per SM: threads per SM over the warp size."""
        return self.max_threads_per_sm // self.granularity.warp_size


@dataclass(frozen=True, kw_only=True)
class GpuLimits:
    """One reference GPU: its SM count, L2 size and compute capability."""

    id: str
    name: str
    compute_capability: str
    sm_count: int
    l2_bytes: int
    source: str


def granularity() -> Granularity:
    """The allocation granularities."""
    g = raw()["granularity"]
    return Granularity(
        warp_size=g["warp_size"],
        register_allocation_unit_per_warp=g["register_allocation_unit_per_warp"],
        register_sub_partitions=g["register_sub_partitions"],
        shared_allocation_unit_bytes=g["shared_allocation_unit_bytes"],
    )


def compute_capability(name: str) -> ComputeCapability:
    """The limits of compute capability ``name`` ("8.0"), or ValueError naming the known ones.

    >>> compute_capability("5.0")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: gpu_limits.json: no compute capability '5.0': use one of 7.0, 7.5, ...
    """
    table = raw()["compute_capabilities"]
    if name not in table:
        known = ", ".join(table)
        raise ValueError(f"gpu_limits.json: no compute capability {name!r}: use one of {known}")
    row = table[name]
    return ComputeCapability(
        name=name,
        max_threads_per_sm=row["max_threads_per_sm"],
        max_blocks_per_sm=row["max_blocks_per_sm"],
        registers_per_sm=row["registers_per_sm"],
        max_registers_per_thread=row["max_registers_per_thread"],
        max_threads_per_block=row["max_threads_per_block"],
        shared_per_sm_bytes=row["shared_per_sm_kib"] * KIB,
        reserved_shared_per_block_bytes=row["reserved_shared_per_block_kib"] * KIB,
        granularity=granularity(),
        source=row["source"],
    )


def gpu(gpu_id: str) -> GpuLimits:
    """A reference GPU's row, or ValueError naming the known ids."""
    table = raw()["gpus"]
    if gpu_id not in table:
        raise ValueError(f"gpu_limits.json: no GPU {gpu_id!r}: use one of {', '.join(table)}")
    row = table[gpu_id]
    return GpuLimits(
        id=gpu_id,
        name=row["name"],
        compute_capability=row["compute_capability"],
        sm_count=row["sm_count"],
        l2_bytes=row["l2_kib"] * KIB,
        source=row["source"],
    )


def gpus() -> tuple[GpuLimits, ...]:
    """Every reference GPU in the file, in file order.

    >>> [g.id for g in gpus()][:2]
    ['t4', 'a100-80gb']
    """
    return tuple(gpu(i) for i in raw()["gpus"])


@dataclass(frozen=True, kw_only=True)
class TensorCoreMultiple:
    """The dimension multiple at which tensor cores run a matmul most efficiently, per dtype."""

    dtype: str
    bytes_per_element: int
    elements: int
    a100_elements: int
    source: str

    @property
    def bytes(self) -> int:
        """The multiple in bytes: elements x bytes per element."""
        return self.elements * self.bytes_per_element

    @property
    def a100_bytes(self) -> int:
        """The A100's multiple in bytes."""
        return self.a100_elements * self.bytes_per_element


def tensor_core_multiples() -> tuple[TensorCoreMultiple, ...]:
    """Per dtype, the M, N, K multiples NVIDIA's matmul guide gives for tensor cores.

    >>> [(m.dtype, m.elements, m.bytes) for m in tensor_core_multiples()][1]
    ('FP16', 8, 16)
    """
    section = raw()["tensor_cores"]
    return tuple(
        TensorCoreMultiple(
            dtype=row["dtype"],
            bytes_per_element=row["bytes_per_element"],
            elements=row["elements"],
            a100_elements=row["a100_elements"],
            source=section["source"],
        )
        for row in section["multiples"]
    )


def cublas_tiles() -> tuple[tuple[int, int], ...]:
    """cuBLAS's thread-block tiles (output rows, columns), most efficient first, as the
    matmul guide lists them.

    >>> cublas_tiles()[0], cublas_tiles()[-1]
    ((256, 128), (64, 64))
    """
    return tuple((int(m), int(n)) for m, n in raw()["tensor_cores"]["cublas_tiles"])


def tensor_core_source() -> str:
    """The URL the tensor-core multiples and the tile list come from."""
    return source_url(raw()["tensor_cores"]["source"])
