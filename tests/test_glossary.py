"""The glossary: one data file feeding the page, the tooltips and the flashcards."""

from __future__ import annotations

import json
import re
from pathlib import Path

import markdown
import pytest

from gpulesson.site import content, glossary
from tests.conftest import REPO

REQUIRED = ("CUDA", "cuDNN", "Tensor Cores", "NVLink", "MIG", "HBM", "SM", "PCIe", "VRAM", "MPS")

GLOSSARY = """\
terms:
  - name: GPU
    expansion: graphics processing unit
    lazy: A faster CPU.
    meaning: A throughput machine. Width wins.
    lesson: demo
  - name: warm-up
    expansion: untimed first iterations
    lazy: Wasted runs.
    meaning: The first calls pay one-off costs.
    lesson: demo
    tooltip: false
"""


@pytest.fixture(autouse=True)
def _course(monkeypatch):
    """Read the course's own docs/ (the fallback outside a build is <cwd>/docs)."""
    monkeypatch.chdir(REPO)
    yield
    content.reset()


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    """A small docs folder: one lesson, its quiz, a two-term glossary, the course's labs.yml."""
    root = tmp_path / "docs"
    (root / "lessons").mkdir(parents=True)
    (root / "lessons" / "demo.md").write_text("# Demo\n")
    (root / "glossary.yml").write_text(GLOSSARY)
    (root / "labs.yml").write_text((REPO / "docs" / "labs.yml").read_text())
    return root


def _error(docs: Path, text: str) -> str:
    (docs / "glossary.yml").write_text(text)
    with pytest.raises(content.ContentError) as error:
        content.load(docs)
    return str(error.value)


def test_required_terms_are_present_and_unique():
    names = [t.name for t in glossary.terms()]
    assert len(names) == len(set(names))
    for name in REQUIRED:
        assert glossary.term(name).meaning


def test_mig_explains_why_partitioning_is_a_memory_feature():
    assert "memory" in glossary.term("MIG").meaning


def test_lazy_and_real_meanings_differ():
    for t in glossary.terms():
        assert t.lazy.strip() and t.meaning.strip()
        assert t.lazy != t.meaning


def test_every_glossary_link_resolves_to_a_lesson_page():
    lessons = REPO / "docs" / "lessons"
    for t in glossary.terms():
        assert (lessons / f"{t.lesson}.md").is_file(), t.name
    links = re.findall(r"\]\(\.\./lessons/([\w-]+)/\)", glossary.to_markdown())
    assert len(links) == len(glossary.terms())
    assert all((lessons / f"{stem}.md").is_file() for stem in links)


def test_abbreviations_make_tooltips():
    md = markdown.Markdown(extensions=["abbr"])
    html = md.convert("A MIG slice of HBM over PCIe.\n\n" + glossary.abbreviations_markdown())
    titles = dict(
        re.findall(r'<abbr title="([^"]*)">([^<]*)</abbr>', html)[i][::-1] for i in range(3)
    )
    assert set(titles) == {"MIG", "HBM", "PCIe"}
    assert titles["MIG"].startswith("Multi-Instance GPU.")


def test_tooltips_have_no_line_breaks_or_brackets():
    for line in glossary.abbreviations_markdown().split("\n\n"):
        assert re.fullmatch(r"\*\[[^\]]+\]: [^\n]+\n?", line), line


def test_page_has_an_anchor_per_term():
    text = glossary.to_markdown()
    assert f"{{#{glossary.anchor('Tensor Cores')}}}" in text
    assert "](../lessons/capacity/)" in text


def test_flashcards_come_from_the_same_terms():
    cards = json.loads(glossary.to_json())
    assert [c["name"] for c in cards] == [t.name for t in glossary.terms()]
    assert glossary.flashcards_markdown().count("??? question") == len(glossary.terms())


# --- the loader ------------------------------------------------------------------------


def test_loader_reads_the_fields_and_the_tooltip_default(docs):
    terms = content.load(docs).terms
    assert [(t.name, t.lesson, t.tooltip) for t in terms] == [
        ("GPU", "demo", True),
        ("warm-up", "demo", False),
    ]


def test_a_term_whose_lesson_does_not_exist_is_refused(docs):
    text = GLOSSARY.replace("    lesson: demo\n    tooltip", "    lesson: timing\n    tooltip")
    assert _error(docs, text) == (
        'docs/glossary.yml: term 2 ("warm-up"): lesson: no lesson lessons/timing.md: '
        "name the file stem of an existing lesson (demo)"
    )


def test_a_removed_lesson_fails_the_glossary_instead_of_a_stale_link(docs):
    assert content.load(docs).terms
    (docs / "lessons" / "demo.md").unlink()
    assert 'term 1 ("GPU"): lesson: no lesson lessons/demo.md' in _error(docs, GLOSSARY)


def test_a_term_given_twice_is_refused(docs):
    text = GLOSSARY.replace("name: warm-up", "name: GPU")
    assert _error(docs, text) == (
        "docs/glossary.yml: term 2 (\"GPU\"): name: 'GPU' is already a term: merge the two entries"
    )


def test_an_unknown_field_is_named(docs):
    text = GLOSSARY.replace("    lazy: Wasted runs.", "    lazzy: Wasted runs.")
    assert _error(docs, text) == (
        'docs/glossary.yml: term 2 ("warm-up"): lazzy: unknown field; '
        "the fields are name, expansion, lazy, meaning, lesson, tooltip"
    )


def test_a_missing_field_is_named(docs):
    text = GLOSSARY.replace("    expansion: graphics processing unit\n", "")
    assert _error(docs, text) == 'docs/glossary.yml: term 1 ("GPU"): expansion: missing; add it'


def test_tooltip_must_be_true_or_false(docs):
    text = GLOSSARY.replace("tooltip: false", "tooltip: sometimes")
    assert _error(docs, text).endswith("tooltip: must be true or false, not 'sometimes'")


def test_a_lazy_version_equal_to_the_meaning_is_refused(docs):
    text = GLOSSARY.replace("lazy: Wasted runs.", "lazy: The first calls pay one-off costs.")
    assert _error(docs, text).endswith(
        'term 2 ("warm-up"): lazy: is the same as meaning: say what people get wrong'
    )


def test_the_glossary_follows_the_configured_docs_dir(docs):
    content.configure(docs)
    assert [t.name for t in glossary.terms()] == ["GPU", "warm-up"]
    assert "*[GPU]:" in glossary.abbreviations_markdown()
    assert "warm-up" not in glossary.abbreviations_markdown()


def test_the_package_finds_docs_only_through_the_site_content_loader():
    source = (REPO / "gpulesson" / "site" / "glossary.py").read_text()
    assert "__file__" not in source and '"docs"' not in source
