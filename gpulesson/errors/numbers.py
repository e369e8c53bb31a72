"""Read the numbers an error message states: sizes in bytes, and a collective's timings.

One job: turn text into numbers. :func:`to_bytes` converts a size as PyTorch
prints it; :func:`cuda_numbers`, :func:`mps_numbers` and :func:`cpu_numbers`
read an out-of-memory message in each of its wordings; :func:`nccl_numbers`
reads NCCL's timeout and error messages. :mod:`gpulesson.errors.diagnose`
judges what the numbers mean.

Every message is read from a bounded window after the phrase that starts it
(:class:`gpulesson.errors.scan.Haystack` finds the phrase in linear time), so
the patterns here only ever see a few kilobytes; a number too long to be a
size is refused before the window is read.
``tests/benchmarks/bench_diagnose_worst_case.py`` times crafted inputs at the
CLI's 4 MiB limit.

Units: PyTorch prints binary sizes (``KiB``, ``MiB``, ``GiB``). Older
allocators, MPS in torch 2.0-2.1 among them, printed the same binary numbers
labelled ``KB``, ``MB``, ``GB`` (their ``format_size`` divides by 1024), so in
these messages a ``GB`` is read as 2**30 bytes. The trade-off: a non-PyTorch
tool that meant decimal GB would be read 7 % high.

>>> to_bytes("20.00", "MiB")
20971520
>>> cuda_numbers(Haystack.of("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
...     "total capacity of 23.65 GiB of which 1.50 GiB is free.")).free == round(1.5 * 2**30)
True
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpulesson.errors.scan import MAX_SIZE_DIGITS, Haystack, normalize, oversized
from gpulesson.units import GIB, MIB

__all__ = [
    "NCCL_ERROR_CLASSES",
    "NcclNumbers",
    "OomNumbers",
    "cpu_numbers",
    "cuda_numbers",
    "cuda_segment_bytes",
    "format_bytes",
    "mps_numbers",
    "nccl_numbers",
    "normalize",
    "to_bytes",
]

# The most a size can be: a 64-bit allocator cannot be asked for more. PyTorch does print
# 2**64 itself (the cudaMallocAsync backend's "no limit"), so 2**64 is still accepted.
MAX_SIZE_BYTES = 2**64
# How far after its first words a message is read (real ones are < 1,000 characters); the
# cut is moved to the end of the word (and the next) it falls in, so no size is split.
SEGMENT_CHARS = 2500

_UNIT_BYTES: dict[str, int] = {
    "b": 1,
    "byte": 1,
    "bytes": 1,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
    # Legacy labels of PyTorch's binary format_size (see the module docstring).
    "kb": 2**10,
    "mb": 2**20,
    "gb": 2**30,
    "tb": 2**40,
}
_LEGACY_UNITS = {"kb", "mb", "gb", "tb"}
# A number starts where no digit, point or comma comes before it: one attempt per number.
_NUM = r"(?<![\d.,])(\d+(?:[.,]\d+)?)"
_SIZE = _NUM + r"\s?(bytes|byte|B|KiB|MiB|GiB|TiB|KB|MB|GB|TB)\b"

# The CUDA caching allocator's block sizes (c10/cuda/CUDACachingAllocator.cpp): requests up
# to 1 MiB are served from 2 MiB segments, requests under 10 MiB from 20 MiB segments, and
# larger ones get a segment rounded up to a multiple of 2 MiB.
SMALL_REQUEST_BYTES = 1 * MIB
SMALL_SEGMENT_BYTES = 2 * MIB
MEDIUM_REQUEST_BYTES = 10 * MIB
MEDIUM_SEGMENT_BYTES = 20 * MIB
LARGE_ROUNDING_BYTES = 2 * MIB


@dataclass(frozen=True)
class OomNumbers:
    """The sizes an out-of-memory message states, in bytes; ``None`` where it is silent."""

    wording: str | None = None
    device: str | None = None
    requested: int | None = None
    total: int | None = None
    free: int | None = None
    allocated: int | None = None
    reserved: int | None = None
    reserved_unallocated: int | None = None
    process: int | None = None
    limit: int | None = None
    other_allocations: int | None = None
    detail: str | None = None
    legacy_units: bool = False
    caching_allocator: bool = True


@dataclass(frozen=True)
class NcclNumbers:
    """What an NCCL timeout or error message states; ``None`` where it is silent."""

    rank: int | None = None
    collective: str | None = None
    sequence_number: int | None = None
    timeout_s: float | None = None
    elapsed_s: float | None = None
    error_class: str | None = None
    nccl_version: str | None = None
    last_error: str | None = None


# --- sizes -------------------------------------------------------------------------


def to_bytes(number: str, unit: str) -> int:
    """Convert a number and a unit as PyTorch prints them into bytes.

    Raises ``ValueError`` for an unknown unit, and for a size over 2**64 bytes,
    which no allocator can be asked for (the text is then not an error message
    as PyTorch printed it).

    >>> to_bytes("18.13", "GB") == round(18.13 * 2**30)
    True
    >>> to_bytes("512", "bytes")
    512
    >>> to_bytes("9" * 400, "GiB")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: the message states a size of 9999999999…9999999999 GiB (400 digits), ...
    """
    key = unit.lower()
    if key not in _UNIT_BYTES:
        raise ValueError(f"unknown unit {unit!r}: use bytes, KiB, MiB, GiB or TiB")
    whole = re.split(r"[.,]", number, maxsplit=1)[0]
    value = None
    if len(whole.lstrip("0")) <= MAX_SIZE_DIGITS:
        value = int(round(float(number.replace(",", ".")) * _UNIT_BYTES[key]))
    if value is None or value > MAX_SIZE_BYTES:
        raise ValueError(oversized(number, unit))
    return value


def format_bytes(n_bytes: int | None) -> str:
    """Render a byte count in the binary unit PyTorch uses, with two decimals.

    >>> format_bytes(20 * 2**20)
    '20.00 MiB'
    >>> format_bytes(None)
    '—'
    """
    if n_bytes is None:
        return "—"
    if n_bytes < 1024:
        return f"{n_bytes} bytes"
    for unit, size in (("TiB", 2**40), ("GiB", GIB), ("MiB", MIB), ("KiB", 2**10)):
        if n_bytes >= size:
            return f"{n_bytes / size:.2f} {unit}"
    return f"{n_bytes} bytes"  # pragma: no cover - unreachable


def cuda_segment_bytes(requested_bytes: int) -> int:
    """What the CUDA caching allocator asks the driver for when no cached block fits.

    >>> cuda_segment_bytes(512 * 1024) == 2 * 2**20
    True
    >>> cuda_segment_bytes(2 * 2**20) == 20 * 2**20
    True
    >>> cuda_segment_bytes(2**30 + 1) == 2**30 + 2 * 2**20
    True
    """
    if requested_bytes <= SMALL_REQUEST_BYTES:
        return SMALL_SEGMENT_BYTES
    if requested_bytes < MEDIUM_REQUEST_BYTES:
        return MEDIUM_SEGMENT_BYTES
    return -(-requested_bytes // LARGE_ROUNDING_BYTES) * LARGE_ROUNDING_BYTES


def _size(pattern: str, text: str) -> int | None:
    """The first size captured by ``pattern`` (number, unit), in bytes."""
    match = re.search(pattern, text, re.IGNORECASE)
    return to_bytes(match.group(1), match.group(2)) if match else None


def _uses_legacy_units(text: str) -> bool:
    return any(m.group(2).lower() in _LEGACY_UNITS for m in re.finditer(_SIZE, text))


def message_at(haystack: Haystack, phrases: tuple[str, ...]) -> tuple[str, int] | None:
    """The last message that starts with one of ``phrases``: its window, and where it starts.

    Sizes that start in the window are checked first (ValueError for one too long to be
    a size).

    >>> message_at(Haystack.of("x CUDA out of memory. a 1.00 GiB"), ("cuda out of memory",))
    ('CUDA out of memory. a 1.00 GiB', 2)
    """
    start = haystack.last(phrases)
    if start is None:
        return None
    haystack.check_sizes(start, SEGMENT_CHARS)
    return haystack.window(start, SEGMENT_CHARS), start


# --- out of memory -------------------------------------------------------------------

# The phrases that start a CUDA out-of-memory message, lower case.
CUDA_OOM_PHRASES: tuple[str, ...] = (
    "cuda out of memory",
    "hip out of memory",
    "allocation on device",
    "cuda error: out of memory",
    "cuda runtime error (2)",
    "cublas_status_alloc_failed",
    "cudaerrormemoryallocation",
)


def cuda_numbers(haystack: Haystack) -> OomNumbers:
    """The numbers of the last CUDA out-of-memory message in the text."""
    found = (
        message_at(haystack, CUDA_OOM_PHRASES)
        or message_at(haystack, ("outofmemoryerror",))
        or message_at(haystack, ("tried to allocate",))  # the numbers quoted on their own
    )
    if found is None:
        return OomNumbers()
    seg, _ = found
    legacy = _uses_legacy_units(seg)
    if seg.lower().startswith("allocation on device"):
        device = re.match(r"Allocation on device (\d{1,4})", seg, re.IGNORECASE)
        limit = _size(r"PyTorch limit \(set by user-supplied memory fraction\) ?: " + _SIZE, seg)
        total = _size(r"Device limit ?: " + _SIZE, seg)
        return OomNumbers(
            wording="cudaMallocAsync backend",
            device=f"GPU {device.group(1)}" if device else None,
            requested=_size(r"Requested ?: " + _SIZE, seg),
            total=total,
            free=_size(r"Free \(according to CUDA\) ?: " + _SIZE, seg),
            allocated=_size(r"Currently allocated ?: " + _SIZE, seg),
            limit=limit if limit is not None and (total is None or limit < total) else None,
            legacy_units=legacy,
            caching_allocator=False,
        )
    requested = _size(r"Tried to allocate " + _SIZE, seg)
    allowed = _size(_SIZE + r" allowed", seg)
    if re.search(r"total capacity;|\(GPU \d{0,4};", seg, re.IGNORECASE):
        device = re.search(r"\((GPU \d{0,4});", seg)
        allocated = _size(_SIZE + r" already allocated", seg)
        reserved = _size(_SIZE + r" reserved in total by PyTorch", seg)
        unallocated = None
        if reserved is not None and allocated is not None:
            unallocated = max(reserved - allocated, 0)
        # Before torch 1.4 the message ended "Z cached": the cache beyond live tensors.
        cached = _size(_SIZE + r" cached\)", seg)
        if reserved is None and cached is not None:
            unallocated = cached
            reserved = cached + allocated if allocated is not None else None
        return OomNumbers(
            wording="torch 1.x: (GPU N; total capacity; already allocated; free; reserved)",
            device=device.group(1).strip() if device else None,
            requested=requested,
            total=_size(_SIZE + r" total capacity", seg),
            free=_size(_SIZE + r" free;", seg),
            allocated=allocated,
            reserved=reserved,
            reserved_unallocated=unallocated,
            limit=allowed,
            legacy_units=legacy,
        )
    if re.search(r"has a total capac", seg, re.IGNORECASE):
        device = re.search(r"\b(GPU ?\d{0,4}) has a total", seg)
        typo = re.search(r"total capacty", seg, re.IGNORECASE)
        allocated = _size(_SIZE + r" is allocated by PyTorch", seg)
        unallocated = _size(_SIZE + r" is reserved by PyTorch but unallocated", seg)
        reserved = None
        if allocated is not None and unallocated is not None:
            reserved = allocated + unallocated
        return OomNumbers(
            wording=(
                "torch 2.0-2.1: 'total capacty of X of which Y is free' (PyTorch's typo)"
                if typo
                else "torch 2.2 or later: 'total capacity of X of which Y is free'"
            ),
            device=device.group(1).strip() if device else None,
            requested=requested,
            total=_size(r"total capac(?:i)?ty of " + _SIZE, seg),
            free=_size(r"of which " + _SIZE + r" is free", seg),
            allocated=allocated,
            reserved=reserved,
            reserved_unallocated=unallocated,
            process=_size(r"this process has " + _SIZE + r" memory in use", seg),
            limit=allowed,
            legacy_units=legacy,
        )
    return OomNumbers(
        wording="CUDA runtime error without numbers",
        requested=requested,
        detail="The message states no sizes: the failing allocation was inside a CUDA "
        "library or the runtime, not PyTorch's allocator.",
        legacy_units=legacy,
        caching_allocator=False,
    )


def mps_numbers(haystack: Haystack) -> OomNumbers:
    """The numbers of the last MPS out-of-memory message in the text."""
    found = message_at(haystack, ("mps backend out of memory",))
    seg = found[0] if found else ""
    pool = re.search(r"on (private|shared) pool", seg)
    return OomNumbers(
        wording="MPS allocator",
        device="MPS",
        requested=_size(r"Tried to allocate " + _SIZE, seg),
        allocated=_size(r"(?:MPS allocated|currently allocated): " + _SIZE, seg),
        other_allocations=_size(r"other allocations: " + _SIZE, seg),
        limit=_size(r"max allowed: " + _SIZE, seg),
        detail=f"The request was for the {pool.group(1)} pool." if pool else None,
        legacy_units=_uses_legacy_units(seg),
        caching_allocator=False,
    )


def cpu_numbers(haystack: Haystack) -> OomNumbers:
    """The numbers of a host-RAM failure: the allocator's, NumPy's, or the OOM killer's."""
    found = message_at(haystack, ("you tried to allocate",))
    match = re.match(r"you tried to allocate (\d{1,40}) bytes", found[0], re.I) if found else None
    if match:
        windows = haystack.contains(("defaultcpuallocator: not enough memory",))
        return OomNumbers(
            wording="DefaultCPUAllocator (Windows)" if windows else "DefaultCPUAllocator",
            device="CPU",
            requested=to_bytes(match.group(1), "bytes"),
            caching_allocator=False,
        )
    found = message_at(haystack, ("unable to allocate",))
    numpy = (
        re.match(
            r"Unable to allocate " + _SIZE + r" for an array with shape (\([^)]{0,200}\))"
            r"(?: and data type (\w{1,40}))?",
            found[0],
        )
        if found
        else None
    )
    if numpy:
        dtype = f" of {numpy.group(4)}" if numpy.group(4) else ""
        return OomNumbers(
            wording="NumPy array allocation",
            device="CPU",
            requested=to_bytes(numpy.group(1), numpy.group(2)),
            detail=f"NumPy asked for an array of shape {numpy.group(3)}{dtype}.",
            caching_allocator=False,
        )
    if haystack.contains(("killed", "oom-kill", "out of memory: kill"), raw=True):
        return OomNumbers(
            wording="killed by the operating system (OOM killer)",
            device="CPU",
            detail="The kernel's OOM killer ended the process: no Python exception, often "
            "just 'Killed' and exit status 137.",
            caching_allocator=False,
        )
    return OomNumbers(wording="Python MemoryError", device="CPU", caching_allocator=False)


# --- NCCL ----------------------------------------------------------------------------

# ncclGetErrorString's wordings, and the class each one belongs to.
NCCL_ERROR_CLASSES: dict[str, str] = {
    "unhandled cuda error": "ncclUnhandledCudaError",
    "unhandled system error": "ncclSystemError",
    "internal error": "ncclInternalError",
    "invalid argument": "ncclInvalidArgument",
    "invalid usage": "ncclInvalidUsage",
    "remote process exited or there was a network error": "ncclRemoteError",
}


_LAST_ERROR = re.compile(rb"Last error:[ \t]*\r?\n?(?:\[rank\d{1,7}\]:[ \t]*)?([^\r\n]{1,200})")


def _int(pattern: str, text: str) -> int | None:
    match = re.search(pattern, text)
    return int(match.group(1)) if match else None


def nccl_numbers(haystack: Haystack) -> NcclNumbers:
    """What the last NCCL watchdog timeout, or else the last NCCL error, in the text states.

    >>> n = nccl_numbers(Haystack.of("[Rank 3] Watchdog caught collective operation timeout: "
    ...     "WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=10, NumelOut=10, "
    ...     "Timeout(ms)=600000) ran for 600412 milliseconds before timing out."))
    >>> n.rank, n.collective, n.timeout_s, n.elapsed_s
    (3, 'ALLREDUCE', 600.0, 600.412)
    """
    start = haystack.last(("watchdog caught collective operation timeout",))
    if start is not None:
        seg = haystack.window(start, SEGMENT_CHARS)
        before = haystack.flat[max(start - 40, 0) : start].decode("utf-8", errors="replace")
        op = re.search(r"OpType=(\w{1,40})", seg)
        timeout_ms = _int(r"Timeout\(ms\)=(\d{1,12})\)", seg)
        elapsed_ms = _int(r"ran for (\d{1,12}) milliseconds", seg)
        return NcclNumbers(
            rank=_int(r"\[Rank (\d{1,7})\]", before),
            collective=op.group(1) if op else None,
            sequence_number=_int(r"SeqNum=(\d{1,15})", seg),
            timeout_s=timeout_ms / 1000 if timeout_ms is not None else None,
            elapsed_s=elapsed_ms / 1000 if elapsed_ms is not None else None,
        )
    start = haystack.last(("nccl error",))
    if start is None:
        start = haystack.last(tuple(c.lower() for c in NCCL_ERROR_CLASSES.values()))
    seg = haystack.window(start, SEGMENT_CHARS) if start is not None else ""
    text = next((w for w in NCCL_ERROR_CLASSES if w in seg.lower()), None)
    error_class = re.search(r"\b(nccl[A-Z]\w{0,30}Error)\b", seg)
    version = re.search(r"NCCL version (\d{1,3}\.\d{1,3}\.\d{1,3})", seg)
    # The line after "Last error:" in the raw text (NCCL 2.13 and later print it).
    at = haystack.raw.rfind(b"Last error:")
    last = _LAST_ERROR.match(haystack.raw, at) if at != -1 else None
    return NcclNumbers(
        error_class=error_class.group(1) if error_class else NCCL_ERROR_CLASSES.get(text or ""),
        nccl_version=version.group(1) if version else None,
        last_error=last.group(1).decode("utf-8", errors="replace").strip() if last else None,
    )
