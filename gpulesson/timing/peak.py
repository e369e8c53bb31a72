"""A CPU's peak FLOP/s from what the machine reveals, beside the best matmul it measured.

The peak arithmetic rate of a CPU is

    cores x FMA units per core x SIMD lanes x 2 x clock

A fused multiply-add (FMA) is 2 FLOPs on every lane of a SIMD register, and each
FMA unit of a core can start one per cycle. The machine reveals most terms: the
cores (``/proc/cpuinfo``, limited to the CPUs this process may use and to the
threads torch runs), the SIMD width (the CPU flags: ``avx512f`` is 512 bits,
``avx2`` 256, ``asimd``/``neon`` 128) and a clock (``/sys`` or ``/proc/cpuinfo``).
It does not reveal how many FMA units a core has: that is in the vendor's
optimization manual (Intel's 64 and IA-32 Architectures Optimization Reference
Manual; AMD's Software Optimization Guides), in measured instruction throughputs
(https://agner.org/optimize/), and tabulated per microarchitecture at
https://en.wikichip.org/wiki/flops and in https://stackoverflow.com/questions/15655835
(for example 32 fp32 FLOPs per cycle per core for two 256-bit FMA units). So the
model gives a rate *per FMA unit*, the bounds for one and two units, and the lesson
takes the best measured matmul as the roof this machine actually achieves.

The GPU side of the comparison is the datasheet tensor-core peak: it comes from the
datasheet table of ``gpulesson.results`` (the results issue), not from here.

Used by the lesson ``why-gpus.md`` (with the best rate of the size sweep,
``SweepComparison.best_cpu``); ``gpulesson.course.why_gpus.cpu_peak_markdown`` renders it.

>>> facts = parse_cpu_facts("processor : 0\\nflags : fma avx2\\ncpu MHz : 2000.0\\n",
...                         arch="x86_64", usable={0})
>>> peak = cpu_peak(facts, "fp32", threads=1)
>>> peak.simd_lanes, peak.per_fma_unit_flop_per_s / 1e9
(8, 32.0)
"""

from __future__ import annotations

import os
import platform
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from gpulesson.timing.inputs import usable_cpus

CPUINFO = Path("/proc/cpuinfo")
MAX_FREQ = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")  # kHz

FLOPS_PER_FMA_LANE = 2  # a multiply and an add, fused into one instruction
FMA_UNIT_BOUNDS = (1, 2)  # what current cores have; the machine does not say which

# SIMD register width by instruction set, widest first: the first flag present wins.
SIMD_BITS: tuple[tuple[str, int], ...] = (
    ("avx512f", 512),
    ("avx2", 256),
    ("avx", 256),
    ("sse2", 128),
    ("asimd", 128),  # Arm NEON on 64-bit Linux
    ("neon", 128),
)
ELEMENT_BITS = {"fp64": 64, "fp32": 32, "bf16": 16, "fp16": 16}

# 16-bit dtypes have native arithmetic only with these flags (a bf16 dot-product or
# fp16 FMA per 16-bit lane); without them the CPU converts to fp32 and runs fp32 lanes.
NATIVE_16BIT_FLAGS = {"bf16": ("avx512_bf16",), "fp16": ("avx512_fp16", "fphp", "asimdhp")}


@dataclass(frozen=True)
class CpuFacts:
    """What this machine reveals about its CPU, each with where it was read."""

    arch: str
    model: str | None
    cores: int | None
    cores_source: str
    clock_hz: float | None
    clock_source: str
    flags: frozenset[str]


def _fields(block: str) -> dict[str, str]:
    fields = {}
    for line in block.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    return fields


def parse_cpu_facts(
    cpuinfo: str,
    arch: str,
    usable: Iterable[int],
    max_freq_khz: str | None = None,
) -> CpuFacts:
    """Read cores, clock and flags from ``/proc/cpuinfo`` text (and the max-frequency file).

    Cores are the distinct (physical id, core id) pairs among the CPUs in
    ``usable``: two hyperthreads of one core share its FMA units. Without core
    ids, every usable logical CPU counts as a core (and the source says so).

    >>> text = ("processor : 0\\nphysical id : 0\\ncore id : 0\\ncpu MHz : 2445.4\\n"
    ...         "flags : avx2 fma\\n\\nprocessor : 1\\nphysical id : 0\\ncore id : 0\\n")
    >>> f = parse_cpu_facts(text, "x86_64", {0, 1})
    >>> f.cores, f.cores_source, f.clock_hz, sorted(f.flags)
    (1, '/proc/cpuinfo core ids of the usable CPUs', 2445400000.0, ['avx2', 'fma'])
    """
    usable = set(usable)
    blocks = [_fields(b) for b in cpuinfo.split("\n\n") if b.strip()]
    mine = [b for b in blocks if b.get("processor", "").isdigit()]
    mine = [b for b in mine if int(b["processor"]) in usable] or mine
    first = mine[0] if mine else {}
    ids = {(b.get("physical id"), b.get("core id")) for b in mine if "core id" in b}
    if ids:
        cores, cores_source = len(ids), "/proc/cpuinfo core ids of the usable CPUs"
    elif usable:
        cores, cores_source = len(usable), "usable logical CPUs (core ids not revealed)"
    else:
        cores, cores_source = None, "not revealed"
    flags_text = first.get("flags") or first.get("Features") or ""
    model = first.get("model name") or first.get("Model") or None
    clock_hz, clock_source = None, "not revealed by this machine"
    if max_freq_khz and max_freq_khz.strip().isdigit():
        clock_hz = int(max_freq_khz.strip()) * 1e3
        clock_source = f"{MAX_FREQ} (the maximum clock)"
    elif first.get("cpu MHz"):
        clock_hz = float(first["cpu MHz"]) * 1e6
        clock_source = "/proc/cpuinfo cpu MHz (the clock when read; boost can be higher)"
    return CpuFacts(
        arch=arch,
        model=model,
        cores=cores,
        cores_source=cores_source,
        clock_hz=clock_hz,
        clock_source=clock_source,
        flags=frozenset(flags_text.split()),
    )


def read_cpu_facts() -> CpuFacts:
    """This machine's CPU facts (Linux files where present; other systems reveal less).

    >>> read_cpu_facts().arch == platform.machine()
    True
    """
    cpuinfo = CPUINFO.read_text() if CPUINFO.exists() else ""
    max_freq = MAX_FREQ.read_text() if MAX_FREQ.exists() else None
    if hasattr(os, "sched_getaffinity"):
        usable: Iterable[int] = os.sched_getaffinity(0)
    else:
        usable = range(usable_cpus())
    return parse_cpu_facts(cpuinfo, platform.machine(), usable, max_freq)


@dataclass(frozen=True)
class CpuPeak:
    """The peak model's terms for one dtype; a term the machine does not reveal is None.

    ``fma_units_per_core`` is never revealed by the machine, so the model's result
    is ``per_fma_unit_flop_per_s``: the peak if each core had one FMA unit.
    """

    dtype: str
    cores: int | None
    cores_source: str
    simd: str | None
    simd_lanes: int | None
    lanes_note: str
    fma: bool
    clock_hz: float | None
    clock_source: str

    @property
    def per_fma_unit_flop_per_s(self) -> float | None:
        """cores x SIMD lanes x 2 x clock: the peak per FMA unit per core (None if unknown)."""
        if self.cores is None or self.simd_lanes is None or self.clock_hz is None:
            return None
        return self.cores * self.simd_lanes * FLOPS_PER_FMA_LANE * self.clock_hz

    @property
    def bounds_flop_per_s(self) -> tuple[tuple[int, float], ...]:
        """The peak for each plausible FMA-unit count, ``FMA_UNIT_BOUNDS``."""
        per_unit = self.per_fma_unit_flop_per_s
        if per_unit is None:
            return ()
        return tuple((units, units * per_unit) for units in FMA_UNIT_BOUNDS)

    @property
    def unknown_terms(self) -> tuple[str, ...]:
        """The terms this machine did not reveal (FMA units per core always among them)."""
        missing = ["FMA units per core"]
        if self.cores is None:
            missing.append("cores")
        if self.simd_lanes is None:
            missing.append("SIMD lanes")
        if self.clock_hz is None:
            missing.append("clock")
        return tuple(missing)


def simd_lanes(flags: frozenset[str], dtype: str) -> tuple[str | None, int | None, str]:
    """The widest SIMD instruction set in ``flags`` and its lanes for ``dtype``, with a note.

    >>> simd_lanes(frozenset({"avx2", "fma"}), "fp32")
    ('avx2', 8, '256-bit registers / 32-bit fp32')
    >>> simd_lanes(frozenset({"avx2"}), "bf16")[1]
    8
    """
    if dtype not in ELEMENT_BITS:
        raise ValueError(f"unknown dtype {dtype!r}: use fp64, fp32, bf16 or fp16")
    found = next(((name, bits) for name, bits in SIMD_BITS if name in flags), None)
    if found is None:
        return None, None, "no SIMD flag this model knows (the machine did not reveal a width)"
    name, bits = found
    element = ELEMENT_BITS[dtype]
    native = [f for f in NATIVE_16BIT_FLAGS.get(dtype, ()) if f in flags]
    if element == 16 and not native:
        return name, bits // 32, f"{bits}-bit registers / 32-bit: no native {dtype}, run as fp32"
    note = f"{bits}-bit registers / {element}-bit {dtype}"
    if native:
        note += f" ({native[0]})"
    return name, bits // element, note


def cpu_peak(facts: CpuFacts, dtype: str = "fp32", threads: int | None = None) -> CpuPeak:
    """The peak model for ``dtype`` on the cores ``threads`` threads can occupy.

    >>> f = CpuFacts(arch="x86_64", model=None, cores=4, cores_source="test",
    ...              clock_hz=3e9, clock_source="test", flags=frozenset({"avx512f"}))
    >>> [(u, r / 1e9) for u, r in cpu_peak(f, "fp32", threads=2).bounds_flop_per_s]
    [(1, 192.0), (2, 384.0)]
    """
    cores = facts.cores
    if cores is not None and threads is not None:
        cores = min(cores, threads)
    simd, lanes, note = simd_lanes(facts.flags, dtype)
    fma = bool({"fma", "avx512f", "asimd", "neon"} & facts.flags)
    return CpuPeak(
        dtype=dtype,
        cores=cores,
        cores_source=facts.cores_source
        + (f", at most the {threads} threads torch runs" if threads is not None else ""),
        simd=simd,
        simd_lanes=lanes,
        lanes_note=note,
        fma=fma,
        clock_hz=facts.clock_hz,
        clock_source=facts.clock_source,
    )


@dataclass(frozen=True)
class CpuRoof:
    """The peak model beside the best matmul rate this machine measured: the achievable roof.

    ``achieved_source`` says where the rate was measured (for the table).
    """

    peak: CpuPeak
    achieved_flop_per_s: float
    achieved_source: str

    @property
    def fma_units_implied(self) -> float | None:
        """Measured rate over the per-FMA-unit peak: at least this many units were busy."""
        per_unit = self.peak.per_fma_unit_flop_per_s
        return None if per_unit is None else self.achieved_flop_per_s / per_unit

    @property
    def verdict(self) -> str:
        """Where the measurement sits against the model's bounds.

        ``unknown`` (a term is missing), ``below_one_unit`` (the model allows one or
        more units), ``needs_two_units`` (faster than one unit per core can go), or
        ``above_bounds`` (faster than two units at the clock read: the cores ran
        above that clock, or have more units).

        >>> f = CpuFacts(arch="x86_64", model=None, cores=1, cores_source="t",
        ...              clock_hz=1e9, clock_source="t", flags=frozenset({"avx2"}))
        >>> CpuRoof(peak=cpu_peak(f, "fp32", 1), achieved_flop_per_s=20e9,
        ...         achieved_source="t").verdict
        'needs_two_units'
        """
        implied = self.fma_units_implied
        if implied is None:
            return "unknown"
        if implied <= FMA_UNIT_BOUNDS[0]:
            return "below_one_unit"
        if implied <= FMA_UNIT_BOUNDS[-1]:
            return "needs_two_units"
        return "above_bounds"


def cpu_roof(
    achieved_flop_per_s: float,
    achieved_source: str,
    threads: int,
    dtype: str = "fp32",
    facts: CpuFacts | None = None,
) -> CpuRoof:
    """This machine's peak model for ``threads`` threads beside a measured matmul rate.

    >>> roof = cpu_roof(1e9, "a test", threads=1)
    >>> roof.peak.dtype, roof.achieved_source
    ('fp32', 'a test')
    """
    if not achieved_flop_per_s > 0:
        raise ValueError(f"measured rate {achieved_flop_per_s} FLOP/s must be positive")
    return CpuRoof(
        peak=cpu_peak(facts or read_cpu_facts(), dtype, threads),
        achieved_flop_per_s=achieved_flop_per_s,
        achieved_source=achieved_source,
    )
