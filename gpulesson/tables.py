"""The one Markdown table helper: every table a lesson, a page or a command prints goes here.

A table is a header and rows of cells already formatted as text; ``align`` is one letter
per column (``l`` left, ``r`` right, ``c`` centre), default: the first column left and the
rest right, as the course's tables of figures read. Cells are written as given: a cell
holding contributed text (a device name from a bundle, a YAML field) must pass through
:func:`gpulesson.text.inert` first, which is what ``inert_cells=True`` does for every
cell. A pipe inside a cell would start a new column, so it is refused unless escaped.

>>> print(markdown_table(("n", "GFLOP/s"), [("64", "1.5"), ("128", "9.0")]))
| n | GFLOP/s |
|---|---:|
| 64 | 1.5 |
| 128 | 9.0 |
>>> print(markdown_table(("a", "b"), [("x", "y")], align="cc"))
| a | b |
|:---:|:---:|
| x | y |
>>> markdown_table(("a", "b"), [("only one",)])
Traceback (most recent call last):
...
ValueError: table row 1 has 1 cells for 2 columns: give every row one cell per header column
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from gpulesson.text import inert

_RULES = {"l": "---", "r": "---:", "c": ":---:"}
_BARE_PIPE = re.compile(r"(?<!\\)\|")


def markdown_table(
    header: Sequence[str],
    rows: Iterable[Sequence[object]],
    *,
    align: str | None = None,
    inert_cells: bool = False,
) -> str:
    """A Markdown table of ``header`` and ``rows``; ValueError for a ragged row or bad align."""
    width = len(header)
    if align is None:
        align = "l" + "r" * (width - 1)
    if len(align) != width or set(align) - set(_RULES):
        raise ValueError(
            f"table align {align!r} does not fit {width} columns: give one of l, r, c per column"
        )
    lines = [_row(header), "|" + "|".join(_RULES[a] for a in align) + "|"]
    for number, row in enumerate(rows, start=1):
        cells = [inert(str(c)) if inert_cells else str(c) for c in row]
        if len(cells) != width:
            raise ValueError(
                f"table row {number} has {len(cells)} cells for {width} columns: "
                "give every row one cell per header column"
            )
        for cell in cells:
            if _BARE_PIPE.search(cell):
                raise ValueError(
                    f"table row {number} cell {cell!r} holds a bare '|': escape it as '\\|'"
                )
        lines.append(_row(cells))
    return "\n".join(lines)


def _row(cells: Sequence[str]) -> str:
    """One row: each cell between pipes with a space either side; an empty cell is one space.

    >>> _row(["", "value"])
    '| | value |'
    """
    return "|" + "|".join(f" {c} " if c else " " for c in cells) + "|"
