"""The probe names each case of the diagnosis tree on a faked machine."""

from __future__ import annotations

import json

from gpulesson import probe
from gpulesson.probe import ProbeFacts, classify

NVIDIA = "0x10de"
VIRTIO = "0x1af4"


def test_case0_no_nvidia_hardware(fake_machine):
    fake_machine(pci_vendors=(VIRTIO, "0x8086"))
    report = probe.probe()
    assert report.verdict.code == "0"
    assert report.verdict.case == "no_nvidia_gpu"
    assert report.selected_device == "cpu"
    assert report.driver.source == "none found"
    assert report.nvidia_pci_devices == 0


def test_case0_on_a_mac_picks_mps(fake_machine):
    fake_machine(mps_available=True)
    report = probe.probe()
    assert report.verdict.case == "no_nvidia_gpu"
    assert "MPS" in report.verdict.summary
    assert report.selected_device == "mps"


def test_case1_hardware_without_driver(fake_machine):
    fake_machine(pci_vendors=(NVIDIA,), torch_cuda="12.1")
    report = probe.probe()
    assert report.nvidia_pci_devices == 1
    assert report.verdict.code == "1"
    assert "driver" in report.verdict.fix


def test_case2_cpu_only_wheel_via_nvml(fake_machine):
    fake_machine(pci_vendors=(NVIDIA,), nvml=("550.54.15", 12040), torch_cuda=None)
    report = probe.probe()
    assert report.driver.source == "nvml"
    assert report.driver.cuda_version == "12.4"
    assert report.verdict.code == "2"
    assert "Reinstall torch" in report.verdict.fix


def test_case2_falls_back_to_nvidia_smi(fake_machine):
    fake_machine(pci_vendors=(NVIDIA,), smi=("535.104.05", "12.2"), torch_cuda=None)
    report = probe.probe()
    assert report.driver.source == "nvidia-smi"
    assert report.driver.version == "535.104.05"
    assert report.driver.cuda_version == "12.2"
    assert report.verdict.case == "cpu_only_wheel"


def test_case2b_wheel_needs_newer_driver(fake_machine):
    fake_machine(pci_vendors=(NVIDIA,), nvml=("470.82.01", 11040), torch_cuda="12.1")
    verdict = probe.probe().verdict
    assert verdict.code == "2b"
    assert "12.1" in verdict.summary and "11.4" in verdict.summary


def test_case3_devices_hidden(fake_machine):
    fake_machine(pci_vendors=(NVIDIA,), nvml=("550.54.15", 12040), torch_cuda="12.1", visible="")
    report = probe.probe()
    assert report.verdict.code == "3"
    assert "CUDA_VISIBLE_DEVICES=''" in report.verdict.summary
    assert report.cuda_visible_devices == ""


def test_case3_without_env_var_points_at_containers(fake_machine):
    fake_machine(pci_vendors=(NVIDIA,), nvml=("550.54.15", 12040), torch_cuda="12.1")
    verdict = probe.probe().verdict
    assert verdict.code == "3"
    assert "--gpus all" in verdict.fix


def test_cuda_ok_lists_devices_in_gb_and_gib(fake_machine, props):
    card = props("NVIDIA GeForce RTX 4090", 24 * 2**30, 8, 9)
    fake_machine(
        pci_vendors=(NVIDIA,),
        nvml=("550.54.15", 12040),
        torch_cuda="12.1",
        cuda_available=True,
        devices=(card,),
    )
    report = probe.probe()
    assert report.verdict.case == "cuda_ok"
    assert report.selected_device == "cuda"
    assert report.devices[0].compute_capability == "8.9"
    text = probe.to_text(report)
    assert "25.8 GB (24.0 GiB)" in text


def test_failing_torch_step_becomes_a_problem_line(fake_machine, monkeypatch):
    fake_machine()

    def broken() -> bool:
        raise RuntimeError("CUDA driver initialization failed")

    monkeypatch.setattr("torch.cuda.is_available", broken)
    report = probe.probe()
    assert any("initialization failed" in p for p in report.problems)
    assert report.verdict.case == "no_nvidia_gpu"
    assert "Probe step failed" in probe.to_text(report)


def test_json_is_one_object_with_the_verdict(fake_machine):
    fake_machine()
    data = json.loads(probe.to_json(probe.probe()))
    assert data["verdict"]["case"] == "no_nvidia_gpu"
    assert data["driver"]["source"] == "none found"
    assert isinstance(data["ram_bytes"], int)


def test_wheel_older_than_driver_is_fine():
    facts = ProbeFacts(True, "550.54", "12.4", "11.8", True, False, None)
    assert classify(facts).case == "cuda_ok"


def test_every_case_is_in_the_lesson_table():
    table = probe.cases_markdown()
    for case in (
        "cuda_ok",
        "no_nvidia_gpu",
        "no_driver",
        "cpu_only_wheel",
        "driver_too_old",
        "devices_hidden",
    ):
        assert f"`{case}`" in table
