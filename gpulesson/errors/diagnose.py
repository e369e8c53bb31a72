"""Diagnose an error message: which kind of failure, the numbers in it, and what to do.

Paste the text of an error (a whole traceback or log is fine) or pass the
exception. :func:`diagnose` returns a :class:`Diagnosis`: the ``kind`` (one of
:data:`KINDS`), the byte counts the message states, a ``verdict`` for an
out-of-memory error, and the steps to try, in order.

The steps:

1. Normalise the text: join wrapped lines, undo ``\\n`` escapes from logs.
2. Find the kind by its signature. Non-memory CUDA errors are checked first, so
   a device-side assert is never mistaken for a memory problem; NCCL failures
   come last, because one rank's OOM or assert leaves the others timing out.
3. Read the numbers with :mod:`gpulesson.errors.numbers`: for an
   out-of-memory message the last one in the text (the exception that ended
   the run), in any of PyTorch's wordings; for NCCL the collective and its
   timeout, or the NCCL error class.
4. Judge an OOM with :func:`oom_verdict`.

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
from collections.abc import Mapping
from dataclasses import dataclass

from gpulesson.errors.fix_ladder import Step, nccl_steps, oom_steps, other_steps
from gpulesson.errors.numbers import (
    NcclNumbers,
    OomNumbers,
    cpu_numbers,
    cuda_numbers,
    cuda_segment_bytes,
    format_bytes,
    mps_numbers,
    nccl_numbers,
    to_bytes,
)
from gpulesson.errors.scan import Haystack, normalize

__all__ = [
    "KINDS",
    "OOM_KINDS",
    "VERDICTS",
    "Diagnosis",
    "classify",
    "diagnose",
    "diagnose_all",
    "format_bytes",
    "normalize",
    "oom_verdict",
    "to_bytes",
]

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
    "nccl_timeout",
    "nccl_error",
    "unknown",
)
OOM_KINDS: tuple[str, ...] = ("cuda_oom", "mps_oom", "cpu_oom")
NCCL_KINDS: tuple[str, ...] = ("nccl_timeout", "nccl_error")
VERDICTS: tuple[str, ...] = (
    "too_large_for_device",
    "fragmentation",
    "outside_allocator",
    "exhaustion",
)

# Memory held by other processes above this share of the card earns a note.
OUTSIDE_SHARE_NOTE = 0.5


@dataclass(frozen=True)
class Diagnosis:
    """What an error message says: its kind, its numbers in bytes, and what to do.

    Byte fields are ``None`` when the message does not state them.
    ``reserved_unallocated_bytes`` is memory the caching allocator holds but no
    tensor uses (stated by torch 2.x, derived as reserved minus allocated in
    1.x). ``outside_process_bytes`` is the card's memory held by something
    other than this process: total minus free minus this process's use. For
    an NCCL timeout, ``rank``, ``collective``, ``timeout_s`` and ``elapsed_s``
    are what the watchdog reported.
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
    rank: int | None
    collective: str | None
    timeout_s: float | None
    elapsed_s: float | None
    detail: str | None
    notes: tuple[str, ...]
    steps: tuple[Step, ...]
    matched: str | None


# --- signatures --------------------------------------------------------------------


@dataclass(frozen=True)
class Pattern:
    """A regular expression for what a literal phrase cannot say.

    It is case-sensitive and starts with a literal, so the search skips ahead to
    candidates; it runs only when its ``needle`` (a lower-case literal every match
    contains) occurs in the text.
    """

    needle: str
    regex: str


@dataclass(frozen=True)
class Signature:
    """How to recognise one kind: literal phrases (any case), and patterns for the rest.

    ``raw`` searches the text as given, where line starts matter, instead of the
    joined text.
    """

    kind: str
    phrases: tuple[str, ...]
    patterns: tuple[Pattern, ...] = ()
    raw: bool = False


# Checked in this order: errors that are not about memory come first, NCCL last.
SIGNATURES: tuple[Signature, ...] = (
    Signature(
        kind="device_assert",
        phrases=("device-side assert triggered", "device-side assertion triggered"),
        patterns=(Pattern(needle="assertion `", regex=r"Assertion `[^`]{0,1000}` failed"),),
    ),
    Signature(
        kind="illegal_memory_access",
        phrases=(
            "illegal memory access was encountered",
            "cudaerrorillegaladdress",
            "cuda_error_illegal_address",
        ),
    ),
    Signature(
        kind="no_kernel_image",
        phrases=(
            "no kernel image is available for execution",
            "cudaerrornokernelimagefordevice",
            "cuda_error_no_binary_for_gpu",
        ),
        patterns=(
            Pattern(
                needle="with cuda capability sm_",
                regex=r"with CUDA capability sm_\w+ is not compatible",
            ),
        ),
    ),
    Signature(
        kind="driver_too_old",
        phrases=(
            "nvidia driver on your system is too old",
            "cuda driver version is insufficient",
            "cudaerrorinsufficientdriver",
        ),
    ),
    Signature(
        kind="no_driver",
        phrases=(
            "found no nvidia driver on your system",
            "couldn't communicate with the nvidia driver",
            "libcuda.so: cannot open shared object file",
            "libcuda.so.1: cannot open shared object file",
        ),
    ),
    Signature(kind="cpu_only_wheel", phrases=("torch not compiled with cuda enabled",)),
    Signature(kind="mps_oom", phrases=("mps backend out of memory",)),
    Signature(
        kind="cuda_oom",
        phrases=(
            "cuda out of memory",
            "hip out of memory",
            "would exceed allowed memory. (out of memory)",
            "cuda error: out of memory",
            "cuda runtime error (2) : out of memory",
            "cublas_status_alloc_failed",
            "cudaerrormemoryallocation",
            "torch.outofmemoryerror",
            "torch.cuda.outofmemoryerror",
            # the numbers of the caching allocator's own message, quoted without its start
            "reserved in total by pytorch",
            "reserved by pytorch but unallocated",
        ),
    ),
    Signature(
        kind="cpu_oom",
        phrases=(
            "defaultcpuallocator: can't allocate memory",
            "defaultcpuallocator: not enough memory",
            "out of memory: kill process",
            "out of memory: killed process",
            "oom-kill",
            "killed by signal: killed",
        ),
        patterns=(
            Pattern(
                needle="unable to allocate ",
                regex=r"Unable to allocate \S{1,32} \S{1,8} for an array",
            ),
            # Python's exception name, not part of a longer word.
            Pattern(needle="memoryerror", regex=r"MemoryError(?<!\SMemoryError)\b"),
            # The shell's bare "Killed" line after the kernel's OOM killer ended a process.
            Pattern(needle="killed", regex=r"Killed(?<![^\n]Killed)[ \t\r]*$"),
        ),
        raw=True,
    ),
    Signature(
        kind="nccl_timeout",
        phrases=(
            "watchdog caught collective operation timeout",
            "milliseconds before timing out",
            "nccltimeouterror",
        ),
    ),
    Signature(
        kind="nccl_error",
        phrases=(
            "nccl error in: ",
            "nccl error: ",
            "distbackenderror: nccl",
            "ncclsystemerror",
            "ncclinternalerror",
            "ncclunhandledcudaerror",
            "ncclremoteerror",
            "ncclinvalidusage",
            "ncclinvalidargument",
            "some nccl operations have failed or timed out",
        ),
    ),
)
_COMPILED = {
    p.regex: re.compile(p.regex.encode(), re.MULTILINE) for sig in SIGNATURES for p in sig.patterns
}
_NCCL_PHRASES = ("watchdog caught collective operation timeout", "nccl error", "some nccl")

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
    "nccl_timeout": "NCCL timeout: a collective waited longer than the process group's timeout",
    "nccl_error": "NCCL error: the library that moves data between GPUs failed",
    "unknown": "Not recognised: no known GPU error signature in this text",
}

# What each NCCL error class means, after NCCL's own descriptions (NCCLUtils in PyTorch,
# and the NCCL troubleshooting guide).
_NCCL_MEANING = {
    "ncclUnhandledCudaError": "a CUDA call inside NCCL failed; look for the CUDA error itself "
    "(an earlier kernel error or an out-of-memory on that rank)",
    "ncclSystemError": "a system call (socket, shared memory, malloc) or an external library "
    "call failed; a peer process that exited can cause it too",
    "ncclInternalError": "an internal check failed, most often a set-up problem: two ranks on "
    "one GPU ('Duplicate GPU detected') or no usable network interface",
    "ncclInvalidArgument": "the program passed NCCL an invalid value",
    "ncclInvalidUsage": "the program used NCCL wrongly, for example mismatched collectives "
    "or tensors across ranks",
    "ncclRemoteError": "a call failed, possibly a network error or a remote process exiting early",
}


def _match(signature: Signature, haystack: Haystack) -> str | None:
    """The leftmost phrase or pattern match of one signature, as written; None when absent."""
    found = haystack.first(signature.phrases, raw=signature.raw)
    for pattern in signature.patterns:
        match = haystack.search(_COMPILED[pattern.regex], (pattern.needle,), raw=signature.raw)
        if match and (found is None or match.start() < found[0]):
            found = (match.start(), match.group(0).decode("utf-8", errors="replace"))
    return found[1].strip() if found else None


def classify_haystack(haystack: Haystack) -> tuple[str, str | None]:
    """The kind of error in a prepared text and the phrase that identified it."""
    for signature in SIGNATURES:
        matched = _match(signature, haystack)
        if matched is not None:
            return signature.kind, matched
    return "unknown", None


def classify(text: str) -> tuple[str, str | None]:
    """The kind of error in ``text`` and the phrase that identified it.

    >>> classify("RuntimeError: CUDA error: device-side assert triggered")
    ('device_assert', 'device-side assert triggered')
    >>> classify("all good")
    ('unknown', None)
    """
    return classify_haystack(Haystack.of(text))


# --- verdict ------------------------------------------------------------------------


def oom_verdict(
    *,
    requested_bytes: int | None,
    total_bytes: int | None,
    free_bytes: int | None,
    reserved_bytes: int | None = None,
    reserved_unallocated_bytes: int | None = None,
    limit_bytes: int | None = None,
    segment_bytes: int | None = None,
    held_elsewhere_bytes: int | None = None,
) -> tuple[str, str]:
    """Judge an out-of-memory failure from its numbers; return (verdict, reason).

    The rules, in order:

    1. ``too_large_for_device``: the one request is larger than the card (or at
       least the per-process cap ``limit_bytes``, which then replaces the card).
    2. ``fragmentation``: the allocator's reserved-but-unallocated cache is at
       least the request. Before raising, the CUDA caching allocator releases
       every cached segment that holds no live tensor and retries, so what the
       message still counts as unallocated sits in segments shared with live
       tensors: there is enough, but not in one piece.
    3. ``outside_allocator``: the driver reports enough free memory for the
       segment the allocator would ask for (``segment_bytes``, the request when
       not given), the cache cannot cover it, and the allocation failed anyway:
       the cause is outside PyTorch's allocator (a per-process cap, another
       process taking memory, memory the driver keeps back).
    4. ``fragmentation`` again: neither alone holds the request (the segment, for the free
       memory) but the free memory and the cache together do, so the live tensors plus
       the request fit in what this process could have; only the pieces are too small.
       Not when other processes hold more than half of the card
       (``held_elsewhere_bytes``, from the message): then the free memory is theirs to
       take too, and the reading stays exhaustion.
    5. ``exhaustion``: neither could hold it; the working set is too large.

    >>> from gpulesson.units import GIB, MIB
    >>> oom_verdict(requested_bytes=8 * GIB, total_bytes=4 * GIB, free_bytes=GIB)[0]
    'too_large_for_device'
    >>> oom_verdict(requested_bytes=GIB, total_bytes=16 * GIB, free_bytes=10 * MIB,
    ...     reserved_unallocated_bytes=2 * GIB)[0]
    'fragmentation'
    >>> oom_verdict(requested_bytes=GIB, total_bytes=16 * GIB, free_bytes=3 * GIB,
    ...     reserved_unallocated_bytes=50 * MIB)[0]
    'outside_allocator'
    >>> oom_verdict(requested_bytes=GIB, total_bytes=16 * GIB, free_bytes=100 * MIB,
    ...     reserved_unallocated_bytes=50 * MIB)[0]
    'exhaustion'
    >>> oom_verdict(requested_bytes=GIB, total_bytes=16 * GIB, free_bytes=600 * MIB,
    ...     reserved_unallocated_bytes=600 * MIB)[0]
    'fragmentation'
    >>> oom_verdict(requested_bytes=GIB, total_bytes=16 * GIB, free_bytes=600 * MIB,
    ...     reserved_unallocated_bytes=600 * MIB, held_elsewhere_bytes=12 * GIB)[0]
    'exhaustion'
    """
    requested, limit = requested_bytes, limit_bytes
    capped = limit is not None and (total_bytes is None or limit < total_bytes)
    capacity = limit if capped else total_bytes
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
    if requested is None:
        return "exhaustion", "the message gives no sizes, so it reads as plain exhaustion"
    cache = reserved_unallocated_bytes
    if cache is not None and cache >= requested:
        return (
            "fragmentation",
            f"the allocator held {format_bytes(cache)} reserved but unallocated, at least "
            f"the {format_bytes(requested)} asked for, after releasing every cached segment "
            "it could: the rest lies in segments shared with live tensors, in pieces none "
            "of which fits the request",
        )
    available = free_bytes
    if limit is not None and reserved_bytes is not None:
        headroom = max(limit - reserved_bytes, 0)
        available = headroom if available is None else min(available, headroom)
    room = "left under the limit" if capped and available != free_bytes else "free"
    needed = segment_bytes if segment_bytes is not None else requested
    if available is not None and available >= needed:
        asked = (
            f"the {format_bytes(needed)} segment the allocator asks the driver for"
            if needed != requested
            else f"the {format_bytes(requested)} asked for"
        )
        cached = f" and its cache ({format_bytes(cache)}) could not hold it" if cache else ""
        return (
            "outside_allocator",
            f"{format_bytes(available)} was {room}, at least {asked}, yet the allocation "
            f"failed{cached}: something outside PyTorch's allocator holds or caps the "
            "memory (a per-process cap, another process, the driver)",
        )
    contested = (
        held_elsewhere_bytes is not None
        and total_bytes is not None
        and held_elsewhere_bytes > OUTSIDE_SHARE_NOTE * total_bytes
    )
    if cache is not None and available is not None and not contested:
        if cache + available >= needed:
            return (
                "fragmentation",
                f"neither the {format_bytes(available)} {room} nor the allocator's "
                f"{format_bytes(cache)} cache holds {format_bytes(needed)} alone, but "
                f"together they hold {format_bytes(cache + available)}: the live tensors and "
                "the request fit in what this process could have, only not in one piece",
            )
    held = []
    if available is not None:
        held.append(f"the {format_bytes(available)} {room}")
    if cache is not None:
        held.append(f"the allocator's {format_bytes(cache)} cache")
    if not held:
        return "exhaustion", f"{format_bytes(requested)} could not be found"
    could = f"neither {held[0]} nor {held[1]} could" if len(held) == 2 else f"{held[0]} could not"
    return (
        "exhaustion",
        f"{could} hold {format_bytes(requested)}: the working set is larger than the memory",
    )


# --- details -----------------------------------------------------------------------


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
    sm = re.search(r"CUDA capability sm_(\d{1,2})(\d)(?!\d)", flat)
    capability = f"{sm.group(1)}.{sm.group(2)}" if sm else None
    supported: tuple[str, ...] = ()
    listed = re.search(r"supports CUDA capabilities ((?:sm_\w{1,8} ?){1,64})", flat)
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
    match = re.search(r"Assertion `([^`]{0,1000})` failed", flat)
    if not match:
        return None
    condition = match.group(1)
    # The kernel's file is printed just before the assertion, on the same line.
    where = re.search(r"\b(\w{1,200}\.cu):\d", flat[max(match.start() - 500, 0) : match.start()])
    source = where.group(1) if where else ""
    place = f" in {source}" if source else ""
    hint = ""
    if "n_classes" in condition or "Loss" in source:
        hint = " A label is outside [0, num_classes)."
    elif "index" in condition.lower() or "Index" in source:
        hint = " An index is outside the tensor it indexes (an embedding lookup, a gather)."
    return f"The kernel's check `{condition}` failed{place}.{hint}"


def _nccl_detail(kind: str, nccl: NcclNumbers) -> str | None:
    if kind == "nccl_timeout":
        if nccl.collective is None and nccl.timeout_s is None:
            return None
        who = f"Rank {nccl.rank}'s" if nccl.rank is not None else "A"
        op = nccl.collective or "collective"
        seq = f" (sequence number {nccl.sequence_number})" if nccl.sequence_number else ""
        ran = f" ran {nccl.elapsed_s:,.1f} s" if nccl.elapsed_s is not None else " ran"
        limit = f" against a {nccl.timeout_s:,.1f} s timeout" if nccl.timeout_s else ""
        return f"{who} {op}{seq}{ran}{limit}: the watchdog gave up waiting for the other ranks."
    parts = []
    if nccl.error_class:
        meaning = _NCCL_MEANING.get(nccl.error_class)
        parts.append(f"{nccl.error_class}" + (f": {meaning}." if meaning else "."))
    if nccl.nccl_version:
        parts.append(f"NCCL version {nccl.nccl_version}.")
    if nccl.last_error:
        parts.append(f"NCCL's last error: {nccl.last_error}")
    return " ".join(parts) or None


def _held_elsewhere(numbers: OomNumbers) -> int | None:
    """Bytes of the card neither free nor this process's: other processes, other jobs."""
    if numbers.total is None or numbers.free is None:
        return None
    own = numbers.process if numbers.process is not None else numbers.reserved
    return None if own is None else max(numbers.total - numbers.free - own, 0)


def _oom_notes(kind: str, numbers: OomNumbers, haystack: Haystack) -> tuple[list[str], int | None]:
    notes: list[str] = []
    outside = _held_elsewhere(numbers)
    if numbers.total is not None and outside is not None:
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
    if haystack.contains(("hip out of memory",)):
        notes.append("HIP is PyTorch's ROCm (AMD) backend; the same reading applies.")
    return notes, outside


# --- the entry point -----------------------------------------------------------------


def diagnose(error: str | BaseException) -> Diagnosis:
    """Diagnose an error message or exception: kind, numbers in bytes, verdict, steps.

    Raises ``ValueError`` for empty text, and for a size no allocator can be
    asked for (over 2**64 bytes).

    >>> d = diagnose("RuntimeError: CUDA error: device-side assert triggered")
    >>> d.kind, d.verdict, d.steps[0].action
    ('device_assert', None, 'Do not shrink the batch')
    """
    text = _text_of(error)
    if not text.strip():
        raise ValueError("the error text is empty: paste the message or the whole traceback")
    haystack = Haystack.of(text)
    kind, matched = classify_haystack(haystack)
    flat = haystack.flat_text
    numbers = OomNumbers(caching_allocator=False)
    if kind == "cuda_oom":
        numbers = cuda_numbers(haystack)
    elif kind == "mps_oom":
        numbers = mps_numbers(haystack)
    elif kind == "cpu_oom":
        numbers = cpu_numbers(haystack)
    nccl = nccl_numbers(haystack) if kind in NCCL_KINDS else NcclNumbers()

    capability, supported = _capability(flat) if kind == "no_kernel_image" else (None, ())
    driver_cuda = _driver_cuda(flat) if kind == "driver_too_old" else None
    detail = numbers.detail
    if kind == "device_assert":
        detail = _assertion(flat)
    elif kind in NCCL_KINDS:
        detail = _nccl_detail(kind, nccl)
    notes: list[str] = []
    verdict: str | None = None
    outside: int | None = None
    if kind in OOM_KINDS:
        reserved = numbers.reserved
        if kind == "mps_oom" and numbers.allocated is not None:
            reserved = numbers.allocated + (numbers.other_allocations or 0)
        segment = None
        if numbers.caching_allocator and numbers.requested is not None:
            segment = cuda_segment_bytes(numbers.requested)
        verdict, reason = oom_verdict(
            requested_bytes=numbers.requested,
            total_bytes=numbers.total,
            free_bytes=numbers.free,
            reserved_bytes=reserved,
            reserved_unallocated_bytes=numbers.reserved_unallocated,
            limit_bytes=numbers.limit,
            segment_bytes=segment,
            held_elsewhere_bytes=_held_elsewhere(numbers),
        )
        summary = f"Verdict {verdict}: {reason}."
        if kind == "cpu_oom" and numbers.requested is not None:
            summary = (
                f"Verdict {verdict}: host RAM could not supply {format_bytes(numbers.requested)} "
                "(the message does not say how much RAM was free)."
            )
        notes, outside = _oom_notes(kind, numbers, haystack)
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
                f"The driver supports CUDA {driver_cuda} at most; the wheel's CUDA runtime "
                f"needs a newer driver (a CUDA major version above {driver_cuda.split('.')[0]}, "
                "or a feature only newer drivers have)."
            )
        if kind in ("device_assert", "illegal_memory_access"):
            notes.append(
                "CUDA reports kernel errors asynchronously: the line in the traceback may be "
                "a later, innocent call."
            )
        steps = (
            nccl_steps(kind)
            if kind in NCCL_KINDS
            else other_steps(kind, capability=capability, driver_cuda=driver_cuda)
        )
    if kind not in NCCL_KINDS and kind != "unknown" and haystack.contains(_NCCL_PHRASES):
        notes.append(
            "The same text also shows NCCL timeouts or errors: the other ranks were waiting "
            "for the one that failed here. Fix this error first."
        )
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
        rank=nccl.rank,
        collective=nccl.collective,
        timeout_s=nccl.timeout_s,
        elapsed_s=nccl.elapsed_s,
        detail=detail,
        notes=tuple(notes),
        steps=tuple(steps),
        matched=matched,
    )


def diagnose_all(messages: Mapping[str, str]) -> dict[str, Diagnosis]:
    """Diagnose several named messages, keeping their order (a page's table of examples).

    >>> diagnose_all({"a": "MemoryError"})["a"].kind
    'cpu_oom'
    """
    return {name: diagnose(text) for name, text in messages.items()}
