"""``gpulesson diagnose``: read an error message from a file or stdin and diagnose it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpulesson.errors import diagnose
from gpulesson.errors import render as diagnose_render

# Bigger inputs are not error messages; reading stops here.
MAX_INPUT_BYTES = 4 * 2**20


def register(commands: argparse._SubParsersAction) -> None:
    """Add the ``diagnose`` subcommand."""
    parser = commands.add_parser(
        "diagnose",
        help="read an error message (OOM, CUDA error) and say what kind it is and what to do",
        description="Classify a PyTorch error message (CUDA, MPS or host out-of-memory, "
        "device-side assert, illegal memory access, no kernel image, driver problems), "
        "read the numbers in it in bytes, and list the fixes to try in order. Paste a whole "
        "traceback: the message is found inside it.",
    )
    parser.add_argument(
        "file",
        nargs="?",
        metavar="FILE",
        help="file holding the error text; read from stdin when omitted or '-'",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


def read_input(file: str | None) -> str:
    """The error text from ``file`` or stdin; ValueError when missing, empty or binary."""
    if file in (None, "-"):
        data = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
        source = "stdin"
    else:
        path = Path(file)
        if not path.is_file():
            raise ValueError(f"no such file: {file!r}; give the path of a file holding the error")
        with path.open("rb") as handle:
            data = handle.read(MAX_INPUT_BYTES + 1)
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
    result = diagnose.diagnose(read_input(args.file))
    print(diagnose_render.to_json(result) if args.json else diagnose_render.to_text(result))
    return 0
