"""No sentence on a built page shows a blank ("–") where a number belongs, and GPU pages
carry one stamp line naming the kinds of figure instead of a per-page banner."""

from __future__ import annotations

import html
import re
from pathlib import Path

_BLOCK = re.compile(r"<(p|li|td)\b[^>]*>(.*?)</\1>", re.S)
_SKIP = re.compile(r"<(script|style|pre|code)\b[^>]*>.*?</\1>", re.S)
# a dash standing alone where a number would be: "read – MB", "(–)", "rose –x", "–%"
_BLANK = re.compile(r"(?:^|[\s(])–(?=[\s%x.,;:)]|$)")


def blank_sentences(page_html: str) -> list[str]:
    """Claim sentences (paragraphs that carry a claim's verdict) with a blank number.

    >>> blank_sentences('<p>Batch 1 read – MB. <span class="gl-claim">(checked)</span></p>')
    ['Batch 1 read – MB. (checked)']
    >>> blank_sentences('<p>Batch 1 read 12 MB. <span class="gl-claim">(checked)</span></p>')
    []
    """
    found = []
    for _, inner in _BLOCK.findall(_SKIP.sub("", page_html)):
        if "gl-claim" not in inner and "checked" not in inner:
            continue
        text = html.unescape(re.sub(r"<[^>]+>", "", inner)).strip()
        if _BLANK.search(text):
            found.append(text)
    return found


def test_the_scanner_finds_the_old_blank_sentences():
    old = (
        "<p>On the GPU, batch 1 read – MB of weights per step and decoded – tokens/s. "
        '<span class="gl-claim gl-claim-unchecked">(not checked on this build)</span></p>'
        '<li>From batch 1 to –, total tokens/s rose –x <span class="gl-claim">x</span></li>'
    )
    assert len(blank_sentences(old)) == 2


def test_no_built_page_has_a_claim_sentence_with_blank_numbers(built_site: Path):
    pages = sorted(built_site.rglob("*.html"))
    assert len(pages) > 20
    blanks = {
        str(p.relative_to(built_site)): found
        for p in pages
        if (found := blank_sentences(p.read_text(encoding="utf-8")))
    }
    assert not blanks


def test_gpu_pages_carry_one_kinds_line_and_no_banner(built_site: Path):
    lessons = built_site / "lessons"
    with_rows = [
        d.name
        for d in lessons.iterdir()
        if (d / "index.html").exists()
        and re.search(r"GPU figures? in this table", (d / "index.html").read_text())
    ]
    assert len(with_rows) >= 9
    for name in with_rows:
        page = (lessons / name / "index.html").read_text(encoding="utf-8")
        assert "GPU figures were not measured in this build" not in page, name
        assert page.count("GPU figures on this page: predicted") == 1, name
        assert "measured / predicted" in page and "How this is predicted" in page, name
