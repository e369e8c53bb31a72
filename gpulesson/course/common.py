"""What several lessons' quiz questions share: the numbers a templated question shows.

A templated question in ``docs/lessons/<stem>.quiz.yml`` names the facts it reads and one
function (``values: gpulesson.course.common:decades``, or a function in its own lesson's
module, ``gpulesson.course.<lesson>``). The function takes ``{fact name: value}`` and
returns the named values that the question's prompt, options and reasons put in
``{placeholders}``: the arithmetic lives in the lesson's room, the words in the YAML. Such
a question stands before the block that computes its answer (``before:``), so the page
asks first and shows the number after. Each function must keep the options apart
whatever the facts are (:func:`gpulesson.site.quizzes.fill` refuses two options that read
the same). The ones here serve several lessons: :func:`decades` (the order of magnitude
of one figure) and :func:`named_figures` (several figures the page computed), with
:func:`about` and :func:`figure`, how a quiz prints a number.

>>> decades({"timing.inflation": 1.18})["value"]
'1.2'
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


def about(x: float, figures: int = 2) -> str:
    """``x`` rounded to ``figures`` significant figures, with thousands separators.

    >>> about(1234.5), about(0.1183), about(9.96), about(1234.5, 3)
    ('1,200', '0.12', '10', '1,230')
    """
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x) or x <= 0:
        raise ValueError(f"{x!r} is not a positive number: publish the fact as one")
    rounded = float(f"{x:.{figures}g}")
    decimals = max(0, figures - 1 - math.floor(math.log10(rounded)))
    return f"{rounded:,.{decimals}f}"


def decades(facts: Mapping[str, Any]) -> dict[str, str]:
    """The one fact's value to two figures, and values ten times smaller, larger and 100x larger.

    The four always read differently, so a question can offer them as options
    and ask the reader for the order of magnitude. ``measured`` is the value to
    three figures, for the explanations.

    >>> decades({"timing.inflation": 812.7})
    {'value': '810', 'tenth': '81', 'tenfold': '8,100', 'hundredfold': '81,000', 'measured': '813'}
    >>> decades({"a": 1, "b": 2})
    Traceback (most recent call last):
    ...
    ValueError: decades reads exactly one fact, got 2 (a, b): list one under facts
    """
    if len(facts) != 1:
        raise ValueError(
            f"decades reads exactly one fact, got {len(facts)} ({', '.join(facts)}): "
            "list one under facts"
        )
    (x,) = facts.values()
    return {
        "value": about(x),
        "tenth": about(x / 10),
        "tenfold": about(x * 10),
        "hundredfold": about(x * 100),
        "measured": about(x, 3),
    }


def figure(x: float) -> str:
    """A computed figure as a lesson prints it: whole from 100 up, else 3 significant figures.

    >>> figure(112.0), figure(12.885), figure(1.0), figure(0.125), figure(1234.5)
    ('112', '12.9', '1', '0.125', '1,234')
    """
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x) or x <= 0:
        raise ValueError(f"{x!r} is not a positive number: publish the fact as one")
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def named_figures(facts: Mapping[str, Any]) -> dict[str, str]:
    """Each fact's value as :func:`figure` prints it, under its last dotted name.

    For questions whose options are several figures the page computed (the 7B
    bills of several recipes, one card under several uses): the options are the
    page's own numbers, the question says which one is right.

    >>> named_figures({"budget.amp_7b_gb": 112.0, "budget.bf16_7b_gb": 84.0})
    {'amp_7b_gb': '112', 'bf16_7b_gb': '84'}
    >>> named_figures({"a.x": 1.0, "b.x": 2.0})
    Traceback (most recent call last):
    ...
    ValueError: named_figures: a.x and b.x share the name 'x': give facts distinct last names
    """
    out: dict[str, str] = {}
    owner: dict[str, str] = {}
    for name, value in facts.items():
        short = name.rsplit(".", 1)[-1]
        if short in owner:
            raise ValueError(
                f"named_figures: {owner[short]} and {name} share the name {short!r}: "
                "give facts distinct last names"
            )
        owner[short] = name
        out[short] = figure(value)
    return out
