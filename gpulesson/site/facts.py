"""Numbers that executed blocks publish, so later blocks on the page use the same figures.

A lesson's prose, quiz and checked claims must agree with the numbers its
executed blocks printed. A block *publishes* the figures it computed::

    from gpulesson.site import facts
    result = async_illusion(...)
    facts.publish("timing.naive_speedup", result.naive_speedup, "x")
    print(illusion_markdown(result))

and a later block on the same page (a quiz question, a checked claim, a
sentence rendered from the number) reads them with :func:`value` or
:func:`get`. The execution cache (:mod:`gpulesson.site.exec_cache`) stores
the facts a block published beside its printed output and replays them when it
serves the block from the cache, so a cached build sees exactly the facts a
fresh build would. A block's cache key includes :func:`page_digest` (every fact
published before it on the page), so a block that reads facts is re-run when
they change.

A figure this build could not measure (its machine lacks what the measurement needs, or
the measurement leaves it undefined) is *withheld* with the reason instead
(:func:`withhold`): a checked claim or a sentence that reads it shows the reason, never a
blank, and a quiz question that reads it is left out (:mod:`gpulesson.site.claims`,
:mod:`gpulesson.site.quizzes`).

Facts are page-scoped: a block sees what earlier blocks of its own page
published. :func:`all_facts` gives every page's facts after the build (for the
build record).

>>> reset()
>>> begin_page("lessons/timing.md")
>>> begin_block("timing-illusion")
>>> publish("timing.naive_speedup", 812.5, "x")
812.5
>>> [f.name for f in end_block()]
['timing.naive_speedup']
>>> value("timing.naive_speedup")
812.5
>>> get("timing.naive_speedup").block_id
'timing-illusion'
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

FactValue = float | int | str | bool

MEASURED = "measured"
PUBLISHED = "published"
PREDICTED = "predicted"
CONSTANT = "constant"
DERIVED = "derived"
KINDS = (MEASURED, PUBLISHED, PREDICTED, CONSTANT, DERIVED)
""" What a number is, so a claim knows whether it checks anything (``claims.INDEPENDENT``):

* ``measured``: computed by this build's own run (a timing, a traced or tracked peak, a
  FlopCounterMode count, a probe reading) or read from a result bundle of ours; arithmetic
  over measured figures (a ratio of two timings) stays ``measured``: it carries their noise.
* ``published``: a measurement by others (``gpulesson/results/published.json``).
* ``predicted``: a teaching model's figure (the memory estimate, a roofline time, a
  datasheet bound, a teaching example's arithmetic).
* ``constant``: a cited or defined fixed figure (a datasheet peak, bytes per fp16 value, a
  figure a source states).
* ``derived``: arithmetic over predicted and constant facts only.

:func:`publish` defaults to ``measured``; lessons state every fact's kind (a test checks).
"""


@dataclass(frozen=True)
class Fact:
    """One published figure: its name, value and unit, and where on the site it came from.

    A withheld fact (:func:`withhold`) has no value: ``value`` is None and ``withheld``
    says why this build does not have it.
    """

    name: str
    value: FactValue | None
    unit: str
    page: str
    block_id: str
    kind: str = MEASURED
    withheld: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The fact as plain JSON data (``withheld`` only when the fact is)."""
        data = asdict(self)
        if not self.withheld:
            del data["withheld"]
        return data


_pages: dict[str, dict[str, Fact]] = {}
_page: str | None = None
_block: str | None = None
_published: list[Fact] = []


def reset() -> None:
    """Forget every fact (the start of a build)."""
    global _page, _block
    _pages.clear()
    _published.clear()
    _page = None
    _block = None


def begin_page(page: str) -> None:
    """Blocks from now on belong to ``page`` (its source path, e.g. ``lessons/timing.md``).

    A page rendered again in the same build (``mkdocs serve``) starts empty.
    """
    global _page
    _page = page
    _pages[page] = {}


def current_page() -> str | None:
    """The page whose blocks are running, or None outside a build."""
    return _page


def begin_block(block_id: str) -> None:
    """An executed block is about to run (or be replayed from the cache)."""
    global _block
    _block = block_id
    _published.clear()


def end_block() -> list[Fact]:
    """The block has finished: the facts it published, in order."""
    global _block
    published = list(_published)
    _published.clear()
    _block = None
    return published


def _check(name: str, value: Any) -> FactValue:
    if not isinstance(name, str) or not name or any(c.isspace() for c in name):
        raise ValueError(
            f"fact name {name!r} must be a non-empty word, e.g. 'timing.naive_speedup'"
        )
    if isinstance(value, bool | str | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"fact {name!r} has the non-finite value {value!r}: publish a number")
        return value
    try:  # numpy and torch scalars
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(
            f"fact {name!r} has a value of type {type(value).__name__}: "
            "publish a number, a string or a bool"
        ) from None
    return _check(name, number)


def _check_kind(name: str, kind: str) -> str:
    if kind not in KINDS:
        raise ValueError(f"fact {name!r} has kind {kind!r}: use one of {', '.join(KINDS)}")
    return kind


def publish(name: str, value: Any, unit: str = "", kind: str = MEASURED) -> Any:
    """Publish ``value`` under ``name`` for the rest of the page; returns ``value``.

    Names are dotted, topic first (``roofline.bandwidth_roof``); ``unit`` is
    free text (``"GB/s"``, ``"x"``, ``"s"``). Publishing a name twice on one
    page keeps the later value. ``kind`` says what the number is (:data:`KINDS`).

    >>> reset(); begin_page("p.md")
    >>> _ = publish("gpu.peak", 9.895e14, "FLOP/s", kind=PREDICTED)
    >>> get("gpu.peak").kind
    'predicted'
    >>> publish("gpu.peak", 1.0, kind="guessed")
    Traceback (most recent call last):
    ...
    ValueError: fact 'gpu.peak' has kind 'guessed': use one of measured, published, predicted, \
constant, derived
    """
    checked = _check(name, value)
    page = _page or "(no page)"
    fact = Fact(name, checked, unit, page, _block or "(no block)", _check_kind(name, kind))
    _pages.setdefault(page, {})[name] = fact
    _published.append(fact)
    return value


def withhold(name: str, reason: str, unit: str = "", kind: str = MEASURED) -> None:
    """Say that this build has no value for ``name``, and why, in a sentence a reader can act on.

    >>> reset(); begin_page("p.md")
    >>> withhold("f.speedup", "torch.compile found no C++ compiler: install g++ or clang")
    >>> value("f.speedup")
    Traceback (most recent call last):
    ...
    ValueError: fact 'f.speedup' is not measured on this build: torch.compile found no C++ \
compiler: install g++ or clang
    """
    _check(name, 0)
    if not isinstance(reason, str) or not reason.strip():
        raise ValueError(f"fact {name!r} is withheld without a reason: say why in a sentence")
    page = _page or "(no page)"
    fact = Fact(name, None, unit, page, _block or "(no block)", _check_kind(name, kind), reason)
    _pages.setdefault(page, {})[name] = fact
    _published.append(fact)


def replay(page_facts: list[dict[str, Any]]) -> None:
    """Publish again what a cached block published when it ran (see the module docstring)."""
    for data in page_facts:
        unit, kind = data.get("unit", ""), data.get("kind", MEASURED)
        if data.get("withheld"):
            withhold(data["name"], data["withheld"], unit, kind)
        else:
            publish(data["name"], data["value"], unit, kind)


def restore(page_facts: list[dict[str, Any]]) -> None:
    """Put back facts published before, with their page and block, without publishing them.

    The worker process that runs blocks (:mod:`gpulesson.site.block_worker`) starts
    each block from the facts its page has so far, so the block reads them as it would
    in the build process.

    >>> reset(); begin_page("p.md")
    >>> restore([{"name": "x", "value": 2, "unit": "s", "page": "p.md", "block_id": "b"}])
    >>> get("x").block_id, end_block()
    ('b', [])
    """
    for data in page_facts:
        withheld = str(data.get("withheld") or "")
        fact = Fact(
            name=data["name"],
            value=None if withheld else _check(data["name"], data["value"]),
            unit=data.get("unit", ""),
            page=data["page"],
            block_id=data["block_id"],
            kind=_check_kind(data["name"], data.get("kind", MEASURED)),
            withheld=withheld,
        )
        _pages.setdefault(fact.page, {})[fact.name] = fact


def get(name: str, page: str | None = None) -> Fact:
    """The fact ``name`` published earlier on ``page`` (default: the page being built).

    Raises ``ValueError`` naming the facts that do exist, so a typo in a lesson
    fails the build with the fix in the message.
    """
    where = page or _page or "(no page)"
    known = _pages.get(where, {})
    if name not in known:
        listed = ", ".join(sorted(known)) or "none yet"
        raise ValueError(
            f"no fact {name!r} on {where}: publish it in an earlier block "
            f"(facts on this page so far: {listed})"
        )
    return known[name]


def value(name: str, page: str | None = None) -> FactValue:
    """The value of fact ``name``; see :func:`get`. A withheld fact raises ``ValueError``
    with the reason."""
    fact = get(name, page)
    if fact.value is None:
        raise ValueError(f"fact {name!r} is not measured on this build: {fact.withheld}")
    return fact.value


def withheld_reason(names: Iterable[str], page: str | None = None) -> str:
    """Why ``page`` has no value for some of ``names``: each withheld fact's reason, once,
    joined by "; "; '' when it has them all (a name never published is not withheld:
    reading it fails, naming it).

    >>> reset(); begin_page("p.md"); _ = publish("a", 1)
    >>> withhold("b", "no C++ compiler"); withhold("c", "no C++ compiler")
    >>> withheld_reason(["a", "b", "c", "d"]), withheld_reason(["a"])
    ('no C++ compiler', '')
    """
    known = _pages.get(page or _page or "(no page)", {})
    return "; ".join(
        dict.fromkeys(known[n].withheld for n in names if n in known and known[n].withheld)
    )


def page_facts(page: str | None = None) -> dict[str, Fact]:
    """Every fact published so far on ``page`` (default: the current one)."""
    return dict(_pages.get(page or _page or "(no page)", {}))


def all_facts() -> dict[str, dict[str, Fact]]:
    """Every page's facts, for the build record."""
    return {page: dict(facts) for page, facts in _pages.items()}


def page_digest(page: str | None = None) -> str:
    """A hash of the facts published so far on the page: part of a block's cache key.

    >>> reset(); begin_page("p.md"); empty = page_digest()
    >>> _ = publish("x", 1)
    >>> empty == page_digest()
    False
    """
    facts = page_facts(page)
    ordered = sorted(facts.values(), key=lambda f: f.name)
    data = [
        [f.name, f.value, f.unit, f.kind] + ([f.withheld] if f.withheld else []) for f in ordered
    ]
    return hashlib.sha256(json.dumps(data).encode()).hexdigest()
