"""Diagnose an error message: which kind of failure, the numbers in it, and what to do.

Paste the text of an error (a whole traceback is fine) or pass the exception.
:func:`diagnose` returns a :class:`Diagnosis`: the ``kind`` (one of
:data:`KINDS`), the byte counts the message states, a ``verdict`` for an
out-of-memory error, and the steps to try, in order.

The steps:

1. Normalise the text: join wrapped lines, undo ``\\n`` escapes from logs.
2. Find the kind by its signature. Non-memory CUDA errors are checked first, so
   a device-side assert is never mistaken for a memory problem.
3. For an out-of-memory message, parse the last one in the text (the exception
   that ended the run) in any of PyTorch's wordings: 1.x ``(GPU 0; X total
   capacity; ...)``, 2.0-2.1 ``total capacty of`` (PyTorch's typo), 2.2 and
   later ``Including non-PyTorch memory``, the ``cudaMallocAsync`` backend, MPS,
   and host RAM.
4. Judge an OOM: ``too_large_for_device`` when the one request exceeds the card
   (or the per-process cap), ``fragmentation`` when the free memory or the
   allocator's reserved-but-unallocated cache could hold the request and it
   still failed, ``exhaustion`` otherwise.

Units: PyTorch prints binary sizes (``KiB``, ``MiB``, ``GiB``). Older
allocators, MPS in torch 2.0-2.1 among them, printed the same binary numbers
labelled ``KB``, ``MB``, ``GB`` (their ``format_size`` divides by 1024), so in
these messages a ``GB`` is read as 2**30 bytes. The trade-off: a non-PyTorch
tool that meant decimal GB would be read 7 % high.

Used by the lessons ``lessons/oom.md``, ``lessons/fix-ladder.md`` and
``lessons/cuda-errors.md``, and by ``gpulesson diagnose``.
The steps to try come from :mod:`gpulesson.errors.fix_ladder`;
:mod:`gpulesson.errors.render` renders a diagnosis as JSON, text or Markdown.

>>> d = diagnose("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
...     "2.00 GiB. GPU 0 has a total capacity of 23.65 GiB of which 1.50 GiB is free.")
>>> d.kind, d.verdict, d.requested_bytes
('cuda_oom', 'exhaustion', 2147483648)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpulesson.errors.fix_ladder import Step, oom_steps, other_steps
from gpulesson.units import GIB, MIB

KINDS: tuple[str, ...] = (
    "cuda_oom",
    "mps_oom",
    "cpu_oom",
    "device_assert",
    "illegal_memory_access",
    "no_kernel_image",
    "driver_too_old",
    "no_driver",
    "cpu_only_wheel",
    "unknown",
)
OOM_KINDS: tuple[str, ...] = ("cuda_oom", "mps_oom", "cpu_oom")
VERDICTS: tuple[str, ...] = ("too_large_for_device", "fragmentation", "exhaustion")

# Memory held by other processes above this share of the card earns a note.
OUTSIDE_SHARE_NOTE = 0.5

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
_NUM = r"(\d+(?:[.,]\d+)?)"
_SIZE = _NUM + r"\s*(bytes|byte|B|KiB|MiB|GiB|TiB|KB|MB|GB|TB)\b"


@dataclass(frozen=True)
class Diagnosis:
    """What an error message says: its kind, its numbers in bytes, and what to do.

    Byte fields are ``None`` when the message does not state them.
    ``reserved_unallocated_bytes`` is memory the caching allocator holds but no
    tensor uses (stated by torch 2.x, derived as reserved minus allocated in
    1.x). ``outside_process_bytes`` is the card's memory held by something
    other than this process: total minus free minus this process's use.
    """

    kind: str
    title: str
    verdict: str | None
    summary: str
    wording: str | None
    device: str | None
    requested_bytes: int | None
    total_bytes: int | None
    free_bytes: int | None
    allocated_bytes: int | None
    reserved_bytes: int | None
    reserved_unallocated_bytes: int | None
    process_bytes: int | None
    outside_process_bytes: int | None
    limit_bytes: int | None
    other_allocations_bytes: int | None
    compute_capability: str | None
    supported_capabilities: tuple[str, ...]
    driver_cuda_version: str | None
    detail: str | None
    notes: tuple[str, ...]
    steps: tuple[Step, ...]
    matched: str | None


# --- parsing helpers -------------------------------------------------------------


def to_bytes(number: str, unit: str) -> int:
    """Convert a number and a unit as PyTorch prints them into bytes.

    >>> to_bytes("20.00", "MiB")
    20971520
    >>> to_bytes("18.13", "GB") == round(18.13 * 2**30)
    True
    >>> to_bytes("512", "bytes")
    512
    """
    key = unit.lower()
    if key not in _UNIT_BYTES:
        raise ValueError(f"unknown unit {unit!r}: use bytes, KiB, MiB, GiB or TiB")
    return int(round(float(number.replace(",", ".")) * _UNIT_BYTES[key]))


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


def normalize(text: str) -> str:
    """Join wrapped lines and escaped newlines into one line of single spaces.

    >>> normalize("Tried to allocate \\\\\\n 4.03   GiB.\\\\nGPU 0")
    'Tried to allocate 4.03 GiB. GPU 0'
    """
    text = text.replace("\\\n", " ").replace("\\n", " ").replace("\\t", " ")
    return re.sub(r"\s+", " ", text).strip()


def _size(pattern: str, text: str, last: bool = False) -> int | None:
    """The first (or last) size captured by ``pattern``, in bytes."""
    matches = list(re.finditer(pattern, text, re.IGNORECASE))
    if not matches:
        return None
    match = matches[-1] if last else matches[0]
    return to_bytes(match.group(1), match.group(2))


def _uses_legacy_units(text: str) -> bool:
    return any(m.group(2).lower() in _LEGACY_UNITS for m in re.finditer(_SIZE, text))


def _segment(text: str, start_pattern: str) -> tuple[str, str] | None:
    """The last message starting at ``start_pattern``, up to the next one; and the match."""
    starts = list(re.finditer(start_pattern, text, re.IGNORECASE))
    if not starts:
        return None
    start = starts[-1].start()
    return text[start : start + 2500], starts[-1].group(0)


# --- signatures --------------------------------------------------------------------

# Checked in this order: errors that are not about memory come first.
_SIGNATURES: tuple[tuple[str, str], ...] = (
    ("device_assert", r"device-side assert(?:ion)? triggered|Assertion `[^`]*` failed"),
    (
        "illegal_memory_access",
        r"illegal memory access was encountered|cudaErrorIllegalAddress"
        r"|CUDA_ERROR_ILLEGAL_ADDRESS",
    ),
    (
        "no_kernel_image",
        r"no kernel image is available for execution|cudaErrorNoKernelImageForDevice"
        r"|CUDA_ERROR_NO_BINARY_FOR_GPU|with CUDA capability sm_\d+\w* is not compatible",
    ),
    (
        "driver_too_old",
        r"NVIDIA driver on your system is too old|CUDA driver version is insufficient"
        r"|cudaErrorInsufficientDriver",
    ),
    (
        "no_driver",
        r"Found no NVIDIA driver on your system|couldn't communicate with the NVIDIA driver"
        r"|libcuda\.so(?:\.1)?: cannot open shared object file",
    ),
    ("cpu_only_wheel", r"Torch not compiled with CUDA enabled"),
    ("mps_oom", r"MPS backend out of memory"),
    (
        "cuda_oom",
        r"(?:CUDA|HIP) out of memory|would exceed allowed memory\. \(out of memory\)"
        r"|CUDA error: out of memory|cuda runtime error \(2\) : out of memory"
        r"|CUBLAS_STATUS_ALLOC_FAILED|cudaErrorMemoryAllocation"
        r"|torch\.(?:cuda\.)?OutOfMemoryError",
    ),
    (
        "cpu_oom",
        r"DefaultCPUAllocator: (?:can't allocate memory|not enough memory)"
        r"|Unable to allocate \S+ \S+ for an array|(?:^|\s)MemoryError\b"
        r"|Out of memory: Kill(?:ed)? process|oom-kill(?:er)?|killed by signal: Killed"
        r"|^\s*Killed\s*$",
    ),
)

_TITLES = {
    "cuda_oom": "CUDA out of memory: the GPU's own memory could not hold the request",
    "mps_oom": "MPS out of memory: the Apple GPU's share of unified memory ran out",
    "cpu_oom": "Host RAM out of memory: the CPU side, not the GPU, ran out",
    "device_assert": "Device-side assert: a data or index bug that surfaced on the GPU",
    "illegal_memory_access": "Illegal memory access: a kernel read or wrote outside its memory",
    "no_kernel_image": "No kernel image: the torch wheel has no kernels for this GPU",
    "driver_too_old": "Driver too old: the wheel's CUDA needs a newer NVIDIA driver",
    "no_driver": "No NVIDIA driver: nothing answers for the GPU",
    "cpu_only_wheel": "CPU-only wheel: this torch build has no CUDA at all",
    "unknown": "Not recognised: no known GPU error signature in this text",
}


def classify(text: str) -> tuple[str, str | None]:
    """The kind of error in ``text`` and the phrase that identified it.

    >>> classify("RuntimeError: CUDA error: device-side assert triggered")
    ('device_assert', 'device-side assert triggered')
    >>> classify("all good")
    ('unknown', None)
    """
    raw = text
    flat = normalize(text)
    for kind, pattern in _SIGNATURES:
        haystack = raw if kind == "cpu_oom" else flat
        match = re.search(pattern, haystack, re.IGNORECASE | re.MULTILINE)
        if match:
            return kind, match.group(0).strip()
    return "unknown", None


# --- numbers -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Numbers:
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


def _cuda_numbers(flat: str) -> _Numbers:
    found = _segment(
        flat,
        r"(?:CUDA|HIP) out of memory|Allocation on device \d+ would exceed|CUDA error: out of "
        r"memory|cuda runtime error \(2\)|CUBLAS_STATUS_ALLOC_FAILED|cudaErrorMemoryAllocation",
    ) or _segment(flat, r"OutOfMemoryError")
    if found is None:  # pragma: no cover - classify guarantees a match
        return _Numbers()
    seg, head = found
    legacy = _uses_legacy_units(seg)
    if head.lower().startswith("allocation on device"):
        device = re.search(r"device (\d+)", head)
        limit = _size(r"PyTorch limit \(set by user-supplied memory fraction\) ?: " + _SIZE, seg)
        total = _size(r"Device limit ?: " + _SIZE, seg)
        return _Numbers(
            wording="cudaMallocAsync backend",
            device=f"GPU {device.group(1)}" if device else None,
            requested=_size(r"Requested ?: " + _SIZE, seg),
            total=total,
            free=_size(r"Free \(according to CUDA\) ?: " + _SIZE, seg),
            allocated=_size(r"Currently allocated ?: " + _SIZE, seg),
            limit=limit if limit is not None and (total is None or limit < total) else None,
            legacy_units=legacy,
        )
    requested = _size(r"Tried to allocate " + _SIZE, seg)
    allowed = _size(_SIZE + r" allowed", seg)
    if re.search(r"total capacity;|\(GPU \d*;", seg, re.IGNORECASE):
        device = re.search(r"\((GPU \d*);", seg)
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
        return _Numbers(
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
        device = re.search(r"\b(GPU ?\d*) has a total", seg)
        typo = re.search(r"total capacty", seg, re.IGNORECASE)
        allocated = _size(_SIZE + r" is allocated by PyTorch", seg)
        unallocated = _size(_SIZE + r" is reserved by PyTorch but unallocated", seg)
        reserved = None
        if allocated is not None and unallocated is not None:
            reserved = allocated + unallocated
        process = _size(r"this process has " + _SIZE + r" memory in use", seg)
        return _Numbers(
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
            process=process,
            limit=allowed,
            legacy_units=legacy,
        )
    return _Numbers(
        wording="CUDA runtime error without numbers",
        requested=requested,
        detail="The message states no sizes: the failing allocation was inside a CUDA "
        "library or the runtime, not PyTorch's allocator.",
        legacy_units=legacy,
    )


def _mps_numbers(flat: str) -> _Numbers:
    found = _segment(flat, r"MPS backend out of memory")
    seg = found[0] if found else flat
    allocated = _size(r"(?:MPS allocated|currently allocated): " + _SIZE, seg)
    pool = re.search(r"on (private|shared) pool", seg)
    return _Numbers(
        wording="MPS allocator",
        device="MPS",
        requested=_size(r"Tried to allocate " + _SIZE, seg),
        allocated=allocated,
        other_allocations=_size(r"other allocations: " + _SIZE, seg),
        limit=_size(r"max allowed: " + _SIZE, seg),
        detail=f"The request was for the {pool.group(1)} pool." if pool else None,
        legacy_units=_uses_legacy_units(seg),
    )


def _cpu_numbers(raw: str, flat: str) -> _Numbers:
    match = re.search(r"you tried to allocate (\d+) bytes", flat, re.IGNORECASE)
    if match:
        windows = "not enough memory" in flat
        return _Numbers(
            wording="DefaultCPUAllocator (Windows)" if windows else "DefaultCPUAllocator",
            device="CPU",
            requested=int(match.group(1)),
        )
    numpy = re.search(
        r"Unable to allocate " + _SIZE + r" for an array with shape (\([^)]*\))"
        r"(?: and data type (\w+))?",
        flat,
    )
    if numpy:
        dtype = f" of {numpy.group(4)}" if numpy.group(4) else ""
        return _Numbers(
            wording="NumPy array allocation",
            device="CPU",
            requested=to_bytes(numpy.group(1), numpy.group(2)),
            detail=f"NumPy asked for an array of shape {numpy.group(3)}{dtype}.",
        )
    if re.search(r"Killed|oom-kill|Out of memory: Kill", raw, re.IGNORECASE):
        return _Numbers(
            wording="killed by the operating system (OOM killer)",
            device="CPU",
            detail="The kernel's OOM killer ended the process: no Python exception, often "
            "just 'Killed' and exit status 137.",
        )
    return _Numbers(wording="Python MemoryError", device="CPU")


# --- verdict ------------------------------------------------------------------------


def oom_verdict(
    requested: int | None,
    total: int | None,
    free: int | None,
    reserved: int | None = None,
    reserved_unallocated: int | None = None,
    limit: int | None = None,
) -> tuple[str, str]:
    """Judge an out-of-memory failure from its numbers; return (verdict, reason).

    ``limit`` is a per-process cap (``set_per_process_memory_fraction``, MPS's
    high watermark) when the message states one; it replaces the card's total.

    >>> oom_verdict(8 * GIB, 4 * GIB, 1 * GIB)[0]
    'too_large_for_device'
    >>> oom_verdict(GIB, 16 * GIB, 3 * GIB)[0]
    'fragmentation'
    >>> oom_verdict(GIB, 16 * GIB, 100 * MIB, reserved_unallocated=50 * MIB)[0]
    'exhaustion'
    """
    capped = limit is not None and (total is None or limit < total)
    capacity = limit if capped else total
    where = "the per-process limit" if capped else "the card"
    # A cap is a hard ceiling for everything, so a request equal to it cannot fit either.
    if (
        requested is not None
        and capacity is not None
        and (requested > capacity or (capped and requested >= capacity))
    ):
        return (
            "too_large_for_device",
            f"one request of {format_bytes(requested)} is "
            f"{'at least' if capped else 'larger than'} {where} "
            f"({format_bytes(capacity)}): no amount of freeing makes it fit",
        )
    if requested is not None and reserved_unallocated is not None:
        if reserved_unallocated >= requested:
            return (
                "fragmentation",
                f"the allocator held {format_bytes(reserved_unallocated)} reserved but "
                f"unallocated, at least the {format_bytes(requested)} asked for, and could not "
                "hand out one block that size",
            )
    available = free
    if limit is not None and reserved is not None:
        headroom = max(limit - reserved, 0)
        available = headroom if available is None else min(available, headroom)
    room = "left under the limit" if capped and available != free else "free"
    if requested is not None and available is not None and available >= requested:
        return (
            "fragmentation",
            f"{format_bytes(available)} was {room}, at least the {format_bytes(requested)} "
            "asked for, yet no contiguous block that size could be found",
        )
    if requested is None:
        return "exhaustion", "the message gives no sizes, so it reads as plain exhaustion"
    held = []
    if available is not None:
        held.append(f"the {format_bytes(available)} {room}")
    if reserved_unallocated is not None:
        held.append(f"the allocator's {format_bytes(reserved_unallocated)} cache")
    if not held:
        return "exhaustion", f"{format_bytes(requested)} could not be found"
    could = f"neither {held[0]} nor {held[1]} could" if len(held) == 2 else f"{held[0]} could not"
    return (
        "exhaustion",
        f"{could} hold {format_bytes(requested)}: the working set is larger than the memory",
    )


# --- the entry point -----------------------------------------------------------------


def _text_of(error: str | BaseException) -> str:
    if isinstance(error, BaseException):
        name = type(error).__qualname__
        module = type(error).__module__
        prefix = name if module == "builtins" else f"{module}.{name}"
        message = str(error)
        return f"{prefix}: {message}" if message else prefix
    if isinstance(error, bytes):
        raise ValueError("got bytes: decode the error text first (error.decode('utf-8'))")
    return str(error)


def _capability(flat: str) -> tuple[str | None, tuple[str, ...]]:
    sm = re.search(r"CUDA capability sm_(\d+)(\d)\w*", flat)
    capability = f"{sm.group(1)}.{sm.group(2)}" if sm else None
    supported: tuple[str, ...] = ()
    listed = re.search(r"supports CUDA capabilities ((?:sm_\w+ ?)+)", flat)
    if listed:
        supported = tuple(listed.group(1).split())
    return capability, supported


def _driver_cuda(flat: str) -> str | None:
    found = re.search(r"too old \(found version (\d{4,5})\)", flat)
    if not found:
        return None
    value = int(found.group(1))
    return f"{value // 1000}.{(value % 1000) // 10}"


def _assertion(flat: str) -> str | None:
    match = re.search(r"Assertion `([^`]*)` failed", flat)
    if not match:
        return None
    condition = match.group(1)
    where = re.search(r"(\w+\.cu):\d+", flat)
    place = f" in {where.group(1)}" if where else ""
    hint = ""
    if "n_classes" in condition or "Loss" in (where.group(1) if where else ""):
        hint = " A label is outside [0, num_classes)."
    elif "index" in condition.lower() or "Index" in (where.group(1) if where else ""):
        hint = " An index is outside the tensor it indexes (an embedding lookup, a gather)."
    return f"The kernel's check `{condition}` failed{place}.{hint}"


def diagnose(error: str | BaseException) -> Diagnosis:
    """Diagnose an error message or exception: kind, numbers in bytes, verdict, steps.

    Raises ``ValueError`` for empty text.

    >>> d = diagnose("RuntimeError: CUDA error: device-side assert triggered")
    >>> d.kind, d.verdict, d.steps[0].action
    ('device_assert', None, 'Do not shrink the batch')
    """
    text = _text_of(error)
    if not text.strip():
        raise ValueError("the error text is empty: paste the message or the whole traceback")
    kind, matched = classify(text)
    flat = normalize(text)
    numbers = _Numbers()
    if kind == "cuda_oom":
        numbers = _cuda_numbers(flat)
    elif kind == "mps_oom":
        numbers = _mps_numbers(flat)
    elif kind == "cpu_oom":
        numbers = _cpu_numbers(text, flat)

    capability, supported = _capability(flat) if kind == "no_kernel_image" else (None, ())
    driver_cuda = _driver_cuda(flat) if kind == "driver_too_old" else None
    detail = numbers.detail
    if kind == "device_assert":
        detail = _assertion(flat)
    notes: list[str] = []
    verdict: str | None = None
    outside: int | None = None
    if kind in OOM_KINDS:
        reserved = numbers.reserved
        if kind == "mps_oom" and numbers.allocated is not None:
            reserved = numbers.allocated + (numbers.other_allocations or 0)
        verdict, reason = oom_verdict(
            numbers.requested,
            numbers.total,
            numbers.free,
            reserved,
            numbers.reserved_unallocated,
            numbers.limit,
        )
        summary = f"Verdict {verdict}: {reason}."
        if kind == "cpu_oom" and numbers.requested is not None:
            summary = (
                f"Verdict {verdict}: host RAM could not supply {format_bytes(numbers.requested)} "
                "(the message does not say how much RAM was free)."
            )
        if numbers.total is not None and numbers.free is not None:
            own = numbers.process if numbers.process is not None else numbers.reserved
            if own is not None:
                outside = max(numbers.total - numbers.free - own, 0)
                if outside > OUTSIDE_SHARE_NOTE * numbers.total:
                    notes.append(
                        f"{format_bytes(outside)} of the card's {format_bytes(numbers.total)} "
                        "is held outside this process (other processes or jobs on the same "
                        "GPU): check `nvidia-smi` before shrinking your own run."
                    )
        if kind == "mps_oom" and numbers.other_allocations and numbers.limit:
            if numbers.other_allocations > OUTSIDE_SHARE_NOTE * numbers.limit:
                notes.append(
                    f"Other allocations ({format_bytes(numbers.other_allocations)}) hold most "
                    f"of the {format_bytes(numbers.limit)} allowed: memory beyond live "
                    "tensors, such as the allocator's cache and other Metal buffers."
                )
        if numbers.limit is not None and kind == "cuda_oom":
            notes.append(
                f"A per-process cap of {format_bytes(numbers.limit)} was set "
                "(torch.cuda.set_per_process_memory_fraction): the verdict is judged "
                "against the cap, not the whole card."
            )
        if "HIP out of memory" in flat:
            notes.append("HIP is PyTorch's ROCm (AMD) backend; the same reading applies.")
        steps = oom_steps(kind, verdict)
    else:
        summary = _TITLES[kind] + "."
        if kind == "no_kernel_image" and capability:
            summary = (
                f"The GPU has compute capability {capability} (sm_{capability.replace('.', '')}),"
                " which this torch wheel was not built for."
            )
            if supported:
                summary += f" The wheel supports: {' '.join(supported)}."
        if kind == "driver_too_old" and driver_cuda:
            summary = (
                f"The driver supports CUDA {driver_cuda} at most; the wheel needs a newer one."
            )
        if kind in ("device_assert", "illegal_memory_access"):
            notes.append(
                "CUDA reports kernel errors asynchronously: the line in the traceback may be "
                "a later, innocent call."
            )
        steps = other_steps(kind, capability, driver_cuda)
    if numbers.legacy_units:
        notes.append(
            "The message labels sizes KB/MB/GB but PyTorch computed them in binary units; "
            "they are read as KiB/MiB/GiB."
        )
    return Diagnosis(
        kind=kind,
        title=_TITLES[kind],
        verdict=verdict,
        summary=summary,
        wording=numbers.wording,
        device=numbers.device,
        requested_bytes=numbers.requested,
        total_bytes=numbers.total,
        free_bytes=numbers.free,
        allocated_bytes=numbers.allocated,
        reserved_bytes=numbers.reserved,
        reserved_unallocated_bytes=numbers.reserved_unallocated,
        process_bytes=numbers.process,
        outside_process_bytes=outside,
        limit_bytes=numbers.limit,
        other_allocations_bytes=numbers.other_allocations,
        compute_capability=capability,
        supported_capabilities=supported,
        driver_cuda_version=driver_cuda,
        detail=detail,
        notes=tuple(notes),
        steps=tuple(steps),
        matched=matched,
    )
