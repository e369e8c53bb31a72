"""Lesson quizzes: every option carries the reason it is right or wrong.

The questions live as data beside each lesson, ``docs/lessons/<stem>.quiz.yml``
(read and checked by :mod:`gpulesson.site.content`). The site hook
(``gpulesson/site/labs_hook.py``) appends to each lesson with a quiz an
executed block that prints :func:`section_markdown`: a container the quiz
script fills from the questions in its ``data-questions`` attribute, then a
static, no-JavaScript copy with the answers in collapsible blocks.

A question may take its numbers from the page: it names the facts it reads
(:mod:`gpulesson.site.facts`, published by the lesson's blocks) and a
function, ``values: module:function``, that turns them into the numbers its
prompt and options name as ``{placeholders}``. :func:`fill` puts them in at
build time, so the answer is always the one this build computed.

A *predict-then-reveal* question also says ``before: <block id>``: the executed
block that computes its answer. The page shows it right before that block, so the
reader commits to an answer first; its reveal (the explanations, with this build's
number) shows once answered. Its numbers exist only after the block ran, so the hook
renders it with the rest of the quiz at the end of the page and then moves it:
:func:`insert_slots` puts an empty slot before the block's fence in the page's
Markdown, :func:`section_markdown` prints the question in a wrapper naming the
block, and :func:`move_predictions` moves the rendered wrapper into its slot in the
page's HTML. Without JavaScript the moved question keeps its static copy, the answer
in a collapsible block, like the rest of the quiz.

>>> qs = questions("roofline")
>>> len(qs) >= 3, all(sum(o.correct for o in q.options) == 1 for q in qs)
(True, True)
"""

from __future__ import annotations

import ast
import html
import importlib
import importlib.util
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
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
    A predict-then-reveal question names in ``before`` the id of the executed block
    that computes its answer: the page shows it right before that block.
    """

    prompt: str
    options: tuple[Option, ...]
    facts: tuple[str, ...] = ()
    values: str = ""
    before: str = ""

    def __post_init__(self) -> None:
        n_correct = sum(o.correct for o in self.options)
        if n_correct != 1:
            raise ValueError(
                f"question {self.prompt[:40]!r} has {n_correct} correct options: mark exactly one"
            )


def _values_module(dotted: str) -> tuple[str, str]:
    """``module:function`` split, the module checked to be one of :mod:`gpulesson.course`."""
    module_name, _, name = dotted.partition(":")
    if not module_name.startswith("gpulesson.course.") or not name:
        raise ValueError(
            f"{dotted!r} must name a function in gpulesson.course as module:function, "
            "e.g. gpulesson.course.common:decades or gpulesson.course.<lesson>:<function>"
        )
    return module_name, name


def check_values(dotted: str) -> None:
    """Refuse a ``values`` name that names no function of a :mod:`gpulesson.course` module,
    reading the module's source rather than importing it: the build process, which reads
    the quiz files, imports no lesson module (some import torch).

    >>> check_values("gpulesson.course.common:decades")
    >>> check_values("gpulesson.course.common:nope")
    Traceback (most recent call last):
    ...
    ValueError: 'gpulesson.course.common:nope': gpulesson.course.common has no function nope
    >>> check_values("os:system")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: 'os:system' must name a function in gpulesson.course as module:function, ...
    """
    module_name, name = _values_module(dotted)
    try:
        spec = importlib.util.find_spec(module_name)
    except ModuleNotFoundError:
        spec = None
    if spec is None or spec.origin is None:
        raise ValueError(f"{dotted!r}: there is no module {module_name}")
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    if not any(isinstance(n, ast.FunctionDef) and n.name == name for n in tree.body):
        raise ValueError(f"{dotted!r}: {module_name} has no function {name}")


def resolve_values(dotted: str) -> ValuesFunction:
    """The function a templated question names as ``module:function`` (see
    :func:`check_values`): in its lesson's module of :mod:`gpulesson.course`, or in
    :mod:`gpulesson.course.common` when several lessons share it; nowhere else, since the
    quiz files are contributors' data.

    >>> resolve_values("gpulesson.course.common:decades").__name__
    'decades'
    """
    module_name, name = _values_module(dotted)
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
    ...     prompt="About how large?", facts=("x",), values="gpulesson.course.common:decades",
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
    return Question(prompt=prompt, options=options, before=question.before)


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


def _check_before(question: Question, where: str) -> None:
    """Refuse a predict-then-reveal question whose block published none of its facts.

    The question stands before that block, so the block must compute its answer; a
    question whose facts all came from other blocks would ask for a number the page
    printed elsewhere (or name the wrong block).
    """
    if not question.before or not question.facts:
        return
    sources = {name: facts.get(name).block_id for name in question.facts}
    if question.before in sources.values():
        return
    found = ", ".join(f"{name} by {block!r}" for name, block in sources.items())
    raise ValueError(
        f"{where}: before: the block {question.before!r} publishes none of the facts the "
        f"question reads ({found}): name the block that computes the answer"
    )


def page_questions(stem: str, fact_values: Mapping[str, Any] | None = None) -> tuple[Question, ...]:
    """The quiz of lesson ``stem`` filled in from the facts of the page being built.

    ``fact_values`` (name -> value) replaces the page's facts, for tests. With the
    page's own facts, a predict-then-reveal question must read at least one fact its
    ``before`` block published (:func:`_check_before`), and a question that reads a fact
    this build withheld (:func:`gpulesson.site.facts.withhold`) is left out: it has no
    number to reveal.
    """
    from gpulesson.site import content  # content imports this module's dataclasses

    file = content.current().quiz_file(stem)
    filled = []
    for i, q in enumerate(questions(stem), 1):
        where = f"{file}: question {i}{content.quote(q.prompt)}"
        if fact_values is None and facts.withheld_reason(q.facts):
            continue
        if fact_values is None and q.facts:
            try:
                values = {name: facts.value(name) for name in q.facts}
            except ValueError as exc:
                raise ValueError(f"{where}: facts: {exc}") from None
            _check_before(q, where)
        else:
            values = dict(fact_values or {})
        filled.append(fill(q, values, where))
    return tuple(filled)


def _static_question(label: str, q: Question) -> str:
    """One question as static Markdown: options shown, answer and reasons collapsed."""
    letters = "ABCDEFG"[: len(q.options)]
    answer = next(letter for letter, o in zip(letters, q.options, strict=True) if o.correct)
    lines = [f"**{label}** {q.prompt}", ""]
    lines += [f"{letter}. {o.text}  " for letter, o in zip(letters, q.options, strict=True)]
    lines += ["", f'??? success "Answer: {answer}"']
    for letter, o in zip(letters, q.options, strict=True):
        verdict = "right" if o.correct else "wrong"
        lines.append(f"    - **{letter}** ({verdict}): {o.why}")
    return "\n".join(lines) + "\n"


def to_markdown(qs: tuple[Question, ...]) -> str:
    """Questions as static Markdown: options shown, answer and reasons collapsed.

    >>> print(to_markdown(questions("roofline")).splitlines()[0][:40])
    **Question 1.** An elementwise add of tw
    """
    return "\n".join(_static_question(f"Question {i}.", q) for i, q in enumerate(qs, 1))


def to_json(qs: tuple[Question, ...]) -> str:
    """Filled questions as JSON for the quiz script: prompt and options (text, correct, why).

    >>> json.loads(to_json(questions("timing")))[0]["options"][1]["correct"]
    True
    """
    return json.dumps(
        [{"prompt": q.prompt, "options": [asdict(o) for o in q.options]} for q in qs],
        ensure_ascii=False,
    )


# --- predict-then-reveal questions: rendered with the quiz, moved before their block ------

#: The label a predict-then-reveal question carries where the quiz numbers the others.
PREDICT_LABEL = "Predict."
#: The slot :func:`insert_slots` leaves before a block, and the wrapper a question comes in.
SLOT_CLASS = "gl-predict-slot"
WRAPPER_CLASS = "gl-predict"

#: A fence markdown-exec runs: ```python exec="on" ... id="..." (any order of options).
_EXEC_FENCE = re.compile(
    r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?:python|py)\b(?P<options>[^\n]*)$", re.M
)
_EXEC_ON = re.compile(r"""\bexec=["']?(?:on|true|yes|1)["']?(?:\s|$)""", re.I)
_FENCE_ID = re.compile(r"""\bid=["']([^"']+)["']""")


def executed_block_ids(markdown: str) -> dict[str, int]:
    """The ids of the executed Python blocks in ``markdown``: id -> offset of its fence line.

    >>> executed_block_ids('Text.\\n\\n```python exec="on" id="a"\\nprint(1)\\n```\\n'
    ...                    '```python id="b"\\n```\\n    ```python exec="on" id="c" cache="off"\\n')
    {'a': 7, 'c': 68}
    """
    found: dict[str, int] = {}
    for match in _EXEC_FENCE.finditer(markdown):
        options = match["options"]
        block_id = _FENCE_ID.search(options)
        if block_id and _EXEC_ON.search(options + " ") and block_id.group(1) not in found:
            found[block_id.group(1)] = match.start()
    return found


def _slot(block_id: str) -> str:
    return f'<div class="{SLOT_CLASS}" data-before="{html.escape(block_id, quote=True)}"></div>'


def insert_slots(markdown: str, block_ids: tuple[str, ...] | list[str]) -> str:
    """``markdown`` with an empty slot right before the fence of each block in ``block_ids``.

    The slot keeps the fence's indent (a block inside an admonition or a list gets its
    slot there too) and stands in its own paragraph. A block id the page lacks raises
    ValueError (the quiz loader already refuses one the lesson file lacks).

    >>> page = insert_slots('Say.\\n```python exec="on" id="a"\\nprint(1)\\n```\\n', ["a"])
    >>> page.splitlines()[:5]  # doctest: +NORMALIZE_WHITESPACE
    ['Say.', '', '<div class="gl-predict-slot" data-before="a"></div>', '',
     '```python exec="on" id="a"']
    """
    where = executed_block_ids(markdown)
    missing = [b for b in block_ids if b not in where]
    if missing:
        raise ValueError(f"no executed block with id {missing[0]!r} on the page")
    for block_id in sorted(set(block_ids), key=where.__getitem__, reverse=True):
        at = where[block_id]
        indent = re.match(r"[ \t]*", markdown[at:]).group(0)  # type: ignore[union-attr]
        slot = f"{indent}\n{indent}{_slot(block_id)}\n{indent}\n"
        markdown = markdown[:at] + slot + markdown[at:]
    return markdown


def _container(stem: str, qs: tuple[Question, ...], before: str = "") -> str:
    """The quiz script's container: the filled questions in ``data-questions``."""
    attr = html.escape(to_json(qs), quote=True)
    predict = f' data-predict="{html.escape(before, quote=True)}"' if before else ""
    return f'<div class="gl-quiz" data-quiz="{stem}"{predict} data-questions="{attr}"></div>'


def prediction_markdown(stem: str, q: Question) -> str:
    """A predict-then-reveal question as printed at the end of the page, in its wrapper.

    The wrapper names the block the question belongs before; :func:`move_predictions`
    moves it there. Inside: the script's container and the static copy.
    """
    before = html.escape(q.before, quote=True)
    return (
        f'<div class="{WRAPPER_CLASS}" data-before="{before}" markdown="block">\n\n'
        f"{_container(stem, (q,), q.before)}\n\n"
        f'<div class="gl-quiz-static" markdown="block">\n\n'
        f"{_static_question(PREDICT_LABEL, q)}\n</div>\n\n</div>\n\n"
    )


def section_markdown(stem: str, fact_values: Mapping[str, Any] | None = None) -> str:
    """What a lesson's quiz block prints: the script's container, the static quiz, the tooltips.

    The container carries the filled questions in ``data-questions``, so the
    interactive quiz shows this build's numbers too. A predict-then-reveal question
    comes first, each in its own wrapper (:func:`prediction_markdown`), for the hook to
    move before its block. The glossary's tooltip lines are repeated because an
    executed block's output is converted on its own.

    >>> text = section_markdown("roofline", {"roofline.ridge": 4.2})
    >>> text.startswith('<div class="gl-predict" data-before="roof-measure" markdown="block">')
    True
    >>> '<div class="gl-quiz" data-quiz="roofline" data-questions="[{&quot;' in text
    True
    """
    qs = page_questions(stem, fact_values)
    predicted = tuple(q for q in qs if q.before)
    rest = tuple(q for q in qs if not q.before)
    left_out = [  # an empty wrapper fills the slot before its block
        f'<div class="{WRAPPER_CLASS}" data-before="{html.escape(q.before, quote=True)}"></div>\n\n'
        for q in questions(stem)
        if q.before and fact_values is None and facts.withheld_reason(q.facts)
    ]
    note = ""
    if predicted:
        some = "question" if len(predicted) == 1 else f"{len(predicted)} questions"
        note = (
            f"This quiz also has {'a ' if len(predicted) == 1 else ''}{some} placed in the "
            "lesson, before the block that computes the answer; the score counts "
            f"{'it' if len(predicted) == 1 else 'them'} too.\n\n"
        )
    return (
        "".join(prediction_markdown(stem, q) for q in predicted)
        + "".join(left_out)
        + note
        + f"{_container(stem, rest)}\n\n"
        + f'<div class="gl-quiz-static" markdown="block">\n\n{to_markdown(rest)}\n</div>\n\n'
        + glossary.abbreviations_markdown()
    )


# The wrapper as Markdown renders it (md_in_html may reorder its attributes).
_WRAPPER_OPEN = re.compile(
    rf'<div\b(?=[^>]*\bclass="{WRAPPER_CLASS}")[^>]*\bdata-before="(?P<id>[^"]*)"[^>]*>'
)
_DIV_TAG = re.compile(r"<div\b[^>]*>|</div\s*>")


def _element_end(text: str, start: int) -> int:
    """The offset just past the ``</div>`` that closes the ``<div>`` opening at ``start``."""
    depth = 0
    for tag in _DIV_TAG.finditer(text, start):
        depth += -1 if tag.group(0).startswith("</") else 1
        if depth == 0:
            return tag.end()
    raise ValueError("a predict-then-reveal question's <div> is never closed")


def move_predictions(page_html: str) -> str:
    """The page's HTML with each rendered predict-then-reveal question moved into its slot.

    A slot with no question, or a question with no slot, raises ValueError naming the
    block: the quiz would lose a question or show it at the end, after its answer.

    >>> page = ('<p>Intro.</p>\\n<div class="gl-predict-slot" data-before="a"></div>\\n'
    ...         '<pre>block a</pre>\\n<h2>Check yourself</h2>\\n'
    ...         '<div class="gl-predict" data-before="a"><div>Q</div></div>\\n<p>Rest.</p>')
    >>> print(move_predictions(page))
    <p>Intro.</p>
    <div class="gl-predict" data-before="a"><div>Q</div></div>
    <pre>block a</pre>
    <h2>Check yourself</h2>
    <BLANKLINE>
    <p>Rest.</p>
    """
    rendered: dict[str, str] = {}
    while match := _WRAPPER_OPEN.search(page_html):
        end = _element_end(page_html, match.start())
        block_id = html.unescape(match["id"])
        rendered[block_id] = rendered.get(block_id, "") + page_html[match.start() : end]
        page_html = page_html[: match.start()] + page_html[end:]
    for block_id, element in rendered.items():
        slot = re.compile(r"(?:<p>\s*)?" + re.escape(_slot(block_id)) + r"(?:\s*</p>)?", re.S)
        found = slot.search(page_html)
        if found is None:
            raise ValueError(
                f"no slot before block {block_id!r}: the question would stay at the end, "
                "after its answer"
            )
        page_html = page_html[: found.start()] + element + page_html[found.end() :]
    left = re.search(rf'<div class="{SLOT_CLASS}" data-before="([^"]*)"></div>', page_html)
    if left:
        raise ValueError(f"no question was rendered for the slot before block {left.group(1)!r}")
    return page_html
