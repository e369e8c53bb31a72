"""Quizzes: data files beside the lessons, checked on load, filled from facts."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import markdown
import pytest
from mkdocs.exceptions import PluginError

from gpulesson.site import content, exec_cache, facts, quizzes
from gpulesson.site import labs_hook as site_labs
from tests.conftest import REPO

LESSON_QUIZ = """\
questions:
  - prompt: First question?
    options:
      - text: Right
        correct: true
        why: Because it is.
      - text: Wrong
        why: Because it is not.
      - text: Also wrong
        why: Not this either.
  - prompt: Why does the second question exist?
    options:
      - text: To be answered
        correct: true
        why: Quizzes are for answering.
      - text: To fill space
        why: No question is filler.
"""

TEMPLATED = """\
  - prompt: "About how large is x ({measured})?"
    facts: [demo.x]
    values: gpulesson.site.quiz_values:decades
    options:
      - text: "{tenth}"
        why: Ten times too small.
      - text: "{value}"
        correct: true
        why: "It is {measured}."
      - text: "{tenfold}"
        why: Ten times too large.
"""

GLOSSARY = """\
terms:
  - name: GPU
    expansion: graphics processing unit
    lazy: A faster CPU.
    meaning: A throughput machine.
    lesson: demo
"""


@pytest.fixture
def docs(tmp_path: Path):
    """A small docs folder with one lesson, its quiz, a glossary and the course's labs.yml."""
    root = tmp_path / "docs"
    (root / "lessons").mkdir(parents=True)
    (root / "lessons" / "demo.md").write_text("# Demo\n")
    (root / "lessons" / "demo.quiz.yml").write_text(LESSON_QUIZ)
    (root / "glossary.yml").write_text(GLOSSARY)
    (root / "labs.yml").write_text((REPO / "docs" / "labs.yml").read_text())
    yield root
    content.reset()


def _quiz_error(docs: Path, text: str) -> str:
    (docs / "lessons" / "demo.quiz.yml").write_text(text)
    with pytest.raises(content.ContentError) as error:
        content.load(docs)
    return str(error.value)


# --- the course's own quizzes -------------------------------------------------------


def test_every_lesson_on_disk_has_a_quiz_file():
    course = content.load(REPO / "docs")
    missing = [
        p.stem for p in (REPO / "docs" / "lessons").glob("*.md") if p.stem not in course.quizzes
    ]
    assert missing == []
    assert sorted(course.quizzes) == sorted(course.lessons)


def test_every_option_has_an_explanation_and_one_is_right():
    for stem, questions in content.load(REPO / "docs").quizzes.items():
        assert len(questions) >= 3, stem
        for q in questions:
            assert len(q.options) >= 3
            assert sum(o.correct for o in q.options) == 1
            assert all(o.why.strip() and o.text.strip() for o in q.options), q.prompt


def test_the_timing_quiz_has_a_question_filled_from_the_page(monkeypatch):
    monkeypatch.chdir(REPO)
    templated = [q for q in quizzes.questions("timing") if q.facts]
    assert [q.facts for q in templated] == [("timing.inflation",)]
    filled = quizzes.page_questions("timing", {"timing.inflation": 812.7})
    right = next(o for o in filled[-1].options if o.correct)
    assert right.text == "About 810×" and "813×" in right.why
    assert "{" not in quizzes.to_markdown(filled)


def test_a_question_with_two_right_answers_is_refused():
    with pytest.raises(ValueError, match="2 correct options"):
        quizzes.Question(
            prompt="x?",
            options=(
                quizzes.Option(text="a", correct=True, why="."),
                quizzes.Option(text="b", correct=True, why="."),
            ),
        )


def test_static_quiz_shows_the_answer_in_a_collapsible_block(monkeypatch):
    monkeypatch.chdir(REPO)
    filled = quizzes.page_questions("timing", {"timing.inflation": 2.0})
    text = quizzes.to_markdown(filled)
    assert text.count('??? success "Answer: ') == len(filled)
    assert "(right)" in text and "(wrong)" in text


def test_unknown_lesson_is_refused(monkeypatch):
    monkeypatch.chdir(REPO)
    with pytest.raises(ValueError, match="no quiz for lesson 'nope'"):
        quizzes.questions("nope")


def _page(src_uri: str) -> SimpleNamespace:
    return SimpleNamespace(file=SimpleNamespace(src_uri=src_uri))


def test_hook_appends_an_uncached_quiz_block_to_lessons_only(monkeypatch):
    monkeypatch.chdir(REPO)
    lesson = site_labs.on_page_markdown("# T\n\nBody.", _page("lessons/timing.md"), None, None)
    assert site_labs.QUIZ_HEADING in lesson
    assert '```python exec="on" id="quiz-timing" cache="off"' in lesson
    home = site_labs.on_page_markdown("# Home\n", _page("index.md"), None, None)
    assert site_labs.QUIZ_HEADING not in home
    assert "*[CUDA]:" in home  # tooltips go on every page


# --- the loader: file, entry and field in every error -------------------------------


def test_loader_reads_a_valid_quiz(docs):
    quiz = content.load(docs).quizzes["demo"]
    assert [q.prompt for q in quiz] == ["First question?", "Why does the second question exist?"]
    assert [o.correct for o in quiz[0].options] == [True, False, False]


def test_two_correct_options_name_file_question_and_field(docs):
    text = LESSON_QUIZ.replace("why: No question is filler.", "correct: true\n        why: No.")
    assert _quiz_error(docs, text) == (
        'docs/lessons/demo.quiz.yml: question 2 ("Why does the second question exist?"): '
        "options: 2 options are marked correct; mark exactly one"
    )


def test_no_correct_option_is_refused(docs):
    text = LESSON_QUIZ.replace(
        "        correct: true\n        why: Because it is.", "        why: B."
    )
    assert _quiz_error(docs, text).endswith(
        'question 1 ("First question?"): options: no option is marked correct; mark exactly one'
    )


def test_an_option_without_why_is_refused(docs):
    text = LESSON_QUIZ.replace("        why: Not this either.\n", "")
    assert _quiz_error(docs, text) == (
        'docs/lessons/demo.quiz.yml: question 1 ("First question?"): options: 3 ("Also wrong"): '
        "why: missing; add it"
    )


def test_an_empty_why_is_refused(docs):
    text = LESSON_QUIZ.replace("why: Not this either.", 'why: " "')
    assert _quiz_error(docs, text).endswith(
        'options: 3 ("Also wrong"): why: is empty: write it out'
    )


def test_an_unknown_field_is_named(docs):
    text = LESSON_QUIZ.replace("  - prompt: First question?", "  - promt: First question?")
    assert _quiz_error(docs, text) == (
        "docs/lessons/demo.quiz.yml: question 1: promt: unknown field; "
        "the fields are prompt, options, facts, values"
    )


def test_a_missing_prompt_is_named(docs):
    text = LESSON_QUIZ.replace("  - prompt: First question?\n    options:", "  - options:")
    assert _quiz_error(docs, text).endswith("question 1: prompt: missing; add it")


def test_a_yes_no_answer_must_be_quoted(docs):
    text = LESSON_QUIZ.replace("text: Wrong", "text: yes")
    assert _quiz_error(docs, text).endswith(
        "options: 2: text: must be text, not 'true': put it in quotes"
    )


def test_correct_must_be_true_or_false(docs):
    text = LESSON_QUIZ.replace(
        "correct: true\n        why: Because", "correct: right\n        why: B"
    )
    assert "options: 1 (\"Right\"): correct: must be true or false, not 'right'" in _quiz_error(
        docs, text
    )


def test_a_field_given_twice_is_refused(docs):
    text = LESSON_QUIZ.replace("why: Because it is not.", "why: A.\n        why: B.")
    message = _quiz_error(docs, text)
    assert message.startswith("docs/lessons/demo.quiz.yml: line 9, column 9: not valid YAML")
    assert "field 'why' is given twice" in message


def test_broken_yaml_names_the_line(docs):
    message = _quiz_error(docs, LESSON_QUIZ.replace("    options:\n", "    options: [\n", 1))
    assert message.startswith("docs/lessons/demo.quiz.yml: line ")
    assert "not valid YAML" in message


def test_a_quiz_file_without_its_lesson_is_refused(docs):
    (docs / "lessons" / "other.quiz.yml").write_text(LESSON_QUIZ)
    with pytest.raises(content.ContentError, match="other.quiz.yml: no lesson lessons/other.md"):
        content.load(docs)


def test_a_placeholder_in_a_plain_question_is_refused(docs):
    text = LESSON_QUIZ.replace("prompt: First question?", 'prompt: "First {x:.0f} question?"')
    assert _quiz_error(docs, text).endswith(
        "prompt: uses the placeholder {x:.0f} but the question names no facts and values; "
        "add them or remove the braces"
    )


def test_a_templated_question_needs_facts_and_values(docs):
    text = LESSON_QUIZ + TEMPLATED.replace("    facts: [demo.x]\n", "")
    assert _quiz_error(docs, text).endswith(
        'question 3 ("About how large is x ({measured})?"): facts: missing: '
        "a templated question needs both facts and values"
    )


def test_a_values_function_outside_the_site_package_is_refused(docs):
    text = LESSON_QUIZ + TEMPLATED.replace("gpulesson.site.quiz_values:decades", "os:system")
    assert "question 3 (" in _quiz_error(docs, text)
    assert "values: 'os:system' must name a function in gpulesson.site" in _quiz_error(docs, text)


def test_a_values_function_that_does_not_exist_is_refused(docs):
    text = LESSON_QUIZ + TEMPLATED.replace(":decades", ":nope")
    assert _quiz_error(docs, text).endswith(
        "values: 'gpulesson.site.quiz_values:nope': gpulesson.site.quiz_values has no function nope"
    )


def test_hook_turns_a_bad_file_into_a_build_error(docs):
    (docs / "lessons" / "demo.quiz.yml").write_text(LESSON_QUIZ.replace("correct: true", "x: 1"))
    with pytest.raises(PluginError, match=r"demo.quiz.yml: question 1 .*x: unknown field"):
        site_labs.on_config({"docs_dir": str(docs)})


def test_hook_reads_the_docs_dir_of_the_config_and_applies_the_lesson_rules(docs):
    from mkdocs.exceptions import PluginError

    with pytest.raises(PluginError, match="lesson rules are broken") as refused:
        site_labs.on_config({"docs_dir": str(docs)})  # 2 options, no prediction, no sources
    assert "docs/lessons/demo.md: sources:" in str(refused.value)
    third = "      - text: To waste time\n        why: Quizzes are not filler.\n"
    (docs / "lessons" / "demo.quiz.yml").write_text(LESSON_QUIZ + third + TEMPLATED)
    links = [f"[{n}](https://{n}.org/)" for n in ("a", "b", "c")]
    sources = "\n".join(f"- {link}" for link in links)
    (docs / "lessons" / "demo.md").write_text(
        f"# Demo\n\nFacts from {', '.join(links)}.\n\n## Sources\n\n{sources}\n"
    )
    site_labs.on_config({"docs_dir": str(docs)})
    assert list(content.current().quizzes) == ["demo"]
    assert quizzes.questions("demo")[0].prompt == "First question?"


# --- templated questions --------------------------------------------------------------


def test_a_templated_question_renders_from_the_given_facts(docs):
    (docs / "lessons" / "demo.quiz.yml").write_text(LESSON_QUIZ + TEMPLATED)
    content.configure(docs)
    q = quizzes.page_questions("demo", {"demo.x": 1234.5})[2]
    assert q.prompt == "About how large is x (1,230)?"
    assert [o.text for o in q.options] == ["120", "1,200", "12,000"]
    assert [o.correct for o in q.options] == [False, True, False]
    assert q.options[1].why == "It is 1,230."


def test_a_templated_question_reads_the_facts_published_on_the_page(docs):
    (docs / "lessons" / "demo.quiz.yml").write_text(LESSON_QUIZ + TEMPLATED)
    content.configure(docs)
    facts.reset()
    facts.begin_page("lessons/demo.md")
    with pytest.raises(ValueError, match=r"demo.quiz.yml: question 3 .*facts: no fact 'demo.x'"):
        quizzes.section_markdown("demo")
    facts.publish("demo.x", 3.0)
    section = quizzes.section_markdown("demo")
    assert "**Question 3.** About how large is x (3.00)?" in section
    assert "&quot;text&quot;: &quot;3.0&quot;, &quot;correct&quot;: true" in section
    facts.reset()


def test_a_placeholder_the_function_does_not_return_names_the_field(docs):
    bad = TEMPLATED.replace('"{tenfold}"', '"{twice}"')
    (docs / "lessons" / "demo.quiz.yml").write_text(LESSON_QUIZ + bad)
    content.configure(docs)
    with pytest.raises(ValueError) as error:
        quizzes.page_questions("demo", {"demo.x": 2.0})
    assert str(error.value).startswith(
        'docs/lessons/demo.quiz.yml: question 3 ("About how large is x ({measured})?"): '
        "options: 3: text: the placeholder {twice} is not among the values"
    )


def test_two_options_that_read_the_same_are_refused(docs):
    same = TEMPLATED.replace('"{tenfold}"', '"{value}"')
    (docs / "lessons" / "demo.quiz.yml").write_text(LESSON_QUIZ + same)
    content.configure(docs)
    with pytest.raises(ValueError, match=r"options: options 2 and 3 both read '2.0'"):
        quizzes.page_questions("demo", {"demo.x": 2.0})


# --- an edit to a quiz file reaches the page, cache or not ----------------------------


def _convert(text: str) -> str:
    md = markdown.Markdown(
        extensions=["pymdownx.superfences", "md_in_html", "pymdownx.details", "abbr"],
        extension_configs={"pymdownx.superfences": {"custom_fences": exec_cache.custom_fences()}},
    )
    return md.convert(text)


def test_a_yaml_edit_changes_the_rendered_quiz_with_the_cache_on(docs, tmp_path):
    context = exec_cache.CacheContext("pkg", "snip", "3.11.0", "2.13.0", "2.4.6", "{}", "")
    policy = exec_cache.cache_policy({})
    store = exec_cache.ResultStore(tmp_path / "cache")
    exec_cache.configure(exec_cache.ExecSettings(store=store, context=context, policy=policy))
    try:
        content.configure(docs)
        page = site_labs.quiz_section("demo")
        first = _convert(page)
        quiz = docs / "lessons" / "demo.quiz.yml"
        quiz.write_text(quiz.read_text().replace("Because it is not.", "A changed reason."))
        content.configure(docs)
        second = _convert(page)
    finally:
        exec_cache.configure(
            exec_cache.ExecSettings(None, None, exec_cache.CachePolicy(False, False, "not set up"))
        )
    assert "Because it is not." in first and "A changed reason." not in first
    assert "A changed reason." in second and "Because it is not." not in second
    assert 'class="gl-quiz" data-quiz="demo" data-questions="' in second
    assert "<details" in second  # the static copy's collapsible answers
