"""Lesson quizzes: every option carries the reason it is right or wrong.

The questions live as data beside each lesson, ``docs/lessons/<stem>.quiz.yml``
(read and checked by :mod:`gpulesson.site.content`). The site hook
(``gpulesson/site/labs_hook.py``) appends to each lesson with a quiz an
executed block that prints :func:`section_markdown`: a container the quiz
script fills from the questions in its ``data-questions`` attribute, then a
static, no-JavaScript copy with the answers in collapsible blocks.

A question may take its numbers from the page: it names the facts it reads
(:mod:`gpulesson.site.facts`, published by the lesson's earlier blocks) and a
function, ``values: module:function``, that turns them into the numbers its
prompt and options name as ``{placeholders}``. :func:`fill` puts them in at
build time, so the answer is always the one this build computed.

>>> qs = questions("roofline")
>>> len(qs) >= 3, all(sum(o.correct for o in q.options) == 1 for q in qs)
(True, True)
"""

from __future__ import annotations

import html
import importlib
import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from gpulesson.site import facts, glossary

ValuesFunction = Callable[[Mapping[str, Any]], Mapping[str, Any]]


@dataclass(frozen=True)
class Option:
    """One answer choice and why it is right or wrong."""

    text: str
    correct: bool
    why: str


@dataclass(frozen=True)
class Question:
    """A multiple-choice question with exactly one correct option.

    A templated question names the page ``facts`` it reads and the ``values``
    function (``module:function``) that fills its placeholders; see :func:`fill`.
    """

    prompt: str
    options: tuple[Option, ...]
    facts: tuple[str, ...] = ()
    values: str = ""

    def __post_init__(self) -> None:
        n_correct = sum(o.correct for o in self.options)
        if n_correct != 1:
            raise ValueError(
                f"question {self.prompt[:40]!r} has {n_correct} correct options: mark exactly one"
            )


def resolve_values(dotted: str) -> ValuesFunction:
    """The function a templated question names as ``module:function`` (in gpulesson.site).

    >>> resolve_values("gpulesson.site.quiz_values:decades").__name__
    'decades'
    >>> resolve_values("os:system")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: 'os:system' must name a function in gpulesson.site as module:function, ...
    """
    module_name, _, name = dotted.partition(":")
    if not module_name.startswith("gpulesson.site.") or not name:
        raise ValueError(
            f"{dotted!r} must name a function in gpulesson.site as module:function, "
            "e.g. gpulesson.site.quiz_values:decades"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        raise ValueError(f"{dotted!r}: there is no module {module_name}") from None
    function = getattr(module, name, None)
    if not callable(function):
        raise ValueError(f"{dotted!r}: {module_name} has no function {name}")
    return function


def _fill_text(template: str, values: Mapping[str, Any], where: str, question: Question) -> str:
    try:
        return template.format(**values)
    except KeyError as exc:
        raise ValueError(
            f"{where}: the placeholder {{{exc.args[0]}}} is not among the values "
            f"{question.values} returns ({', '.join(sorted(values))})"
        ) from None
    except (ValueError, IndexError, AttributeError, TypeError) as exc:
        raise ValueError(f"{where}: cannot be filled in ({exc})") from None


def fill(question: Question, fact_values: Mapping[str, Any], where: str = "question") -> Question:
    """The question with its placeholders filled from ``fact_values`` (name -> value).

    A question without facts comes back as it is. ``where`` names the question
    in errors (file and entry).

    >>> q = Question(
    ...     prompt="About how large?", facts=("x",), values="gpulesson.site.quiz_values:decades",
    ...     options=(Option(text="{value}", correct=True, why="Measured: {measured}."),
    ...              Option(text="{tenfold}", correct=False, why="Ten times too large.")))
    >>> [o.text for o in fill(q, {"x": 1234.5}).options]
    ['1,200', '12,000']
    """
    if not question.facts:
        return question
    missing = [name for name in question.facts if name not in fact_values]
    if missing:
        raise ValueError(f"{where}: facts: no value for {missing[0]!r}")
    function = resolve_values(question.values)
    values = dict(function({name: fact_values[name] for name in question.facts}))
    options = tuple(
        Option(
            text=_fill_text(o.text, values, f"{where}: options: {k}: text", question),
            correct=o.correct,
            why=_fill_text(o.why, values, f"{where}: options: {k}: why", question),
        )
        for k, o in enumerate(question.options, 1)
    )
    texts = [o.text for o in options]
    for k, text in enumerate(texts, 1):
        if texts.index(text) + 1 != k:
            raise ValueError(
                f"{where}: options: options {texts.index(text) + 1} and {k} both read {text!r} "
                f"with the facts {dict(fact_values)}: make {question.values} keep them apart"
            )
    prompt = _fill_text(question.prompt, values, f"{where}: prompt", question)
    return Question(prompt=prompt, options=options)


def questions(stem: str) -> tuple[Question, ...]:
    """The quiz of lesson ``stem`` as written (templates not filled in).

    >>> questions("nope")
    Traceback (most recent call last):
    ...
    ValueError: no quiz for lesson 'nope': add docs/lessons/nope.quiz.yml
    """
    from gpulesson.site import content  # content imports this module's dataclasses

    quizzes = content.current().quizzes
    if stem not in quizzes:
        raise ValueError(f"no quiz for lesson {stem!r}: add docs/lessons/{stem}.quiz.yml")
    return quizzes[stem]


def page_questions(stem: str, fact_values: Mapping[str, Any] | None = None) -> tuple[Question, ...]:
    """The quiz of lesson ``stem`` filled in from the facts of the page being built.

    ``fact_values`` (name -> value) replaces the page's facts, for tests.
    """
    from gpulesson.site import content  # content imports this module's dataclasses

    file = content.current().quiz_file(stem)
    filled = []
    for i, q in enumerate(questions(stem), 1):
        where = f"{file}: question {i}{content.quote(q.prompt)}"
        if fact_values is None and q.facts:
            try:
                values = {name: facts.value(name) for name in q.facts}
            except ValueError as exc:
                raise ValueError(f"{where}: facts: {exc}") from None
        else:
            values = dict(fact_values or {})
        filled.append(fill(q, values, where))
    return tuple(filled)


def to_markdown(qs: tuple[Question, ...]) -> str:
    """Questions as static Markdown: options shown, answer and reasons collapsed.

    >>> print(to_markdown(questions("roofline")).splitlines()[0][:40])
    **Question 1.** An elementwise add of tw
    """
    blocks = []
    for i, q in enumerate(qs, 1):
        letters = "ABCDEFG"[: len(q.options)]
        answer = next(letter for letter, o in zip(letters, q.options, strict=True) if o.correct)
        lines = [f"**Question {i}.** {q.prompt}", ""]
        lines += [f"{letter}. {o.text}  " for letter, o in zip(letters, q.options, strict=True)]
        lines += ["", f'??? success "Answer: {answer}"']
        for letter, o in zip(letters, q.options, strict=True):
            verdict = "right" if o.correct else "wrong"
            lines.append(f"    - **{letter}** ({verdict}): {o.why}")
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks)


def to_json(qs: tuple[Question, ...]) -> str:
    """Filled questions as JSON for the quiz script: prompt and options (text, correct, why).

    >>> json.loads(to_json(questions("timing")))[0]["options"][1]["correct"]
    True
    """
    return json.dumps(
        [{"prompt": q.prompt, "options": [asdict(o) for o in q.options]} for q in qs],
        ensure_ascii=False,
    )


def section_markdown(stem: str, fact_values: Mapping[str, Any] | None = None) -> str:
    """What a lesson's quiz block prints: the script's container, the static quiz, the tooltips.

    The container carries the filled questions in ``data-questions``, so the
    interactive quiz shows this build's numbers too. The glossary's tooltip
    lines are repeated because an executed block's output is converted on its own.

    >>> text = section_markdown("roofline", {"roofline.ridge": 4.2})
    >>> text.startswith('<div class="gl-quiz" data-quiz="roofline" data-questions="[{&quot;')
    True
    """
    qs = page_questions(stem, fact_values)
    attr = html.escape(to_json(qs), quote=True)
    return (
        f'<div class="gl-quiz" data-quiz="{stem}" data-questions="{attr}"></div>\n\n'
        f'<div class="gl-quiz-static" markdown="block">\n\n{to_markdown(qs)}\n</div>\n\n'
        + glossary.abbreviations_markdown()
    )
