"""Numbers for quiz questions that ask the reader to predict a figure the page computed.

A templated question in ``docs/lessons/<stem>.quiz.yml`` names the facts it
reads and one function here (``values: gpulesson.site.quiz_values:decades``).
The function takes ``{fact name: value}`` and returns the named values that the
question's prompt, options and reasons put in ``{placeholders}``: the
arithmetic lives here, the words in the YAML. Each function must keep the
options apart whatever the facts are (:func:`gpulesson.site.quizzes.fill`
refuses two options that read the same).

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
