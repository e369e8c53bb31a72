"""Checked claims: sentences that interpret this build's numbers, checked against them.

A lesson says "the naive stopwatch overstates the speedup" next to numbers that
change with every machine the site is built on. Typed prose drifts; a claim is
checked. A lesson states it in an executed block after the blocks that
published the figures it rests on (:mod:`gpulesson.site.facts`)::

    from gpulesson.site.claims import claim
    print(claim(
        "On this machine the naive stopwatch reads {timing.naive_x:.0f}x, "
        "more than ten times the honest {timing.honest_x:.1f}x.",
        "timing.naive_x > 10 * timing.honest_x",
    ))

* ``text`` is Markdown; ``{fact.name:format}`` fields are filled from the facts,
  so the numbers in the sentence are the numbers it was checked against.
* ``rule`` is a small expression over fact names: numbers, + - * / **,
  comparisons, ``and``/``or``/``not``, ``min``/``max``/``abs``. Nothing else
  parses, so a rule cannot run code.
* ``needs="cuda"`` marks a claim about GPU figures: when its facts are absent
  (a CPU build with no reference bundle to publish them), it is recorded as
  *not checked on this build* instead of failing, and the page does not show it:
  a sentence is never printed with blanks where its numbers belong. Say what a
  CPU build can say with predicted and published facts in a claim of its own
  (:mod:`gpulesson.site.gpu_claims`); the measured sentence appears when a
  measurement exists.
* each claim records the kind of every number behind it (``kinds``: fact name ->
  ``measured``, ``published``, ``predicted``...; see :data:`gpulesson.site.facts.KINDS`).

A claim that holds prints its sentence with a small "checked" note naming
the numbers; one that fails prints a visible warning admonition. Each claim is
also published as a fact of the page (named ``claim#N``, its value the claim
as JSON), so it travels back from the block worker and is replayed from the
execution cache like any other fact; :func:`claims` reads them back after the
build, for the build record, the log and (with ``GPULESSON_REQUIRE_DEVICE``
set) a failed build. :func:`can_fail` perturbs each number under a claim to
prove the rule is not a tautology.

>>> from gpulesson.site import facts
>>> facts.reset(); facts.begin_page("lessons/timing.md")
>>> _ = facts.publish("timing.naive_x", 900.0, "x"); _ = facts.publish("timing.honest_x", 20.0, "x")
>>> c = evaluate("Naive {timing.naive_x:.0f}x.", "timing.naive_x > 10 * timing.honest_x")
>>> c.status, c.text, c.numbers
('holds', 'Naive 900x.', {'timing.naive_x': 900.0, 'timing.honest_x': 20.0})
>>> can_fail(c)
True
"""

from __future__ import annotations

import ast
import html
import json
import math
import operator
import string
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from gpulesson.site import facts

HOLDS = "holds"
FAILS = "fails"
NOT_CHECKED = "not_checked"
STATUSES = (HOLDS, FAILS, NOT_CHECKED)
NEEDS = (None, "cuda", "gpu")
FACT_PREFIX = "claim#"
#: What a claim whose measured numbers are absent prints: no visible text, a marker in the source.
NOT_SHOWN = "<!-- a claim about measured GPU figures: shown when they exist -->"

_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
}
_COMPARE: dict[type, Callable[[Any, Any], bool]] = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}
_FUNCTIONS: dict[str, Callable[..., Any]] = {"min": min, "max": max, "abs": abs}


@dataclass(frozen=True)
class Claim:
    """One checked sentence: what it says, the rule, the verdict and the numbers behind it."""

    page: str
    block_id: str
    text: str  # the sentence as shown, with fact fields filled in
    rule: str
    status: str  # HOLDS, FAILS or NOT_CHECKED
    numbers: dict[str, Any] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)
    needs: str | None = None
    kinds: dict[str, str] = field(default_factory=dict)  # fact name -> facts.KINDS entry

    def to_dict(self) -> dict[str, Any]:
        """The claim as plain JSON data (one entry of the build record's ``claims``)."""
        return asdict(self)


def _from_fact(fact: facts.Fact) -> Claim:
    data = json.loads(str(fact.value))
    return Claim(**data)


def claims() -> list[Claim]:
    """Every claim evaluated in this build, page by page, in the order each page made them."""
    found: list[Claim] = []
    for page_facts in facts.all_facts().values():
        named = [f for name, f in page_facts.items() if name.startswith(FACT_PREFIX)]
        named.sort(key=lambda f: int(f.name[len(FACT_PREFIX) :]))
        found.extend(_from_fact(f) for f in named)
    return found


def _record(c: Claim) -> None:
    """Publish the claim as a fact of its page (see the module docstring)."""
    taken = [n for n in facts.page_facts() if n.startswith(FACT_PREFIX)]
    facts.publish(f"{FACT_PREFIX}{len(taken) + 1}", json.dumps(c.to_dict()), "claim")


def _dotted(node: ast.AST) -> str | None:
    """``a.b.c`` as the string 'a.b.c', or None when the node is not a plain name chain."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def fact_names(rule: str) -> list[str]:
    """The fact names a rule uses, in order of first use.

    >>> fact_names("a.b > 2 * max(c, a.b)")
    ['a.b', 'c']
    """
    tree = _parse(rule)
    names: list[str] = []

    def visit(node: ast.AST) -> None:
        name = _dotted(node)
        if name is not None and name not in _FUNCTIONS:
            if name not in names:
                names.append(name)
            return
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return names


def _parse(rule: str) -> ast.Expression:
    try:
        tree = ast.parse(rule, mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"claim rule {rule!r} is not an expression: {exc.msg}") from None
    for node in ast.walk(tree):
        allowed = (
            ast.Expression,
            ast.Compare,
            ast.BoolOp,
            ast.And,
            ast.Or,
            ast.BinOp,
            ast.UnaryOp,
            ast.USub,
            ast.Not,
            ast.Constant,
            ast.Name,
            ast.Attribute,
            ast.Load,
            ast.Call,
            *_BINARY,
            *_COMPARE,
        )
        if not isinstance(node, allowed):
            raise ValueError(
                f"claim rule {rule!r} uses {type(node).__name__}: only numbers, fact names, "
                "+ - * / **, comparisons, and/or/not and min/max/abs are allowed"
            )
        if isinstance(node, ast.Call) and not (
            isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS and not node.keywords
        ):
            raise ValueError(f"claim rule {rule!r}: only min(), max() and abs() may be called")
        if isinstance(node, ast.Constant) and not isinstance(node.value, int | float | bool):
            raise ValueError(f"claim rule {rule!r}: constants must be numbers")
    return tree


def check_rule(rule: str, numbers: Mapping[str, Any]) -> bool:
    """Evaluate ``rule`` with ``numbers`` (fact name -> value); True when the claim holds.

    >>> check_rule("x.y >= 2 * z", {"x.y": 5, "z": 2})
    True
    >>> check_rule("x.y >= 2 * z", {"x.y": 3, "z": 2})
    False
    """
    tree = _parse(rule)

    def ev(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        name = _dotted(node)
        if name is not None:
            if name not in numbers:
                raise ValueError(f"claim rule {rule!r} uses {name!r}, which has no value")
            return numbers[name]
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.BinOp):
            return _BINARY[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp):
            value = ev(node.operand)
            return -value if isinstance(node.op, ast.USub) else not value
        if isinstance(node, ast.BoolOp):
            values = [ev(v) for v in node.values]
            return all(values) if isinstance(node.op, ast.And) else any(values)
        if isinstance(node, ast.Compare):
            left = ev(node.left)
            for op, right_node in zip(node.ops, node.comparators, strict=True):
                right = ev(right_node)
                if not _COMPARE[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.Call):
            return _FUNCTIONS[node.func.id](*(ev(a) for a in node.args))  # type: ignore[union-attr]
        raise ValueError(f"claim rule {rule!r}: cannot evaluate {type(node).__name__}")

    try:
        return bool(ev(tree))
    except ZeroDivisionError:
        raise ValueError(f"claim rule {rule!r} divides by zero with {dict(numbers)}") from None


class _FactFormatter(string.Formatter):
    """Fills ``{dotted.fact.name:spec}`` fields from a mapping of fact values."""

    def __init__(self, numbers: Mapping[str, Any]) -> None:
        self.numbers = numbers

    def get_field(self, field_name: str, args: Any, kwargs: Any) -> tuple[Any, str]:
        if field_name not in self.numbers:
            raise ValueError(f"claim text uses {{{field_name}}}, which is not a fact on this page")
        return self.numbers[field_name], field_name


def text_fields(text: str) -> list[str]:
    """The fact names a claim's text fills in.

    >>> text_fields("reads {a.b:.0f}x, not {c}")
    ['a.b', 'c']
    """
    return [name for _, name, _, _ in string.Formatter().parse(text) if name]


def evaluate(text: str, rule: str, *, needs: str | None = None) -> Claim:
    """Check ``rule`` against the facts published so far on this page; record the claim."""
    if needs not in NEEDS:
        raise ValueError(f"needs={needs!r}: use one of {', '.join(map(str, NEEDS))}")
    names = fact_names(rule)
    if not names:
        raise ValueError(f"claim rule {rule!r} names no fact, so it cannot fail: name the numbers")
    wanted = names + [n for n in text_fields(text) if n not in names]
    known = {n: f for n, f in facts.page_facts().items() if not n.startswith(FACT_PREFIX)}
    missing = [n for n in wanted if n not in known]
    page = facts.current_page() or "(no page)"
    block = getattr(facts, "_block", None) or "(no block)"
    if missing:
        if needs is None:
            listed = ", ".join(sorted(known)) or "none"
            raise ValueError(
                f"claim {text[:60]!r} on {page} uses {', '.join(missing)}, not published on "
                f"this page (published: {listed}); publish them in an earlier block, or pass "
                'needs="cuda" for a claim about GPU figures'
            )
        numbers = {n: known[n].value for n in wanted if n in known}
        units = {n: known[n].unit for n in numbers}
        kinds = {n: known[n].kind for n in numbers}
        shown = _strip_fields(text)
        result = Claim(page, block, shown, rule, NOT_CHECKED, numbers, units, needs, kinds)
    else:
        numbers = {n: known[n].value for n in wanted}
        units = {n: known[n].unit for n in wanted}
        kinds = {n: known[n].kind for n in wanted}
        status = HOLDS if check_rule(rule, numbers) else FAILS
        shown = _FactFormatter(numbers).format(text)
        result = Claim(page, block, shown, rule, status, numbers, units, needs, kinds)
    _record(result)
    return result


def _strip_fields(text: str) -> str:
    """The sentence with its unknown number fields shown as a dash (build record only).

    A page never shows this text: :func:`to_markdown` prints nothing for a claim
    whose numbers are missing.
    """
    parts = []
    for literal, name, _, _ in string.Formatter().parse(text):
        parts.append(literal)
        if name:
            parts.append("–")
    return "".join(parts)


def _format_number(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def numbers_text(c: Claim) -> str:
    """The numbers behind a claim as one line, e.g. ``timing.naive_x = 900 x``.

    >>> numbers_text(Claim("p", "b", "t", "a > 1", HOLDS, {"a": 2.5}, {"a": "GB/s"}))
    'a = 2.5 GB/s'
    """
    parts = []
    for name, value in c.numbers.items():
        unit = c.units.get(name, "")
        parts.append(f"{name} = {_format_number(value)}" + (f" {unit}" if unit else ""))
    return "; ".join(parts)


def to_markdown(c: Claim) -> str:
    """The claim as the page shows it: the sentence and its verdict.

    A claim not checked on this build (its measured numbers are absent) shows no
    text, only the :data:`NOT_SHOWN` comment in the page's source, so no sentence
    reaches a page with blanks where numbers belong (the build record keeps it).

    >>> to_markdown(Claim("p", "b", "On the GPU, – tokens/s.", "x > 1", NOT_CHECKED, needs="cuda"))
    '<!-- a claim about measured GPU figures: shown when they exist -->'
    """
    detail = html.escape(f"Checked at build: {c.rule} with {numbers_text(c)}", quote=True)
    if c.status == HOLDS:
        return (
            f'{c.text} <span class="gl-claim gl-claim-holds" title="{detail}">'
            "(checked on this build)</span>"
        )
    if c.status == NOT_CHECKED:  # said only with its measurement: never a sentence with blanks
        return NOT_SHOWN
    body = f"{c.text}\n\nChecked against: `{c.rule}` with {numbers_text(c)}."
    indented = "\n".join(f"    {line}" if line else "" for line in body.splitlines())
    return (
        f'!!! warning "On this build\'s machine, the numbers do not bear this out"\n\n{indented}\n'
    )


def claim(text: str, rule: str, *, needs: str | None = None) -> str:
    """Check a sentence against this page's facts and return its Markdown (see the module)."""
    return to_markdown(evaluate(text, rule, needs=needs))


_PERTURBATIONS: tuple[Callable[[float], float], ...] = (
    lambda v: 0.0,
    lambda v: -v,
    lambda v: v * 1e3,
    lambda v: v * 1e-3,
    lambda v: v + 1.0,
    lambda v: v - 1.0,
    lambda v: v * 10.0,
    lambda v: v / 10.0,
)


def can_fail(c: Claim) -> bool:
    """True when changing some number under the claim changes its verdict.

    Each numeric fact in the rule is perturbed alone (zero, negated, scaled
    up and down, shifted); a rule no perturbation can flip is a tautology.

    >>> can_fail(Claim("p", "b", "t", "a > 1 or a <= 1", HOLDS, {"a": 2.0}))
    False
    """
    if c.status == NOT_CHECKED and not all(n in c.numbers for n in fact_names(c.rule)):
        return True  # cannot be evaluated here; the GPU build checks it
    base = check_rule(c.rule, c.numbers)
    for name in fact_names(c.rule):
        value = c.numbers.get(name)
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        for change in _PERTURBATIONS:
            changed = change(float(value))
            if not math.isfinite(changed):
                continue
            try:
                if check_rule(c.rule, {**c.numbers, name: changed}) != base:
                    return True
            except ValueError:  # a perturbation divided by zero
                continue
    return False
