"""Quizzes: well-formed data, every lesson covered, appended by the hook."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from gpulesson.site import labs_hook as site_labs
from gpulesson.site import quizzes

LESSONS = Path(__file__).resolve().parent.parent / "docs" / "lessons"


def test_every_lesson_on_disk_has_a_quiz():
    missing = [p.stem for p in LESSONS.glob("*.md") if p.stem not in quizzes.QUIZZES]
    assert missing == []


def test_every_option_has_an_explanation_and_one_is_right():
    for stem, questions in quizzes.QUIZZES.items():
        assert len(questions) >= 3, stem
        for q in questions:
            assert len(q.options) >= 3
            assert sum(o.correct for o in q.options) == 1
            assert all(o.why.strip() and o.text.strip() for o in q.options), q.prompt


def test_a_question_with_two_right_answers_is_refused():
    with pytest.raises(ValueError, match="2 correct options"):
        quizzes.Question("x?", (quizzes.Option("a", True, "."), quizzes.Option("b", True, ".")))


def test_static_quiz_shows_the_answer_in_a_collapsible_block():
    text = quizzes.to_markdown("timing")
    assert text.count('??? success "Answer: ') == len(quizzes.QUIZZES["timing"])
    assert "(right)" in text and "(wrong)" in text


def test_unknown_lesson_is_refused():
    with pytest.raises(ValueError, match="no quiz for lesson 'nope'"):
        quizzes.to_markdown("nope")


def _page(src_uri: str) -> SimpleNamespace:
    return SimpleNamespace(file=SimpleNamespace(src_uri=src_uri))


def test_hook_appends_quiz_to_lessons_only():
    lesson = site_labs.on_page_markdown("# T\n\nBody.", _page("lessons/timing.md"), None, None)
    assert site_labs.QUIZ_HEADING in lesson and 'data-quiz="timing"' in lesson
    home = site_labs.on_page_markdown("# Home\n", _page("index.md"), None, None)
    assert site_labs.QUIZ_HEADING not in home
    assert "*[CUDA]:" in home  # tooltips go on every page
