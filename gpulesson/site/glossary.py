"""The course glossary: one list of terms feeding the glossary page, tooltips and flashcards.

The terms live in ``docs/glossary.yml`` (read and checked by
:mod:`gpulesson.site.content`). Each has the lazy one-liner people repeat and
what it really means. The site hooks (``gpulesson/site/labs_hook.py``) append
:func:`abbreviations_markdown` to every page, so the ``abbr`` extension puts a
tooltip on each term wherever it appears; ``docs/glossary.md`` prints
:func:`to_markdown`; the flashcards read :func:`to_json`.

>>> term("MIG").name
'MIG'
>>> "*[VRAM]:" in abbreviations_markdown()
True
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Term:
    """One glossary entry.

    ``name`` is matched case-sensitively as a whole word for the tooltip;
    ``tooltip`` is False for terms too common as plain English to underline.
    """

    name: str
    expansion: str
    lazy: str
    meaning: str
    lesson: str
    tooltip: bool = True


def terms() -> tuple[Term, ...]:
    """The glossary's terms, from ``docs/glossary.yml`` (read once per build).

    >>> len(terms()) == len({t.name for t in terms()})
    True
    """
    from gpulesson.site import content  # content imports Term from this module

    return content.current().terms


def term(name: str) -> Term:
    """The glossary entry named ``name``; ValueError naming close matches if absent.

    >>> term("cuda")
    Traceback (most recent call last):
    ...
    ValueError: no glossary term 'cuda': names are case-sensitive, e.g. 'CUDA'
    """
    for t in terms():
        if t.name == name:
            return t
    close = [t.name for t in terms() if t.name.lower() == name.lower()]
    hint = f"e.g. {close[0]!r}" if close else "see docs/glossary.yml"
    raise ValueError(f"no glossary term {name!r}: names are case-sensitive, {hint}")


def anchor(name: str) -> str:
    """The glossary page's anchor for a term.

    >>> anchor("Tensor Cores")
    'term-tensor-cores'
    """
    return "term-" + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def _tooltip_text(t: Term) -> str:
    first = t.meaning.split(". ")[0].rstrip(".")
    return f"{t.expansion}. {first}.".replace("\n", " ")


def abbreviations_markdown(chosen: tuple[Term, ...] | None = None) -> str:
    """Abbreviation definitions for the ``abbr`` extension: one tooltip per term (default: all).

    Each definition is its own paragraph, which gives the same HTML as one definition a
    line and is much faster: Python-Markdown reads a definition off the front of its block
    and tests the rest of the block again, so one long block costs time quadratic in the
    number of terms, paid by every page and every quiz block's output.

    >>> abbreviations_markdown((term("HBM"),)).startswith("*[HBM]: high-bandwidth memory. Memory")
    True
    >>> abbreviations_markdown((term("HBM"), term("MIG"))).count("\\n\\n*[")
    1
    """
    chosen = terms() if chosen is None else chosen
    return "\n\n".join(f"*[{t.name}]: {_tooltip_text(t)}" for t in chosen if t.tooltip) + "\n"


def to_markdown(chosen: tuple[Term, ...] | None = None) -> str:
    """The glossary page body: terms (default: all) in alphabetical order, each with an anchor.

    Each term links to its lesson (the loader has checked that the lesson
    exists). Links are site URLs relative to the glossary page (``glossary/``),
    because MkDocs does not rewrite ``.md`` links inside executed output.

    >>> print(to_markdown((term("MIG"),)).splitlines()[-1])
    Lazy version: "Splits a GPU to run more jobs faster." · Lesson: [capacity](../lessons/capacity/)
    """
    chosen = terms() if chosen is None else chosen
    lines: list[str] = []
    for t in sorted(chosen, key=lambda t: t.name.lower()):
        lesson = f"[{t.lesson}](../lessons/{t.lesson}/)"
        lines.append(f"### {t.name} {{#{anchor(t.name)}}}\n")
        lines.append(f"*{t.expansion}.* {t.meaning}\n")
        lines.append(f'Lazy version: "{t.lazy}" · Lesson: {lesson}\n')
    return "\n".join(lines).rstrip() + "\n"


def flashcards_markdown(chosen: tuple[Term, ...] | None = None) -> str:
    """The flashcards without JavaScript: one collapsible block per term (default: all).

    >>> print(flashcards_markdown((term("GiB"),)).splitlines()[0])
    ??? question "GiB: A gigabyte."
    """
    blocks = []
    for t in terms() if chosen is None else chosen:
        blocks.append(f'??? question "{t.name}: {t.lazy}"\n    **{t.expansion}.** {t.meaning}\n')
    return "\n".join(blocks)


def to_json(chosen: tuple[Term, ...] | None = None) -> str:
    """The terms (default: all) as JSON for the flashcards script.

    >>> json.loads(to_json((term("SM"),)))[0]["name"]
    'SM'
    """
    chosen = terms() if chosen is None else chosen
    return json.dumps([asdict(t) for t in chosen], ensure_ascii=False)
