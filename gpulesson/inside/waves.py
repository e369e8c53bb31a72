"""Tiles and waves of a matmul: why 4097 costs more than 4096 on a GPU.

A GPU matmul kernel splits the ``m x n`` output into tiles (``128 x 128`` or ``256 x 128``
elements are common for 16-bit tensor-core kernels, NVIDIA's "Matrix Multiplication
Background" guide) and gives each tile to one SM at a time. With ``T`` tiles and ``S`` SMs
(one tile per SM at a time) the kernel runs in ``ceil(T / S)`` **waves**; a last, partly
filled wave costs as long as a full one. One row or column past a multiple of the tile
adds a whole ragged row or column of tiles: that is wave quantization (and tile
quantization).

>>> w = waves(4096, 4096, tile_m=256, tile_n=128, sm_count=132)
>>> w.tiles, w.waves, round(w.efficiency, 3)
(512, 4, 0.97)
>>> w2 = waves(4097, 4097, tile_m=256, tile_n=128, sm_count=132)
>>> w2.tiles, w2.waves
(561, 5)
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Waves:
    """The tile and wave count of one ``m x n`` output on one GPU."""

    m: int
    n: int
    tile_m: int
    tile_n: int
    sm_count: int

    @property
    def tiles(self) -> int:
        """Output tiles: ``ceil(m / tile_m) x ceil(n / tile_n)``."""
        return math.ceil(self.m / self.tile_m) * math.ceil(self.n / self.tile_n)

    @property
    def waves(self) -> int:
        """Waves of tiles, one tile per SM at a time."""
        return math.ceil(self.tiles / self.sm_count)

    @property
    def efficiency(self) -> float:
        """Useful output elements over the elements the SMs' tile slots could compute in
        that many waves: 1.0 when every tile is full and every wave is full."""
        return self.m * self.n / (self.waves * self.sm_count * self.tile_m * self.tile_n)


def waves(m: int, n: int, *, tile_m: int, tile_n: int, sm_count: int) -> Waves:
    """The waves of an ``m x n`` output in ``tile_m x tile_n`` tiles on ``sm_count`` SMs.

    >>> waves(0, 8, tile_m=8, tile_n=8, sm_count=1)
    Traceback (most recent call last):
    ...
    ValueError: m=0 must be a positive integer (rows, columns, tile sides and SMs all are)
    """
    for name, value in (("m", m), ("n", n), ("tile_m", tile_m), ("tile_n", tile_n)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(
                f"{name}={value!r} must be a positive integer "
                "(rows, columns, tile sides and SMs all are)"
            )
    if not isinstance(sm_count, int) or sm_count < 1:
        raise ValueError(f"sm_count={sm_count!r} must be a positive integer")
    return Waves(m=m, n=n, tile_m=tile_m, tile_n=tile_n, sm_count=sm_count)
