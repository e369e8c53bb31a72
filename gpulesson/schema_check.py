"""Data checked against its JSON Schema: the first problem, named by its entry and its field.

One job: turn jsonschema's errors into the one problem a person fixes first.
:func:`first_problem` validates a document and returns the first :class:`Problem` in the
document's own order (an entry's fields before what they hold, an unknown field before a
missing one), or None; :func:`load_json` reads a package data file, checks it against
the schema beside it and raises ``ValueError`` naming the file, the entry and the field.

Each property of a schema has a ``description``: the fix a message gives when a value
breaks that property's rule; a ``title`` names what the value must be ("a size"). The
wording of the common problems is fixed here, so every data file of the package says
them alike: a missing field (``missing; add it``), an unknown one (``unknown field; the
fields are ...``), text that YAML read as something else (``must be text, not 'true':
put it in quotes``), an empty text (``is empty: write it out``).

>>> schema = {"type": "object", "additionalProperties": False, "required": ["n"],
...           "properties": {"n": {"type": "integer", "minimum": 1, "title": "a count",
...                                "description": "write a whole number from 1 up"}}}
>>> print(first_problem({"n": 0}, schema))
n: 0 is not a count: write a whole number from 1 up
>>> print(first_problem({"m": 1}, schema))
m: unknown field; the fields are n
>>> first_problem({"n": 2}, schema) is None
True
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema

Path_ = tuple[str | int, ...]

# Which problem of one place is named first: its shape, then its fields' names, then values.
_RANK = {"type": 0, "additionalProperties": 1, "required": 2, "dependentRequired": 3}


@dataclass(frozen=True)
class Problem:
    """One way a document breaks its schema.

    ``entry`` is the path of the entry at fault (``()`` for the whole document) and
    ``field`` the field of that entry (None when the entry itself is wrong); ``keyword``
    is the schema rule broken; ``value`` the value found (None for a missing field);
    ``fix`` the ``description`` of the rule's property; ``text`` the problem and its fix.
    """

    entry: Path_
    field: str | None
    keyword: str
    value: Any
    fix: str
    text: str

    def __str__(self) -> str:
        return f"{self.field}: {self.text}" if self.field else self.text


def shown(value: Any) -> Any:
    """A value as the data file wrote it (YAML's ``yes`` is read as True: show ``'true'``)."""
    return "true" if value is True else "false" if value is False else value


def _order(data: Any, path: Path_) -> tuple[int, ...]:
    """Where ``path`` lies in the document: list indexes, and each key's place in its mapping."""
    places = []
    node = data
    for part in path:
        if isinstance(node, Mapping):
            places.append(list(node).index(part) if part in node else len(node))
        else:
            places.append(int(part))
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            node = None
    return tuple(places)


def _problem(error: jsonschema.ValidationError) -> Problem:
    path: Path_ = tuple(error.absolute_path)
    schema = error.schema if isinstance(error.schema, Mapping) else {}
    keyword = str(error.validator)
    value = error.instance
    properties = list(schema.get("properties", {}))
    if keyword in ("required", "dependentRequired", "additionalProperties"):
        if keyword == "additionalProperties":
            patterns = schema.get("patternProperties", {})
            field = next(
                k
                for k in value
                if k not in properties and not any(re.search(p, k) for p in patterns)
            )
            text = f"unknown field; the fields are {', '.join(properties)}"
            fix = ""
        else:
            needed = error.validator_value
            if keyword == "dependentRequired":
                needed = [n for given in needed if given in value for n in needed[given]]
            field = next(k for k in needed if k not in value)
            fix = schema.get("properties", {}).get(field, {}).get("description", "")
            text = "missing; add it"
        return Problem(path, field, keyword, None, fix, text)
    strings = [p for p in path if isinstance(p, str)]
    field = strings[-1] if strings else None
    entry = path[: len(path) - path[::-1].index(field) - 1] if field is not None else path
    fix = str(schema.get("description", ""))
    title = schema.get("title")
    if keyword == "type" and error.validator_value == "object":
        return Problem(
            path,
            None,
            keyword,
            value,
            fix,
            f"expected fields ({', '.join(properties)}), got {value!r}",
        )
    if keyword == "type" and error.validator_value == "string":
        text = f"must be text, not {shown(value)!r}: put it in quotes"
    elif keyword == "type" and error.validator_value == "boolean":
        text = f"must be true or false, not {value!r}"
    elif (keyword == "type" and error.validator_value == "array") or (
        keyword == "minItems" and (error.validator_value == 1 or not value)
    ):
        text = "must be a list with at least one item"
    elif keyword == "minItems":
        noun = schema.get("items", {}).get("title", "item")
        text = f"has {len(value)} {noun}: {fix}"
    elif keyword == "pattern" and isinstance(value, str) and not value.strip():
        text = "is empty: write it out"
    else:
        what = title or f"allowed here ({error.message})"
        text = f"{value!r} is not {what}: {fix}" if fix else f"{value!r} is not {what}"
    return Problem(entry, field, keyword, value, fix, text)


def _key_problem(data: Any, path: Path_ = ()) -> Problem | None:
    """A field name that is not text (YAML reads ``1:`` or ``yes:`` as a number or a flag)."""
    items = (
        data.items()
        if isinstance(data, Mapping)
        else enumerate(data)
        if isinstance(data, list)
        else ()
    )
    for key, value in items:
        if isinstance(data, Mapping) and not isinstance(key, str):
            text = "a field name must be text: put it in quotes"
            return Problem(path, str(shown(key)), "propertyNames", key, "", text)
        found = _key_problem(value, (*path, key))
        if found is not None:
            return found
    return None


def first_problem(data: Any, schema: Mapping[str, Any]) -> Problem | None:
    """The first problem of ``data`` against ``schema`` in document order, or None."""
    bad_key = _key_problem(data)
    if bad_key is not None:
        return bad_key
    validator = jsonschema.Draft202012Validator(schema)
    errors = list(validator.iter_errors(data))
    if not errors:
        return None
    first = min(
        errors,
        key=lambda e: (_order(data, tuple(e.absolute_path)), _RANK.get(str(e.validator), 9)),
    )
    return _problem(first)


@functools.lru_cache(maxsize=32)
def load_schema(path: Path) -> Mapping[str, Any]:
    """A schema file shipped in the package, read once (and checked as a schema)."""
    schema = json.loads(path.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return schema


def where(label: str, entry: Path_, field: str | None) -> str:
    """``label: part: part: field`` for a path in a data file (indexes counted from 1).

    >>> where("recipes.json", ("recipes", 2), "source")
    'recipes.json: recipes: 3: source'
    """
    parts = [label, *(str(p + 1) if isinstance(p, int) else p for p in entry)]
    return ": ".join([*parts, *([field] if field else [])])


def load_json(path: Path, schema_path: Path) -> Any:
    """A package data file, checked against its schema; ValueError naming the entry and field.

    >>> from gpulesson.memory import recipes
    >>> data = load_json(recipes.TABLE, recipes.SCHEMA)
    >>> data["recipes"][0]["name"]
    'amp'
    """
    label = path.name
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{label}: cannot be read ({exc}): reinstall gpulesson") from None
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"{label}: line {exc.lineno}, column {exc.colno}: not valid JSON: {exc.msg}"
        ) from None
    problem = first_problem(data, load_schema(schema_path))
    if problem is not None:
        raise ValueError(f"{where(label, problem.entry, None)}: {problem}")
    return data
