"""Load the example error messages in ``docs/errors/``: the lessons' and the tests' one copy.

One job: read ``docs/errors/<name>.txt`` and the catalogue ``docs/errors/examples.yml``
into :class:`ErrorExample` values, validated. Every ``.txt`` file has exactly one
catalogue entry and every entry a file; each entry has an ``about`` line and an
``expect`` mapping whose keys are fields of
:class:`gpulesson.errors.diagnose.Diagnosis`. Sizes are written as a message
prints them (``"3.49 GiB"``) or as whole bytes, and are read with
:func:`gpulesson.errors.numbers.to_bytes`. The catalogue's shape is checked by
``gpulesson/site/schemas/error_examples.schema.json``; the field names and the kinds and
verdicts against :mod:`gpulesson.errors.diagnose`. A malformed entry raises ``ValueError``
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

from gpulesson import schema_check
from gpulesson.errors.diagnose import KINDS, VERDICTS, Diagnosis
from gpulesson.errors.numbers import to_bytes

ERRORS_FOLDER = "errors"
CATALOGUE = "examples.yml"
SCHEMA = Path(__file__).with_name("schemas") / "error_examples.schema.json"

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


def _check(path: Path, catalogue: Any) -> None:
    """Refuse a catalogue that breaks ``schemas/error_examples.schema.json``, naming the field."""
    problem = schema_check.first_problem(catalogue, schema_check.load_schema(SCHEMA))
    if problem is None:
        return
    entry, field = problem.entry, problem.field
    if not entry and field is None:
        raise ValueError(f"{path.name}: {problem.fix}")
    name = str(entry[0]) if entry else str(field)
    field = field if entry else None
    if field is None and len(entry) > 1:
        field = str(entry[-1])
    if problem.keyword == "type" and problem.text.startswith("expected fields"):
        text = problem.fix  # an entry, or its expect, that is not a mapping
    elif problem.keyword == "required":
        text = f"missing: {problem.fix}"
    else:
        text = problem.text
    raise ValueError(f"{_where(path, name, field)}: {text}")


def _value(path: Path, name: str, field: str, raw: Any) -> Any:
    """One expected value (its type checked by the schema), converted to what a Diagnosis holds."""
    where = _where(path, name, field)
    if field not in _FIELDS:
        raise ValueError(f"{where}: not a Diagnosis field; use one of {', '.join(sorted(_FIELDS))}")
    if raw is None:
        return None
    if field.endswith("_bytes"):
        if isinstance(raw, int):
            return raw
        match = _SIZE_TEXT.match(raw)
        if not match:  # the schema's pattern for sizes is this one: a test keeps them equal
            raise ValueError(f"{where}: {raw!r} is not a size: write e.g. 3.49 GiB or 512")
        return to_bytes(match.group(1), match.group(2))
    if field == "kind" and raw not in KINDS:
        raise ValueError(f"{where}: {raw!r} is not a kind; use one of {', '.join(KINDS)}")
    if field == "verdict" and raw not in VERDICTS:
        raise ValueError(f"{where}: {raw!r} is not a verdict; use one of {', '.join(VERDICTS)}")
    if field == "supported_capabilities":
        return tuple(raw)
    if field in ("timeout_s", "elapsed_s"):
        return float(raw)
    return raw


def _entry(path: Path, name: str, entry: dict[str, Any], message: str) -> ErrorExample:
    values = {field: _value(path, name, str(field), raw) for field, raw in entry["expect"].items()}
    return ErrorExample(name=name, message=message, about=entry["about"].strip(), expect=values)


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
    _check(path, catalogue)
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
