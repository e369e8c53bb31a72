"""``gpulesson diagnose``: read an error message from a file, a pipe or stdin and diagnose it.

Registering the subcommand imports nothing heavy; the diagnosis modules are
imported only once the input has been read, so a bad argument fails fast.
"""

from __future__ import annotations

import argparse
import os
import stat
import sys

# Bigger inputs are not error messages; reading stops here.
MAX_INPUT_BYTES = 4 * 2**20


def register(commands: argparse._SubParsersAction) -> None:
    """Add the ``diagnose`` subcommand."""
    parser = commands.add_parser(
        "diagnose",
        help="read an error message (OOM, CUDA, NCCL error) and say what kind it is and what to do",
        description="Classify a PyTorch error message (CUDA, MPS or host out-of-memory, "
        "device-side assert, illegal memory access, no kernel image, driver problems, NCCL "
        "timeouts and errors), read the numbers in it in bytes, and list the fixes to try in "
        "order. Paste a whole traceback or log: the message is found inside it.",
    )
    parser.add_argument(
        "file",
        nargs="?",
        metavar="FILE",
        help="file or pipe holding the error text (up to 4 MiB); read from stdin when "
        "omitted or '-'",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


def _read_path(file: str) -> bytes:
    """Up to MAX_INPUT_BYTES + 1 bytes of ``file``: a regular file, a pipe or a device."""
    try:
        mode = os.stat(file).st_mode
    except FileNotFoundError:
        raise ValueError(
            f"no such file: {file!r}; give the path of a file holding the error"
        ) from None
    except OSError as exc:
        raise ValueError(f"cannot open {file!r}: {exc.strerror}; give a readable file") from None
    if stat.S_ISDIR(mode):
        raise ValueError(f"{file!r} is a directory; give the path of a file holding the error")
    try:
        with open(file, "rb") as handle:
            return handle.read(MAX_INPUT_BYTES + 1)
    except OSError as exc:
        raise ValueError(
            f"cannot read {file!r}: {exc.strerror}; give a file or pipe holding the error text"
        ) from None


def read_input(file: str | None) -> str:
    """The error text from ``file`` or stdin; ValueError when missing, unreadable, empty or binary.

    A pipe is valid input (``gpulesson diagnose <(kubectl logs pod)``): only a
    missing path, a directory or a read error is refused.
    """
    if file in (None, "-"):
        stream = getattr(sys.stdin, "buffer", None)
        if stream is None:
            raise ValueError("stdin is closed: pipe the error text in or give a FILE")
        data = stream.read(MAX_INPUT_BYTES + 1)
        source = "stdin"
    else:
        data = _read_path(file)
        source = repr(file)
    if len(data) > MAX_INPUT_BYTES:
        raise ValueError(
            f"{source} is larger than {MAX_INPUT_BYTES // 2**20} MiB: paste the traceback, "
            "not the whole log"
        )
    if b"\x00" in data:
        raise ValueError(f"{source} looks binary (it holds NUL bytes): give the error as text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{source} is not UTF-8 text (byte {exc.start}): give the error as text"
        ) from None
    if not text.strip():
        raise ValueError(f"{source} is empty: paste the error message or the whole traceback")
    return text


def run(args: argparse.Namespace) -> int:
    """Diagnose the message and print the report."""
    text = read_input(args.file)
    from gpulesson.errors import diagnose
    from gpulesson.errors import render as diagnose_render

    result = diagnose.diagnose(text)
    print(diagnose_render.to_json(result) if args.json else diagnose_render.to_text(result))
    return 0
