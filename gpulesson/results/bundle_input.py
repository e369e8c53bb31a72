"""Reading a bundle file nobody vouches for: bounded, regular files only, strict JSON.

Bundles arrive by pull request (``results/reference/``, ``results/community/``) and as
files named on ``gpulesson compare``'s command line, so the reader refuses, before the
schema sees anything, what a page cannot carry:

* a file that is not a regular file (a symbolic link, a device such as ``/dev/zero``, a
  FIFO, a folder), checked with ``lstat`` before anything is opened and again on the open
  descriptor; a file over :data:`MAX_BUNDLE_BYTES` (at most that many bytes plus one are
  ever read);
* text that is not UTF-8, nesting deeper than :data:`MAX_DEPTH` (found by scanning the
  text before the recursive JSON parser runs), ``NaN``, ``Infinity`` and ``-Infinity``,
  numbers beyond :data:`MAX_MAGNITUDE` or non-zero ones below :data:`MIN_MAGNITUDE` (so
  every ratio of two figures is a finite number), and a key that appears twice in one
  object;
* strings longer than :data:`MAX_STRING_CHARS` (keys: :data:`MAX_KEY_CHARS`), and strings
  holding a control character (C0, DEL, C1: an escape sequence starts with one), a line
  or paragraph separator, a bidirectional-text control or a lone surrogate: bundle text is
  one plain line.

Each refusal raises :class:`FieldError`, a ``ValueError`` with one printable line naming
the field (a JSON path such as ``measurements[3].params.flop``) and what to do.

>>> loads_strict('{"a": [1, 2.5, "x"]}')
{'a': [1, 2.5, 'x']}
>>> check_values(loads_strict('{"a": NaN}'))
Traceback (most recent call last):
...
gpulesson.results.bundle_input.FieldError: a: NaN is not a finite number: write a number \
(a page cannot show NaN)
>>> printable("red \\x1b[31m text")
'red \\\\x1b[31m text'
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_BUNDLE_BYTES = 4 * 1024 * 1024  # a --quick CPU run writes about 39 KB (34 figures)
MAX_DEPTH = 16  # a bundle nests 4 deep (measurements[i].spread.median)
MAX_STRING_CHARS = 2000  # the longest string of that run is 213 characters
MAX_KEY_CHARS = 100
MAX_MAGNITUDE = 1e30  # no figure of one machine is larger (FLOP/s are ~1e16, bytes ~1e13)
MIN_MAGNITUDE = 1e-30  # nor, other than 0, smaller (seconds per call are ~1e-9)
MAX_SHOWN_CHARS = 60  # of a key or value quoted in a message

#: Characters no bundle string may hold: C0, DEL and C1 controls, line and paragraph
#: separators, bidirectional-text controls and lone surrogates.
FORBIDDEN = re.compile(
    "[\x00-\x1f\x7f-\x9f\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
_MAX_INT_DIGITS = len(str(int(MAX_MAGNITUDE))) + 1
_TOKEN = re.compile(r'["\[\]{},:]')
_STRING_REST = re.compile(r'(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_PAIR = re.compile(r"\[\]|\{\}")


class FieldError(ValueError):
    """A refusal: ``field`` names where (``measurements[3].value``), ``problem`` says what.

    The message is one printable line whatever the input held:

    >>> str(FieldError("a\\nb", "bad \\x1b[2J"))
    'a\\\\nb: bad \\\\x1b[2J'
    """

    def __init__(self, where: str, problem: str) -> None:
        self.field = printable(where)
        self.problem = printable(problem)
        super().__init__(f"{self.field}: {self.problem}")


def printable(text: str) -> str:
    """``text`` with each forbidden character written as its escape (``\\x1b``, ``\\u202e``)."""
    return FORBIDDEN.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def one_line(text: str, limit: int = MAX_STRING_CHARS) -> str:
    """Free text (an exception's message) as a bundle may hold it: one line, ``limit`` long.

    Each forbidden character becomes a space; text that is too long is cut, ending "...".

    >>> one_line("RuntimeError: CUDA out of memory.\\nTried to allocate 2.00 GiB")
    'RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB'
    >>> one_line("x" * 10, limit=6)
    'xxx...'
    """
    text = FORBIDDEN.sub(" ", text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _shown(text: str) -> str:
    """A key or value quoted in a message: printable and at most MAX_SHOWN_CHARS long."""
    if len(text) > MAX_SHOWN_CHARS:
        text = text[: MAX_SHOWN_CHARS - 3] + "..."
    return repr(text)  # repr escapes every forbidden character


def json_path(parts: Sequence[str | int]) -> str:
    """A JSON path as ``measurements[3].value``; long or odd keys quoted.

    >>> json_path(["measurements", 3, "params", "flop"])
    'measurements[3].params.flop'
    >>> json_path(["params", "a b"])
    "params['a b']"
    >>> json_path([])
    '(top level)'
    """
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z0-9_]{1,60}", part):
            out += f".{part}" if out else part
        else:
            out += f"[{_shown(part)}]"
    return out or "(top level)"


# --- the file ------------------------------------------------------------------------


def _kind(mode: int) -> str:
    kinds = (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def _not_regular(mode: int) -> FieldError:
    return FieldError(
        "(file)",
        f"{_kind(mode)}, not a regular file: a bundle is the JSON file gpulesson measure "
        "--out wrote; put that file itself here (a link is not followed)",
    )


def read_bounded(path: Path, limit_bytes: int = MAX_BUNDLE_BYTES) -> bytes:
    """The bytes of the regular file ``path`` (not a link), refusing more than ``limit_bytes``.

    Nothing but a regular file is opened, and at most ``limit_bytes + 1`` bytes are read.

    >>> read_bounded(Path("/dev/zero"))
    Traceback (most recent call last):
    ...
    gpulesson.results.bundle_input.FieldError: (file): a character device, not a regular \
file: a bundle is the JSON file gpulesson measure --out wrote; put that file itself here \
(a link is not followed)
    """
    try:
        info = os.lstat(path)
    except OSError as exc:
        raise FieldError("(file)", f"cannot read the file ({exc.strerror or exc})") from None
    if not stat.S_ISREG(info.st_mode):
        raise _not_regular(info.st_mode)
    too_big = FieldError(
        "(file)",
        f"larger than {limit_bytes} bytes, the most a bundle may be: send the bundle "
        "gpulesson measure wrote, unchanged",
    )
    if info.st_size > limit_bytes:
        raise too_big
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        descriptor = os.open(path, flags | getattr(os, "O_BINARY", 0))
    except OSError as exc:
        raise FieldError("(file)", f"cannot read the file ({exc.strerror or exc})") from None
    with open(descriptor, "rb", closefd=True) as stream:
        mode = os.fstat(stream.fileno()).st_mode
        if not stat.S_ISREG(mode):  # replaced between lstat and open
            raise _not_regular(mode)
        try:
            data = stream.read(limit_bytes + 1)
        except OSError as exc:
            raise FieldError("(file)", f"cannot read the file ({exc.strerror or exc})") from None
    if len(data) > limit_bytes:
        raise too_big
    return data


def decode(data: bytes) -> str:
    """UTF-8 text, or a refusal naming the first byte that is not.

    >>> decode(b'{"a": "\\xff"}')
    Traceback (most recent call last):
    ...
    gpulesson.results.bundle_input.FieldError: (file): not UTF-8 text (byte 7): save the \
bundle as UTF-8, as gpulesson measure writes it
    """
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FieldError(
            "(file)",
            f"not UTF-8 text (byte {exc.start}): save the bundle as UTF-8, as gpulesson "
            "measure writes it",
        ) from None


# --- the JSON ------------------------------------------------------------------------


def check_depth(text: str, limit: int = MAX_DEPTH) -> None:
    """Refuse nesting deeper than ``limit``, naming the path, without recursing.

    Brackets inside strings do not count. Malformed text is left to the parser.

    >>> check_depth('{"a": [[["]]]]]"]]]}', limit=4)
    >>> check_depth('{"a": [[[1]]]}', limit=3)
    Traceback (most recent call last):
    ...
    gpulesson.results.bundle_input.FieldError: a[0][0]: nested deeper than 3 levels: a \
bundle nests 4 deep at most; send the bundle gpulesson measure wrote
    """
    if _nesting_within(text, limit):
        return
    # Too deep, or malformed: find where, token by token. Each open container: its path
    # part so far (a key or an index) and whether the next string in it is a key.
    parts: list[str | int] = []
    expecting_key: list[bool] = []
    pos = 0
    while True:
        match = _TOKEN.search(text, pos)
        if match is None:
            return
        token, pos = match.group(), match.end()
        if token == '"':
            end = _STRING_REST.match(text, pos)
            if end is None:
                return  # unterminated: the parser says where
            if expecting_key and expecting_key[-1]:
                parts[-1] = json.loads(text[pos - 1 : end.end()], strict=False)
                expecting_key[-1] = False
            pos = end.end()
        elif token in "[{":
            if len(parts) >= limit:
                raise FieldError(
                    json_path(parts),
                    f"nested deeper than {limit} levels: a bundle nests 4 deep at most; "
                    "send the bundle gpulesson measure wrote",
                )
            parts.append(0 if token == "[" else "")
            expecting_key.append(token == "{")
        elif token in "]}":
            if parts:
                parts.pop()
                expecting_key.pop()
        elif token == "," and parts:
            if isinstance(parts[-1], int):
                parts[-1] += 1
            else:
                expecting_key[-1] = True


def _nesting_within(text: str, limit: int) -> bool:
    """Whether the brackets outside strings close within ``limit`` rounds (fast, in C).

    Strings go first: escaped backslashes, then escaped quotes, then every other quoted
    run. Each round removes every innermost ``[]`` and ``{}`` (one level), so the
    brackets are gone after ``limit`` rounds exactly when they nest ``limit`` deep or less.

    >>> _nesting_within('{"a": [[["]]]]]\\\\\\\\"]]]}', 4), _nesting_within("[[[]]]", 2)
    (True, False)
    """
    plain = text.replace("\\\\", "").replace('\\"', "")
    brackets = _NOT_BRACKET.sub("", "".join(plain.split('"')[::2]))
    for _ in range(limit):
        if not brackets:
            return True
        brackets = _PAIR.sub("", brackets)
    return not brackets


@dataclass(frozen=True)
class _Refused:
    """A value the parser met that no bundle may hold; the walk names its path.

    ``key`` is the key of an object that held it twice (the path then ends with it).
    """

    problem: str
    key: str | None = None


def _constant(text: str) -> _Refused:
    return _Refused(f"{text} is not a finite number: write a number (a page cannot show {text})")


def _float(text: str) -> float | _Refused:
    value = float(text)
    if not math.isfinite(value):
        return _Refused(f"{text[:20]} is beyond the range of a number: write a finite number")
    return value


def _int(text: str) -> int | _Refused:
    if len(text.lstrip("-")) > _MAX_INT_DIGITS:
        return _Refused(
            f"a {len(text.lstrip('-'))}-digit integer is beyond {MAX_MAGNITUDE:g}, the "
            "largest figure a bundle holds: write the measured number"
        )
    return int(text)


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any] | _Refused:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            return _Refused("this key appears twice in one object: keep one of them", key)
        out[key] = value
    return out


def loads_strict(text: str) -> Any:
    """The depth check and the parser; values refused by the parser are left for the walk.

    :func:`check_values` (which ``bundle.validate`` runs first) names where they are.
    """
    check_depth(text)
    try:
        data = json.loads(
            text,
            strict=False,  # control characters reach the walk, which names their field
            parse_constant=_constant,
            parse_float=_float,
            parse_int=_int,
            object_pairs_hook=_object,
        )
    except json.JSONDecodeError as exc:
        raise FieldError(
            "(file)", f"not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    return data


# --- every value ---------------------------------------------------------------------


def _string_problem(text: str, limit: int) -> str | None:
    if len(text) > limit:
        return f"{len(text)} characters, over the {limit} a bundle string may have: shorten it"
    bad = FORBIDDEN.search(text)
    if bad:
        return (
            f"holds U+{ord(bad.group()):04X} at character {bad.start()}, a control or "
            "invisible formatting character: bundle text is one plain line; remove it"
        )
    return None


def _number_problem(value: float) -> str | None:
    if isinstance(value, float) and not math.isfinite(value):
        return f"{value} is not a finite number: write a number (a page cannot show it)"
    size = abs(value)
    if size > MAX_MAGNITUDE:
        return f"{value:.6g} is beyond {MAX_MAGNITUDE:g}, the largest figure a bundle holds"
    if 0 < size < MIN_MAGNITUDE:
        return f"{value:.6g} is below {MIN_MAGNITUDE:g}, the smallest non-zero figure"
    return None


def _scalar_problem(item: Any, path: tuple[str | int, ...]) -> tuple[str, str] | None:
    """The problem of a value that is not a container, with its path; None if it has none."""
    if isinstance(item, str):
        problem = _string_problem(item, MAX_STRING_CHARS)
    elif isinstance(item, (int, float)) and not isinstance(item, bool):
        problem = _number_problem(item)
    elif isinstance(item, _Refused):
        path, problem = (path if item.key is None else (*path, item.key)), item.problem
    else:
        return None  # true, false, null: the schema decides where they may stand
    return (json_path(path), problem) if problem else None


def value_problems(data: Any, limit_depth: int = MAX_DEPTH) -> Iterator[tuple[str, str]]:
    """Each field no bundle may hold (each container's own values first), without recursing.

    >>> list(value_problems({"a": [1.0, float("inf")], "b\\x1b": "ok"}))  # doctest: +ELLIPSIS
    [("['b\\\\x1b']", 'this key: holds U+001B at ...'), ('a[1]', 'inf is not a finite number...')]
    """
    if not isinstance(data, (dict, list)):
        found = _scalar_problem(data, ())
        if found:
            yield found
        return
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(data, ())]
    while stack:
        container, path = stack.pop()
        if len(path) >= limit_depth:
            yield json_path(path), f"nested deeper than {limit_depth} levels: a bundle nests 4 deep"
            continue
        items = container.items() if isinstance(container, dict) else enumerate(container)
        nested = []
        for key, item in items:
            if isinstance(key, str) and (len(key) > MAX_KEY_CHARS or FORBIDDEN.search(key)):
                yield json_path((*path, key)), f"this key: {_string_problem(key, MAX_KEY_CHARS)}"
            elif isinstance(item, (dict, list)):
                nested.append((item, (*path, key)))
            else:
                found = _scalar_problem(item, (*path, key))
                if found:
                    yield found
        stack.extend(reversed(nested))


def check_values(data: Any) -> None:
    """Raise :class:`FieldError` for the first field no bundle may hold."""
    for where, problem in value_problems(data):
        raise FieldError(where, problem)
