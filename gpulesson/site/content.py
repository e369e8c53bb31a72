"""The course content kept as data beside the lessons, read and checked once per build.

The files, all under the MkDocs ``docs_dir`` and kept out of the built site
(``exclude_docs`` in ``mkdocs.yml``):

- ``lessons/<stem>.quiz.yml``: the quiz of ``lessons/<stem>.md``
  (:class:`gpulesson.site.quizzes.Question`),
- ``glossary.yml``: the glossary (:class:`gpulesson.site.glossary.Term`),
- ``labs.yml``: the routes to a GPU and the device-dispatch script
  (:mod:`gpulesson.site.labs`). The cost calculator's example rates are not
  here: they are package data, ``gpulesson/results/example_rates.json``, shared
  with ``gpulesson budget --gpu`` (:func:`gpulesson.results.datasheets.example_rates`).

:func:`load` checks each file against its JSON Schema, shipped in the package
(``gpulesson/site/schemas/quiz.schema.json``, ``glossary.schema.json``,
``labs.schema.json``: the fields, their types, which are required; each property's
``description`` is the fix a message gives), then what a schema cannot say (exactly
one right answer, a question's ``before:`` names a block of its lesson, a term's lesson
exists, placeholders and values agree, a route's rates), and turns them into the frozen
dataclasses of those modules. Anything malformed raises a :class:`ContentError` whose
message names the file, the entry, the field and the fix. The site hook
(``labs_hook.on_config``) calls :func:`configure` with ``config["docs_dir"]`` once per
build; executed blocks and the renderers then read :func:`current`, which outside a build
(tests, doctests) loads ``<cwd>/docs`` once.

>>> c = current()
>>> "timing" in c.quizzes and c.terms[0].name
'GPU'
>>> load(Path("/nonexistent/docs"))
Traceback (most recent call last):
...
gpulesson.site.content.ContentError: /nonexistent/docs: no such folder: point docs_dir at docs/
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gpulesson import schema_check
from gpulesson.memory.cost import card_rates
from gpulesson.site.glossary import Term
from gpulesson.site.labs import MACHINE_KEYS, DispatchLine, Machine, Route, fill_route_cost
from gpulesson.site.quizzes import Option, Question, check_values, executed_block_ids
from gpulesson.text import markup_hazard

QUIZ_SUFFIX = ".quiz.yml"
GLOSSARY_FILE = "glossary.yml"
LABS_FILE = "labs.yml"
_PLACEHOLDER = re.compile(r"\{[A-Za-z_][\w.]*(?::[^{}]*)?\}")


#: A route's fields, each a cell of the routes table; a '|' in one must be escaped.
ROUTE_FIELDS = ("route", "cost", "setup", "best_for", "watch_out")
_BARE_PIPE = re.compile(r"(?<!\\)\|")


class ContentError(ValueError):
    """A content file breaks a rule; the message names the file, the entry and the field."""


@dataclass(frozen=True)
class LabsContent:
    """The labs' data from ``labs.yml`` (route costs may still hold rate placeholders)."""

    routes: tuple[Route, ...]
    machines: tuple[Machine, ...]
    dispatch: tuple[DispatchLine, ...]


@dataclass(frozen=True)
class Content:
    """Everything the content files hold, checked; ``lessons`` are the lesson file stems."""

    docs_dir: Path
    lessons: frozenset[str]
    quizzes: Mapping[str, tuple[Question, ...]]
    terms: tuple[Term, ...]
    labs: LabsContent

    def quiz_file(self, stem: str) -> str:
        """The quiz file of lesson ``stem`` as error messages name it.

        >>> current().quiz_file("timing")
        'docs/lessons/timing.quiz.yml'
        """
        return f"{self.docs_dir.name}/lessons/{stem}{QUIZ_SUFFIX}"


# --- reading YAML ---------------------------------------------------------------


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # libyaml's parser when built
    """YAML's safe loader, refusing a field given twice in one entry."""


def _mapping(loader: _Loader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if not isinstance(key, str):
            continue
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"field {key!r} is given twice", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def _read_yaml(path: Path, label: str) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ContentError(f"{label}: file missing: the site needs it") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ContentError(f"{label}: cannot be read ({exc})") from None
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 (_Loader is a SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise ContentError(f"{label}: {where}not valid YAML: {exc.problem}") from None
    except yaml.YAMLError as exc:
        raise ContentError(f"{label}: not valid YAML: {exc}") from None


# --- checking against the schemas ----------------------------------------------------

SCHEMAS = Path(__file__).with_name("schemas")

# The field quoted after an entry's number, and the singular a top list's entries take.
_QUOTED = {
    "questions": "prompt",
    "options": "text",
    "terms": "name",
    "routes": "route",
    "machines": "key",
    "lines": "code",
}
_SINGULAR = {"questions": "question", "terms": "term"}


def quote(text: Any) -> str:
    """A short quotation of an entry's first field for error messages."""
    if not isinstance(text, str):
        return ""
    text = " ".join(text.split())
    return f' ("{text[:40]}...")' if len(text) > 40 else f' ("{text}")'


def _get(data: Any, field: str) -> Any:
    return data.get(field) if isinstance(data, dict) else None


def where(label: str, data: Any, entry: tuple[str | int, ...]) -> str:
    """How messages name an entry: ``docs/lessons/x.quiz.yml: question 2 ("..."): options: 3``.

    >>> where("q.yml", {"questions": [{"prompt": "Why?"}]}, ("questions", 0))
    'q.yml: question 1 ("Why?")'
    """
    parts = [label]
    node = data
    for k, part in enumerate(entry):
        node = node[part] if isinstance(node, dict | list) else None
        if isinstance(part, int):
            continue
        after = entry[k + 1] if k + 1 < len(entry) else None
        if isinstance(after, int) and isinstance(node, list) and after < len(node):
            item = node[after]
            number = f"{after + 1}{quote(_get(item, _QUOTED.get(part, '')))}"
            parts.append(
                f"{_SINGULAR[part]} {number}" if part in _SINGULAR else f"{part}: {number}"
            )
        else:
            parts.append(part)
    return ": ".join(parts)


def _check(data: Any, schema_file: str, label: str) -> None:
    """Refuse ``data`` that breaks ``schemas/<schema_file>``: the file, entry, field and fix."""
    problem = schema_check.first_problem(data, schema_check.load_schema(SCHEMAS / schema_file))
    if problem is None:
        return
    text = problem.text
    if problem.keyword == "dependentRequired":
        text = "missing: a templated question needs both facts and values"
    field = f"{problem.field}: " if problem.field else ""
    raise ContentError(f"{where(label, data, problem.entry)}: {field}{text}")


def _strings(
    data: Any, path: tuple[str | int, ...] = ()
) -> list[tuple[tuple[str | int, ...], str]]:
    """Every string in ``data`` with the path to it, in file order."""
    if isinstance(data, str):
        return [(path, data)]
    if isinstance(data, dict):
        return [found for k, v in data.items() for found in _strings(v, (*path, k))]
    if isinstance(data, list):
        return [found for i, v in enumerate(data) for found in _strings(v, (*path, i))]
    return []


def _check_markup(data: Any, label: str) -> None:
    """Refuse authored Markdown that could run or load something on a page (:func:`markup_hazard`).

    >>> _check_markup({"terms": [{"name": "SM", "meaning": "<b onclick=x>"}]}, "g.yml")
    Traceback (most recent call last):
    ...
    gpulesson.site.content.ContentError: g.yml: term 1 ("SM"): meaning: carries raw HTML; \
write plain Markdown (code spans for markup you mean to show)
    """
    for path, text in _strings(data):
        hazard = markup_hazard(text)
        if hazard is None:
            continue
        entry = path[:-1] if isinstance(path[-1], str) else path
        field = path[-1] if isinstance(path[-1], str) else "item"
        raise _error(
            where(label, data, entry),
            str(field),
            f"carries {hazard}; write plain Markdown (code spans for markup you mean to show)",
        )


def _error(where_: str, field: str, problem: str) -> ContentError:
    """A cross-field problem, named as the schema's problems are."""
    return ContentError(f"{where_}: {field}: {problem}")


# --- quizzes ----------------------------------------------------------------------


def _check_template(where_: str, field: str, text: str, templated: bool) -> None:
    if templated:
        try:
            list(string.Formatter().parse(text))
        except ValueError as exc:
            raise _error(
                where_, field, f"is not a valid template ({exc}); write {{{{ for a brace"
            ) from None
        return
    found = _PLACEHOLDER.search(text)
    if found:
        raise _error(
            where_,
            field,
            f"uses the placeholder {found.group(0)} but the question names no facts and values; "
            "add them or remove the braces",
        )


def _check_before(where_: str, before: str, lesson: tuple[str, tuple[str, ...]] | None) -> None:
    """Refuse a ``before:`` that names no executed block of the lesson, with the ids it has."""
    if lesson is None:
        return
    label, ids = lesson
    if before not in ids:
        listed = ", ".join(ids) or "none"
        raise _error(
            where_,
            "before",
            f"no executed block with id {before!r} in {label}: name the id of the "
            '```python exec="on" id="..."``` block that computes the answer '
            f"(the lesson's ids: {listed})",
        )


def _question(
    q: dict[str, Any], where_: str, lesson: tuple[str, tuple[str, ...]] | None = None
) -> Question:
    """One question the schema accepted; the checks across its fields.

    ``lesson`` is the lesson file's label and the ids of its executed blocks, which a
    ``before:`` must name (None: not checked, for a quiz read without its lesson).
    """
    templated = "facts" in q
    if "before" in q:
        _check_before(where_, q["before"], lesson)
    if templated:
        try:
            check_values(q["values"])
        except ValueError as exc:
            raise _error(where_, "values", str(exc)) from None
    _check_template(where_, "prompt", q["prompt"], templated)
    options = []
    for k, o in enumerate(q["options"], 1):
        for field in ("text", "why"):
            _check_template(f"{where_}: options: {k}{quote(o['text'])}", field, o[field], templated)
        options.append(Option(text=o["text"], correct=o.get("correct", False), why=o["why"]))
    n_correct = sum(o.correct for o in options)
    if n_correct != 1:
        marked = "no option is" if n_correct == 0 else f"{n_correct} options are"
        raise _error(where_, "options", f"{marked} marked correct; mark exactly one")
    return Question(
        prompt=q["prompt"],
        options=tuple(options),
        facts=tuple(q.get("facts", ())),
        values=q.get("values", ""),
        before=q.get("before", ""),
    )


def lesson_blocks(path: Path, label: str) -> tuple[str, tuple[str, ...]]:
    """A lesson's label and the ids of its executed blocks, for the checks of ``before:``."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ContentError(f"{label}: cannot be read ({exc})") from None
    return label, tuple(executed_block_ids(text))


def load_quiz(
    path: Path, label: str, lesson: tuple[str, tuple[str, ...]] | None = None
) -> tuple[Question, ...]:
    """The questions of one quiz file; ``label`` is how errors name the file.

    ``lesson`` (from :func:`lesson_blocks`) is what a question's ``before:`` is checked
    against: the id of one of the lesson's executed blocks.
    """
    data = _read_yaml(path, label)
    _check(data, "quiz.schema.json", label)
    _check_markup(data, label)
    return tuple(
        _question(q, where(label, data, ("questions", i)), lesson)
        for i, q in enumerate(data["questions"])
    )


# --- glossary ---------------------------------------------------------------------


def load_glossary(path: Path, label: str, lessons: frozenset[str]) -> tuple[Term, ...]:
    """The glossary's terms; each ``lesson`` must be the stem of a lesson in ``lessons``."""
    data = _read_yaml(path, label)
    _check(data, "glossary.schema.json", label)
    _check_markup(data, label)
    terms: list[Term] = []
    seen: set[str] = set()
    for i, raw in enumerate(data["terms"]):
        at = where(label, data, ("terms", i))
        t = Term(
            name=raw["name"],
            expansion=raw["expansion"],
            lazy=raw["lazy"],
            meaning=raw["meaning"],
            lesson=raw["lesson"],
            tooltip=raw.get("tooltip", True),
        )
        if t.name in seen:
            raise _error(at, "name", f"{t.name!r} is already a term: merge the two entries")
        if t.lesson not in lessons:
            raise _error(
                at,
                "lesson",
                f"no lesson lessons/{t.lesson}.md: name the file stem of an existing lesson "
                f"({', '.join(sorted(lessons)) or 'none found'})",
            )
        if t.lazy.strip() == t.meaning.strip():
            raise _error(at, "lazy", "is the same as meaning: say what people get wrong")
        seen.add(t.name)
        terms.append(t)
    return tuple(terms)


# --- labs -------------------------------------------------------------------------


def load_labs(path: Path, label: str) -> LabsContent:
    """The routes (their costs checked against the package's example rates) and the script."""
    data = _read_yaml(path, label)
    _check(data, "labs.schema.json", label)
    _check_markup(data, label)
    rates = card_rates()
    routes = []
    for i, raw in enumerate(data["routes"]):
        route = Route(
            route=raw["route"],
            cost=raw["cost"],
            setup=raw["setup"],
            best_for=raw["best_for"],
            watch_out=raw["watch_out"],
        )
        try:
            fill_route_cost(route, rates)
        except ValueError as exc:
            raise _error(where(label, data, ("routes", i)), "cost", str(exc)) from None
        for field in ROUTE_FIELDS:  # each field is one cell of the routes table
            if _BARE_PIPE.search(raw[field]):
                raise _error(
                    where(label, data, ("routes", i)),
                    field,
                    "holds a '|', which would end its cell of the routes table: write it as '\\|'",
                )
        routes.append(route)
    dispatch = data["dispatch"]
    machines = tuple(Machine(key=m["key"], label=m["label"]) for m in dispatch["machines"])
    keys = tuple(m.key for m in machines)
    if tuple(sorted(keys)) != tuple(sorted(MACHINE_KEYS)):
        raise _error(
            f"{label}: dispatch",
            "machines",
            f"the keys must be {', '.join(MACHINE_KEYS)} (one each), not {', '.join(keys)}",
        )
    for i, line in enumerate(dispatch["lines"]):  # a code span in a table cell, and in the lab
        if "|" in line["code"]:
            raise _error(
                where(label, data, ("dispatch", "lines", i)),
                "code",
                "holds a '|', which would end its cell of the dispatch table (escaped, the lab"
                " would show the backslash): write the line without one",
            )
    lines = tuple(
        DispatchLine(code=line["code"], nvidia=line["nvidia"], mac=line["mac"], cpu=line["cpu"])
        for line in dispatch["lines"]
    )
    return LabsContent(routes=tuple(routes), machines=machines, dispatch=lines)


# --- the whole folder -------------------------------------------------------------


def load(docs_dir: Path) -> Content:
    """Read and check every content file under ``docs_dir``; ContentError on the first problem."""
    docs_dir = Path(docs_dir)
    if not docs_dir.is_dir():
        raise ContentError(f"{docs_dir}: no such folder: point docs_dir at docs/")
    name = docs_dir.name
    lessons_dir = docs_dir / "lessons"
    lessons = frozenset(p.stem for p in lessons_dir.glob("*.md"))
    quizzes: dict[str, tuple[Question, ...]] = {}
    for path in sorted(lessons_dir.glob(f"*{QUIZ_SUFFIX}")):
        stem = path.name[: -len(QUIZ_SUFFIX)]
        label = f"{name}/lessons/{path.name}"
        if stem not in lessons:
            raise ContentError(
                f"{label}: no lesson lessons/{stem}.md beside it: name the file after its lesson"
            )
        lesson = lesson_blocks(lessons_dir / f"{stem}.md", f"{name}/lessons/{stem}.md")
        quizzes[stem] = load_quiz(path, label, lesson)
    return Content(
        docs_dir=docs_dir,
        lessons=lessons,
        quizzes=quizzes,
        terms=load_glossary(docs_dir / GLOSSARY_FILE, f"{name}/{GLOSSARY_FILE}", lessons),
        labs=load_labs(docs_dir / LABS_FILE, f"{name}/{LABS_FILE}"),
    )


_configured: list[Content] = []
_fallback: dict[Path, Content] = {}


def configure(docs_dir: Path) -> Content:
    """Load ``docs_dir`` for this build (the site hook calls it with ``config["docs_dir"]``)."""
    content = load(docs_dir)
    _configured[:] = [content]
    return content


def configured() -> Content | None:
    """The content :func:`configure` loaded for this build, or None outside a build."""
    return _configured[0] if _configured else None


def reset() -> None:
    """Forget the configured folder, so :func:`current` falls back to ``<cwd>/docs``."""
    _configured.clear()
    _fallback.clear()


def current() -> Content:
    """The content of this build, or of ``<cwd>/docs`` (loaded once) outside a build."""
    if _configured:
        return _configured[0]
    docs = Path.cwd() / "docs"
    if docs not in _fallback:
        _fallback[docs] = load(docs)
    return _fallback[docs]
