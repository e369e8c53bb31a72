"""The ``gpulesson`` command line: one subcommand per module.

Bad input exits 2 with one line on stderr naming the problem and the fix.
Output is plain text unless ``--json`` is given.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from gpulesson import __version__, probe


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line on stderr and exit 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _run_probe(args: argparse.Namespace) -> int:
    report = probe.probe()
    print(probe.to_json(report) if args.json else probe.to_text(report))
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The full parser; the CLI reference page is generated from it."""
    parser = _Parser(
        prog="gpulesson",
        description="Tools from the GPU course: probe this machine, time matmuls, "
        "budget memory, diagnose errors.",
    )
    parser.add_argument("--version", action="version", version=f"gpulesson {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True

    probe_parser = commands.add_parser(
        "probe",
        help="report this machine's GPU stack and why CUDA is or is not usable",
        description="Report Python, torch, CUDA, MPS, CPU, RAM and the NVIDIA driver, "
        "and name the case when CUDA is not usable.",
    )
    probe_parser.add_argument("--json", action="store_true", help="print one JSON object")
    probe_parser.set_defaults(func=_run_probe)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``gpulesson`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except ValueError as exc:
        print(f"gpulesson {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"gpulesson {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
