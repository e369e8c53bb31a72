"""The glossary: one list feeding the page, the tooltips and the flashcards."""

from __future__ import annotations

import json
import re

import markdown

from gpulesson.site import glossary

REQUIRED = ("CUDA", "cuDNN", "Tensor Cores", "NVLink", "MIG", "HBM", "SM", "PCIe", "VRAM", "MPS")


def test_required_terms_are_present_and_unique():
    names = [t.name for t in glossary.TERMS]
    assert len(names) == len(set(names))
    for name in REQUIRED:
        assert glossary.term(name).meaning


def test_mig_explains_why_partitioning_is_a_memory_feature():
    assert "memory" in glossary.term("MIG").meaning


def test_lazy_and_real_meanings_differ():
    for t in glossary.TERMS:
        assert t.lazy.strip() and t.meaning.strip()
        assert t.lazy != t.meaning


def test_abbreviations_make_tooltips():
    md = markdown.Markdown(extensions=["abbr"])
    html = md.convert("A MIG slice of HBM over PCIe.\n\n" + glossary.abbreviations_markdown())
    titles = dict(
        re.findall(r'<abbr title="([^"]*)">([^<]*)</abbr>', html)[i][::-1] for i in range(3)
    )
    assert set(titles) == {"MIG", "HBM", "PCIe"}
    assert titles["MIG"].startswith("Multi-Instance GPU.")


def test_tooltips_have_no_line_breaks_or_brackets():
    for line in glossary.abbreviations_markdown().splitlines():
        assert re.fullmatch(r"\*\[[^\]]+\]: [^\n]+", line), line


def test_page_links_only_existing_lessons():
    text = glossary.to_markdown(linked_lessons=frozenset({"timing"}))
    assert "](../lessons/timing/)" in text
    assert "](../lessons/capacity/)" not in text
    assert f"{{#{glossary.anchor('Tensor Cores')}}}" in text


def test_flashcards_come_from_the_same_terms():
    cards = json.loads(glossary.to_json())
    assert [c["name"] for c in cards] == [t.name for t in glossary.TERMS]
    assert glossary.flashcards_markdown().count("??? question") == len(glossary.TERMS)
