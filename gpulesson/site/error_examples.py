"""Load the example error messages in ``docs/errors/``: the lessons' and the tests' one copy.

One job: read ``docs/errors/<name>.txt`` and the catalogue ``docs/errors/examples.yml``
into :class:`ErrorExample` values, validated. Every ``.txt`` file has exactly one
catalogue entry and every entry a file; each entry has an ``about`` line and an
``expect`` mapping whose keys are fields of
:class:`gpulesson.errors.diagnose.Diagnosis`. Sizes are written as a message
prints them (``"3.49 GiB"``) or as whole bytes, and are read with
:func:`gpulesson.errors.numbers.to_bytes`. A malformed entry raises ``ValueError``
naming the file, the entry and the field.

The folder is ``errors/`` under the docs folder: the one given to
:func:`configure` (a site hook can pass ``config["docs_dir"]``), else
``<cwd>/docs``, where MkDocs and pytest run. Lessons load a message here and hand it to
:mod:`gpulesson.errors.diagnose` and :mod:`gpulesson.errors.render`; the library
itself never reads ``docs/``.
Used by ``lessons/oom.md``, ``lessons/fix-ladder.md``, ``lessons/cuda-errors.md``
and ``tests/test_diagnose.py``.

>>> "Tried to allocate 2.00 GiB" in message("fragmentation")
True
>>> load()["nccl_timeout"].expect["kind"]
'nccl_timeout'
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gpulesson.errors.diagnose import KINDS, VERDICTS, Diagnosis
from gpulesson.errors.numbers import to_bytes

ERRORS_FOLDER = "errors"
CATALOGUE = "examples.yml"

_FIELDS = {f.name for f in dataclasses.fields(Diagnosis)}
_SIZE_TEXT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(bytes|B|KiB|MiB|GiB|TiB|KB|MB|GB|TB)\s*$")


@dataclass(frozen=True)
class ErrorExample:
    """One example message, what it is, and what ``diagnose()`` must find in it."""

    name: str
    message: str
    about: str
    expect: Mapping[str, Any]


def _where(path: Path, name: str, field: str | None = None) -> str:
    return f"{path.name}: entry {name!r}" + (f", field {field!r}" if field else "")


def _value(path: Path, name: str, field: str, raw: Any) -> Any:
    """One expected value, converted to what a Diagnosis holds."""
    where = _where(path, name, field)
    if field not in _FIELDS:
        raise ValueError(f"{where}: not a Diagnosis field; use one of {', '.join(sorted(_FIELDS))}")
    if raw is None:
        return None
    if field.endswith("_bytes"):
        if isinstance(raw, int) and not isinstance(raw, bool):
            return raw
        match = _SIZE_TEXT.match(str(raw))
        if not match:
            raise ValueError(f"{where}: {raw!r} is not a size: write e.g. 3.49 GiB or 512")
        return to_bytes(match.group(1), match.group(2))
    if field == "kind" and raw not in KINDS:
        raise ValueError(f"{where}: {raw!r} is not a kind; use one of {', '.join(KINDS)}")
    if field == "verdict" and raw not in VERDICTS:
        raise ValueError(f"{where}: {raw!r} is not a verdict; use one of {', '.join(VERDICTS)}")
    if field == "supported_capabilities":
        if not isinstance(raw, list):
            raise ValueError(f"{where}: write a list, e.g. [sm_80, sm_90]")
        return tuple(str(item) for item in raw)
    if field in ("timeout_s", "elapsed_s"):
        if not isinstance(raw, int | float) or isinstance(raw, bool):
            raise ValueError(f"{where}: {raw!r} is not a number of seconds")
        return float(raw)
    return raw


def _entry(path: Path, name: str, entry: Any, message: str) -> ErrorExample:
    if not isinstance(entry, dict):
        raise ValueError(f"{_where(path, name)}: write a mapping with 'about' and 'expect'")
    unknown = set(entry) - {"about", "expect"}
    if unknown:
        field = sorted(unknown)[0]
        raise ValueError(f"{_where(path, name, field)}: unknown key; use 'about' and 'expect'")
    about = entry.get("about")
    if not isinstance(about, str) or not about.strip():
        raise ValueError(f"{_where(path, name, 'about')}: say in one line what the message is")
    expect = entry.get("expect")
    if not isinstance(expect, dict) or "kind" not in expect:
        raise ValueError(
            f"{_where(path, name, 'expect')}: give at least the kind, e.g. kind: cuda_oom"
        )
    values = {field: _value(path, name, str(field), raw) for field, raw in expect.items()}
    return ErrorExample(name=name, message=message, about=about.strip(), expect=values)


_configured: list[Path] = []


def configure(docs_dir: Path) -> None:
    """Read the examples from ``docs_dir/errors`` from now on (for a build run elsewhere)."""
    _configured[:] = [Path(docs_dir)]


def errors_dir() -> Path:
    """``errors/`` in the configured docs folder, else in ``<cwd>/docs``."""
    docs = _configured[0] if _configured else Path.cwd() / "docs"
    return docs / ERRORS_FOLDER


def load(directory: Path | None = None) -> dict[str, ErrorExample]:
    """Every example in ``directory`` (default :func:`errors_dir`), by name, in catalogue order.

    Raises ``ValueError`` naming the file, the entry and the field when anything is malformed.
    """
    return _load(Path(directory) if directory is not None else errors_dir())


@functools.lru_cache(maxsize=8)
def _load(directory: Path) -> dict[str, ErrorExample]:
    path = directory / CATALOGUE
    try:
        catalogue = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"{path}: cannot read the catalogue: {exc}") from None
    if not isinstance(catalogue, dict):
        raise ValueError(f"{path.name}: write one mapping entry per message file")
    files = {p.stem: p for p in directory.glob("*.txt")}
    missing = sorted(set(files) - set(catalogue))
    if missing:
        raise ValueError(f"{path.name}: no entry for {files[missing[0]].name}; add one")
    examples = {}
    for name, entry in catalogue.items():
        if name not in files:
            raise ValueError(f"{_where(path, name)}: no file {name}.txt in {directory}")
        message = files[name].read_text(encoding="utf-8").rstrip("\n")
        if not message.strip():
            raise ValueError(f"{files[name].name}: the message is empty")
        examples[name] = _entry(path, name, entry, message)
    return examples


def message(name: str) -> str:
    """The text of one example message, by name."""
    examples = load()
    if name not in examples:
        raise ValueError(f"no example named {name!r}: choose one of {', '.join(examples)}")
    return examples[name].message


def messages(*names: str) -> dict[str, str]:
    """Several example messages by name, in the order given (a page's table)."""
    return {name: message(name) for name in names}
