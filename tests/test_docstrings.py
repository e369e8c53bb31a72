"""Docstring examples are doctests, never Markdown fences.

``tests/conftest.py`` keeps pytest-markdown-docs to the Markdown files (its docstring scan
costs about 10 s a run), so a fenced example in a docstring would never run. This keeps
every docstring example a doctest, which ``--doctest-modules`` does run.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

MODULES = sorted([*(REPO / "gpulesson").rglob("*.py"), *(REPO / "tests").rglob("*.py")])
_OWNERS = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def fenced_docstrings(tree: ast.AST) -> list[int]:
    """Lines of the module, classes and functions whose docstring opens a code fence (a
    line that starts with three backticks; backticks inside a doctest's string are fine).

    >>> fence = "`" * 3
    >>> fenced = ast.Expr(ast.Constant(f"Use it:\\n\\n{fence}python\\nf()\\n{fence}\\n"))
    >>> fenced_docstrings(ast.Module([fenced], []))
    [1]
    >>> quoted = ast.Expr(ast.Constant(f">>> render('{fence}python')"))
    >>> fenced_docstrings(ast.Module([quoted], []))
    []
    """
    return [
        getattr(node, "lineno", 1)
        for node in ast.walk(tree)
        if isinstance(node, _OWNERS)
        and any(
            line.lstrip().startswith("```")
            for line in (ast.get_docstring(node, clean=False) or "").splitlines()
        )
    ]


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_docstring_holds_a_fenced_example(path: Path):
    lines = fenced_docstrings(ast.parse(path.read_text(encoding="utf-8")))
    assert not lines, (
        f"{path.relative_to(REPO)}: the docstrings at lines {lines} open a ``` fence, which "
        "the suite does not run; write the example as a doctest (>>> lines) instead"
    )
