"""Provenance of a result bundle: the device, driver, software and time, never guessed.

:func:`collect` asks :func:`gpulesson.probe.probe` for the machine (torch, CUDA build,
devices, driver), NVML for clocks and the power limit (package ``nvidia-ml-py``; every
NVML field is None when NVML does not answer), and git for the commit of the gpulesson
checkout that is running (None for an installed copy outside a clone).

On CUDA the device is GPU 0 as torch numbers them; on Apple silicon (MPS) and on a CPU
the device name is the CPU model (``Apple M1 Max``), which is how the datasheet table
knows Apple chips, and the memory is the system's RAM.

>>> clocks, power = read_nvml(device_index=0, nvml=None)
>>> clocks.sm_mhz is None and power is None
True
"""

from __future__ import annotations

import datetime as dt
import platform
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

from gpulesson import __version__
from gpulesson.probe import ProbeReport, probe
from gpulesson.results import datasheets
from gpulesson.results.bundle import Clocks, Provenance, SuiteRun

PACKAGE_PARENT = Path(__file__).resolve().parents[2]


def utc_now() -> str:
    """The current time as ISO 8601 UTC with a Z, to the second.

    >>> utc_now().endswith("Z") and len(utc_now()) == 20
    True
    """
    now = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def package_commit(root: Path = PACKAGE_PARENT) -> str | None:
    """The commit of the gpulesson clone that is running (``+dirty`` if changed), else None."""
    if not (root / ".git").exists():
        return None
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    if not sha:
        return None
    return f"{sha}+dirty" if dirty else sha


def _import_nvml() -> ModuleType | None:
    try:
        import pynvml
    except ImportError:
        return None
    return pynvml


def read_nvml(device_index: int, nvml: ModuleType | None) -> tuple[Clocks, float | None]:
    """Current and maximum SM and memory clocks (MHz) and the power limit (W) from NVML.

    Each field is None when NVML is missing or does not answer for it.
    """
    if nvml is None:
        return Clocks(), None
    try:
        nvml.nvmlInit()
    except Exception:  # noqa: BLE001 - any NVML failure means "no answer here"
        return Clocks(), None

    def ask(fn: str, *args: Any) -> float | None:
        try:
            return float(getattr(nvml, fn)(*args))
        except Exception:  # noqa: BLE001
            return None

    try:
        handle = nvml.nvmlDeviceGetHandleByIndex(device_index)
        sm, mem = nvml.NVML_CLOCK_SM, nvml.NVML_CLOCK_MEM
        clocks = Clocks(
            sm_mhz=ask("nvmlDeviceGetClockInfo", handle, sm),
            memory_mhz=ask("nvmlDeviceGetClockInfo", handle, mem),
            sm_max_mhz=ask("nvmlDeviceGetMaxClockInfo", handle, sm),
            memory_max_mhz=ask("nvmlDeviceGetMaxClockInfo", handle, mem),
        )
        milliwatts = ask("nvmlDeviceGetEnforcedPowerLimit", handle)
        return clocks, None if milliwatts is None else milliwatts / 1000
    except Exception:  # noqa: BLE001
        return Clocks(), None
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def device_facts(device: str, report: ProbeReport) -> dict[str, Any]:
    """Name, memory and compute capability of the device the suite ran on."""
    if device == "cuda" and report.devices:
        gpu = report.devices[0]
        return {
            "device_name": gpu.name,
            "device_memory_bytes": gpu.total_memory_bytes,
            "compute_capability": gpu.compute_capability,
        }
    return {
        "device_name": report.cpu_model,
        "device_memory_bytes": report.ram_bytes,
        "compute_capability": None,
    }


def _torch_version() -> str:
    import torch  # here, not at the top: the site's hooks read package_commit without torch

    return str(torch.__version__)


def _torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def collect(
    device: str,
    suite: SuiteRun,
    report: ProbeReport | None = None,
    nvml: ModuleType | None = None,
    cpu_threads: int | None = None,
) -> Provenance:
    """Describe this machine and run; ``report`` and ``nvml`` can be given for tests.

    ``cpu_threads`` is torch's thread count in the process that ran the suite (a build's
    block worker); without it, this process's. Torch is imported only to read what the
    caller did not give, so a build's own process stays without it.
    """
    report = report or probe()
    facts = device_facts(device, report)
    if device == "cuda":
        clocks, power = read_nvml(0, nvml if nvml is not None else _import_nvml())
    else:
        clocks, power = Clocks(), None
    sheet = datasheets.lookup(facts["device_name"]) if device != "cpu" else None
    return Provenance(
        device_type=device,
        device_name=facts["device_name"],
        device_memory_bytes=facts["device_memory_bytes"],
        device_count=report.device_count,
        compute_capability=facts["compute_capability"],
        datasheet_id=sheet.id if sheet else None,
        driver_version=report.driver.version,
        driver_cuda_version=report.driver.cuda_version,
        cuda_version=report.torch_cuda_build,
        torch_version=report.torch_version or _torch_version(),
        python_version=platform.python_version(),
        platform=report.platform,
        cpu_model=report.cpu_model,
        cpu_threads=cpu_threads if cpu_threads is not None else _torch_threads(),
        gpulesson_version=__version__,
        gpulesson_commit=package_commit(),
        created_utc=utc_now(),
        clocks=clocks,
        power_limit_w=power,
        suite=suite,
    )
