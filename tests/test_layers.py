"""The package's layers: the library never needs the site machinery or the lessons' folder.

``gpulesson/site/`` is what only MkDocs needs. Nothing outside it may import it, and no
library module may name the ``docs/`` folder, so ``pip install gpulesson`` from a wheel
gives a working library and CLI without a clone. The rule is read from the source (every
import statement and string constant), so a lazy import inside a function counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

PACKAGE = REPO / "gpulesson"
SITE = PACKAGE / "site"
LIBRARY = sorted(p for p in PACKAGE.rglob("*.py") if SITE not in p.parents)


def imported_modules(tree: ast.AST) -> list[tuple[int, str]]:
    """Every module an import statement names, with its line (``from a import b`` gives
    ``a.b`` too, since ``b`` may be a module).

    >>> imported_modules(ast.parse("import a.b\\nfrom c import d, e\\nfrom . import f"))
    [(1, 'a.b'), (2, 'c.d'), (2, 'c.e')]
    """
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def names_docs_folder(tree: ast.AST) -> list[int]:
    """Lines with a string constant that is the lessons' folder (``docs`` or ``docs/...``)."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and (node.value == "docs" or node.value.startswith(("docs/", "../docs")))
    ]


def test_the_library_is_most_of_the_package():
    assert len(LIBRARY) > 40 and (PACKAGE / "probe.py") in LIBRARY
    assert not any(SITE in p.parents for p in LIBRARY)


@pytest.mark.parametrize("path", LIBRARY, ids=lambda p: str(p.relative_to(REPO)))
def test_nothing_outside_site_imports_it(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bad = [
        (line, name)
        for line, name in imported_modules(tree)
        if name == "gpulesson.site" or name.startswith("gpulesson.site.")
    ]
    assert not bad, f"{path.relative_to(REPO)} imports the site machinery: {bad}"


@pytest.mark.parametrize("path", LIBRARY, ids=lambda p: str(p.relative_to(REPO)))
def test_the_library_never_reads_the_docs_folder(path: Path):
    lines = names_docs_folder(ast.parse(path.read_text(encoding="utf-8")))
    assert not lines, f"{path.relative_to(REPO)} names docs/ on lines {lines}"


def test_the_checks_catch_what_they_look_for():
    bad = ast.parse(
        "def f():\n    from gpulesson.site import facts\n"
        "import gpulesson.site.claims\nPath(__file__).parent / 'docs'\n"
    )
    assert sorted(n for _, n in imported_modules(bad) if n.startswith("gpulesson.site")) == [
        "gpulesson.site.claims",
        "gpulesson.site.facts",
    ]
    assert names_docs_folder(bad) == [4]


def test_mkdocs_loads_its_hooks_from_the_site_package():
    config = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    hooks = [line.strip()[2:] for line in config.split("hooks:")[1].split("\n\n")[0].splitlines()]
    hooks = [h for h in hooks if h.endswith(".py")]
    assert hooks and all(h.startswith("gpulesson/site/") for h in hooks), hooks
