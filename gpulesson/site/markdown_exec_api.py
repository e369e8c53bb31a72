"""The one place that touches markdown-exec's private Python runner, checked before use.

gpulesson runs executed Python blocks itself (a disk cache, a worker process), but
through markdown-exec's own runner, so a block prints, fails and is named exactly
as markdown-exec would do it. That runner is private API:

* ``_run_python(code, returncode=None, session=None, id=None, **extra) -> str``, which
  runs a block and returns what it printed (``ExecutionError`` when it raised), and
* ``_code_block_id(id=None, session=None, title=None) -> str``, which advances the
  counter markdown-exec names blocks by (called for blocks served from the cache).

:func:`load` finds both and checks their parameters; when a markdown-exec release
moved or changed them it raises :class:`MarkdownExecChanged` with the version, what
is missing and what to do, and the build stops (never a silent fallback).
``pyproject.toml`` pins markdown-exec to the range tested with this module
(:data:`TESTED`).

>>> api = load()
>>> api.run_python("print(6 * 7)", id="answer")
'42\\n'
"""

from __future__ import annotations

import functools
import importlib
import inspect
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

TESTED = "markdown-exec>=1.12.6,<1.13"
MODULES = ("markdown_exec._internal.formatters.python", "markdown_exec.formatters.python")
_PARAMETERS = {
    "_run_python": ("code", "returncode", "session", "id"),
    "_code_block_id": ("id", "session", "title"),
}


class MarkdownExecChanged(RuntimeError):
    """The installed markdown-exec lacks the private runner this module wraps."""


@dataclass(frozen=True)
class MarkdownExecApi:
    """markdown-exec's private runner and the public names that go with it."""

    version: str
    module: str
    run_python: Callable[..., str]
    code_block_id: Callable[..., str]
    execution_error: type[Exception]


@functools.cache  # asked for every block (186 a build); each metadata scan costs about 0.6 ms
def installed_version() -> str:
    """The installed markdown-exec version, or 'not installed' (read once per process)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("markdown-exec")
    except PackageNotFoundError:
        return "not installed"


def _import(name: str) -> Any | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return importlib.import_module(name)
    except ImportError:
        return None


def problems(module: Any | None, name: str = MODULES[0]) -> list[str]:
    """What the runner module ``name`` lacks: the module, functions or parameters.

    Empty when the module is usable.

    >>> problems(None)
    ['no module markdown_exec._internal.formatters.python']
    >>> import types
    >>> problems(types.SimpleNamespace(_run_python=lambda code: "", _code_block_id=None))
    ['_run_python() has no parameter returncode, session, id', '_code_block_id() is missing']
    """
    if module is None:
        return [f"no module {name}"]
    found = []
    for name, wanted in _PARAMETERS.items():
        function = getattr(module, name, None)
        if not callable(function):
            found.append(f"{name}() is missing")
            continue
        parameters = inspect.signature(function).parameters
        absent = [p for p in wanted if p not in parameters]
        if absent:
            found.append(f"{name}() has no parameter {', '.join(absent)}")
    return found


def changed_message(version: str, found: list[str]) -> str:
    """The build-stopping message when the private runner moved or changed.

    >>> print(changed_message("9.0", ["_run_python() is missing"]))
    markdown-exec 9.0 changed the private API gpulesson/site/exec_cache.py runs blocks \
through (_run_python() is missing), so executed blocks cannot run. Install the tested \
range: pip install "markdown-exec>=1.12.6,<1.13"; or adapt \
gpulesson/site/markdown_exec_api.py to the new release and widen the pin in pyproject.toml.
    """
    return (
        f"markdown-exec {version} changed the private API gpulesson/site/exec_cache.py runs "
        f"blocks through ({'; '.join(found)}), so executed blocks cannot run. Install the "
        f'tested range: pip install "{TESTED}"; or adapt gpulesson/site/markdown_exec_api.py '
        "to the new release and widen the pin in pyproject.toml."
    )


def load(modules: tuple[str, ...] = MODULES) -> MarkdownExecApi:
    """markdown-exec's runner, checked; :class:`MarkdownExecChanged` if it moved or changed."""
    import markdown_exec

    first: list[str] = []
    for name in modules:
        module = _import(name)
        with warnings.catch_warnings():  # the old module path warns on every attribute
            warnings.simplefilter("ignore", DeprecationWarning)
            found = problems(module, name)
        first = first or found
        if not found:
            return MarkdownExecApi(
                version=installed_version(),
                module=name,
                run_python=module._run_python,
                code_block_id=module._code_block_id,
                execution_error=markdown_exec.ExecutionError,
            )
    raise MarkdownExecChanged(changed_message(installed_version(), first))
