"""Shared fixtures: a fake machine (torch, NVML, nvidia-smi, sysfs) for the probe."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import types
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from gpulesson import probe as probe_module

REPO = Path(__file__).resolve().parent.parent


class _Props:
    def __init__(self, name: str, total_memory: int, major: int, minor: int) -> None:
        self.name = name
        self.total_memory = total_memory
        self.major = major
        self.minor = minor


def _fake_nvml(driver: str, cuda_int: int) -> types.ModuleType:
    module = types.ModuleType("pynvml")
    module.nvmlInit = lambda: None  # type: ignore[attr-defined]
    module.nvmlShutdown = lambda: None  # type: ignore[attr-defined]
    module.nvmlSystemGetDriverVersion = lambda: driver  # type: ignore[attr-defined]
    module.nvmlSystemGetCudaDriverVersion = lambda: cuda_int  # type: ignore[attr-defined]
    return module


def _failing_nvml() -> types.ModuleType:
    module = types.ModuleType("pynvml")

    def fail() -> None:
        raise RuntimeError("NVML Shared Library Not Found")

    module.nvmlInit = fail  # type: ignore[attr-defined]
    return module


@pytest.fixture
def fake_machine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[..., None]:
    """Configure a fake machine; call it with the facts the test needs."""

    def configure(
        *,
        pci_vendors: tuple[str, ...] = (),
        nvml: tuple[str, int] | None = None,
        smi: tuple[str, str] | None = None,
        torch_cuda: str | None = None,
        cuda_available: bool = False,
        devices: tuple[_Props, ...] = (),
        mps_available: bool = False,
        visible: str | None = None,
    ) -> None:
        pci = tmp_path / "pci"
        pci.mkdir()
        for i, vendor in enumerate(pci_vendors):
            dev = pci / f"0000:00:{i:02x}.0"
            dev.mkdir()
            (dev / "vendor").write_text(vendor + "\n")
        monkeypatch.setattr(probe_module, "PCI_ROOT", pci)
        monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml(*nvml) if nvml else _failing_nvml())
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        if smi:
            driver, cuda = smi
            script = bin_dir / "nvidia-smi"
            script.write_text(
                "#!/bin/sh\n"
                'if [ "$1" = "--query-gpu=driver_version" ]; then echo "' + driver + '"; '
                'else echo "| NVIDIA-SMI '
                + driver
                + "   Driver Version: "
                + driver
                + "   CUDA Version: "
                + cuda
                + ' |"; fi\n'
            )
            script.chmod(script.stat().st_mode | stat.S_IEXEC)
        monkeypatch.setenv("PATH", str(bin_dir) + os.pathsep + "/usr/bin:/bin")
        monkeypatch.setattr(torch.version, "cuda", torch_cuda)
        monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda_available)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: len(devices))
        monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: devices[i])
        monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps_available)
        monkeypatch.setattr(torch.backends.mps, "is_built", lambda: mps_available)
        if visible is None:
            monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        else:
            monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)

    return configure


@pytest.fixture
def props() -> type[_Props]:
    """The fake device-properties class, for tests that list GPUs."""
    return _Props


def mkdocs_build(site_dir: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "NO_MKDOCS_2_WARNING": "1", **env}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site_dir)],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.fixture(scope="session")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("site")
    result = mkdocs_build(site)
    assert result.returncode == 0, f"strict build failed:\n{result.stderr[-4000:]}"
    return site
