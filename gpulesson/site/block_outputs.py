"""What every block of a build showed, kept so the page tests read the build instead of
running each lesson again.

The build records, per page, the Markdown of each executed block (by its ``id``) and of
each ``claim`` and ``describe`` block (``claim-1``, ``describe-2``...: by kind, in page
order, as :mod:`tests.lesson_blocks` numbers them). With ``GPULESSON_BLOCK_OUTPUTS=1`` in
the environment, :mod:`gpulesson.site.hooks` writes them into the site as
``build-blocks.json`` beside ``build-record.json`` (whose ``facts`` and ``claims`` the page
tests read with them). A published site leaves the variable unset: readers have the pages.

>>> reset(); begin_page("lessons/t.md")
>>> record_python("t-one", "| a |")
>>> record_fence("claim", "It holds.")
>>> record_fence("claim", "It also holds.")
>>> outputs()["lessons/t.md"]
{'t-one': '| a |', 'claim-1': 'It holds.', 'claim-2': 'It also holds.'}
"""

from __future__ import annotations

import json

ENV = "GPULESSON_BLOCK_OUTPUTS"
FILE = "build-blocks.json"

_pages: dict[str, dict[str, str]] = {}
_page: list[str] = [""]


def reset() -> None:
    """Forget every page (the start of a build)."""
    _pages.clear()
    _page[0] = ""


def begin_page(page: str) -> None:
    """Blocks from now on belong to ``page``; a page built again starts empty."""
    _page[0] = page
    _pages[page] = {}


def record_python(block_id: str, markdown: str) -> None:
    """Keep what an executed block printed (run now or served from the cache)."""
    _pages.setdefault(_page[0], {})[block_id] = markdown


def record_fence(kind: str, markdown: str) -> None:
    """Keep what a ``claim`` or ``describe`` block showed, numbered by kind in page order."""
    page = _pages.setdefault(_page[0], {})
    number = 1 + sum(key.startswith(f"{kind}-") for key in page)
    page[f"{kind}-{number}"] = markdown


def outputs() -> dict[str, dict[str, str]]:
    """Every page's block outputs, by page and block id."""
    return {page: dict(blocks) for page, blocks in _pages.items()}


def to_json() -> str:
    """The outputs as the JSON written into the site, each page's blocks in page order."""
    return json.dumps(outputs(), indent=1) + "\n"  # in page order
