"""The lesson rules (gpulesson/site/course_rules.py): each can fail, and the course keeps them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpulesson.site import content, course_rules
from tests.conftest import REPO

LESSON = """\
# Demo

A fact from [one][a], [two](https://b.org/two) and [three][c].

```python exec="on" id="demo-figure"
print("the figure")
```

## Sources

- [One][a]
- [Two](https://b.org/two)
- [Three][c]

[a]: https://a.org/one
[c]: https://c.org/three
"""

QUIZ = """\
questions:
  - prompt: Predict the figure.
    before: demo-figure
    facts: [timing.inflation]
    values: gpulesson.course.common:decades
    options:
{options}
  - prompt: Second?
    options:
{options}
  - prompt: Third?
    options:
{options}
"""
OPTIONS = """\
      - text: Right
        correct: true
        why: Because.
      - text: Wrong
        why: Not so.
      - text: Also wrong
        why: Nor this."""


@pytest.fixture
def docs(tmp_path: Path):
    root = tmp_path / "docs"
    (root / "lessons").mkdir(parents=True)
    (root / "lessons" / "demo.md").write_text(LESSON)
    (root / "lessons" / "demo.quiz.yml").write_text(QUIZ.format(options=OPTIONS))
    shutil.copy(REPO / "docs" / "glossary.yml", root / "glossary.yml")
    shutil.copy(REPO / "docs" / "labs.yml", root / "labs.yml")
    for lesson in {t.lesson for t in content.load(REPO / "docs").terms}:
        if lesson != "demo":  # the glossary's terms name the course's lessons
            (root / "lessons" / f"{lesson}.md").write_text(LESSON)
            (root / "lessons" / f"{lesson}.quiz.yml").write_text(QUIZ.format(options=OPTIONS))
    yield root
    content.reset()


def _problems(docs: Path) -> list[str]:
    return [p for p in course_rules.problems(content.load(docs)) if "lessons/demo" in p]


def test_a_lesson_that_keeps_every_rule_passes(docs):
    assert _problems(docs) == []


def test_a_lesson_without_a_quiz_is_named_with_the_fix(docs):
    (docs / "lessons" / "demo.quiz.yml").unlink()
    assert _problems(docs) == [
        "docs/lessons/demo.quiz.yml: missing: every lesson has a quiz beside it; write one "
        'as CONTRIBUTING.md, "Quizzes and the glossary" shows'
    ]


def test_a_quiz_of_two_questions_with_two_options_and_no_prediction_breaks_three_rules(docs):
    two = "\n".join(OPTIONS.splitlines()[:5])
    quiz = QUIZ.format(options=two).split("  - prompt: Third?")[0]
    quiz = quiz.replace("    facts: [timing.inflation]\n", "").replace(
        "    values: gpulesson.course.common:decades\n", ""
    )
    (docs / "lessons" / "demo.quiz.yml").write_text(quiz.replace("    before: demo-figure\n", ""))
    found = _problems(docs)
    assert any("questions: 2; a lesson's quiz has at least 3" in p for p in found)
    assert any('question 1 ("Predict the figure."): options: 2;' in p for p in found)
    assert (
        "docs/lessons/demo.quiz.yml: questions: none is a predict-then-reveal question; every "
        "quiz asks the reader to predict a number before the block that computes it: give one "
        "question before: <block id> and the facts: and values: that block publishes (see "
        'CONTRIBUTING.md, "Quizzes and the glossary")'
    ) in found
    assert all(p.startswith("docs/lessons/demo.quiz.yml: ") for p in found)


def test_a_question_that_reads_the_pages_facts_after_the_page_printed_them_is_named(docs):
    (docs / "lessons" / "demo.quiz.yml").write_text(
        QUIZ.format(options=OPTIONS).replace("    before: demo-figure\n", "")
    )
    assert _problems(docs) == [
        'docs/lessons/demo.quiz.yml: question 1 ("Predict the figure."): before: missing; a '
        "question that reads the page's facts asks for a number the page computes, so it "
        "stands before the block that computes it, never after: add before: <that block's id>",
        "docs/lessons/demo.quiz.yml: questions: none is a predict-then-reveal question; every "
        "quiz asks the reader to predict a number before the block that computes it: give one "
        "question before: <block id> and the facts: and values: that block publishes (see "
        'CONTRIBUTING.md, "Quizzes and the glossary")',
    ]


def test_a_prediction_without_facts_does_not_count_as_predict_then_reveal(docs):
    quiz = QUIZ.format(options=OPTIONS).replace("    facts: [timing.inflation]\n", "")
    quiz = quiz.replace("    values: gpulesson.course.common:decades\n", "")
    (docs / "lessons" / "demo.quiz.yml").write_text(quiz)
    assert [p.split(";")[0] for p in _problems(docs)] == [
        "docs/lessons/demo.quiz.yml: questions: none is a predict-then-reveal question"
    ]


def test_a_source_never_cited_in_the_body_is_named(docs):
    page = LESSON.replace("[two](https://b.org/two) and ", "")
    (docs / "lessons" / "demo.md").write_text(page)
    assert _problems(docs) == [
        "docs/lessons/demo.md: sources: https://b.org/two is listed but never cited in the "
        "body: link it where its fact is used, or drop it"
    ]


def test_fewer_than_three_sources_or_no_sources_section_is_named(docs):
    (docs / "lessons" / "demo.md").write_text(LESSON.replace("- [Three][c]\n", ""))
    assert any("2 links under ## Sources" in p for p in _problems(docs))
    exercises = LESSON.split("## Sources")[0] + "## Exercises\n"  # keeps the quiz's block
    (docs / "lessons" / "demo.md").write_text(exercises)
    assert _problems(docs) == [
        "docs/lessons/demo.md: sources: the last H2 is ['Exercises'], not '## Sources': end "
        "the lesson with a ## Sources list of its links"
    ]


def test_check_lists_every_offender_on_its_own_line(docs):
    (docs / "lessons" / "demo.quiz.yml").unlink()
    (docs / "lessons" / "demo.md").write_text(LESSON.replace("- [Three][c]\n", ""))
    with pytest.raises(ValueError) as error:
        course_rules.check(content.load(docs))
    lines = str(error.value).splitlines()
    assert lines[0] == '2 lesson rules are broken (CONTRIBUTING.md, "Adding a lesson"):'
    assert len(lines) == 3


def test_the_course_keeps_every_lesson_rule():
    assert course_rules.problems(content.load(REPO / "docs")) == []
