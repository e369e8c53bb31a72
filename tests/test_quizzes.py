"""Quizzes: data files beside the lessons, checked on load, filled from facts, and their
predict-then-reveal questions shown before the block that computes the answer."""

from __future__ import annotations

import re
import shutil
import sys
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
    before: demo-x
    facts: [demo.x]
    values: gpulesson.course.common:decades
    options:
      - text: "{tenth}"
        why: Ten times too small.
      - text: "{value}"
        correct: true
        why: "It is {measured}."
      - text: "{tenfold}"
        why: Ten times too large.
"""

LESSON = """\
# Demo

Some prose before the block.

```python exec="on" id="demo-x"
print("x is computed here")
```

After the block.
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
    (root / "lessons" / "demo.md").write_text(LESSON)
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
    timing = (REPO / "docs" / "lessons" / "timing.md").read_text(encoding="utf-8")
    lesson = site_labs.on_page_markdown(timing, _page("lessons/timing.md"), None, None)
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
        "the fields are prompt, options, facts, values, before"
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


def test_a_values_function_outside_the_course_package_is_refused(docs):
    text = LESSON_QUIZ + TEMPLATED.replace("gpulesson.course.common:decades", "os:system")
    assert "question 3 (" in _quiz_error(docs, text)
    assert "values: 'os:system' must name a function in gpulesson.course" in _quiz_error(docs, text)
    text = LESSON_QUIZ + TEMPLATED.replace("gpulesson.course.common:", "gpulesson.site.hooks:")
    assert "'gpulesson.site.hooks:decades' must name a function in gpulesson.course" in (
        _quiz_error(docs, text)
    )


def test_the_build_process_checks_a_values_name_without_importing_the_lesson_module(
    docs, monkeypatch
):
    """The check reads the module's source: a lesson module that imports torch stays out of
    the MkDocs process, which imports no torch."""
    text = LESSON_QUIZ + TEMPLATED.replace(
        "gpulesson.course.common:decades", "gpulesson.course.decoding:decode_bound_readings"
    )
    (docs / "lessons" / "demo.quiz.yml").write_text(text)
    monkeypatch.delitem(sys.modules, "gpulesson.course.decoding", raising=False)
    content.configure(docs)
    assert "gpulesson.course.decoding" not in sys.modules
    text = text.replace(":decode_bound_readings", ":decode_bound")
    assert _quiz_error(docs, text).endswith(
        "gpulesson.course.decoding has no function decode_bound"
    )


def test_a_values_function_that_does_not_exist_is_refused(docs):
    text = LESSON_QUIZ + TEMPLATED.replace(":decades", ":nope")
    assert _quiz_error(docs, text).endswith(
        "values: 'gpulesson.course.common:nope': gpulesson.course.common has no function nope"
    )


COURSE_NAME = re.compile(r"gpulesson\.course\.(\w+)[.:](\w+)")


def test_every_function_a_quiz_file_names_is_where_it_says():
    """Comments name the function a question's numbers come from, as ``values:`` does: each
    name, in a comment or not, must be a function of that lesson module."""
    wrong = []
    for path in sorted((REPO / "docs" / "lessons").glob("*.quiz.yml")):
        for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for module, name in COURSE_NAME.findall(line):
                try:
                    quizzes.check_values(f"gpulesson.course.{module}:{name}")
                except ValueError as exc:
                    wrong.append(f"{path.name}:{line_no}: {exc}")
    assert wrong == []


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
        LESSON.replace("Some prose", f"Facts from {', '.join(links)}. Some prose")
        + f"\n## Sources\n\n{sources}\n"
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
    facts.begin_block("demo-x")
    facts.publish("demo.x", 3.0)
    facts.end_block()
    section = quizzes.section_markdown("demo")
    assert "**Predict.** About how large is x (3.00)?" in section
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


# --- predict-then-reveal questions: placed before the block that computes the answer ------

PREDICT_FORM = "Before running the next block:"


def test_every_quiz_has_a_predict_then_reveal_question_placed_before_its_block():
    """Each quiz asks for a number before the block that computes it, and never after."""
    course = content.load(REPO / "docs")
    for stem, questions in course.quizzes.items():
        lesson = (REPO / "docs" / "lessons" / f"{stem}.md").read_text(encoding="utf-8")
        blocks = quizzes.executed_block_ids(lesson)
        predicted = [q for q in questions if q.before]
        assert any(q.facts for q in predicted), f"{stem}: no predict-then-reveal question"
        for q in predicted:
            assert q.before in blocks, (stem, q.before)
            assert q.prompt.startswith(PREDICT_FORM), (stem, q.prompt)
            page = quizzes.insert_slots(lesson, [q.before])
            slot_text = f'data-before="{q.before}"></div>'
            slot = page.index(slot_text) + len(slot_text)
            fence_line = page.rindex("\n", 0, page.index(f'id="{q.before}"')) + 1
            assert page[slot:fence_line].strip() == "", (stem, q.before)  # right before it
        # a question that reads the page's numbers asks before they are shown
        assert [q.prompt for q in questions if q.facts and not q.before] == [], stem


def test_no_quiz_asks_the_reader_to_recall_a_number_the_page_printed():
    for stem, questions in content.load(REPO / "docs").quizzes.items():
        for q in questions:
            assert "scrolling back" not in q.prompt.lower(), (stem, q.prompt)
            assert not re.match(r"what (does|is) \w+ (refer|mean)", q.prompt.lower()), q.prompt


def test_a_before_that_names_no_block_of_the_lesson_names_file_question_field_and_fix(docs):
    text = LESSON_QUIZ + TEMPLATED.replace("before: demo-x", "before: demo-y")
    assert _quiz_error(docs, text) == (
        'docs/lessons/demo.quiz.yml: question 3 ("About how large is x ({measured})?"): '
        "before: no executed block with id 'demo-y' in docs/lessons/demo.md: name the id of "
        'the ```python exec="on" id="..."``` block that computes the answer '
        "(the lesson's ids: demo-x)"
    )


def test_a_before_that_is_not_an_id_is_refused_by_the_schema(docs):
    text = LESSON_QUIZ + TEMPLATED.replace("before: demo-x", 'before: "demo x"')
    assert _quiz_error(docs, text).startswith(
        'docs/lessons/demo.quiz.yml: question 3 ("About how large is x ({measured})?"): '
        "before: 'demo x' is not a block id: name the id of the lesson's executed block"
    )


def test_the_block_a_question_stands_before_must_publish_a_fact_it_reads(docs):
    (docs / "lessons" / "demo.quiz.yml").write_text(LESSON_QUIZ + TEMPLATED)
    content.configure(docs)
    facts.reset()
    facts.begin_page("lessons/demo.md")
    facts.begin_block("earlier")
    facts.publish("demo.x", 3.0)
    facts.end_block()
    try:
        with pytest.raises(ValueError) as error:
            quizzes.page_questions("demo")
    finally:
        facts.reset()
    assert str(error.value) == (
        'docs/lessons/demo.quiz.yml: question 3 ("About how large is x ({measured})?"): '
        "before: the block 'demo-x' publishes none of the facts the question reads "
        "(demo.x by 'earlier'): name the block that computes the answer"
    )


def test_the_section_prints_the_prediction_in_a_wrapper_with_its_static_copy(docs):
    (docs / "lessons" / "demo.quiz.yml").write_text(LESSON_QUIZ + TEMPLATED)
    content.configure(docs)
    section = quizzes.section_markdown("demo", {"demo.x": 1234.5})
    wrapper, rest = section.split("</div>\n\n</div>\n\n", 1)
    assert wrapper.startswith('<div class="gl-predict" data-before="demo-x" markdown="block">')
    assert 'class="gl-quiz" data-quiz="demo" data-predict="demo-x"' in wrapper
    assert "**Predict.** About how large is x (1,230)?" in wrapper
    assert '??? success "Answer: B"' in wrapper  # the no-JavaScript reveal
    assert "x (1,230)" not in rest and "**Question 2.**" in rest and "**Question 3.**" not in rest
    assert "a question placed in the lesson" in rest  # the end says where the other one is


def test_the_hook_moves_the_prediction_before_its_block_in_the_html(docs, monkeypatch):
    """on_page_markdown leaves a slot, the quiz block prints the question, on_page_content
    moves it: the question ends up before the block's output, and nowhere else."""
    (docs / "lessons" / "demo.quiz.yml").write_text(LESSON_QUIZ + TEMPLATED)
    content.configure(docs)
    page = _page("lessons/demo.md")
    lesson = site_labs.on_page_markdown(LESSON, page, None, None)
    assert lesson.index('<div class="gl-predict-slot" data-before="demo-x">') < lesson.index(
        'id="demo-x"'
    )
    # What markdown-exec makes of the page: the block's output, then the quiz's output.
    printed = lesson.replace(
        lesson[lesson.index('```python exec="on" id="demo-x"') : lesson.index("After the block")],
        "Output of demo-x.\n\n",
    )
    quiz_block = printed[printed.index('```python exec="on" id="quiz-demo"') :]
    quiz_block = quiz_block[: quiz_block.index("```\n", 10) + 4]
    printed = printed.replace(quiz_block, quizzes.section_markdown("demo", {"demo.x": 2.0}))
    html = site_labs.on_page_content(_convert(printed), page, None, None)
    question = html.index('class="gl-predict"')
    assert html.index("Some prose before the block.") < question < html.index("Output of demo-x.")
    assert html.count("About how large is x") == 2  # the script's copy and the static one
    assert "gl-predict-slot" not in html
    heading = html.index("Check yourself")
    assert question < heading and html.index("First question?") > heading


def test_a_question_on_a_withheld_fact_is_left_out_and_its_slot_filled_empty(docs):
    """A build that could not measure demo.x has no number to reveal: the question is left
    out, and its slot before the block is filled with nothing, so the build goes on."""
    (docs / "lessons" / "demo.quiz.yml").write_text(LESSON_QUIZ + TEMPLATED)
    content.configure(docs)
    facts.reset()
    facts.begin_page("lessons/demo.md")
    facts.begin_block("demo-x")
    facts.withhold("demo.x", "this machine has no C++ compiler")
    facts.end_block()
    try:
        assert [q.prompt for q in quizzes.page_questions("demo")] == [
            "First question?",
            "Why does the second question exist?",
        ]
        section = quizzes.section_markdown("demo")
    finally:
        facts.reset()
    assert section.startswith('<div class="gl-predict" data-before="demo-x"></div>')
    assert "About how large" not in section and "placed in the lesson" not in section
    page = _page("lessons/demo.md")
    lesson = site_labs.on_page_markdown(LESSON, page, None, None)
    printed = lesson[: lesson.index('```python exec="on" id="quiz-demo"')] + section
    html = site_labs.on_page_content(_convert(printed), page, None, None)
    assert "gl-predict-slot" not in html and "About how large" not in html


def test_a_question_with_no_slot_or_a_slot_with_no_question_stops_the_build(docs):
    (docs / "lessons" / "demo.quiz.yml").write_text(LESSON_QUIZ + TEMPLATED)
    content.configure(docs)
    page = _page("lessons/demo.md")
    rendered = _convert(quizzes.section_markdown("demo", {"demo.x": 2.0}))
    with pytest.raises(PluginError, match=r"no slot before block 'demo-x'"):
        site_labs.on_page_content(rendered, page, None, None)
    slot = '<div class="gl-predict-slot" data-before="demo-x"></div>'
    with pytest.raises(PluginError, match=r"no question was rendered for the slot .*'demo-x'"):
        site_labs.on_page_content(f"<p>Intro.</p>\n{slot}\n", page, None, None)
    with pytest.raises(PluginError, match=r"demo.quiz.yml: before: no executed block with id"):
        site_labs.on_page_markdown("# Demo, its block gone\n", page, None, None)


def test_the_course_quiz_leaves_a_slot_before_every_predicted_block(monkeypatch):
    monkeypatch.chdir(REPO)
    for stem, questions in content.load(REPO / "docs").quizzes.items():
        lesson = (REPO / "docs" / "lessons" / f"{stem}.md").read_text(encoding="utf-8")
        page = site_labs.on_page_markdown(lesson, _page(f"lessons/{stem}.md"), None, None)
        for q in questions:
            if q.before:
                slot = page.index(f'<div class="gl-predict-slot" data-before="{q.before}">')
                assert slot < page.index(f'id="{q.before}"'), (stem, q.before)


# --- a real strict build: the question's element comes before the block's output ------------

FIXTURE_MKDOCS = """\
site_name: fixture
strict: true
hooks:
  - gpulesson/site/hooks.py
  - gpulesson/site/labs_hook.py
plugins:
  - markdown-exec:
      languages: [bash, console, pycon]
markdown_extensions:
  - abbr
  - admonition
  - attr_list
  - md_in_html
  - tables
  - pymdownx.details
  - pymdownx.superfences
"""

FIXTURE_LESSON = """\
# Demo

Sources: [one](https://a.org/one), [two](https://b.org/two), [three](https://c.org/three).

!!! note "Inside an admonition"
    Prose before the block.

    ```python exec="on" id="demo-x"
    from gpulesson.site import facts

    facts.publish("demo.x", 1234.5, kind=facts.PREDICTED)
    print("THE BLOCK'S OUTPUT")
    ```

After the block.

## Sources

- [One](https://a.org/one)
- [Two](https://b.org/two)
- [Three](https://c.org/three)
"""


def test_a_real_build_shows_the_prediction_before_the_block_that_computes_it(tmp_path):
    from tests.test_exec_cache import _project, _run_build

    project = _project(tmp_path, {"index.md": "# Home\n"})
    (project / "mkdocs.yml").write_text(FIXTURE_MKDOCS)
    docs = project / "docs"
    (docs / "lessons").mkdir()
    (docs / "lessons" / "demo.md").write_text(FIXTURE_LESSON)
    third = "      - text: To waste time\n        why: Quizzes are not filler.\n"
    (docs / "lessons" / "demo.quiz.yml").write_text(LESSON_QUIZ + third + TEMPLATED)
    (docs / "glossary.yml").write_text(GLOSSARY)
    shutil.copy(REPO / "docs" / "labs.yml", docs / "labs.yml")
    result = _run_build(project, tmp_path / "cache")
    assert result.returncode == 0, result.stderr[-3000:]
    html = (project / "site" / "lessons" / "demo" / "index.html").read_text()
    question = html.index('class="gl-predict"')
    assert html.index("Prose before the block.") < question < html.index("THE BLOCK'S OUTPUT")
    assert "About how large is x (1,230)?" in html[question : html.index("THE BLOCK")]
    assert html.index('id="check-yourself"') > html.index("After the block.") > question
    assert "gl-predict-slot" not in html and html.count('data-predict="demo-x"') == 1


def test_the_built_course_shows_each_prediction_before_its_block(built_site: Path):
    """In the built site every predict-then-reveal question stands before the quiz heading,
    and on the software-stack page right before the output of the block that computes it."""
    course = content.load(REPO / "docs")
    for stem, questions in course.quizzes.items():
        html = (built_site / "lessons" / stem / "index.html").read_text(encoding="utf-8")
        assert "gl-predict-slot" not in html, stem
        for q in questions:
            if q.before:
                wrapper = html.index(f'class="gl-predict" data-before="{q.before}"')
                assert wrapper < html.index('id="check-yourself"'), (stem, q.before)
    html = (built_site / "lessons" / "software-stack" / "index.html").read_text(encoding="utf-8")
    question = html.index('class="gl-predict" data-before="stack-gib"')
    output = html.index("A 24 GiB card:")  # what the stack-gib block prints
    assert question < output
    between = re.sub(r"<[^>]+>", "", html[question:output])
    assert "Before running the next block" in between and "Answer: " in between
