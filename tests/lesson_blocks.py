"""Run a lesson's executed blocks as the build does, for the page tests.

The build runs a page's ``python exec="on"`` blocks in order in one namespace per block,
with the page's facts (:mod:`gpulesson.site.facts`) carried from block to block, and
evaluates its ``claim`` and ``describe`` blocks (:mod:`gpulesson.site.claim_fence`) where
they stand. The strict build (the ``built_site`` fixture) records what every block showed
and published; a page test reads that record (:func:`built_page`, :func:`page_fixture`)
instead of running the lesson again, and runs a block itself (:func:`run_block`,
:func:`run_claims_after`) only where it changes what the block sees (a stub, a changed fact).
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpulesson.site import block_outputs, build_bundle, claim_fence, claims, content, facts
from tests.conftest import REPO

LESSONS = REPO / "docs" / "lessons"
FENCE = re.compile(r'^(?P<indent>[ \t]*)```python exec="on" id="(?P<id>[^"]+)"[^\n]*\n', re.M)
ANY_FENCE = re.compile(
    r'^(?P<indent>[ \t]*)```(?:python exec="on" id="(?P<id>[^"]+)"|(?P<lang>claim|describe)\b'
    r"(?P<options>[^\n]*))[^\n]*\n",
    re.M,
)
_OPTION = re.compile(r'(\w+)="([^"]*)"')


def exec_blocks(stem: str) -> list[tuple[str, str]]:
    """The executed blocks of lesson ``stem``, ``(id, code)``, in page order, dedented.

    >>> blocks = exec_blocks("timing")
    >>> blocks[0][0].startswith("timing-") and "import" in blocks[0][1]
    True
    """
    text = (LESSONS / f"{stem}.md").read_text(encoding="utf-8")
    blocks = []
    for match in FENCE.finditer(text):
        end = text.index(f"\n{match['indent']}```\n", match.end() - 1)
        blocks.append((match["id"], textwrap.dedent(text[match.end() : end + 1])))
    return blocks


def run_block(stem: str, block_id: str, code: str, measured: dict[str, dict] | None = None) -> str:
    """Run one block with the facts published so far on the page; return what it printed.

    ``measured`` (optional) plays the build's bundle so far: a suite entry in it is read,
    not measured again (as a later block of a build reads an earlier one's), and what the
    block measures is added to it.
    """
    facts.begin_block(block_id)
    build_bundle.begin_block(measured)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, f"{stem}.md#{block_id}", "exec"), {"__name__": "__lesson__"})  # noqa: S102
    facts.end_block()
    for data in build_bundle.end_block():
        if measured is not None:
            measured[build_bundle.key(data["device"], data["entry"])] = data
    return out.getvalue()


@dataclass(frozen=True)
class PageRun:
    """What one run of a lesson's blocks left: each block's output, its claims and facts."""

    printed: dict[str, str]
    claims: list[claims.Claim]
    facts: dict[str, facts.Fact]

    def values(self) -> dict[str, object]:
        """The page's facts as plain values, by name."""
        return {name: fact.value for name, fact in self.facts.items()}

    def unmet_claims(self) -> list[str]:
        """The page's checked claims (for any device) a reader is not told the truth of.

        A claim must hold, with one exception the course allows: a teaching claim whose
        numbers on this machine do not bear out the lesson's point is "not shown on this
        build", and the page then says so where the claim stands. Whether a machine's
        caches or clocks bear a point out is the hardware's answer, not the code's, so a
        test may not demand it; it demands that the page tells the reader either way.
        """
        shown = "".join(self.printed.values())
        unmet = []
        for c in self.claims:
            if c.status in (claims.HOLDS, claims.NOT_CHECKED):
                continue
            said = "Not shown on this build" in shown and c.text.splitlines()[0] in shown
            if c.status != claims.NOT_SHOWN or not c.teaching or not said:
                unmet.append(f"{c.status}: {c.text}")
        return unmet


def page_blocks(stem: str) -> list[tuple[str, str, str, dict[str, str]]]:
    """Every executed, ``claim`` and ``describe`` block of lesson ``stem`` in page order.

    Each is ``(kind, id, body, options)``: kind ``python`` (id from the fence) or
    ``claim``/``describe`` (id ``claim-N``/``describe-N`` by order on the page).

    >>> kinds = {kind for kind, *_ in page_blocks("timing")}
    >>> {"python", "claim"} <= kinds
    True
    """
    text = (LESSONS / f"{stem}.md").read_text(encoding="utf-8")
    blocks: list[tuple[str, str, str, dict[str, str]]] = []
    counts = {"claim": 0, "describe": 0}
    for match in ANY_FENCE.finditer(text):
        end = text.index(f"\n{match['indent']}```\n", match.end() - 1)
        body = textwrap.dedent(text[match.end() : end + 1])
        if match["id"]:
            blocks.append(("python", match["id"], body, {}))
            continue
        kind = match["lang"]
        counts[kind] += 1
        options = dict(_OPTION.findall(match["options"]))
        blocks.append((kind, f"{kind}-{counts[kind]}", body, options))
    return blocks


def run_fence(kind: str, block_id: str, body: str, options: dict[str, str]) -> str:
    """Evaluate a ``claim`` or ``describe`` block as the build does; return its Markdown."""
    parsed: dict[str, object] = {}
    claim_fence.validator(kind, dict(options), parsed, {}, None)
    facts.begin_block(block_id)
    try:
        return claim_fence.to_markdown(kind, body, parsed)
    finally:
        facts.end_block()


def run_all(
    stem: str,
    skip: Callable[[str, str], bool] | None = None,
    measured: dict[str, dict] | None = None,
) -> dict[str, str]:
    """Run every python, ``claim`` and ``describe`` block of ``stem`` in page order on the
    current page of facts; return what each showed, by id. ``skip(id, code)`` leaves a python
    block out (one the strict build runs instead); ``measured`` as in :func:`run_block`."""
    printed = {}
    for kind, block_id, body, options in page_blocks(stem):
        if kind == "python":
            if skip is None or not skip(block_id, body):
                printed[block_id] = run_block(stem, block_id, body, measured)
        else:
            printed[block_id] = run_fence(kind, block_id, body, options)
    return printed


def run_page(stem: str, measured: dict[str, dict] | None = None) -> PageRun:
    """Run every block of lesson ``stem`` in order on a fresh page of facts.

    The facts stay published afterwards (tests may read them); the caller resets them.
    ``measured`` as in :func:`run_block`: a dict kept across runs measures each entry once.
    """
    page = f"lessons/{stem}.md"
    facts.reset()
    facts.begin_page(page)
    printed = run_all(stem, measured=measured)
    made = [c for c in claims.claims() if c.page == page]
    return PageRun(printed, made, dict(facts.page_facts(page)))


def built_page(site: Path, stem: str) -> PageRun:
    """What the strict build of ``site`` showed and published for lesson ``stem``.

    The build ran every block once (the ``built_site`` fixture builds with
    ``GPULESSON_BLOCK_OUTPUTS=1``, so the site holds ``build-blocks.json``); this reads each
    block's Markdown from there and the page's claims and facts from ``build-record.json``,
    and restores those facts on a fresh page of this process, so a test can run one block
    again (with a stub) as it would run after them.
    """
    page = f"lessons/{stem}.md"
    record = json.loads((site / "build-record.json").read_text(encoding="utf-8"))
    shown = json.loads((site / block_outputs.FILE).read_text(encoding="utf-8"))
    made = [claims.Claim(**c) for c in record["claims"] if c["page"] == page]
    published = [f for f in record["facts"] if f["page"] == page]
    facts.reset()
    facts.begin_page(page)
    facts.restore(published)
    return PageRun(dict(shown[page]), made, dict(facts.page_facts(page)))


def page_fixture(stem: str):
    """A module-scoped fixture named ``page``: :func:`built_page` of lesson ``stem``.

    In a page test module, ``page = page_fixture(STEM)``; each test then reads
    ``page.printed``, ``page.claims``, ``page.facts`` (or ``page.values()``) as the strict
    build left them. The page's facts stay restored for the module's tests (a quiz reads
    them) and are reset, with the content cache, after the last one.
    """

    @pytest.fixture(scope="module", name="page")
    def _page(built_site: Path) -> Iterator[PageRun]:
        run = built_page(built_site, stem)
        yield run
        facts.reset()
        content.reset()

    return _page


def fences_after(stem: str, block_id: str) -> list[str]:
    """The ids of the ``claim``/``describe`` blocks that follow python block ``block_id``,
    up to the next python block (``claim-N``, ``describe-N``), in page order."""
    blocks = page_blocks(stem)
    start = next(i for i, b in enumerate(blocks) if b[0] == "python" and b[1] == block_id)
    ids = []
    for kind, fence_id, _, _ in blocks[start + 1 :]:
        if kind == "python":
            break
        ids.append(fence_id)
    return ids


def claims_by_block(run: PageRun, stem: str) -> dict[str, list[claims.Claim]]:
    """The claims of a page run by the block that made them: a python block's id (a block
    that states claims itself, e.g. through ``gpu_rows``) or a ``claim-N`` block's.

    The claims are numbered in page order, so each ``claim`` block takes the next claim and
    each python block the claims recorded under its id.
    """
    made = sorted(run.claims, key=lambda c: c.number)
    found: dict[str, list[claims.Claim]] = {}
    i = 0
    for kind, block_id, _, _ in page_blocks(stem):
        mine = found.setdefault(block_id, [])
        if kind == "python":
            while i < len(made) and made[i].block_id == block_id:
                mine.append(made[i])
                i += 1
        elif kind == "claim":
            assert i < len(made), f"{stem}: {block_id} made no claim in the record"
            mine.append(made[i])
            i += 1
    assert i == len(made), f"{stem}: claims left over: {[c.rule for c in made[i:]]}"
    return found


def claims_after(run: PageRun, stem: str, block_id: str) -> list[claims.Claim]:
    """The claims python block ``block_id`` and the ``claim`` blocks after it made, in order
    (what :func:`run_claims_after` following :func:`run_block` would make)."""
    by_block = claims_by_block(run, stem)
    return [c for b in (block_id, *fences_after(stem, block_id)) for c in by_block[b]]


def run_on_a_cuda_build(monkeypatch, stem: str, block_id: str, rows) -> tuple[str, list]:
    """Run one block as a CUDA build would, the suite stubbed to give back ``rows``.

    On a fresh page of facts (left published for the test); returns what the block printed
    and the ``(entry, device)`` pairs it asked the suite for.
    """
    from gpulesson.site import gpu_figures

    asked: list[tuple[str, str]] = []
    monkeypatch.setattr(gpu_figures, "build_has_gpu", lambda: True)
    monkeypatch.setattr(build_bundle, "applies", lambda entry, device: True)
    monkeypatch.setattr(
        build_bundle, "measure", lambda entry, device: asked.append((entry, device)) or rows
    )
    (code,) = [c for i, c in exec_blocks(stem) if i == block_id]
    facts.reset()
    facts.begin_page(f"lessons/{stem}.md")
    return run_block(stem, block_id, code), asked


def run_claims_after(stem: str, block_id: str) -> list[str]:
    """Evaluate the ``claim``/``describe`` blocks that follow python block ``block_id``.

    They run with the facts published so far on the current page, up to the next python
    block, as the build evaluates them there; returns what each shows.
    """
    blocks = page_blocks(stem)
    start = next(i for i, b in enumerate(blocks) if b[0] == "python" and b[1] == block_id)
    shown = []
    for kind, fence_id, body, options in blocks[start + 1 :]:
        if kind == "python":
            break
        shown.append(run_fence(kind, fence_id, body, options))
    return shown
