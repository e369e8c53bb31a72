"""Docstring examples are doctests, never Markdown fences.

``tests/conftest.py`` keeps pytest-markdown-docs to the Markdown files (its docstring scan
costs about 10 s a run), so a fenced example in a docstring would never run. This keeps
every docstring example a doctest, which ``--doctest-modules`` does run.
"""

from __future__ import annotations

import ast
from pathlib import Path

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


def fenced_examples(paths: list[Path], root: Path = REPO) -> list[str]:
    """``file:line`` of every docstring in ``paths`` that opens a fence, sorted by file
    and then line. Each file is parsed once here and its tree dropped: no other rule reads
    it, and holding every tree makes each garbage collection walk them all."""
    found = sorted(
        (p.relative_to(root).as_posix(), line)
        for p in paths
        for line in fenced_docstrings(ast.parse(p.read_text(encoding="utf-8")))
    )
    return [f"{name}:{line}" for name, line in found]


def test_no_docstring_holds_a_fenced_example():
    assert len(MODULES) > 200
    found = fenced_examples(MODULES)
    assert not found, (
        "these docstrings open a ``` fence, which the suite does not run; write each "
        "example as a doctest (>>> lines) instead:\n" + "\n".join(found)
    )


def test_the_report_lists_every_fenced_docstring_in_order(tmp_path: Path):
    fence = "`" * 3
    fenced = f'    """Use it:\n\n    {fence}python\n    f()\n    {fence}\n    """\n'
    (tmp_path / "b.py").write_text(
        f'"""Fine: ``{fence}`` inside a line."""\n\n\n\ndef f():\n{fenced}'
        + "\n" * 4
        + f"class C:\n{fenced}"
    )
    (tmp_path / "a.py").write_text(f"x = 1\n\n\ndef g():\n{fenced}")
    (tmp_path / "clean.py").write_text('def h():\n    """>>> h()"""\n')
    paths = sorted(tmp_path.glob("*.py"))
    assert fenced_examples(paths, tmp_path) == ["a.py:4", "b.py:5", "b.py:16"]
