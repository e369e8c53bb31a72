"""Byte units: decimal GB (10**9) and binary GiB (2**30) kept apart.

A "24 GB" card in a vendor's marketing is usually 24 GiB of memory, which is
25.8 GB. Every figure in the course names which of the two it uses.

>>> format_gb(24 * GIB)
'25.8 GB'
>>> format_gib(24 * GIB)
'24.0 GiB'
>>> parse_size("24GiB")
25769803776
>>> parse_size("80 GB")
80000000000
"""

from __future__ import annotations

import math
import re

GB = 10**9
GIB = 2**30
MB = 10**6
MIB = 2**20
MAX_SIZE_BYTES = 2**63

_UNITS: dict[str, int] = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}

_SIZE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*$")


def format_gb(n_bytes: float, digits: int = 1) -> str:
    """Render a byte count in decimal gigabytes (10**9 bytes)."""
    return f"{n_bytes / GB:.{digits}f} GB"


def format_gib(n_bytes: float, digits: int = 1) -> str:
    """Render a byte count in binary gibibytes (2**30 bytes)."""
    return f"{n_bytes / GIB:.{digits}f} GiB"


def format_gb_gib(n_bytes: float, digits: int = 1) -> str:
    """Render a byte count as both, for a reader comparing with a spec sheet.

    >>> format_gb_gib(24 * GIB)
    '25.8 GB (24.0 GiB)'
    """
    return f"{format_gb(n_bytes, digits)} ({format_gib(n_bytes, digits)})"


def parse_size(text: str) -> int:
    """Parse a size such as ``24GiB``, ``80 GB``, ``512MiB`` or ``1.5e9`` into bytes.

    A bare number is bytes. The result is at least one byte and at most
    ``MAX_SIZE_BYTES`` (2^63, what a signed 64-bit byte count holds). Raises
    ``ValueError`` naming the bad text and the accepted forms.

    >>> parse_size("1.5e9")
    1500000000
    >>> parse_size("lots")
    Traceback (most recent call last):
    ...
    ValueError: cannot read size 'lots': write a number with a unit, like 24GiB or 80GB
    >>> parse_size("1e300GiB")
    Traceback (most recent call last):
    ...
    ValueError: size '1e300GiB' is too large: at most 2^63 bytes; write a size like 24GiB or 80GB
    """
    match = _SIZE_RE.match(str(text))
    if not match:
        raise ValueError(
            f"cannot read size {text!r}: write a number with a unit, like 24GiB or 80GB"
        )
    number = float(match.group(1))
    unit = match.group(2).lower() or "b"
    if unit not in _UNITS:
        raise ValueError(
            f"unknown unit {match.group(2)!r} in {text!r}: "
            "use B, KB, MB, GB, TB, KiB, MiB, GiB or TiB"
        )
    if not math.isfinite(number) or number <= 0:
        raise ValueError(f"size {text!r} must be a positive number of bytes")
    size = number * _UNITS[unit]
    if not size <= MAX_SIZE_BYTES:  # also catches an overflow to inf
        raise ValueError(
            f"size {text!r} is too large: at most 2^63 bytes; write a size like 24GiB or 80GB"
        )
    if size < 0.5:
        raise ValueError(f"size {text!r} is less than one byte: write a size like 24GiB or 80GB")
    return int(round(size))
