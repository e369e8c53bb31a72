"""Which tensor-core dtypes each NVIDIA GPU has, by compute capability, with the datasheets' peaks.

Tensor cores came in steps, and a dtype runs fast only on a GPU whose tensor cores take it:

* fp16 from compute capability 7.0 (Volta); a T4 (7.5, Turing) has fp16 tensor cores;
* bf16 and TF32 from 8.0 (Ampere: NVIDIA's A100 whitepaper);
* fp8 from 8.9 (Ada: NVIDIA's Ada whitepaper) and 9.0 (Hopper: the H100 whitepaper).

:func:`tensor_core_dtypes` states that rule; :data:`CAPABILITIES` gives each datasheet
row's compute capability (NVIDIA's CUDA GPU compute capability list, cited below); the
dense peaks come from :mod:`gpulesson.results.datasheets`, which cites each vendor page.
The tests check that the rule and the datasheets agree for every NVIDIA row.

On a GPU before 8.0, ``torch.cuda.is_bf16_supported()`` still answers True: with its
default ``including_emulation=True`` it tries to make a bf16 tensor, which works
(``torch/cuda/__init__.py``), and the bf16 matmuls then run without bf16 tensor cores.
:func:`bf16_support` says which of the two a machine has.

Used by the lesson ``lessons/mixed-precision.md``.

>>> tensor_core_dtypes((7, 5)), tensor_core_dtypes((8, 9))
(('fp16',), ('fp16', 'bf16', 'tf32', 'fp8'))
>>> [r.id for r in hardware_rows()][:3]
['t4', 'a100-40gb', 'a100-80gb']
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gpulesson.results.datasheets import Datasheet, all_rows

# Compute capability of each NVIDIA datasheet row, from NVIDIA's list at
# https://developer.nvidia.com/cuda-gpus
CAPABILITIES: dict[str, tuple[int, int]] = {
    "t4": (7, 5),
    "l4": (8, 9),
    "a10": (8, 6),
    "a100-40gb": (8, 0),
    "a100-80gb": (8, 0),
    "a100-80gb-pcie": (8, 0),
    "h100-sxm": (9, 0),
    "h100-pcie": (9, 0),
    "h200": (9, 0),
    "b200": (10, 0),
    "l40s": (8, 9),
    "rtx-3090": (8, 6),
    "rtx-4090": (8, 9),
}

# The first compute capability whose tensor cores take each dtype.
FIRST_CAPABILITY: dict[str, tuple[int, int]] = {
    "fp16": (7, 0),
    "bf16": (8, 0),
    "tf32": (8, 0),
    "fp8": (8, 9),
}
TENSOR_DTYPES = tuple(FIRST_CAPABILITY)


def tensor_core_dtypes(capability: tuple[int, int]) -> tuple[str, ...]:
    """The dtypes whose tensor-core matmuls a GPU of this compute capability has."""
    return tuple(d for d, first in FIRST_CAPABILITY.items() if capability >= first)


@dataclass(frozen=True, kw_only=True)
class HardwareRow:
    """One GPU: its compute capability, the rule's dtypes and its datasheet's dense peaks.

    ``dense_tflops`` has an entry for each tensor-core dtype the datasheet prints
    (dense figures, in 10^12 FLOP/s); a dtype missing from it has no tensor-core peak.
    ``fp32_accumulate`` names the dtypes whose figure the datasheet states "with FP32
    Accumulate" (the GeForce whitepapers print a second, faster 16-bit-accumulate rate).
    """

    id: str
    name: str
    architecture: str
    capability: tuple[int, int]
    rule_dtypes: tuple[str, ...]
    dense_tflops: dict[str, float]
    fp32_accumulate: tuple[str, ...] = ()

    @property
    def datasheet_dtypes(self) -> tuple[str, ...]:
        """The tensor-core dtypes the datasheet gives a peak for, in ``TENSOR_DTYPES`` order."""
        return tuple(d for d in TENSOR_DTYPES if d in self.dense_tflops)


def _row(sheet: Datasheet) -> HardwareRow:
    capability = CAPABILITIES[sheet.id]
    return HardwareRow(
        id=sheet.id,
        name=sheet.name,
        architecture=sheet.architecture,
        capability=capability,
        rule_dtypes=tensor_core_dtypes(capability),
        dense_tflops={
            d: peak / 1e12 for d in TENSOR_DTYPES if (peak := sheet.dense_flop_per_s(d)) is not None
        },
        fp32_accumulate=tuple(
            d
            for d in TENSOR_DTYPES
            if d in sheet.peaks and "fp32 accumulate" in sheet.peaks[d].stated.lower()
        ),
    )


def hardware_rows() -> tuple[HardwareRow, ...]:
    """Every NVIDIA datasheet row, sorted by compute capability (oldest first)."""
    rows = [_row(sheet) for sheet in all_rows() if sheet.id in CAPABILITIES]
    return tuple(sorted(rows, key=lambda r: r.capability))


def rule_agreements(rows: tuple[HardwareRow, ...]) -> int:
    """How many rows' datasheet dtypes are exactly the ones the compute-capability rule gives.

    >>> rows = hardware_rows()
    >>> rule_agreements(rows) == len(rows)
    True
    """
    return sum(r.datasheet_dtypes == r.rule_dtypes for r in rows)


@dataclass(frozen=True, kw_only=True)
class Bf16Support:
    """What this machine says about bf16: torch's answer, and whether tensor cores back it."""

    device: str
    capability: tuple[int, int] | None
    torch_says: bool  # torch.cuda.is_bf16_supported() with its default (emulation counts)
    native: bool  # bf16 tensor cores (compute capability 8.0 or later)


def bf16_support() -> Bf16Support:
    """torch's bf16 answer on this machine, beside the compute capability's.

    >>> s = bf16_support()
    >>> s.native <= s.torch_says
    True
    """
    if not torch.cuda.is_available():
        return Bf16Support(device="cpu", capability=None, torch_says=False, native=False)
    capability = torch.cuda.get_device_capability()
    return Bf16Support(
        device="cuda",
        capability=capability,
        torch_says=bool(torch.cuda.is_bf16_supported()),
        native="bf16" in tensor_core_dtypes(capability),
    )
