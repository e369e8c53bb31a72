"""MkDocs hooks for the labs, quizzes, flashcards and glossary tooltips.

Named in ``mkdocs.yml`` under ``hooks:`` after ``gpulesson/site/hooks.py``.

- ``on_config`` reads and checks the content files under ``docs_dir`` once
  (:mod:`gpulesson.site.content`: quizzes, glossary, lab data); a malformed
  entry stops the build with a message naming file, entry and field.
- ``on_page_markdown`` appends a quiz section to each lesson that has a quiz
  file: a heading, then an executed block printing
  :func:`gpulesson.site.quizzes.section_markdown` (an interactive container
  plus a static copy that works without JavaScript). It runs after the page's
  own blocks, so templated questions read the facts they published, and it is
  never cached, so an edit to a quiz file always shows. Before the fence of each
  block a predict-then-reveal question names (``before:`` in the quiz file) it
  leaves an empty slot (:func:`gpulesson.site.quizzes.insert_slots`). It also
  appends the glossary's abbreviation lines to every page so each term gets a
  tooltip wherever it appears.
- ``on_page_content`` moves each predict-then-reveal question, rendered with the
  quiz at the end of the page (its numbers exist only once its block ran), into
  its slot before that block (:func:`gpulesson.site.quizzes.move_predictions`).
- ``on_post_build`` writes the JSON the lab script reads into
  ``assets/labs/``: ``labs.json`` (labs), ``glossary.json`` (flashcards) and
  ``planner.json`` (from :func:`gpulesson.memory.budget.planner_data`, so the
  planner widget and the package share one formula).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

from gpulesson.memory.planner import planner_data
from gpulesson.site import content, course_rules, facts, glossary, labs, quizzes

LABS_DIR = "assets/labs"
QUIZ_HEADING = "## Check yourself"
#: Where the estimator's measured error comes from: the memory lesson's accuracy table.
ACCURACY_PAGE = "lessons/memory.md"
ACCURACY_FACT = "memory.gpt2_worst_error_pct"


def quiz_section(stem: str) -> str:
    """The quiz appended to a lesson: heading, intro, and the block that prints the quiz.

    >>> section = quiz_section("timing")
    >>> section.startswith(QUIZ_HEADING), 'id="quiz-timing" cache="off"' in section
    (True, True)
    """
    intro = (
        "Answer before you look: pick an option to see why it is right or wrong. "
        "The score counts first answers."
    )
    return (
        f"{QUIZ_HEADING}\n\n{intro}\n\n"
        f'```python exec="on" id="quiz-{stem}" cache="off"\n'
        "from gpulesson.site import quizzes\n\n"
        f"print(quizzes.section_markdown({stem!r}))\n"
        "```\n"
    )


def page_stem(src_uri: str) -> str | None:
    """The lesson stem for a lesson page's source path, else None.

    >>> page_stem("lessons/timing.md"), page_stem("index.md")
    ('timing', None)
    """
    if src_uri.startswith("lessons/") and src_uri.endswith(".md"):
        return src_uri[len("lessons/") : -len(".md")]
    return None


def on_config(config: Any) -> Any:
    """Read and check the content files under ``docs_dir``, and the lesson rules, for this build."""
    try:
        course_rules.check(content.configure(Path(config["docs_dir"])))
    except (content.ContentError, ValueError) as exc:
        raise PluginError(str(exc)) from None
    return config


def predicted_blocks(stem: str) -> list[str]:
    """The blocks of lesson ``stem`` that a predict-then-reveal question stands before.

    >>> predicted_blocks("timing")
    ['timing-illusion']
    """
    return [q.before for q in content.current().quizzes.get(stem, ()) if q.before]


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Append the lesson's quiz (if any), with a slot before each predicted block, and the
    glossary tooltips."""
    stem = page_stem(page.file.src_uri)
    if stem in content.current().quizzes:
        try:
            markdown = quizzes.insert_slots(markdown, predicted_blocks(stem))
        except ValueError as exc:
            quiz = content.current().quiz_file(stem)
            raise PluginError(
                f"{quiz}: before: {exc}: name a block of {page.file.src_uri}"
            ) from None
        markdown = markdown.rstrip() + "\n\n" + quiz_section(stem)
    return markdown.rstrip() + "\n\n" + glossary.abbreviations_markdown()


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    """Move each predict-then-reveal question before the block that computes its answer."""
    stem = page_stem(page.file.src_uri)
    if not predicted_blocks(stem or ""):
        return html
    try:
        return quizzes.move_predictions(html)
    except ValueError as exc:
        quiz = content.current().quiz_file(stem or "")
        raise PluginError(f"{page.file.src_uri}: {quiz}: {exc}") from None


def planner_accuracy() -> dict[str, Any] | None:
    """The estimator's measured error as this build's memory lesson published it, else None.

    >>> facts.reset(); facts.begin_page(ACCURACY_PAGE)
    >>> _ = facts.publish(ACCURACY_FACT, 5.3, "%")
    >>> planner_accuracy()["max_abs_error_pct"]
    5.3
    >>> facts.reset(); planner_accuracy() is None
    True
    """
    fact = facts.page_facts(ACCURACY_PAGE).get(ACCURACY_FACT)
    if fact is None:
        return None
    return {
        "max_abs_error_pct": float(fact.value),
        "source": "the memory lesson's estimate-vs-measured cases, What fills GPU memory",
        "page": ACCURACY_PAGE,
        "kind": fact.kind,
    }


def planner_json() -> str:
    """The planner's data, :func:`gpulesson.memory.planner.planner_data`, as JSON text, with
    the estimator's measured error from this build (:func:`planner_accuracy`).

    >>> json.loads(planner_json())["default_preset"]
    'amp'
    """
    return json.dumps(planner_data(planner_accuracy()), ensure_ascii=False)


def on_post_build(config: Any) -> None:
    """Write the labs' JSON into the site."""
    out = Path(config["site_dir"], LABS_DIR)
    out.mkdir(parents=True, exist_ok=True)
    (out / "labs.json").write_text(labs.to_json(), encoding="utf-8")
    (out / "glossary.json").write_text(glossary.to_json(), encoding="utf-8")
    (out / "planner.json").write_text(planner_json(), encoding="utf-8")
