"""The ``gpulesson`` command line: one subcommand per module.

Each subcommand lives in ``gpulesson/cli/<name>.py`` with a ``register``
function, and imports its heavy parts (torch) only when it runs: building the
parser, ``--help`` and a bad argument never import torch. Bad input exits 2
with one line on stderr naming the problem and the fix: argparse errors through
``_Parser.error``, and any ``ValueError`` raised by the API through ``main``.
Output that cannot be written (a full disk) is one line on stderr and exit 1.
A reader that went away (a closed pipe) or a stdout closed before the command
started (``gpulesson budget ... >&-``, where Python leaves ``sys.stdout`` as
``None``) stops the command quietly at its first write, status 0.
Output is plain text unless ``--json``.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any, TextIO

from gpulesson import __version__

#: Exit status when the output cannot be written (as ``cat`` on a full disk).
OUTPUT_ERROR_STATUS = 1


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line on stderr and exit 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The full parser; the CLI reference page is generated from it.

    >>> build_parser().parse_args(["probe", "--json"]).json
    True
    """
    # Each module is cheap to import: it registers options and leaves torch for `run`.
    from gpulesson.cli import bench, budget, compare, diagnose, measure, probe

    parser = _Parser(
        prog="gpulesson",
        description="Tools from the GPU course: probe this machine, time matmuls, "
        "budget memory, diagnose errors.",
    )
    parser.add_argument("--version", action="version", version=f"gpulesson {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True
    for module in (probe, bench, diagnose, budget, measure, compare):
        module.register(commands)
    return parser


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse; an unknown option is reported by its subcommand, which names its own --help."""
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        subparsers.choices[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


class OutputError(OSError):
    """Writing the command's output failed (a full disk, an unwritable file)."""


@contextlib.contextmanager
def _output_errors() -> Iterator[None]:
    """Turn an OSError from writing stdout into OutputError; a closed pipe stays as it is."""
    try:
        yield
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise OutputError(exc.errno, exc.strerror) from exc


class _Stdout:
    """``sys.stdout`` while a command runs: a failed write raises :class:`OutputError`.

    So ``main`` can tell "cannot write the output" from an OSError a command met while
    reading its input. Everything but ``write`` and ``flush`` goes to the real stream.
    """

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        with _output_errors():
            return self._stream.write(text)

    def flush(self) -> None:
        with _output_errors():
            self._stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _ClosedStdout:
    """``sys.stdout`` when the process started with file descriptor 1 closed.

    Python then sets ``sys.stdout`` to ``None``; every write here is a closed pipe,
    so the command stops as it does when its reader has gone.
    """

    def write(self, text: str) -> int:
        raise BrokenPipeError(errno.EBADF, "stdout is closed")

    def flush(self) -> None:
        raise BrokenPipeError(errno.EBADF, "stdout is closed")

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        raise OSError(errno.EBADF, "stdout is closed")


def _discard_output(stream: TextIO | None) -> None:
    """Point stdout's file at /dev/null, so the flush at exit cannot fail a second time."""
    if stream is None:  # no stdout at all: nothing is flushed at exit
        return
    with contextlib.suppress(OSError, ValueError):  # not a real file (tests capture it)
        os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``gpulesson`` console script; returns the exit status.

    >>> main(["budget", "--params", "1e9", "--preset", "fp32", "--json"])  # doctest: +ELLIPSIS
    {...
    0
    """
    stdout = sys.stdout
    sys.stdout = _Stdout(_ClosedStdout() if stdout is None else stdout)  # type: ignore[arg-type,assignment]
    command = "gpulesson"
    try:
        parser = build_parser()
        try:
            args = _parse(parser, argv)
        except SystemExit:  # --help, --version or a usage error: argparse has written it
            sys.stdout.flush()
            raise
        command = f"gpulesson {args.command}"
        status = int(args.func(args))
        sys.stdout.flush()
        return status
    except ValueError as exc:
        print(f"{command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`gpulesson probe | head`): stop quietly, as cat does.
        _discard_output(stdout)
        return 0
    except OutputError as exc:
        _discard_output(stdout)
        print(
            f"{command}: error: cannot write the output ({exc.strerror}): "
            "send it to a file or pipe that can take it",
            file=sys.stderr,
        )
        return OUTPUT_ERROR_STATUS
    finally:
        sys.stdout = stdout
