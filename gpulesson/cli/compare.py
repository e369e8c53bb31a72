"""``gpulesson compare``: your bundle beside others, figure by figure, in the terminal.

``gpulesson compare MINE.json [OTHER.json ...]`` validates every file (a bad one exits 2
with one line naming the file and field), then prints each headline figure of MINE beside
each other bundle's, with the ratio and each figure's fraction of its datasheet peak.
Without OTHER files it compares against the reference bundles in ``./results/reference``
when run from a clone of the repository (``--results DIR`` points elsewhere); with nothing
to compare against it prints MINE's own figures. ``--all`` shows every figure, not only the
headline ones; ``--json`` prints the comparison as one JSON object. No torch is imported.
"""

from __future__ import annotations

import argparse
from pathlib import Path

DEFAULT_RESULTS = Path("results")


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
        default=DEFAULT_RESULTS,
        help="the results folder of a clone, holding reference/ (default: ./results)",
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
    mine = Sourced(load(args.mine), "given", args.mine.name)
    if args.others:
        others = tuple(Sourced(load(path), "given", path.name) for path in args.others)
    else:
        references = load_dir(args.results / "reference", "reference")
        mine_path = args.mine.resolve()
        others = tuple(
            s for s in references if (args.results / "reference" / s.file).resolve() != mine_path
        )
    comparison = compare(mine, others, headline_only=not args.all)
    if args.json:
        data = {
            "mine": {"file": mine.file, "label": mine.label},
            "others": [{"file": o.file, "label": o.label, "source": o.source} for o in others],
            "rows": [dataclasses.asdict(row) for row in comparison.rows],
        }
        print(json.dumps(data, indent=2))
    else:
        print(comparison_to_text(comparison))
    return 0
