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

:func:`load` turns them into the frozen dataclasses of those modules and
refuses anything malformed with a :class:`ContentError` whose message names
the file, the entry and the field. The site hook (``labs_hook.on_config``)
calls :func:`configure` with ``config["docs_dir"]`` once per build; executed
blocks and the renderers then read :func:`current`, which outside a build
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

from gpulesson.site.glossary import Term
from gpulesson.site.labs import (
    MACHINE_KEYS,
    DispatchLine,
    Machine,
    Route,
    card_rates,
    fill_route_cost,
)
from gpulesson.site.quizzes import Option, Question, resolve_values

QUIZ_SUFFIX = ".quiz.yml"
GLOSSARY_FILE = "glossary.yml"
LABS_FILE = "labs.yml"
_PLACEHOLDER = re.compile(r"\{[A-Za-z_][\w.]*(?::[^{}]*)?\}")


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


class _Loader(yaml.SafeLoader):
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


@dataclass(frozen=True)
class _Entry:
    """One entry of a file, for checking its fields and naming them in errors."""

    where: str  # "file: entry"
    data: Mapping[str, Any]

    def error(self, field: str, problem: str) -> ContentError:
        return ContentError(
            f"{self.where}: {field}: {problem}" if field else f"{self.where}: {problem}"
        )

    def text(self, field: str) -> str:
        value = self.data[field]
        if not isinstance(value, str):
            shown = "true" if value is True else "false" if value is False else value
            raise self.error(field, f"must be text, not {shown!r}: put it in quotes")
        if not value.strip():
            raise self.error(field, "is empty: write it out")
        return value

    def flag(self, field: str, default: bool) -> bool:
        value = self.data.get(field, default)
        if not isinstance(value, bool):
            raise self.error(field, f"must be true or false, not {value!r}")
        return value

    def items(self, field: str) -> list[Any]:
        value = self.data[field]
        if not isinstance(value, list) or not value:
            raise self.error(field, "must be a list with at least one item")
        return value


def _entry(
    data: Any, where: str, required: tuple[str, ...], optional: tuple[str, ...] = ()
) -> _Entry:
    """Check that ``data`` is a mapping with exactly the allowed fields."""
    allowed = required + optional
    if not isinstance(data, dict):
        raise ContentError(f"{where}: expected fields ({', '.join(allowed)}), got {data!r}")
    for key in data:
        if key not in allowed:
            raise ContentError(
                f"{where}: {key}: unknown field; the fields are {', '.join(allowed)}"
            )
    for key in required:
        if key not in data:
            raise ContentError(f"{where}: {key}: missing; add it")
    return _Entry(where, data)


def quote(text: Any) -> str:
    """A short quotation of an entry's first field for error messages."""
    if not isinstance(text, str):
        return ""
    text = " ".join(text.split())
    return f' ("{text[:40]}...")' if len(text) > 40 else f' ("{text}")'


# --- quizzes ----------------------------------------------------------------------


def _check_template(entry: _Entry, field: str, text: str, templated: bool) -> None:
    if templated:
        try:
            list(string.Formatter().parse(text))
        except ValueError as exc:
            raise entry.error(
                field, f"is not a valid template ({exc}); write {{{{ for a brace"
            ) from None
        return
    found = _PLACEHOLDER.search(text)
    if found:
        raise entry.error(
            field,
            f"uses the placeholder {found.group(0)} but the question names no facts and values; "
            "add them or remove the braces",
        )


def _question(data: Any, where: str) -> Question:
    entry = _entry(data, where, ("prompt", "options"), ("facts", "values"))
    templated = "facts" in data or "values" in data
    facts: tuple[str, ...] = ()
    values = ""
    if templated:
        if "facts" not in data or "values" not in data:
            missing = "values" if "facts" in data else "facts"
            raise entry.error(missing, "missing: a templated question needs both facts and values")
        names = entry.items("facts")
        if not all(isinstance(n, str) and n.strip() and " " not in n for n in names):
            raise entry.error(
                "facts", f"must list fact names such as timing.inflation, not {names!r}"
            )
        facts = tuple(names)
        values = entry.text("values")
        try:
            resolve_values(values)
        except ValueError as exc:
            raise entry.error("values", str(exc)) from None
    prompt = entry.text("prompt")
    _check_template(entry, "prompt", prompt, templated)
    options = []
    for k, raw in enumerate(entry.items("options"), 1):
        option = _entry(
            raw, f"{where}: options: {k}{quote(_get(raw, 'text'))}", ("text", "why"), ("correct",)
        )
        for field in ("text", "why"):
            _check_template(option, field, option.text(field), templated)
        options.append(
            Option(
                text=option.text("text"),
                correct=option.flag("correct", False),
                why=option.text("why"),
            )
        )
    if len(options) < 2:
        raise entry.error("options", f"has {len(options)} option: give at least two")
    n_correct = sum(o.correct for o in options)
    if n_correct != 1:
        marked = "no option is" if n_correct == 0 else f"{n_correct} options are"
        raise entry.error("options", f"{marked} marked correct; mark exactly one")
    return Question(prompt=prompt, options=tuple(options), facts=facts, values=values)


def _get(data: Any, field: str) -> Any:
    return data.get(field) if isinstance(data, dict) else None


def load_quiz(path: Path, label: str) -> tuple[Question, ...]:
    """The questions of one quiz file; ``label`` is how errors name the file."""
    data = _read_yaml(path, label)
    top = _entry(data, label, ("questions",))
    return tuple(
        _question(q, f"{label}: question {i}{quote(_get(q, 'prompt'))}")
        for i, q in enumerate(top.items("questions"), 1)
    )


# --- glossary ---------------------------------------------------------------------

_TERM_FIELDS = ("name", "expansion", "lazy", "meaning", "lesson")


def load_glossary(path: Path, label: str, lessons: frozenset[str]) -> tuple[Term, ...]:
    """The glossary's terms; each ``lesson`` must be the stem of a lesson in ``lessons``."""
    data = _read_yaml(path, label)
    top = _entry(data, label, ("terms",))
    terms: list[Term] = []
    seen: set[str] = set()
    for i, raw in enumerate(top.items("terms"), 1):
        entry = _entry(
            raw, f"{label}: term {i}{quote(_get(raw, 'name'))}", _TERM_FIELDS, ("tooltip",)
        )
        t = Term(
            name=entry.text("name"),
            expansion=entry.text("expansion"),
            lazy=entry.text("lazy"),
            meaning=entry.text("meaning"),
            lesson=entry.text("lesson"),
            tooltip=entry.flag("tooltip", True),
        )
        if t.name in seen:
            raise entry.error("name", f"{t.name!r} is already a term: merge the two entries")
        if t.lesson not in lessons:
            raise entry.error(
                "lesson",
                f"no lesson lessons/{t.lesson}.md: name the file stem of an existing lesson "
                f"({', '.join(sorted(lessons)) or 'none found'})",
            )
        if t.lazy.strip() == t.meaning.strip():
            raise entry.error("lazy", "is the same as meaning: say what people get wrong")
        seen.add(t.name)
        terms.append(t)
    return tuple(terms)


# --- labs -------------------------------------------------------------------------

_ROUTE_FIELDS = ("route", "cost", "setup", "best_for", "watch_out")


def load_labs(path: Path, label: str) -> LabsContent:
    """The routes (their costs checked against the package's example rates) and the script."""
    top = _entry(_read_yaml(path, label), label, ("routes", "dispatch"))
    rates = card_rates()
    routes = []
    for i, raw in enumerate(top.items("routes"), 1):
        r = _entry(raw, f"{label}: routes: {i}{quote(_get(raw, 'route'))}", _ROUTE_FIELDS)
        route = Route(
            route=r.text("route"),
            cost=r.text("cost"),
            setup=r.text("setup"),
            best_for=r.text("best_for"),
            watch_out=r.text("watch_out"),
        )
        try:
            fill_route_cost(route, rates)
        except ValueError as exc:
            raise r.error("cost", str(exc)) from None
        routes.append(route)
    dispatch = _entry(top.data["dispatch"], f"{label}: dispatch", ("machines", "lines"))
    machines = []
    for i, raw in enumerate(dispatch.items("machines"), 1):
        m = _entry(
            raw, f"{label}: dispatch: machines: {i}{quote(_get(raw, 'key'))}", ("key", "label")
        )
        machines.append(Machine(key=m.text("key"), label=m.text("label")))
    keys = tuple(m.key for m in machines)
    outcome_fields = MACHINE_KEYS
    if tuple(sorted(keys)) != tuple(sorted(outcome_fields)):
        raise dispatch.error(
            "machines",
            f"the keys must be {', '.join(outcome_fields)} (one each), not {', '.join(keys)}",
        )
    lines = []
    for i, raw in enumerate(dispatch.items("lines"), 1):
        line = _entry(
            raw,
            f"{label}: dispatch: lines: {i}{quote(_get(raw, 'code'))}",
            ("code", *outcome_fields),
        )
        lines.append(
            DispatchLine(
                code=line.text("code"),
                nvidia=line.text("nvidia"),
                mac=line.text("mac"),
                cpu=line.text("cpu"),
            )
        )
    return LabsContent(
        routes=tuple(routes),
        machines=tuple(machines),
        dispatch=tuple(lines),
    )


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
        quizzes[stem] = load_quiz(path, label)
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
