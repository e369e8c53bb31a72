"""The probe names each case of the diagnosis tree on a faked machine."""

from __future__ import annotations

import json

from gpulesson import probe
from gpulesson.course.software_stack import cases_markdown
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
    assert report.verdict.fix == probe.FIX_WHEEL.detail


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
    assert "newer major version" in verdict.summary
    assert "CUDA 11.x or older" in verdict.fix and "nvcc" in verdict.fix


def test_a_newer_minor_version_than_the_driver_is_not_case_2b(fake_machine):
    # Minor-version compatibility: a 12.8 runtime runs on a driver that supports 12.2.
    fake_machine(pci_vendors=(NVIDIA,), nvml=("535.104.05", 12020), torch_cuda="12.8")
    verdict = probe.probe().verdict
    assert verdict.code == "3"
    assert "minor-version compatibility" in verdict.summary
    facts = ProbeFacts(
        nvidia_hardware=True,
        driver_version="535.104",
        driver_cuda_version="12.2",
        torch_cuda_build="12.8",
        cuda_available=True,
        mps_available=False,
        cuda_visible_devices=None,
    )
    assert classify(facts).case == "cuda_ok"


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
    facts = ProbeFacts(
        nvidia_hardware=True,
        driver_version="550.54",
        driver_cuda_version="12.4",
        torch_cuda_build="11.8",
        cuda_available=True,
        mps_available=False,
        cuda_visible_devices=None,
    )
    assert classify(facts).case == "cuda_ok"


def test_every_case_is_in_the_lesson_table():
    table = cases_markdown(probe.classify_examples())
    for case in (
        "cuda_ok",
        "no_nvidia_gpu",
        "no_driver",
        "cpu_only_wheel",
        "driver_too_old",
        "devices_hidden",
    ):
        assert f"`{case}`" in table


def test_the_container_advice_is_one_fix_used_by_two_cases():
    no_driver = classify(probe.EXAMPLE_MACHINES[3].facts)
    hidden = classify(probe.EXAMPLE_MACHINES[-1].facts)
    assert (no_driver.case, hidden.case) == ("no_driver", "devices_hidden")
    assert probe.FIX_CONTAINER.detail in no_driver.fix
    assert probe.FIX_CONTAINER.detail in hidden.fix
