"""Bytes that attention moves to and from memory, standard against tiled (FlashAttention).

**Standard attention** (Dao et al. 2022, Algorithm 0) writes the ``N x N`` scores
``S = QK^T`` to memory, reads them back for the softmax, writes ``P``, reads ``P`` again
for ``PV``: ``4Nd + 4N^2`` elements per head, the paper's Theorem 2 ``Θ(Nd + N^2)``.

**FlashAttention** keeps tiles of ``S`` and ``P`` in on-chip memory of ``M`` elements
(shared memory): blocks of ``B_c = ceil(M / 4d)`` keys and values are loaded once each,
and each of the ``T_c = ceil(N / B_c)`` passes reads ``Q`` and reads and writes ``O``
(``3Nd`` elements), so it moves ``2Nd + 3Nd·T_c`` elements, ``Θ(N^2 d^2 / M)`` (Theorem 2),
and never stores anything of size ``N^2``. :func:`measure_peaks` shows the memory side:
the peak of an explicit ``softmax(QK^T/sqrt d)V`` against
``torch.nn.functional.scaled_dot_product_attention``, traced with fake tensors (shapes,
no storage) through torch's ``MemTracker`` (:mod:`gpulesson.memory.torch_tools`).

>>> s, f = standard_elements(1024, 64), flash_elements(1024, 64, 100 * 1024 // 2)
>>> s, f, s > f
(4456448, 1310720, True)
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from gpulesson.memory import torch_tools
from gpulesson.timing.bench import call_seconds


def _check(n: int, d: int) -> None:
    if not isinstance(n, int) or not isinstance(d, int) or n < 1 or d < 1:
        raise ValueError(f"n={n!r}, d={d!r}: sequence length and head dimension are positive")


def standard_elements(n: int, d: int) -> int:
    """Elements standard attention reads and writes per head: ``4Nd + 4N^2``.

    >>> standard_elements(2, 1)
    24
    """
    _check(n, d)
    return 4 * n * d + 4 * n * n


def block_columns(d: int, sram_elements: int) -> int:
    """FlashAttention's key/value block ``B_c = ceil(M / 4d)`` (Algorithm 1, line 1).

    >>> block_columns(64, 4096)
    16
    """
    if sram_elements < 4 * d:
        raise ValueError(
            f"sram_elements={sram_elements!r} is under 4d={4 * d}: on-chip memory must hold "
            "one row each of Q, K, V and O"
        )
    return math.ceil(sram_elements / (4 * d))


def flash_elements(n: int, d: int, sram_elements: int) -> int:
    """Elements FlashAttention reads and writes per head: ``2Nd + 3Nd·ceil(N / B_c)``.

    >>> flash_elements(16, 4, 64)
    896
    """
    _check(n, d)
    passes = math.ceil(n / min(n, block_columns(d, sram_elements)))
    return 2 * n * d + 3 * n * d * passes


@dataclass(frozen=True, kw_only=True)
class AttentionPeak:
    """Peak memory of one attention call, by implementation, at one sequence length."""

    seq_len: int
    head_dim: int
    heads: int
    standard_peak_bytes: int
    sdpa_peak_bytes: int


def explicit_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``softmax(QK^T / sqrt d) V``, materialising the ``N x N`` scores."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(scores, dim=-1) @ v


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``torch.nn.functional.scaled_dot_product_attention`` (a fused kernel)."""
    return torch.nn.functional.scaled_dot_product_attention(q, k, v)


def _peak(fn: Callable[..., torch.Tensor], n: int, d: int, heads: int) -> int:
    with torch_tools.fake_tensor_mode():
        q, k, v = (torch.empty(1, heads, n, d) for _ in range(3))
        tracker = torch_tools.mem_tracker()
        with tracker:
            torch_tools.reset_peak(tracker)
            fn(q, k, v)
        return torch_tools.peak_by_category(tracker)[0]


def measure_peaks(
    seq_lens: Sequence[int] = (256, 512, 1024, 2048), head_dim: int = 64, heads: int = 1
) -> tuple[AttentionPeak, ...]:
    """Traced peak bytes of explicit attention and SDPA at each sequence length (fp32).

    >>> p = measure_peaks((64, 128), head_dim=8, heads=1)
    >>> p[1].standard_peak_bytes > p[0].standard_peak_bytes > 0
    True
    """
    return tuple(
        AttentionPeak(
            seq_len=n,
            head_dim=head_dim,
            heads=heads,
            standard_peak_bytes=_peak(explicit_attention, n, head_dim, heads),
            sdpa_peak_bytes=_peak(sdpa, n, head_dim, heads),
        )
        for n in seq_lens
    )


def growth_exponent(ns: Sequence[int], values: Sequence[float]) -> float:
    """The least-squares slope of log(value) against log(n): 2 for N^2, 1 for N.

    >>> round(growth_exponent((1, 2, 4), (3, 12, 48)), 6)
    2.0
    """
    xs, ys = [math.log(n) for n in ns], [math.log(v) for v in values]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs
    )


@dataclass(frozen=True, kw_only=True)
class AttentionTime:
    """Median time of each implementation at one sequence length on one device."""

    seq_len: int
    standard_s: float
    sdpa_s: float
    standard_samples_s: tuple[float, ...] = ()
    sdpa_samples_s: tuple[float, ...] = ()


def time_attention(
    device: str,
    seq_lens: Sequence[int] = (256, 512, 1024),
    head_dim: int = 64,
    heads: int = 1,
    repeats: int = 5,
) -> tuple[AttentionTime, ...]:
    """Median wall time of explicit attention and SDPA per sequence length, interleaved.

    On a CPU it runs in one thread and counts that thread's CPU time, so a busy
    neighbour's threads do not decide it.
    """
    threads = torch.get_num_threads()
    if device == "cpu":
        torch.set_num_threads(1)
    try:
        return _time_attention(device, seq_lens, head_dim, heads, repeats)
    finally:
        torch.set_num_threads(threads)


def _time_attention(
    device: str, seq_lens: Sequence[int], head_dim: int, heads: int, repeats: int
) -> tuple[AttentionTime, ...]:
    rows = []
    for n in seq_lens:
        q, k, v = (torch.randn(1, heads, n, head_dim, device=device) for _ in range(3))
        times: dict[str, list[float]] = {"standard": [], "sdpa": []}
        for _ in range(repeats + 1):
            for name, fn in (("standard", explicit_attention), ("sdpa", sdpa)):
                times[name].append(call_seconds(functools.partial(fn, q, k, v), device))
        rows.append(
            AttentionTime(
                seq_len=n,
                standard_s=statistics.median(times["standard"][1:]),
                sdpa_s=statistics.median(times["sdpa"][1:]),
                standard_samples_s=tuple(times["standard"][1:]),
                sdpa_samples_s=tuple(times["sdpa"][1:]),
            )
        )
    return tuple(rows)
