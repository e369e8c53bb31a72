"""Per-page execution time of a site build: which pages are slow, and why.

``site.hooks`` opens a page in ``on_page_markdown`` and closes it in
``on_page_content``; ``exec_cache`` reports every executed block in between.
The summary goes to the build log and, as ``exec-timings.json``, into the site.

>>> recorder = Recorder()
>>> recorder.begin_page("lessons/a.md")
>>> recorder.block("probe", "ran", 1.5)
>>> recorder.block("table", "cached", 0.001)
>>> recorder.block("stamp", "uncacheable", 0.5)
>>> recorder.end_page()
>>> page = recorder.pages()[0]
>>> (page.page, page.blocks, page.ran, page.cached, page.uncacheable, page.exec_s)
('lessons/a.md', 3, 2, 1, 1, 2.001)
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field

TIMINGS_FILE = "exec-timings.json"


@dataclass(frozen=True)
class BlockTiming:
    """One executed block: what happened to it and how long it took."""

    block_id: str
    status: str  # "ran", "cached", "uncacheable" (cache="off", session, no id) or "failed"
    elapsed_s: float


@dataclass(frozen=True)
class PageTiming:
    """The executed blocks of one page and the time to turn the page into HTML."""

    page: str
    blocks: int
    ran: int  # executed in this build, whatever the reason
    cached: int
    uncacheable: int  # executed because they can never come from the cache
    exec_s: float  # time inside executed blocks (running them or reading the cache)
    render_s: float  # Markdown to HTML for the whole page, blocks included
    block_timings: tuple[BlockTiming, ...]


@dataclass
class Recorder:
    """Collects block timings page by page during one build."""

    _pages: list[PageTiming] = field(default_factory=list)
    _page: str | None = None
    _started: float = 0.0
    _blocks: list[BlockTiming] = field(default_factory=list)

    def begin_page(self, page: str) -> None:
        """Start timing ``page`` (its source path)."""
        self._page, self._started, self._blocks = page, time.perf_counter(), []

    def block(self, block_id: str, status: str, elapsed_s: float) -> None:
        """Record one executed block of the current page."""
        self._blocks.append(BlockTiming(block_id, status, elapsed_s))

    def end_page(self) -> None:
        """Close the current page; pages without executed blocks are not kept."""
        if self._page is not None and self._blocks:
            blocks = tuple(self._blocks)
            self._pages.append(
                PageTiming(
                    page=self._page,
                    blocks=len(blocks),
                    ran=sum(b.status != "cached" for b in blocks),
                    cached=sum(b.status == "cached" for b in blocks),
                    uncacheable=sum(b.status == "uncacheable" for b in blocks),
                    exec_s=round(sum(b.elapsed_s for b in blocks), 6),
                    render_s=round(time.perf_counter() - self._started, 6),
                    block_timings=blocks,
                )
            )
        self._page, self._blocks = None, []

    def pages(self) -> list[PageTiming]:
        """The pages with executed blocks, slowest first."""
        return sorted(self._pages, key=lambda p: p.exec_s, reverse=True)


def to_json(pages: list[PageTiming], cache_reason: str) -> str:
    """The timings as the JSON object written into the site."""
    data = {
        "cache": cache_reason,
        "total_exec_s": round(sum(p.exec_s for p in pages), 6),
        "pages": [asdict(p) for p in pages],
    }
    return json.dumps(data, indent=2) + "\n"


def to_text(pages: list[PageTiming], cache_reason: str, limit: int = 10) -> str:
    """A log summary: totals, the slowest pages, then the slowest blocks that ran.

    >>> blocks = (BlockTiming("a-run", "ran", 1.5), BlockTiming("a-table", "cached", 0.001))
    >>> page = PageTiming("lessons/a.md", 2, 1, 1, 0, 1.501, 1.7, blocks)
    >>> print(to_text([page], "cache on"))
    executed blocks: 2 on 1 page (1 ran, 1 from cache; cache on) in 1.50 s
      exec s  render s  blocks  ran  page
        1.50      1.70       2    1  lessons/a.md
    slowest blocks that ran: a-run (lessons/a.md) 1.50 s
    """
    blocks = sum(p.blocks for p in pages)
    ran = sum(p.ran for p in pages)
    cached = sum(p.cached for p in pages)
    total_s = sum(p.exec_s for p in pages)
    plural = "" if len(pages) == 1 else "s"
    lines = [
        f"executed blocks: {blocks} on {len(pages)} page{plural} ({ran} ran, {cached} from "
        f"cache; {cache_reason}) in {total_s:.2f} s",
        "  exec s  render s  blocks  ran  page",
    ]
    for p in pages[:limit]:
        lines.append(f"  {p.exec_s:6.2f}  {p.render_s:8.2f}  {p.blocks:6d}  {p.ran:3d}  {p.page}")
    executed = [(b, p.page) for p in pages for b in p.block_timings if b.status != "cached"]
    executed.sort(key=lambda item: item[0].elapsed_s, reverse=True)
    if executed:
        slowest = ", ".join(
            f"{b.block_id} ({page}) {b.elapsed_s:.2f} s" for b, page in executed[:5]
        )
        lines.append(f"slowest blocks that ran: {slowest}")
    return "\n".join(lines)
