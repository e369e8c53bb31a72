"""Content files checked by the JSON Schemas shipped in the package: every refusal they make."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gpulesson import schema_check
from gpulesson.site import content, error_examples, labs
from tests.conftest import REPO

SCHEMAS = REPO / "gpulesson" / "site" / "schemas"

QUIZ = """\
questions:
  - prompt: First question?
    options:
      - text: Right
        correct: true
        why: Because it is.
      - text: Wrong
        why: Because it is not.
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
    root = tmp_path / "docs"
    (root / "lessons").mkdir(parents=True)
    (root / "lessons" / "demo.md").write_text("# Demo\n")
    (root / "lessons" / "demo.quiz.yml").write_text(QUIZ)
    (root / "glossary.yml").write_text(GLOSSARY)
    (root / "labs.yml").write_text((REPO / "docs" / "labs.yml").read_text())
    yield root
    content.reset()


def _error(docs: Path, name: str, text: str) -> str:
    (docs / name).write_text(text)
    with pytest.raises(content.ContentError) as error:
        content.load(docs)
    return str(error.value)


def _properties(schema: dict, where: str = "") -> list[tuple[str, dict]]:
    """Every property schema under ``schema``, named by where it sits."""
    found = []
    for name, sub in schema.get("properties", {}).items():
        found.append((f"{where}.{name}", sub))
        found += _properties(sub, f"{where}.{name}")
        if isinstance(sub.get("items"), dict):
            found += _properties(sub["items"], f"{where}.{name}[]")
    for key in ("additionalProperties", "items"):
        if isinstance(schema.get(key), dict):
            found += _properties(schema[key], f"{where}{'[]' if key == 'items' else '.*'}")
    for pattern, sub in schema.get("patternProperties", {}).items():
        found.append((f"{where}.{pattern}", sub))
    return found


@pytest.mark.parametrize("name", sorted(p.name for p in SCHEMAS.glob("*.schema.json")))
def test_every_schema_is_valid_and_every_property_has_a_fix(name):
    schema = schema_check.load_schema(SCHEMAS / name)
    properties = _properties(dict(schema))
    assert properties
    assert [where for where, sub in properties if not sub.get("description")] == []


def test_the_course_content_passes_its_schemas():
    course = content.load(REPO / "docs")
    assert course.quizzes and course.terms and course.labs.routes
    assert error_examples.load(REPO / "docs" / "errors")


def test_the_schemas_name_the_same_fields_as_the_code():
    labs_schema = schema_check.load_schema(SCHEMAS / "labs.schema.json")
    line = labs_schema["properties"]["dispatch"]["properties"]["lines"]["items"]
    assert list(line["properties"]) == ["code", *labs.MACHINE_KEYS]
    catalogue = schema_check.load_schema(SCHEMAS / "error_examples.schema.json")
    size = catalogue["additionalProperties"]["properties"]["expect"]["patternProperties"]["_bytes$"]
    assert size["pattern"] == error_examples._SIZE_TEXT.pattern


# --- quizzes ----------------------------------------------------------------------------

QUIZ_CASES = [
    (
        QUIZ.replace("      - text: Wrong\n        why: Because it is not.\n", ""),
        'question 1 ("First question?"): options: has 1 option: '
        "give at least two options, exactly one marked correct",
    ),
    (QUIZ.replace("    options:\n", "    options: []\n    x:\n"), "unknown field"),
    (
        "questions: []\n",
        "docs/lessons/demo.quiz.yml: questions: must be a list with at least one item",
    ),
    (
        "- a question\n",
        "docs/lessons/demo.quiz.yml: expected fields (questions), got ['a question']",
    ),
    (
        "questions:\n  - Why?\n",
        "docs/lessons/demo.quiz.yml: question 1: expected fields "
        "(prompt, options, facts, values, before), got 'Why?'",
    ),
    (
        QUIZ.replace("prompt: First question?", "prompt: 42"),
        "docs/lessons/demo.quiz.yml: question 1: prompt: must be text, not 42: put it in quotes",
    ),
    (
        QUIZ.replace("    options:", "    values: gpulesson.course.common:decades\n    options:"),
        'question 1 ("First question?"): facts: missing: '
        "a templated question needs both facts and values",
    ),
    (
        QUIZ.replace(
            "    options:",
            "    facts: [timing inflation]\n"
            "    values: gpulesson.course.common:decades\n    options:",
        ),
        "facts: 'timing inflation' is not a fact name: "
        "name a fact the page publishes, such as timing.inflation",
    ),
    (
        QUIZ.replace("    options:", "    facts: []\n    values: x:y\n    options:"),
        'question 1 ("First question?"): facts: must be a list with at least one item',
    ),
    (
        QUIZ.replace("      - text: Wrong\n", "      - 3\n").replace(
            "        why: Because it is not.\n", ""
        ),
        "options: 2: expected fields (text, why, correct), got 3",
    ),
    (
        QUIZ.replace("        correct: true\n", "        1: true\n"),
        'options: 1 ("Right"): 1: a field name must be text: put it in quotes',
    ),
    (
        QUIZ.replace("    options:", "    before: [demo-x]\n    options:"),
        "question 1 (\"First question?\"): before: must be text, not ['demo-x']: put it in quotes",
    ),
    (
        QUIZ.replace("    options:", '    before: "demo x"\n    options:'),
        "before: 'demo x' is not a block id: name the id of the lesson's executed block",
    ),
    (
        QUIZ.replace("    options:", "    before: demo-x\n    options:"),
        "question 1 (\"First question?\"): before: no executed block with id 'demo-x' in "
        'docs/lessons/demo.md: name the id of the ```python exec="on" id="..."``` block '
        "that computes the answer (the lesson's ids: none)",
    ),
]


@pytest.mark.parametrize(("text", "message"), QUIZ_CASES)
def test_a_quiz_the_schema_refuses_names_file_entry_field_and_fix(docs, text, message):
    error = _error(docs, "lessons/demo.quiz.yml", text)
    assert error.startswith("docs/lessons/demo.quiz.yml: ")
    assert message in error


def test_an_unknown_field_is_named_before_anything_else_in_its_entry(docs):
    text = QUIZ.replace("    options:\n", "    optoins:\n", 1)
    assert _error(docs, "lessons/demo.quiz.yml", text) == (
        'docs/lessons/demo.quiz.yml: question 1 ("First question?"): optoins: unknown field; '
        "the fields are prompt, options, facts, values, before"
    )


# --- glossary ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("terms:\n", "docs/glossary.yml: terms: must be a list with at least one item"),
        ("{}\n", "docs/glossary.yml: terms: missing; add it"),
        (
            GLOSSARY.replace("name: GPU", "name: 7"),
            "docs/glossary.yml: term 1: name: must be text, not 7: put it in quotes",
        ),
        (
            GLOSSARY.replace("    lesson: demo\n", "    lesson: ''\n"),
            'docs/glossary.yml: term 1 ("GPU"): lesson: is empty: write it out',
        ),
        (
            "terms:\n  - GPU\n",
            "docs/glossary.yml: term 1: expected fields "
            "(name, expansion, lazy, meaning, lesson, tooltip), got 'GPU'",
        ),
    ],
)
def test_a_glossary_the_schema_refuses_names_file_entry_and_field(docs, text, message):
    assert _error(docs, "glossary.yml", text) == message


# --- labs -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            "dispatch:\n  machines:",
            "dispatch: []\nx:\n  machines:",
            "docs/labs.yml: x: unknown field; the fields are routes, dispatch",
        ),
        (
            "    - key: mac\n",
            "    - 7\n    - key: mac\n",
            "docs/labs.yml: dispatch: machines: 2: expected fields (key, label), got 7",
        ),
        (
            "routes:\n",
            "routes: []\nold_routes:\n",
            "docs/labs.yml: old_routes: unknown field; the fields are routes, dispatch",
        ),
        (
            "    watch_out: Capped by your card's memory; driver and wheel must agree\n",
            "",
            'docs/labs.yml: routes: 1 ("Local NVIDIA card"): watch_out: missing; add it',
        ),
    ],
)
def test_a_labs_file_the_schema_refuses_names_file_entry_and_field(tmp_path, old, new, message):
    docs = tmp_path / "docs"
    shutil.copytree(REPO / "docs", docs, ignore=shutil.ignore_patterns("notebooks", "assets"))
    text = (REPO / "docs" / "labs.yml").read_text()
    assert old in text
    (docs / "labs.yml").write_text(text.replace(old, new, 1))
    with pytest.raises(content.ContentError) as error:
        content.load(docs)
    assert str(error.value) == message


def test_a_dispatch_line_without_a_machine_names_the_line(tmp_path):
    docs = tmp_path / "docs"
    shutil.copytree(REPO / "docs", docs, ignore=shutil.ignore_patterns("notebooks", "assets"))
    text = (REPO / "docs" / "labs.yml").read_text()
    first_cpu = text.index("      cpu:", text.index("  lines:"))
    end = text.index("\n", first_cpu) + 1
    (docs / "labs.yml").write_text(text[:first_cpu] + text[end:])
    with pytest.raises(content.ContentError) as error:
        content.load(docs)
    assert str(error.value).startswith("docs/labs.yml: dispatch: lines: 1 (")
    assert str(error.value).endswith("): cpu: missing; add it")


# --- the example error messages ---------------------------------------------------------


@pytest.mark.parametrize(
    ("catalogue", "message"),
    [
        ("a: 3\n", "examples.yml: entry 'a': write a mapping with 'about' and 'expect'"),
        (
            'a:\n  about: ""\n  expect: {kind: cuda_oom}\n',
            "examples.yml: entry 'a', field 'about': is empty: write it out",
        ),
        (
            "a:\n  about: x\n",
            "examples.yml: entry 'a', field 'expect': missing: "
            "give at least the kind, e.g. kind: cuda_oom",
        ),
        (
            "a:\n  about: x\n  expect: 7\n",
            "examples.yml: entry 'a', field 'expect': give at least the kind, e.g. kind: cuda_oom",
        ),
        (
            "a:\n  about: x\n  expect: {kind: cuda_oom, timeout_s: soon}\n",
            "examples.yml: entry 'a', field 'timeout_s': 'soon' is not a number of seconds: "
            "write the seconds the message states, e.g. 600.0",
        ),
        (
            "a:\n  about: x\n  expect: {kind: cuda_oom, supported_capabilities: sm_80}\n",
            "examples.yml: entry 'a', field 'supported_capabilities': 'sm_80' is not a list: "
            "write a list, e.g. [sm_80, sm_90]",
        ),
        (
            "a:\n  about: x\n  expect: {kind: cuda_oom, free_bytes: 1.5}\n",
            "examples.yml: entry 'a', field 'free_bytes': 1.5 is not a size: "
            "write e.g. 3.49 GiB or 512",
        ),
        (
            "a:\n  about: x\n  expect: {kind: 5}\n",
            "examples.yml: entry 'a', field 'kind': must be text, not 5: put it in quotes",
        ),
        ("1: x\n", "examples.yml: entry '1': a field name must be text: put it in quotes"),
    ],
)
def test_an_example_catalogue_the_schema_refuses_names_entry_and_field(
    tmp_path, catalogue, message
):
    folder = tmp_path / "errors"
    folder.mkdir()
    (folder / "examples.yml").write_text(catalogue)
    (folder / "a.txt").write_text("CUDA out of memory")
    with pytest.raises(ValueError) as error:
        error_examples.load(folder)
    assert str(error.value) == message


def test_the_schema_files_are_package_data():
    pyproject = (REPO / "pyproject.toml").read_text()
    assert '"gpulesson.site" = ["schemas/*.json"]' in pyproject
    for path in SCHEMAS.glob("*.schema.json"):
        assert json.loads(path.read_text())["$id"] == path.name


@pytest.mark.parametrize(
    ("name", "old", "new", "expected"),
    [
        (
            "lessons/demo.quiz.yml",
            "text: Wrong",
            'text: "[x](#){: onfocus=alert(1) autofocus }"',
            "): text: carries an attribute list",
        ),
        (
            "lessons/demo.quiz.yml",
            "why: Because it is.",
            "why: <img src=x onerror=alert(1)>",
            'options: 1 ("Right"): why: carries raw HTML',
        ),
        (
            "glossary.yml",
            "meaning: A throughput machine.",
            "meaning: '[GPU](javascript:alert(1))'",
            'term 1 ("GPU"): meaning: carries a script or data URL',
        ),
        (
            "glossary.yml",
            "lazy: A faster CPU.",
            "lazy: '![](https://example.com/track.png)'",
            'term 1 ("GPU"): lazy: carries a remote image',
        ),
    ],
)
def test_authored_markdown_that_could_run_or_load_something_is_refused(
    docs, name, old, new, expected
):
    text = (docs / name).read_text()
    assert old in text
    message = _error(docs, name, text.replace(old, new))
    assert expected in message
    assert "write plain Markdown" in message


def test_markup_inside_code_spans_and_relative_links_stay_allowed(docs):
    text = (docs / "glossary.yml").read_text()
    safe = "meaning: 'Write `<img onerror=x>` as code; see [timing](../timing/) *first*.'"
    (docs / "glossary.yml").write_text(text.replace("meaning: A throughput machine.", safe))
    assert content.load(docs).terms[0].meaning.startswith("Write `<img")


def test_the_course_content_carries_no_markup_hazard():
    assert content.load(REPO / "docs").quizzes  # every quiz, the glossary and the labs load
