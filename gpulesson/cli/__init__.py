"""The ``gpulesson`` command line: one subcommand per module.

Each subcommand lives in ``gpulesson/cli/<name>.py`` with a ``register``
function. Bad input exits 2 with one line on stderr naming the problem and
the fix: argparse errors through ``_Parser.error``, and any ``ValueError``
raised by the API through ``main``. Output is plain text unless ``--json``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from gpulesson import __version__
from gpulesson.cli import bench as cli_bench
from gpulesson.cli import budget as cli_budget
from gpulesson.cli import diagnose as cli_diagnose
from gpulesson.cli import probe as cli_probe


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line on stderr and exit 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


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
    cli_probe.register(commands)
    cli_bench.register(commands)
    cli_diagnose.register(commands)
    cli_budget.register(commands)
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
    except BrokenPipeError:
        # The reader went away (`gpulesson probe | head`): stop quietly, as cat does.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
