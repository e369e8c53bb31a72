"""Probe the machine: Python, torch, the GPU stack, and why CUDA is or is not usable.

The probe never raises on a strange machine: each step that fails becomes a
line in ``ProbeReport.problems``. The verdict names one of the cases taught in
the lesson "Your GPU software stack":

* ``cuda_ok``: torch sees a CUDA device.
* case 0, ``no_nvidia_gpu``: no NVIDIA hardware; CPU or MPS is the normal path.
* case 1, ``no_driver``: NVIDIA hardware but no working driver.
* case 2, ``cpu_only_wheel``: driver fine, torch is a CPU-only build.
* case 2b, ``driver_too_old``: the wheel's CUDA is a newer major version than
  the driver supports.
* case 3, ``devices_hidden``: driver and wheel agree, but no device is visible.

Driver and wheel agree when the driver supports the wheel's CUDA major
version: since CUDA 11, a runtime runs on any driver of its major release
family (minor-version compatibility, NVIDIA's CUDA Compatibility guide,
https://docs.nvidia.com/deploy/cuda-compatibility/), so a wheel built with
CUDA 12.8 runs on a driver that reports 12.2. The fixes shared with
:mod:`gpulesson.errors.fix_ladder` live here, as :class:`Fix` constants.

Used by the lesson ``lessons/software-stack.md`` and by ``gpulesson probe``.

>>> classify(ProbeFacts(nvidia_hardware=False, driver_version=None,
...     driver_cuda_version=None, torch_cuda_build=None, cuda_available=False,
...     mps_available=False, cuda_visible_devices=None)).case
'no_nvidia_gpu'
>>> classify(ProbeFacts(nvidia_hardware=True, driver_version="470.82",
...     driver_cuda_version="11.4", torch_cuda_build="12.1", cuda_available=False,
...     mps_available=False, cuda_visible_devices=None)).code
'2b'
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gpulesson.units import format_gb, format_gib

PCI_ROOT = Path("/sys/bus/pci/devices")
NVIDIA_PCI_VENDOR = "0x10de"


@dataclass(frozen=True)
class GpuDevice:
    """One CUDA device as torch reports it."""

    index: int
    name: str
    total_memory_bytes: int
    compute_capability: str


@dataclass(frozen=True)
class DriverInfo:
    """The NVIDIA driver, read through NVML or nvidia-smi.

    ``cuda_version`` is the highest CUDA version the driver supports, not the
    CUDA that torch was built with.
    """

    version: str | None
    cuda_version: str | None
    source: str  # "nvml", "nvidia-smi" or "none found"


@dataclass(frozen=True)
class ProbeFacts:
    """The few facts the verdict depends on, separated so it can be tested alone."""

    nvidia_hardware: bool
    driver_version: str | None
    driver_cuda_version: str | None
    torch_cuda_build: str | None
    cuda_available: bool
    mps_available: bool
    cuda_visible_devices: str | None


@dataclass(frozen=True)
class Fix:
    """One fix for a layer of the stack: what to do, and how. Shared with the error steps."""

    action: str
    detail: str


FIX_DRIVER = Fix(
    action="Make nvidia-smi work",
    detail="Install or repair the NVIDIA driver until `nvidia-smi` lists the card; nothing "
    "in Python helps before that.",
)
FIX_CONTAINER = Fix(
    action="In a container, attach the GPU",
    detail="In a container, start it with GPUs attached (`docker run --gpus all`) and the "
    "NVIDIA Container Toolkit installed on the host.",
)
FIX_WHEEL = Fix(
    action="Reinstall a CUDA build of torch",
    detail="Install torch from the index URL of a CUDA build your driver supports "
    "(pytorch.org's install selector): a wheel for the driver's CUDA major version or an "
    "older one. The CUDA toolkit (nvcc) is not needed: the wheel bundles its runtime.",
)
FIX_VISIBLE_DEVICES = Fix(
    action="Unhide the devices",
    detail="Unset or correct CUDA_VISIBLE_DEVICES (e.g. CUDA_VISIBLE_DEVICES=0).",
)


def fix_driver_too_old(driver_cuda_version: str | None) -> Fix:
    """The fix when the wheel's CUDA major version is newer than the driver supports.

    >>> fix_driver_too_old("12.4").detail.startswith("Update the NVIDIA driver")
    True
    """
    major = (driver_cuda_version or "").split(".")[0]
    older = f"CUDA {major}.x or older" if major else "the CUDA version `nvidia-smi` reports"
    return Fix(
        action="Update the driver, or pick a wheel for its CUDA",
        detail="Update the NVIDIA driver to one that supports the wheel's CUDA major version "
        "(`nvidia-smi` prints the highest CUDA version the driver supports), or install a "
        f"torch wheel built for {older}; within one major version a newer wheel runs on an "
        "older driver (minor-version compatibility). The CUDA toolkit (nvcc) is needed only "
        "to compile extensions.",
    )


@dataclass(frozen=True)
class Verdict:
    """Which case this machine is in, what it means and the next step."""

    case: str
    code: str  # "ok", "0", "1", "2", "2b", "3"
    summary: str
    fix: str


@dataclass(frozen=True)
class ProbeReport:
    """Everything the probe found, plus its verdict."""

    python_version: str
    platform: str
    torch_version: str | None
    torch_cuda_build: str | None
    cuda_available: bool
    device_count: int
    devices: tuple[GpuDevice, ...]
    mps_built: bool
    mps_available: bool
    selected_device: str
    ram_bytes: int | None
    cpu_model: str
    cpu_cores_physical: int | None
    cpu_cores_logical: int | None
    driver: DriverInfo
    nvidia_pci_devices: int
    cuda_visible_devices: str | None
    verdict: Verdict
    problems: tuple[str, ...]


def _version_tuple(text: str | None) -> tuple[int, ...] | None:
    """Read '12.4' or '12.4.1' as a tuple; None when it is not a version.

    >>> _version_tuple("12.4")
    (12, 4)
    >>> _version_tuple(None) is None
    True
    """
    if not text:
        return None
    parts = re.findall(r"\d+", text)
    return tuple(int(p) for p in parts[:3]) if parts else None


def _visible_devices_hide_all(value: str | None) -> bool:
    """True when CUDA_VISIBLE_DEVICES is set to something that hides every GPU.

    An empty value, ``-1``, or a list whose first entry is not a device index
    or UUID hides all devices.

    >>> _visible_devices_hide_all("")
    True
    >>> _visible_devices_hide_all("0,1")
    False
    >>> _visible_devices_hide_all(None)
    False
    """
    if value is None:
        return False
    first = value.split(",")[0].strip()
    if not first:
        return True
    if first.startswith(("GPU-", "MIG-")):
        return False
    return not first.isdigit()


def classify(facts: ProbeFacts) -> Verdict:
    """Name the case for this machine, following the diagnosis tree in order."""
    if facts.cuda_available:
        return Verdict(
            case="cuda_ok",
            code="ok",
            summary="PyTorch sees a CUDA device: the driver, the wheel's CUDA runtime and "
            "torch agree.",
            fix="Nothing to fix. Use torch.device('cuda') through a device pick, never .cuda().",
        )
    if not facts.nvidia_hardware and facts.driver_version is None:
        where = "Apple's MPS backend" if facts.mps_available else "the CPU"
        return Verdict(
            case="no_nvidia_gpu",
            code="0",
            summary=f"No NVIDIA GPU on this machine, so CUDA is not expected; {where} is the "
            "normal path and nothing is broken.",
            fix="Use a device pick (cuda, then mps, then cpu). For GPU work, use a hosted "
            "notebook with a GPU attached or a rented instance.",
        )
    if facts.driver_version is None:
        return Verdict(
            case="no_driver",
            code="1",
            summary="NVIDIA hardware is present but no working driver answers (NVML and "
            "nvidia-smi both failed).",
            fix=f"{FIX_DRIVER.detail} {FIX_CONTAINER.detail}",
        )
    if facts.torch_cuda_build is None:
        return Verdict(
            case="cpu_only_wheel",
            code="2",
            summary=f"The driver works (version {facts.driver_version}) but torch is a CPU-only "
            "build (torch.version.cuda is None).",
            fix=FIX_WHEEL.detail,
        )
    wheel = _version_tuple(facts.torch_cuda_build)
    driver = _version_tuple(facts.driver_cuda_version)
    if wheel and driver and wheel[0] > driver[0]:
        return Verdict(
            case="driver_too_old",
            code="2b",
            summary=f"torch was built with CUDA {facts.torch_cuda_build}, a newer major version "
            f"than driver {facts.driver_version} supports (CUDA {facts.driver_cuda_version} at "
            "most); minor-version compatibility covers only one major release family.",
            fix=fix_driver_too_old(facts.driver_cuda_version).detail,
        )
    if _visible_devices_hide_all(facts.cuda_visible_devices):
        detail = f"CUDA_VISIBLE_DEVICES={facts.cuda_visible_devices!r} hides every device."
    else:
        detail = "The driver and the wheel agree, yet torch sees no device."
        if wheel and driver and wheel[:2] > driver[:2]:
            detail += (
                f" (The wheel's CUDA {facts.torch_cuda_build} is newer than the driver's "
                f"{facts.driver_cuda_version} within one major version, which minor-version "
                "compatibility allows.)"
            )
    return Verdict(
        case="devices_hidden",
        code="3",
        summary=detail,
        fix=f"{FIX_VISIBLE_DEVICES.detail} {FIX_CONTAINER.detail}",
    )


def pick_device_name(cuda_available: bool, mps_available: bool) -> str:
    """The three-way dispatch: cuda, then mps, then cpu.

    >>> pick_device_name(False, True)
    'mps'
    """
    if cuda_available:
        return "cuda"
    if mps_available:
        return "mps"
    return "cpu"


def count_nvidia_pci(root: Path | None = None) -> int:
    """Count PCI devices with NVIDIA's vendor id; visible on Linux even without a driver."""
    root = PCI_ROOT if root is None else root
    try:
        vendors = [p / "vendor" for p in root.iterdir()]
    except OSError:
        return 0
    count = 0
    for vendor in vendors:
        try:
            if vendor.read_text().strip().lower() == NVIDIA_PCI_VENDOR:
                count += 1
        except OSError:
            continue
    return count


def _cuda_int_to_text(value: int) -> str:
    """NVML reports CUDA 12.4 as 12040.

    >>> _cuda_int_to_text(12040)
    '12.4'
    """
    return f"{value // 1000}.{(value % 1000) // 10}"


def read_driver_nvml() -> DriverInfo | None:
    """Read the driver through NVML (package nvidia-ml-py); None when unavailable."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - any NVML failure means "no answer here"
        return None
    try:
        version = pynvml.nvmlSystemGetDriverVersion()
        if isinstance(version, bytes):
            version = version.decode()
        cuda = _cuda_int_to_text(int(pynvml.nvmlSystemGetCudaDriverVersion()))
        return DriverInfo(version=str(version), cuda_version=cuda, source="nvml")
    except Exception:  # noqa: BLE001
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def read_driver_smi(timeout_s: float = 10.0) -> DriverInfo | None:
    """Read the driver from ``nvidia-smi``; None when it is missing or fails."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        query = subprocess.run(
            [exe, "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=True,
        )
        header = subprocess.run(
            [exe], capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [line.strip() for line in query.stdout.splitlines() if line.strip()]
    if not lines:
        return None
    cuda = re.search(r"CUDA Version:\s*([0-9.]+)", header.stdout)
    return DriverInfo(
        version=lines[0], cuda_version=cuda.group(1) if cuda else None, source="nvidia-smi"
    )


_NO_DRIVER = DriverInfo(version=None, cuda_version=None, source="none found")


def read_driver() -> DriverInfo:
    """NVML first, then nvidia-smi, else 'none found'."""
    return read_driver_nvml() or read_driver_smi() or _NO_DRIVER


def read_cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, sysctl on macOS, or platform."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "hardware")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    if sys.platform == "darwin":
        try:
            out = subprocess.run(
                ["sysctl", "-n", "machdep.cpu.brand_string"],
                capture_output=True,
                text=True,
                timeout=5,
                check=True,
            )
            if out.stdout.strip():
                return out.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return platform.processor() or platform.machine() or "unknown CPU"


def _read_torch(problems: list[str]) -> dict[str, Any]:
    """Ask torch what it can see; each failing question becomes a problem line."""
    facts: dict[str, Any] = {
        "torch_version": None,
        "torch_cuda_build": None,
        "cuda_available": False,
        "devices": (),
        "mps_built": False,
        "mps_available": False,
    }
    try:
        import torch
    except Exception as exc:  # noqa: BLE001
        problems.append(f"import torch failed: {exc}")
        return facts
    facts["torch_version"] = str(torch.__version__)
    facts["torch_cuda_build"] = torch.version.cuda
    try:
        facts["cuda_available"] = bool(torch.cuda.is_available())
    except Exception as exc:  # noqa: BLE001
        problems.append(f"torch.cuda.is_available() raised: {exc}")
    if facts["cuda_available"]:
        devices = []
        try:
            for index in range(torch.cuda.device_count()):
                props = torch.cuda.get_device_properties(index)
                devices.append(
                    GpuDevice(
                        index=index,
                        name=str(props.name),
                        total_memory_bytes=int(props.total_memory),
                        compute_capability=f"{props.major}.{props.minor}",
                    )
                )
        except Exception as exc:  # noqa: BLE001
            problems.append(f"reading CUDA device properties failed: {exc}")
        facts["devices"] = tuple(devices)
    try:
        facts["mps_built"] = bool(torch.backends.mps.is_built())
        facts["mps_available"] = bool(torch.backends.mps.is_available())
    except Exception as exc:  # noqa: BLE001
        problems.append(f"asking torch about MPS failed: {exc}")
    return facts


def _read_ram_bytes(problems: list[str]) -> int | None:
    try:
        import psutil

        return int(psutil.virtual_memory().total)
    except Exception as exc:  # noqa: BLE001
        problems.append(f"reading system RAM failed: {exc}")
        return None


def _read_cores() -> tuple[int | None, int | None]:
    try:
        import psutil

        return psutil.cpu_count(logical=False), psutil.cpu_count(logical=True)
    except Exception:  # noqa: BLE001
        return None, os.cpu_count()


def probe() -> ProbeReport:
    """Probe this machine and return a report; never raises.

    >>> report = probe()
    >>> report.selected_device in ("cuda", "mps", "cpu")
    True
    """
    problems: list[str] = []
    torch_facts = _read_torch(problems)
    try:
        driver = read_driver()
    except Exception as exc:  # noqa: BLE001
        problems.append(f"reading the NVIDIA driver failed: {exc}")
        driver = _NO_DRIVER
    pci = count_nvidia_pci()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    verdict = classify(
        ProbeFacts(
            nvidia_hardware=pci > 0,
            driver_version=driver.version,
            driver_cuda_version=driver.cuda_version,
            torch_cuda_build=torch_facts["torch_cuda_build"],
            cuda_available=torch_facts["cuda_available"],
            mps_available=torch_facts["mps_available"],
            cuda_visible_devices=visible,
        )
    )
    physical, logical = _read_cores()
    return ProbeReport(
        python_version=platform.python_version(),
        platform=platform.platform(),
        torch_version=torch_facts["torch_version"],
        torch_cuda_build=torch_facts["torch_cuda_build"],
        cuda_available=torch_facts["cuda_available"],
        device_count=len(torch_facts["devices"]),
        devices=torch_facts["devices"],
        mps_built=torch_facts["mps_built"],
        mps_available=torch_facts["mps_available"],
        selected_device=pick_device_name(
            torch_facts["cuda_available"], torch_facts["mps_available"]
        ),
        ram_bytes=_read_ram_bytes(problems),
        cpu_model=read_cpu_model(),
        cpu_cores_physical=physical,
        cpu_cores_logical=logical,
        driver=driver,
        nvidia_pci_devices=pci,
        cuda_visible_devices=visible,
        verdict=verdict,
        problems=tuple(problems),
    )


# --- rendering -----------------------------------------------------------------


def to_dict(report: ProbeReport) -> dict[str, Any]:
    """The report as plain data, for JSON."""
    return asdict(report)


def to_json(report: ProbeReport) -> str:
    """The report as one JSON object."""
    return json.dumps(to_dict(report), indent=2, sort_keys=True)


def _rows(report: ProbeReport) -> list[tuple[str, str]]:
    """The report as (question, answer) rows, shared by text and Markdown."""

    def yes(flag: bool) -> str:
        return "yes" if flag else "no"

    physical = report.cpu_cores_physical or "?"
    cores = f"{physical} physical, {report.cpu_cores_logical or '?'} logical"
    rows = [
        ("Python", report.python_version),
        ("Platform", report.platform),
        ("torch", report.torch_version or "not importable"),
        ("torch built with CUDA", report.torch_cuda_build or "none (CPU-only build)"),
        ("CUDA available", yes(report.cuda_available)),
        ("CUDA devices", str(report.device_count)),
    ]
    for dev in report.devices:
        rows.append(
            (
                f"GPU {dev.index}",
                f"{dev.name}, {format_gb(dev.total_memory_bytes)} "
                f"({format_gib(dev.total_memory_bytes)}), compute capability "
                f"{dev.compute_capability}",
            )
        )
    rows += [
        ("MPS built / available", f"{yes(report.mps_built)} / {yes(report.mps_available)}"),
        ("Device picked (cuda, mps, cpu)", report.selected_device),
        (
            "System RAM",
            f"{format_gb(report.ram_bytes)} ({format_gib(report.ram_bytes)})"
            if report.ram_bytes
            else "unknown",
        ),
        ("CPU", f"{report.cpu_model} ({cores})"),
        (
            "NVIDIA driver",
            f"{report.driver.version}, supports CUDA up to {report.driver.cuda_version or '?'} "
            f"(via {report.driver.source})"
            if report.driver.version
            else "none found",
        ),
        ("NVIDIA PCI devices", str(report.nvidia_pci_devices)),
        (
            "CUDA_VISIBLE_DEVICES",
            "unset" if report.cuda_visible_devices is None else repr(report.cuda_visible_devices),
        ),
    ]
    return rows


def _verdict_line(verdict: Verdict) -> str:
    label = "OK" if verdict.code == "ok" else f"case {verdict.code} ({verdict.case})"
    return f"{label}: {verdict.summary}"


def to_text(report: ProbeReport) -> str:
    """A plain aligned table for the terminal."""
    rows = _rows(report)
    width = max(len(key) for key, _ in rows)
    lines = [f"{key.ljust(width)}  {value}" for key, value in rows]
    lines += ["", f"Verdict: {_verdict_line(report.verdict)}", f"Next step: {report.verdict.fix}"]
    lines += [f"Probe step failed: {problem}" for problem in report.problems]
    return "\n".join(lines)


def _machine(
    *,
    driver: str | None,
    driver_cuda: str | None,
    wheel_cuda: str | None,
    nvidia: bool = True,
    cuda: bool = False,
    mps: bool = False,
    visible: str | None = None,
) -> ProbeFacts:
    return ProbeFacts(
        nvidia_hardware=nvidia,
        driver_version=driver,
        driver_cuda_version=driver_cuda,
        torch_cuda_build=wheel_cuda,
        cuda_available=cuda,
        mps_available=mps,
        cuda_visible_devices=visible,
    )


@dataclass(frozen=True)
class ExampleMachine:
    """One representative machine for the lesson's table of cases."""

    label: str
    facts: ProbeFacts


# One representative machine per case; the lesson's diagnosis table is made by
# classifying these, so page and tool cannot disagree.
EXAMPLE_MACHINES: tuple[ExampleMachine, ...] = (
    ExampleMachine(
        label="NVIDIA workstation, CUDA wheel, recent driver",
        facts=_machine(driver="550.54", driver_cuda="12.4", wheel_cuda="12.1", cuda=True),
    ),
    ExampleMachine(
        label="Wheel for CUDA 12.8 on a driver for CUDA 12.2 (same major version)",
        facts=_machine(driver="535.104", driver_cuda="12.2", wheel_cuda="12.8", cuda=True),
    ),
    ExampleMachine(
        label="Laptop or Apple Silicon Mac, no NVIDIA card",
        facts=_machine(driver=None, driver_cuda=None, wheel_cuda=None, nvidia=False, mps=True),
    ),
    ExampleMachine(
        label="NVIDIA card visible on the PCI bus, driver missing",
        facts=_machine(driver=None, driver_cuda=None, wheel_cuda="12.1"),
    ),
    ExampleMachine(
        label="Working driver, `pip install torch` gave a CPU-only wheel",
        facts=_machine(driver="550.54", driver_cuda="12.4", wheel_cuda=None),
    ),
    ExampleMachine(
        label="Wheel for CUDA 12.1 on a driver for CUDA 11.4 (newer major version)",
        facts=_machine(driver="470.82", driver_cuda="11.4", wheel_cuda="12.1"),
    ),
    ExampleMachine(
        label='Everything installed, but `CUDA_VISIBLE_DEVICES=""`',
        facts=_machine(driver="550.54", driver_cuda="12.4", wheel_cuda="12.1", visible=""),
    ),
)


def classify_examples(
    machines: tuple[ExampleMachine, ...] = EXAMPLE_MACHINES,
) -> tuple[tuple[ExampleMachine, Verdict], ...]:
    """Classify each example machine: the rows of the lesson's table of cases.

    >>> [verdict.code for _, verdict in classify_examples()]
    ['ok', 'ok', '0', '1', '2', '2b', '3']
    """
    return tuple((machine, classify(machine.facts)) for machine in machines)
