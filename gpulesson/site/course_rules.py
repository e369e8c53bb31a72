r"""The rules every lesson keeps, checked in one place when the site is built.

A lesson is a page ``docs/lessons/<stem>.md``. The build (``labs_hook.on_config``, through
:func:`check`) stops with every offender listed, each naming the file, the rule and the fix,
when a lesson breaks one of these (CONTRIBUTING.md, "Adding a lesson", states them too):

1. it has a quiz beside it, ``docs/lessons/<stem>.quiz.yml``;
2. the quiz has at least :data:`MIN_QUESTIONS` questions, each with at least
   :data:`MIN_OPTIONS` options (the loader alone accepts fewer: a fixture or a draft is fine);
3. at least one question asks the reader to predict a number the page computes (it lists
   ``facts:``), so the quiz tests reasoning with the page's own figures, not recall;
4. the lesson ends with a ``## Sources`` section of at least :data:`MIN_SOURCES` distinct
   absolute ``http(s)`` links, and every one of them is also cited in the lesson's body,
   where the fact it supports is used.

>>> page = "# L\n\nA [fact][a].\n\n## Sources\n\n- [A][a]\n- [B](https://b.org/y)\n"
>>> for line in sources_problems("l.md", page + "\n[a]: https://a.org/a\n"):
...     print(line.split(": add")[0].split(" is listed")[0])
l.md: sources: 2 links under ## Sources; a lesson cites at least 3
l.md: sources: https://b.org/y
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlparse

from gpulesson.site.content import QUIZ_SUFFIX, Content
from gpulesson.site.quizzes import Question

MIN_QUESTIONS = 3
MIN_OPTIONS = 3
MIN_SOURCES = 3
RULES_AT = 'CONTRIBUTING.md, "Adding a lesson"'

_H2 = re.compile(r"^## (.+)$", re.M)
_INLINE = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")
_REFERENCE = re.compile(r"\[([^\]]+)\]\[([^\]]*)\]")
_DEFINITION = re.compile(r"^\[([^\]]+)\]:\s*(\S+)\s*$", re.M)
_FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def _links(markdown: str, definitions: dict[str, str]) -> list[str]:
    """Every link target in ``markdown``: inline ones and reference ones resolved."""
    found = [url for _, url in _INLINE.findall(markdown)]
    for label, ref in _REFERENCE.findall(markdown):
        key = (ref or label).lower()
        if key in definitions:
            found.append(definitions[key])
    return found


def sources_of(markdown: str) -> tuple[str, list[str], list[str]]:
    """The Sources section, the links in it, and the links of the body before it.

    Raises ValueError when the last H2 is not ``## Sources``.
    """
    definitions = {label.lower(): url for label, url in _DEFINITION.findall(markdown)}
    headings = _H2.findall(markdown)
    if not headings or headings[-1].strip() != "Sources":
        raise ValueError(f"the last H2 is {headings[-1:] or 'missing'}, not '## Sources'")
    start = markdown.rindex("\n## Sources")
    section = _DEFINITION.sub("", markdown[start:])
    body = _FENCE.sub("", _DEFINITION.sub("", markdown[:start]))
    return section, _links(section, definitions), _links(body, definitions)


def well_formed(url: str) -> bool:
    """An absolute http(s) URL with a dotted host and no spaces.

    >>> well_formed("https://pytorch.org/docs/stable/amp.html"), well_formed("pytorch.org")
    (True, False)
    """
    parsed = urlparse(url)
    return parsed.scheme in ("http", "https") and "." in parsed.netloc and " " not in url


def sources_problems(label: str, markdown: str) -> list[str]:
    """Rule 4 for one lesson's Markdown: what is wrong with its sources, each with the fix."""
    try:
        _, links, cited = sources_of(markdown)
    except ValueError as exc:
        return [f"{label}: sources: {exc}: end the lesson with a ## Sources list of its links"]
    problems = []
    distinct = sorted(set(links), key=links.index)
    if len(distinct) < MIN_SOURCES:
        problems.append(
            f"{label}: sources: {len(distinct)} links under ## Sources; a lesson cites at least "
            f"{MIN_SOURCES}: add the sources its facts come from"
        )
    problems += [
        f"{label}: sources: {url} is not an absolute http(s) link: give the page's full URL"
        for url in distinct
        if not well_formed(url)
    ]
    problems += [
        f"{label}: sources: {url} is listed but never cited in the body: link it where its "
        "fact is used, or drop it"
        for url in distinct
        if url not in cited
    ]
    return problems


def quiz_problems(label: str, questions: tuple[Question, ...]) -> list[str]:
    """Rules 2 and 3 for one lesson's quiz, each with the fix.

    >>> from gpulesson.site.quizzes import Option
    >>> q = Question(prompt="Why?", options=(Option("a", True, "."), Option("b", False, ".")))
    >>> for line in quiz_problems("x.quiz.yml", (q,)):
    ...     print(line.split(";")[0].split(": add")[0])
    x.quiz.yml: questions: 1
    x.quiz.yml: question 1 ("Why?"): options: 2
    x.quiz.yml: questions: none asks the reader to predict a number the page computes
    """
    problems = []
    if len(questions) < MIN_QUESTIONS:
        problems.append(
            f"{label}: questions: {len(questions)}; a lesson's quiz has at least "
            f"{MIN_QUESTIONS}: add questions that need the lesson's reasoning"
        )
    for number, q in enumerate(questions, 1):
        if len(q.options) < MIN_OPTIONS:
            prompt = " ".join(q.prompt.split())
            shown = prompt if len(prompt) <= 40 else prompt[:40] + "..."
            problems.append(
                f'{label}: question {number} ("{shown}"): options: {len(q.options)}; a question '
                f"offers at least {MIN_OPTIONS}: add a plausible wrong answer with its why"
            )
    if not any(q.facts for q in questions):
        problems.append(
            f"{label}: questions: none asks the reader to predict a number the page computes: "
            'add one with facts: and values: (see CONTRIBUTING.md, "Quizzes and the glossary")'
        )
    return problems


def problems(course: Content) -> list[str]:
    """Every broken rule of every lesson under ``course.docs_dir``, lesson by lesson."""
    name = course.docs_dir.name
    found = []
    for stem in sorted(course.lessons):
        page = Path(course.docs_dir) / "lessons" / f"{stem}.md"
        label = f"{name}/lessons/{stem}"
        if stem not in course.quizzes:
            found.append(
                f"{label}{QUIZ_SUFFIX}: missing: every lesson has a quiz beside it; write one "
                'as CONTRIBUTING.md, "Quizzes and the glossary" shows'
            )
        else:
            found += quiz_problems(f"{label}{QUIZ_SUFFIX}", course.quizzes[stem])
        found += sources_problems(f"{label}.md", page.read_text(encoding="utf-8"))
    return found


def check(course: Content) -> None:
    """Raise ValueError listing every broken lesson rule (one line each), or return."""
    found = problems(course)
    if found:
        count = f"{len(found)} lesson rule{'s are' if len(found) > 1 else ' is'} broken"
        raise ValueError(f"{count} ({RULES_AT}):\n  " + "\n  ".join(found))
