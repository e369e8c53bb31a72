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
    "NVIDIA GeForce RTX 5090": "rtx-5090",
    "NVIDIA B200": "b200",
    "AMD Instinct MI300X": "mi300x",
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
    "NVIDIA GeForce RTX 5090 D",
    "NVIDIA GB200",
    "AMD Instinct MI325X",
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
    "rtx-5090",
    "b200",
    "mi300x",
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


VENDORS = {"NVIDIA": "nvidia.com", "AMD": "amd.com", "Apple": "apple.com"}


def test_every_row_cites_a_vendor_source_or_says_it_was_read_elsewhere():
    for row in datasheets.all_rows():
        assert row.sources, row.id
        vendor = VENDORS[row.name.split()[0]]
        for source in row.sources:
            assert source.url.startswith("https://"), row.id
            assert source.kind in datasheets.SOURCE_KINDS, row.id
            assert source.title
            if source.kind != "secondary":
                assert vendor in source.url, (row.id, source.url)
        kinds = {s.kind for s in row.sources}
        if "vendor" not in kinds:  # read from another publication: the note says so
            assert "secondary" in kinds and "vendor-cited" in kinds, row.id
            assert row.note.startswith("Read from a secondary source"), row.id


def test_the_reference_gpus_are_one_list_of_rows():
    refs = datasheets.reference_ids()
    assert refs[:5] == ("t4", "rtx-4090", "a100-80gb", "h100-sxm", "h200")
    assert any(r.startswith("apple-m") for r in refs)
    assert all(datasheets.get(r) for r in refs)


def test_the_table_passes_its_schema_and_a_broken_row_is_named():
    import copy

    good = datasheets.raw()
    datasheets.check(good)  # the shipped file is valid
    bad = copy.deepcopy(good)
    bad["devices"][4]["interconnect"]["pcie_generation"] = 7
    with pytest.raises(ValueError) as err:
        datasheets.check(bad, "x.json")
    assert str(err.value).startswith(
        "x.json: datasheet row 'a100-80gb': interconnect: pcie_generation: must be 3, 4, 5 or 6, "
        "not 7 (see gpulesson/results/datasheets.schema.json)"
    )
    bad = copy.deepcopy(good)
    del bad["devices"][0]["memory_bandwidth_stated_gb_per_s"]
    with pytest.raises(ValueError, match=r"row 't4': memory_bandwidth_stated_gb_per_s: missing"):
        datasheets.check(bad, "x.json")
    bad = copy.deepcopy(good)
    bad["devices"][1]["id"] = "t4"
    with pytest.raises(ValueError, match=r"row 't4': id: 't4' is used twice"):
        datasheets.check(bad, "x.json")
    bad = copy.deepcopy(good)
    bad["reference_gpus"] = ["t4", "b300"]
    with pytest.raises(ValueError, match=r"reference_gpus: 2: 'b300' is not a datasheet row"):
        datasheets.check(bad, "x.json")


def test_rows_read_from_secondary_sources_carry_its_figures():
    # ml-engineering's dense TFLOPS and memory tables, as the rows copy them
    b200, mi300x = datasheets.get("b200"), datasheets.get("mi300x")
    assert b200.dense_flop_per_s("bf16") == pytest.approx(2250e12)
    assert b200.memory_bandwidth_bytes_per_s == pytest.approx(8.0e12)
    assert mi300x.dense_flop_per_s("fp8") == pytest.approx(2610e12)
    assert mi300x.memory_bandwidth_bytes_per_s == pytest.approx(5.3e12)
    rtx = datasheets.get("rtx-5090")
    assert set(rtx.peaks) == {"fp32"}  # the review's tensor figures say neither dense nor sparse
    assert rtx.memory_bandwidth_bytes_per_s == pytest.approx(1792e9)


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
    with pytest.raises(ValueError, match=r"unknown GPU id 'b300': use one of t4, l4"):
        datasheets.get("b300")
