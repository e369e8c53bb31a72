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
* ``needs="cpu"`` marks a claim about a CPU build's own figures (published only when the
  build ran on the CPU); on another device it is recorded as not checked and not shown.
* ``needs="cuda"`` marks a claim about GPU figures: when its facts are absent
  (a CPU build with no reference bundle to publish them), it is recorded as
  *not checked on this build* instead of failing, and the page does not show it:
  a sentence is never printed with blanks where its numbers belong. Say what a
  CPU build can say with predicted and published facts in a claim of its own
  (:mod:`gpulesson.site.gpu_claims`); the measured sentence appears when a
  measurement exists.
* a claim that reads a fact this build withheld (:func:`gpulesson.site.facts.withhold`:
  it could not measure the figure, and says why) is recorded as not checked, and the
  page shows a note with the reason in the sentence's place.
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
import functools
import html
import json
import math
import operator
import re
import string
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from gpulesson.site import facts
from gpulesson.text import inert

HOLDS = "holds"
FAILS = "fails"
NOT_SHOWN = "not_shown"  # a teaching claim this build's numbers do not bear out
NOT_CHECKED = "not_checked"
STATUSES = (HOLDS, FAILS, NOT_SHOWN, NOT_CHECKED)
#: The kinds of fact a check must rest on: something measured, here or by others.
INDEPENDENT = (facts.MEASURED, facts.PUBLISHED)
NEEDS = (None, "cuda", "gpu", "cpu")
FACT_PREFIX = "claim#"
CHECK_ANCHOR = "gl-check-"  # the id of a claim's entry in "What this page checked"
#: What a claim whose measured numbers are absent prints: no visible text, a marker in the source.
WAITING = "<!-- a claim about measured GPU figures: shown when they exist -->"
#: What a sentence reading a figure this build could not measure prints (the figure's block,
#: and any claim that reads it, say why).
WITHHELD = "<!-- a sentence about a figure this build could not measure -->"

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
    teaching: bool = False  # the lesson's point: failing shows "not shown on this build"
    flip_margin: float | None = None  # see flip_margin(); None when it cannot be computed
    number: int = 0  # its place among the page's claims (1, 2, ...), its anchor's suffix
    withheld: str = ""  # NOT_CHECKED: why this build has no value for a fact it reads

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


def _record(c: Claim) -> Claim:
    """Publish the claim as a fact of its page (see the module docstring); return it numbered."""
    taken = [n for n in facts.page_facts() if n.startswith(FACT_PREFIX)]
    numbered = replace(c, number=len(taken) + 1)
    facts.publish(f"{FACT_PREFIX}{numbered.number}", json.dumps(numbered.to_dict()), "claim")
    return numbered


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


@functools.lru_cache(maxsize=1024)  # flip_margin checks one rule hundreds of times
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


def evaluate(text: str, rule: str, *, needs: str | None = None, teaching: bool = False) -> Claim:
    """Check ``rule`` against the facts published so far on this page; record the claim.

    A check must rest on something measured: at least one fact its rule reads is
    ``measured`` or ``published`` (:data:`INDEPENDENT`). A rule over constants, predictions
    and arithmetic alone is true by construction, so it is refused with the fix: write the
    sentence as a ``describe`` block (rendered from the facts, not called checked).
    """
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
    numbers = {n: known[n].value for n in wanted if n in known}
    units = {n: known[n].unit for n in numbers}
    kinds = {n: known[n].kind for n in numbers}
    if missing:
        if needs is None:
            listed = ", ".join(sorted(known)) or "none"
            raise ValueError(
                f"claim {text[:60]!r} on {page} uses {', '.join(missing)}, not published on "
                f"this page (published: {listed}); publish them in an earlier block, or pass "
                'needs="cuda" for a claim about GPU figures'
            )
        shown = _strip_fields(text)
        result = Claim(
            page, block, shown, rule, NOT_CHECKED, numbers, units, needs, kinds, teaching
        )
        return _record(result)
    withheld = facts.withheld_reason(wanted)
    if withheld:
        shown = _strip_fields(text)
        present = {n: v for n, v in numbers.items() if v is not None}
        result = Claim(
            page, block, shown, rule, NOT_CHECKED, present, units, needs, kinds, teaching
        )
        return _record(replace(result, withheld=withheld))
    rule_kinds = {n: kinds[n] for n in names}
    if not any(kind in INDEPENDENT for kind in rule_kinds.values()):
        listed = ", ".join(f"{n} ({k})" for n, k in rule_kinds.items())
        raise ValueError(
            f"claim {text[:60]!r} on {page} rests on {listed} only: a rule over constants, "
            "predictions and arithmetic cannot fail, so it checks nothing. Compare a measured "
            "or published figure, or write the sentence as a ```describe block (rendered from "
            "the facts, not called checked)"
        )
    holds = check_rule(rule, numbers)
    status = HOLDS if holds else (NOT_SHOWN if teaching else FAILS)
    margin = flip_margin(rule, numbers, kinds)
    shown = _FactFormatter(numbers).format(text)
    result = Claim(page, block, shown, rule, status, numbers, units, needs, kinds, teaching, margin)
    return _record(result)


def describe(text: str, *, needs: str | None = None) -> str:
    """A sentence rendered from this page's facts: no rule, no check, no claim record.

    What follows whatever was measured ("from batch 1 to 64 tokens/s rose 9x") is
    said this way; a sentence whose numbers are absent (``needs="cuda"`` on a CPU
    build) renders as the :data:`WAITING` comment, never with blanks.

    >>> facts.reset(); facts.begin_page("p.md"); _ = facts.publish("d.gain", 9.04, "x")
    >>> describe("Tokens/s rose {d.gain:.1f}x.")
    'Tokens/s rose 9.0x.'
    """
    if needs not in NEEDS:
        raise ValueError(f"needs={needs!r}: use one of {', '.join(map(str, NEEDS))}")
    wanted = text_fields(text)
    known = {n: f for n, f in facts.page_facts().items() if not n.startswith(FACT_PREFIX)}
    missing = [n for n in wanted if n not in known]
    if missing:
        if needs is None:
            page = facts.current_page() or "(no page)"
            raise ValueError(
                f"sentence {text[:60]!r} on {page} uses {', '.join(missing)}, not published "
                'on this page: publish them in an earlier block, or pass needs="cuda"'
            )
        return WAITING
    if facts.withheld_reason(wanted):
        return WITHHELD
    return _FactFormatter({n: known[n].value for n in wanted}).format(text)


#: Relative changes tried by :func:`flip_margin`: 1e-6 up to 1e3, eight steps a decade.
_MARGIN_STEPS = tuple(10 ** (k / 8) for k in range(-48, 25))


def flip_margin(rule: str, numbers: Mapping[str, Any], kinds: Mapping[str, str]) -> float | None:
    """The smallest relative change of one measured or published input that flips the rule.

    Each input of kind :data:`INDEPENDENT` is scaled alone by ``1 + d`` and ``1 - d``
    (``d`` from 1e-6 to 1e3, then refined by bisection); the smallest ``d`` that changes
    the verdict is the margin. None when no such change flips it: the claim cannot fail.
    A margin of 0.02 on a timing is thin for a shared machine; 50 means it would take a
    fifty-fold error to notice.

    >>> round(flip_margin("a > 2 * b", {"a": 3.0, "b": 1.0}, {"a": "measured"}), 3)
    0.333
    >>> flip_margin("a > 0 or a <= 0", {"a": 3.0}, {"a": "measured"}) is None
    True
    """
    base = check_rule(rule, numbers)

    def flips(name: str, factor: float) -> bool:
        try:
            return check_rule(rule, {**numbers, name: numbers[name] * factor}) != base
        except (ValueError, OverflowError):
            return False

    best: float | None = None
    for name in fact_names(rule):
        value = numbers.get(name)
        if kinds.get(name) not in INDEPENDENT or isinstance(value, bool):
            continue
        if not isinstance(value, int | float) or value == 0:
            continue
        for sign in (1.0, -1.0):
            low = 0.0
            for step in _MARGIN_STEPS:
                if best is not None and step >= best:
                    break
                if flips(name, 1.0 + sign * step):
                    high = step
                    for _ in range(40):
                        middle = (low + high) / 2
                        if flips(name, 1.0 + sign * middle):
                            high = middle
                        else:
                            low = middle
                    best = high if best is None else min(best, high)
                    break
                low = step
    return best


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


def _icon(c: Claim) -> str:
    """The small mark after a claim that holds: a tooltip and a link to its entry."""
    detail = html.escape(f"Checked at build: {c.rule} with {numbers_text(c)}", quote=True)
    return (
        f' <a class="gl-claim gl-claim-holds" href="#{CHECK_ANCHOR}{c.number}" '
        f'title="{detail}" aria-label="Checked claim {c.number}: see what this page checked">'
        "&#10003;</a>"
    )


def to_markdown(c: Claim) -> str:
    """The claim as the page shows it: the sentence and its verdict.

    A claim that holds is followed by a small check mark whose tooltip gives the rule and
    the numbers and whose link leads to the page's "What this page checked" list. One
    that fails is a visible warning; a teaching claim that fails says "not shown on this
    build". A claim not checked on this build (its measured numbers are absent) shows no
    text, only the :data:`WAITING` comment in the page's source, so no sentence reaches a
    page with blanks where numbers belong (the build record keeps it). One whose figure this
    build withheld shows, in the sentence's place, a collapsed note with the reason.

    >>> to_markdown(Claim("p", "b", "On the GPU, – tokens/s.", "x > 1", NOT_CHECKED, needs="cuda"))
    '<!-- a claim about measured GPU figures: shown when they exist -->'
    >>> "(checked" in to_markdown(Claim("p", "b", "Fast.", "x > 1", HOLDS, {"x": 2}, number=1))
    False
    """
    if c.status == HOLDS:
        return f"{c.text}{_icon(c)}"
    if c.status == NOT_CHECKED and c.withheld:  # said visibly, with what the reader can do
        title = "Not checked on this build: it reads a figure this build could not measure"
        return f'??? note "{title}"\n\n    {inert(c.withheld)}\n'
    if c.status == NOT_CHECKED:  # said only with its measurement: never a sentence with blanks
        return WAITING
    body = f"{c.text}\n\nChecked against: `{c.rule}` with {numbers_text(c)}."
    indented = "\n".join(f"    {line}" if line else "" for line in body.splitlines())
    title = (
        "Not shown on this build: this machine's numbers do not bear out the lesson's point"
        if c.status == NOT_SHOWN
        else "On this build's machine, the numbers do not bear this out"
    )
    return f'!!! warning "{title}"\n\n{indented}\n'


def claim(text: str, rule: str, *, needs: str | None = None, teaching: bool = False) -> str:
    """Check a sentence against this page's facts and return its Markdown (see the module)."""
    return to_markdown(evaluate(text, rule, needs=needs, teaching=teaching))


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


def margin_text(margin: float | None) -> str:
    """A flip margin in words.

    >>> margin_text(0.123), margin_text(4.0), margin_text(None)
    ('a 12% change', 'a 5-fold change', 'no change tried')
    """
    if margin is None:
        return "no change tried"
    if margin < 1:
        return f"a {margin * 100:.2g}% change"
    return f"a {1 + margin:.2g}-fold change"


_QUOTED_SPAN = re.compile(r'<span class="gl-q" title="[^"]*">(.*?)</span>')
_STATUS_WORDS = {
    HOLDS: "holds",
    FAILS: "does not hold on this build",
    NOT_SHOWN: "not shown on this build",
    NOT_CHECKED: "not checked on this build: it reads measured GPU figures this build lacks",
}


def _check_item(c: Claim, record_url: str) -> str:
    esc = html.escape
    numbers = "; ".join(
        f"{esc(name)} = {esc(_format_number(value))}"
        + (f" {esc(c.units.get(name, ''))}" if c.units.get(name) else "")
        + (f" ({esc(c.kinds[name])})" if name in c.kinds else "")
        for name, value in c.numbers.items()
    )
    what = "teaching claim" if c.teaching else "check"
    status = f"not checked on this build: {c.withheld}" if c.withheld else _STATUS_WORDS[c.status]
    parts = [
        f'<li id="{CHECK_ANCHOR}{c.number}" class="gl-check gl-check-{esc(c.status)}">',
        f"<strong>{esc(status)}</strong> ({what})",
    ]
    if c.status != NOT_CHECKED:  # the sentence as text: its quoted-figure spans unwrapped
        sentence = _QUOTED_SPAN.sub(lambda m: m.group(1), c.text)
        parts.append(f": {esc(sentence)}")
    parts.append(f"<br>Rule <code>{esc(c.rule)}</code>")
    if numbers:
        parts.append(f" with {numbers}")
    if c.status in (HOLDS, FAILS, NOT_SHOWN):
        parts.append(
            f". It flips with {margin_text(c.flip_margin)} in one measured or published number"
        )
    parts.append(f'. <a href="{esc(record_url, quote=True)}">Build record</a></li>')
    return "".join(parts)


def checks_html(page_claims: list[Claim], record_url: str) -> str:
    """The collapsible "What this page checked" list appended to a page with claims.

    Every string is HTML-escaped; each entry's id is the target of its claim's check mark.

    >>> c = Claim("p.md", "b", "A <b>.", "a > 1", HOLDS, {"a": 2.0}, {}, None,
    ...           {"a": "measured"}, False, 0.5, 1)
    >>> out = checks_html([c], "../../build-record.json")
    >>> 'id="gl-check-1"' in out and "A &lt;b&gt;." in out and "a 50% change" in out
    True
    >>> checks_html([], "x")
    ''
    """
    if not page_claims:
        return ""
    counts = {s: sum(c.status == s for c in page_claims) for s in STATUSES}
    summary = f"What this page checked: {counts[HOLDS]} of {len(page_claims)} hold"
    items = "\n".join(_check_item(c, record_url) for c in page_claims)
    return (
        f'\n<details class="gl-checks" id="gl-checks" data-search-exclude>'
        f"<summary>{html.escape(summary)}</summary>\n"
        f"<ol>\n{items}\n</ol>\n</details>\n"
    )
