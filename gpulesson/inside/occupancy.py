"""How many warps of a kernel fit on one SM: NVIDIA's occupancy rules as a function.

An SM holds a block only if it has warp slots, a block slot, registers and shared memory
for all of it. Each limit gives a number of blocks; the smallest wins. The rules and
their rounding follow ``cuda_occupancy.h`` in the CUDA Toolkit (the calculator NVIDIA's
Best Practices Guide points to), with partitioned global caching off and the default
shared-memory carveout (the SM's full shared memory):

* **warps**: ``floor(warp slots / warps per block)``;
* **blocks**: the per-SM block limit;
* **registers**: registers are allocated per warp, ``regs/thread x 32`` rounded up to 256,
  in each of 4 sub-partitions of ``registers per SM / 4``; warps per sub-partition round
  down, and blocks are ``floor(4 x that / warps per block)``;
* **shared memory**: each block's bytes plus the driver's reserved 1 KiB (compute
  capability 8.0 on), rounded up to 128 bytes, into the SM's shared memory.

>>> r = occupancy("7.0", threads_per_block=128, registers_per_thread=37)
>>> r.blocks_per_sm, r.warps_per_sm, round(r.occupancy, 2), r.limited_by
(12, 48, 0.75, 'registers')
"""

from __future__ import annotations

from dataclasses import dataclass

from gpulesson.inside.limits import ComputeCapability, compute_capability


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


@dataclass(frozen=True, kw_only=True)
class Occupancy:
    """The blocks and warps of one kernel configuration that fit on one SM."""

    compute_capability: str
    threads_per_block: int
    registers_per_thread: int
    shared_per_block_bytes: int
    warps_per_block: int
    blocks_by_warps: int
    blocks_by_blocks: int
    blocks_by_registers: int
    blocks_by_shared: int
    max_warps_per_sm: int

    @property
    def blocks_per_sm(self) -> int:
        """Resident blocks: the smallest of the four limits."""
        return min(
            self.blocks_by_warps,
            self.blocks_by_blocks,
            self.blocks_by_registers,
            self.blocks_by_shared,
        )

    @property
    def warps_per_sm(self) -> int:
        """Resident warps per SM."""
        return self.blocks_per_sm * self.warps_per_block

    @property
    def occupancy(self) -> float:
        """Resident warps over the SM's warp slots."""
        return self.warps_per_sm / self.max_warps_per_sm

    @property
    def limited_by(self) -> str:
        """The limit that sets the block count (the first of warps, blocks, registers,
        shared memory to reach it)."""
        limits = {
            "warps": self.blocks_by_warps,
            "blocks": self.blocks_by_blocks,
            "registers": self.blocks_by_registers,
            "shared memory": self.blocks_by_shared,
        }
        return next(name for name, blocks in limits.items() if blocks == self.blocks_per_sm)


def _check(name: str, value: int, low: int, high: int, unit: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(
            f"{name}={value!r} is out of range: give an integer from {low} to {high} {unit}"
        )


def registers_blocks(cc: ComputeCapability, warps_per_block: int, registers_per_thread: int) -> int:
    """Blocks per SM that the register file allows (cudaOccMaxBlocksPerSMRegsLimit).

    >>> registers_blocks(compute_capability("9.0"), 4, 255)
    2
    """
    g = cc.granularity
    per_warp = _round_up(registers_per_thread * g.warp_size, g.register_allocation_unit_per_warp)
    if per_warp == 0:
        return cc.max_blocks_per_sm
    per_block = per_warp * warps_per_block
    assumed = per_warp * _round_up(warps_per_block, g.register_sub_partitions)
    if max(per_block, assumed) > cc.registers_per_sm:  # registers per block = per SM here
        return 0
    per_sub_partition = (cc.registers_per_sm // g.register_sub_partitions) // per_warp
    return per_sub_partition * g.register_sub_partitions // warps_per_block


def shared_blocks(cc: ComputeCapability, shared_per_block_bytes: int) -> int:
    """Blocks per SM that shared memory allows (cudaOccMaxBlocksPerSMSmemLimit).

    >>> shared_blocks(compute_capability("8.0"), 48 * 1024)
    3
    """
    used = shared_per_block_bytes + cc.reserved_shared_per_block_bytes
    allocated = _round_up(used, cc.granularity.shared_allocation_unit_bytes)
    if allocated == 0:
        return cc.max_blocks_per_sm
    if allocated > cc.shared_per_sm_bytes:
        return 0
    return cc.shared_per_sm_bytes // allocated


def occupancy(
    cc_name: str,
    *,
    threads_per_block: int,
    registers_per_thread: int,
    shared_per_block_bytes: int = 0,
) -> Occupancy:
    """The occupancy of a kernel configuration on compute capability ``cc_name``.

    Bad input raises ValueError naming the argument and its range:

    >>> occupancy("8.0", threads_per_block=2048, registers_per_thread=32)
    Traceback (most recent call last):
    ...
    ValueError: threads_per_block=2048 is out of range: give an integer from 1 to 1024 threads
    """
    cc = compute_capability(cc_name)
    _check("threads_per_block", threads_per_block, 1, cc.max_threads_per_block, "threads")
    _check(
        "registers_per_thread", registers_per_thread, 0, cc.max_registers_per_thread, "registers"
    )
    _check("shared_per_block_bytes", shared_per_block_bytes, 0, cc.shared_per_sm_bytes, "bytes")
    warps = -(-threads_per_block // cc.granularity.warp_size)
    return Occupancy(
        compute_capability=cc_name,
        threads_per_block=threads_per_block,
        registers_per_thread=registers_per_thread,
        shared_per_block_bytes=shared_per_block_bytes,
        warps_per_block=warps,
        blocks_by_warps=cc.max_warps_per_sm // warps,
        blocks_by_blocks=cc.max_blocks_per_sm,
        blocks_by_registers=registers_blocks(cc, warps, registers_per_thread),
        blocks_by_shared=shared_blocks(cc, shared_per_block_bytes),
        max_warps_per_sm=cc.max_warps_per_sm,
    )
