"""The datasheet table: stable ids, sources, dense peaks, and names torch reports mapped to ids."""

from __future__ import annotations

import re

import pytest

from gpulesson.results import datasheets
from gpulesson.units import GIB

# Names as torch.cuda.get_device_name() (or the CPU model on Apple silicon) reports them.
TORCH_NAMES = {
    "Tesla T4": "t4",
    "NVIDIA L4": "l4",
    "NVIDIA A10": "a10",
    "NVIDIA A100-SXM4-40GB": "a100-40gb",
    "NVIDIA A100-PCIE-40GB": "a100-40gb",
    "NVIDIA A100-SXM4-80GB": "a100-80gb",
    "NVIDIA A100 80GB PCIe": "a100-80gb-pcie",
    "NVIDIA H100 80GB HBM3": "h100-sxm",
    "NVIDIA H100 PCIe": "h100-pcie",
    "NVIDIA H200": "h200",
    "NVIDIA L40S": "l40s",
    "NVIDIA GeForce RTX 3090": "rtx-3090",
    "NVIDIA GeForce RTX 4090": "rtx-4090",
    "Apple M1 Pro": "apple-m1-pro",
    "Apple M1 Max": "apple-m1-max",
    "Apple M4 Max": "apple-m4-max",
}
# Different parts with different figures: they must not borrow a row.
NOT_IN_TABLE = (
    "NVIDIA A10G",
    "NVIDIA L40",
    "NVIDIA H100 NVL",
    "NVIDIA H200 NVL",
    "NVIDIA GeForce RTX 3090 Ti",
    "NVIDIA GeForce RTX 4090 D",
    "Apple M1",
    "AMD EPYC 7B13",
    "",
)
REQUIRED_IDS = (
    "t4",
    "l4",
    "a10",
    "a100-40gb",
    "a100-80gb",
    "h100-sxm",
    "h100-pcie",
    "h200",
    "l40s",
    "rtx-3090",
    "rtx-4090",
)


def test_the_issue_s_gpus_are_all_in_the_table_with_stable_ids():
    ids = datasheets.ids()
    assert len(ids) == len(set(ids))
    for required in REQUIRED_IDS:
        assert required in ids
    assert any(i.startswith("apple-m") for i in ids)
    for i in ids:
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", i)


@pytest.mark.parametrize(("name", "expected"), sorted(TORCH_NAMES.items()))
def test_torch_device_names_map_to_their_row(name, expected):
    assert datasheets.lookup(name).id == expected


@pytest.mark.parametrize("name", NOT_IN_TABLE)
def test_other_parts_map_to_no_row(name):
    assert datasheets.lookup(name) is None


def test_every_row_cites_a_vendor_source():
    for row in datasheets.all_rows():
        assert row.sources, row.id
        for source in row.sources:
            assert source.url.startswith("https://"), row.id
            vendor = "apple.com" if row.id.startswith("apple-") else "nvidia.com"
            assert vendor in source.url, (row.id, source.url)
            assert source.title


def test_dense_peaks_halve_only_the_sparsity_figures():
    h100 = datasheets.get("h100-sxm")
    assert h100.peaks["bf16"].with_sparsity
    assert h100.dense_flop_per_s("bf16") == pytest.approx(1979e12 / 2)
    assert h100.dense_flop_per_s("fp32") == pytest.approx(67e12)  # FP32 is never sparse
    a100 = datasheets.get("a100-80gb")
    assert not a100.peaks["bf16"].with_sparsity
    assert a100.dense_flop_per_s("bf16") == pytest.approx(312e12)
    for row in datasheets.all_rows():
        for dtype, peak in row.peaks.items():
            assert dtype in datasheets.DTYPES
            if peak.with_sparsity:
                assert "*" in peak.stated, (row.id, dtype)  # the datasheet's sparsity mark
        fp32 = row.dense_flop_per_s("fp32")
        for dtype in ("tf32", "bf16", "fp16", "fp8"):
            dense = row.dense_flop_per_s(dtype)
            if dense is not None and fp32 is not None:
                assert dense >= fp32, (row.id, dtype)  # tensor cores never lose to fp32


def test_dtypes_the_hardware_lacks_are_left_out():
    t4 = datasheets.get("t4")  # Turing: no BF16 or TF32 tensor cores, no FP8
    assert set(t4.peaks) == {"fp32", "fp16"}
    for ampere in ("a10", "a100-40gb", "a100-80gb", "rtx-3090"):
        assert "fp8" not in datasheets.get(ampere).peaks
    for apple in (r for r in datasheets.all_rows() if r.id.startswith("apple-")):
        assert apple.peaks == {}  # Apple gives no dtype for its teraflops
        assert apple.memory_bytes is None


def test_memory_is_read_as_gib_and_bandwidth_as_decimal():
    h200 = datasheets.get("h200")
    assert h200.memory_bytes == 141 * GIB
    assert h200.memory_bandwidth_bytes_per_s == pytest.approx(4.8e12)
    assert datasheets.get("rtx-4090").memory_bandwidth_bytes_per_s == pytest.approx(1008e9)


def test_an_unknown_id_names_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown GPU id 'b200': use one of t4, l4"):
        datasheets.get("b200")
