"""The datasheet's link figures (interconnect) and what the multi-GPU lesson reads from them."""

from __future__ import annotations

import pytest

from gpulesson.results import datasheets

# NVLink and PCIe x16 per GPU as NVIDIA's datasheets state them (both directions added).
STATED = {
    "a100-40gb": (600, 64, 4),
    "a100-80gb": (600, 64, 4),
    "a100-80gb-pcie": (600, 64, 4),
    "h100-sxm": (900, 128, 5),
    "h100-pcie": (600, 128, 5),
    "h200": (900, 128, 5),
}
VALID = {
    "nvlink_stated_gb_per_s": 900,
    "pcie_stated_gb_per_s": 128,
    "pcie_generation": 5,
    "stated": "NVLink: 900GB/s; PCIe Gen5: 128GB/s",
}


@pytest.mark.parametrize(("gpu", "figures"), sorted(STATED.items()))
def test_a100_h100_and_h200_rows_carry_their_links(gpu, figures):
    link = datasheets.get(gpu).interconnect
    assert (link.nvlink_stated_gb_per_s, link.pcie_stated_gb_per_s, link.pcie_generation) == (
        figures
    )
    # The quoted line carries both figures as printed.
    assert f"{figures[0]}GB/s" in link.stated and f"{figures[1]}GB/s" in link.stated
    assert link.nvlink_one_way_bytes_per_s == figures[0] * 1e9 / 2
    assert link.pcie_one_way_bytes_per_s == figures[1] * 1e9 / 2


def test_nvlink_is_several_times_pcie_on_every_row_that_has_both():
    for row in datasheets.all_rows():
        if row.interconnect and row.interconnect.nvlink_stated_gb_per_s:
            ratio = row.interconnect.nvlink_stated_gb_per_s / row.interconnect.pcie_stated_gb_per_s
            assert 4 <= ratio <= 10, row.id


def test_the_rules_say_the_figures_add_both_directions():
    rule = datasheets.raw()["rules"]["interconnect"]
    assert "bidirectional" in rule and "half" in rule and "nvidia.com" in rule


def test_rows_without_interconnect_have_none():
    assert datasheets.get("apple-m1-max").interconnect is None


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"pcie_stated_gb_per_s": 0}, "pcie_stated_gb_per_s: must be a positive number"),
        ({"nvlink_stated_gb_per_s": "900"}, "nvlink_stated_gb_per_s: must be a positive"),
        ({"pcie_generation": 7}, "pcie_generation: must be 3, 4, 5 or 6, not 7"),
        ({"stated": "fast"}, "stated: quote the datasheet's line"),
        ({"nvlink_gbps": 1}, "nvlink_gbps: unknown field"),
    ],
)
def test_a_malformed_interconnect_names_the_row_and_the_field(change, fragment):
    with pytest.raises(ValueError, match=f"datasheet row 'h9': interconnect: {fragment}"):
        datasheets.parse_interconnect("h9", {**VALID, **change})


def test_a_missing_field_says_to_add_it_and_no_nvlink_is_null():
    partial = {k: v for k, v in VALID.items() if k != "pcie_generation"}
    with pytest.raises(ValueError, match="pcie_generation: missing; add it"):
        datasheets.parse_interconnect("h9", partial)
    pcie_only = datasheets.parse_interconnect("l9", {**VALID, "nvlink_stated_gb_per_s": None})
    assert pcie_only.nvlink_one_way_bytes_per_s is None
