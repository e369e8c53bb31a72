"""The occupancy lab in Chromium: its answers are gpulesson.inside.occupancy's, and it refuses
input out of range. Skipped, with the reason, without Chromium (see tests/test_browser.py)."""

from __future__ import annotations

import re

from gpulesson.inside.occupancy import occupancy
from tests.test_browser import browser, site_url, watched  # noqa: F401  (fixtures)

BOX = "div.gl-occupancy"
CASES = [
    ("7.0", 128, 37, 0),
    ("7.0", 320, 37, 0),
    ("8.0", 256, 64, 0),
    ("8.0", 128, 32, 48),
    ("9.0", 128, 255, 0),
    ("8.9", 1024, 32, 0),
]


def _set(page: object, cc: str, threads: int, regs: int, shared_kib: int) -> str:
    page.select_option(f"{BOX} select", cc)  # type: ignore[attr-defined]
    inputs = page.locator(f"{BOX} input")  # type: ignore[attr-defined]
    for i, value in enumerate((threads, regs, shared_kib)):
        inputs.nth(i).fill(str(value))
    return page.locator(f"{BOX} .gl-occupancy-result").inner_text()  # type: ignore[attr-defined]


def test_the_occupancy_lab_agrees_with_the_package(site_url: str, watched):  # noqa: F811
    page = watched.open(site_url + "lessons/inside-gpu/")
    page.wait_for_selector(f"{BOX} .gl-occupancy-result")
    for cc, threads, regs, shared in CASES:
        o = occupancy(
            cc,
            threads_per_block=threads,
            registers_per_thread=regs,
            shared_per_block_bytes=shared * 1024,
        )
        text = _set(page, cc, threads, regs, shared)
        m = re.match(
            r"(\d+) blocks per SM, (\d+) of (\d+) warp slots: \d+% occupancy, "
            r"limited by (.+)\.$",
            text,
        )
        assert m, text
        assert (int(m[1]), int(m[2]), int(m[3]), m[4]) == (
            o.blocks_per_sm,
            o.warps_per_sm,
            o.max_warps_per_sm,
            o.limited_by,
        )
    assert "Out of range" in _set(page, "8.0", 2048, 32, 0)
    assert watched.errors == [] and watched.outside == []
