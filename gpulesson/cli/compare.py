"""``gpulesson compare``: your bundle beside others, figure by figure, in the terminal.

``gpulesson compare MINE.json [OTHER.json ...]`` validates every file (a bad one exits 2
with one line naming the file and field), then prints each headline figure of MINE beside
each other bundle's, with the ratio and each figure's fraction of its datasheet peak.
Without OTHER files it compares against the reference bundles in ``./results/reference``
when run from a clone of the repository (``--results DIR`` points elsewhere); with nothing
to compare against it prints MINE's own figures. ``--all`` shows every figure, not only the
headline ones; ``--json`` prints the comparison as one JSON object. No torch is imported.

Every file is read as :func:`gpulesson.results.bundle.load` reads it: a link, a device
(``/dev/zero``), a FIFO, an oversized file or a value no page can carry exits 2 at once
with one line. The text printed has no terminal control sequence in it, whatever a
bundle's strings held (:func:`terminal_text`); ``--json`` is strict JSON (no ``NaN``). A
``--results`` folder that does not exist exits 2 naming it.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

DEFAULT_RESULTS = Path("results")
#: Escape sequences (CSI, OSC, DCS/SOS/PM/APC strings, two-character ones) and C1's CSI.
_ESCAPE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]?"
    r"|\x1b[\]PX^_][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[ -/]*[0-~]?"
    r"|\x9b[0-?]*[ -/]*[@-~]?"
)
#: What is left after the sequences: C0 (but the newline), DEL, C1, separators, bidi.
_CONTROL = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)


def terminal_text(text: str) -> str:
    """``text`` without terminal control sequences or control characters (newlines kept).

    >>> terminal_text("GPU \\x1b[31mred\\x1b[0m \\x1b]0;title\\x07ok\\x9b2J\\r\\nnext")
    'GPU red ok\\nnext'
    """
    return _CONTROL.sub("", _ESCAPE.sub("", text))


def register(commands: argparse._SubParsersAction) -> None:
    """Add the ``compare`` subcommand."""
    parser = commands.add_parser(
        "compare",
        help="compare a result bundle with reference bundles or other bundles",
        description="Print MINE's figures beside other bundles' (the reference bundles in "
        "./results/reference when none are given), with ratios and fractions of datasheet "
        "peaks. Make a bundle with: gpulesson measure --out mine.json",
    )
    # Optional for argparse only, so a missing bundle gets this module's one-line message
    # (argparse's would call OTHER.json required too).
    parser.add_argument("mine", metavar="MINE.json", type=Path, nargs="?", help="your bundle")
    parser.add_argument(
        "others",
        metavar="OTHER.json",
        type=Path,
        nargs="*",
        help="bundles to compare against (default: the reference bundles in --results)",
    )
    parser.add_argument(
        "--results",
        metavar="DIR",
        type=Path,
        default=None,
        help="the results folder of a clone, holding reference/ (default: ./results, "
        "skipped when absent; a DIR given must exist)",
    )
    parser.add_argument(
        "--all", action="store_true", help="every figure, not only the headline ones"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Load and validate the bundles, compare them, print the table or JSON."""
    import dataclasses
    import json

    from gpulesson.results.bundle import load
    from gpulesson.results.compare import Sourced, compare, load_dir
    from gpulesson.results.render import comparison_to_text

    if args.mine is None:
        raise ValueError(
            "no bundle given: name yours, like gpulesson compare mine.json "
            "(make it with gpulesson measure --out mine.json)"
        )
    if args.results is not None and not args.results.is_dir():
        raise ValueError(
            f"--results {args.results}: no such folder: name the results folder of a clone "
            "(it holds reference/), or leave --results out"
        )
    results = DEFAULT_RESULTS if args.results is None else args.results
    mine = Sourced(load(args.mine, str(args.mine)), "given", args.mine.name)
    if args.others:
        others = tuple(Sourced(load(path, str(path)), "given", path.name) for path in args.others)
    else:
        references = load_dir(results / "reference", "reference")
        mine_path = args.mine.resolve()
        others = tuple(
            s for s in references if (results / "reference" / s.file).resolve() != mine_path
        )
    comparison = compare(mine, others, headline_only=not args.all)
    if args.json:
        data = {
            "mine": {"file": mine.file, "label": mine.label},
            "others": [{"file": o.file, "label": o.label, "source": o.source} for o in others],
            "rows": [dataclasses.asdict(row) for row in comparison.rows],
        }
        print(json.dumps(data, indent=2, allow_nan=False))
    else:
        print(terminal_text(comparison_to_text(comparison)))
    return 0
