"""The package's layers: the library never needs the site machinery or the lessons' folder.

``gpulesson/site/`` is what only MkDocs needs. Nothing outside it may import it, and no
library module may name the ``docs/`` folder, so ``pip install gpulesson`` from a wheel
gives a working library and CLI without a clone. The rule is read from the source (every
import statement and string constant), so a lazy import inside a function counts too.
"""

from __future__ import annotations

import ast
import functools
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests import measuring as measuring_code
from tests.conftest import REPO

PACKAGE = REPO / "gpulesson"
SITE = PACKAGE / "site"
LIBRARY = sorted(p for p in PACKAGE.rglob("*.py") if SITE not in p.parents)


@functools.cache
def parsed(path: Path) -> ast.Module:
    """The syntax tree of a source file, parsed once however many rules here read it."""
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


@pytest.fixture(autouse=True, scope="module")
def _drop_the_parsed_trees() -> Iterator[None]:
    # Held trees are hundreds of thousands of objects that every later garbage collection
    # walks (pytest runs two full ones at exit), so they go when this module is done.
    yield
    parsed.cache_clear()


#: A rule: what is wrong in one source file, as ``(line, what)`` pairs.
Rule = Callable[[Path], list[tuple[int, str]]]


def offences(paths: list[Path], rule: Rule, root: Path = REPO) -> list[str]:
    """``file:line: what`` for everything ``rule`` finds in ``paths``, sorted by file and
    then line, so one failure shows every offender."""
    found = sorted(
        {(p.relative_to(root).as_posix(), line, what) for p in paths for line, what in rule(p)}
    )
    return [f"{name}:{line}: {what}" for name, line, what in found]


def report(title: str, found: list[str]) -> str:
    return f"{title}:\n" + "\n".join(found)


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


def names_docs_folder(tree: ast.AST) -> list[tuple[int, str]]:
    """Each string constant that is the lessons' folder (``docs`` or ``docs/...``), with
    its line.

    >>> names_docs_folder(ast.parse("a = 'docs'\\nb = 'docs/x.md'\\nc = 'documents'"))
    [(1, 'docs'), (2, 'docs/x.md')]
    """
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and (node.value == "docs" or node.value.startswith(("docs/", "../docs")))
    ]


def test_the_library_is_most_of_the_package():
    assert len(LIBRARY) > 40 and (PACKAGE / "probe.py") in LIBRARY
    assert not any(SITE in p.parents for p in LIBRARY)


def site_imports(path: Path) -> list[tuple[int, str]]:
    return [
        (line, f"imports {name}")
        for line, name in imported_modules(parsed(path))
        if name == "gpulesson.site" or name.startswith("gpulesson.site.")
    ]


def docs_folder_names(path: Path) -> list[tuple[int, str]]:
    return [
        (line, f"names the docs/ folder: {value!r}")
        for line, value in names_docs_folder(parsed(path))
    ]


def test_nothing_outside_site_imports_it():
    found = offences(LIBRARY, site_imports)
    assert not found, report("library modules that import the site machinery", found)


def test_the_library_never_reads_the_docs_folder():
    found = offences(LIBRARY, docs_folder_names)
    assert not found, report("library modules that name the docs/ folder", found)


def test_the_checks_catch_what_they_look_for():
    bad = ast.parse(
        "def f():\n    from gpulesson.site import facts\n"
        "import gpulesson.site.claims\nPath(__file__).parent / 'docs'\n"
    )
    assert sorted(n for _, n in imported_modules(bad) if n.startswith("gpulesson.site")) == [
        "gpulesson.site.claims",
        "gpulesson.site.facts",
    ]
    assert names_docs_folder(bad) == [(4, "docs")]


def test_mkdocs_loads_its_hooks_from_the_site_package():
    config = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    hooks = [line.strip()[2:] for line in config.split("hooks:")[1].split("\n\n")[0].splitlines()]
    hooks = [h for h in hooks if h.endswith(".py")]
    assert hooks and all(h.startswith("gpulesson/site/") for h in hooks), hooks


def test_the_build_process_imports_no_torch():
    """Torch loads in the block worker only (hooks.py): the hooks mkdocs loads, imported in a
    fresh Python, leave torch out, so a build does not pay for the import twice."""
    config = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    hooks = re.findall(r"^  - (gpulesson/site/\w+)\.py$", config, re.M)
    assert hooks, "no hooks found in mkdocs.yml"
    code = "import importlib, sys\n" + "".join(
        f"importlib.import_module({h.replace('/', '.')!r})\n" for h in hooks
    )
    code += "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]", result.stdout[:500]


# --- one room per lesson: topic packages compute, gpulesson/course renders, site builds -----

COURSE = PACKAGE / "course"
CLI = PACKAGE / "cli"
TOPIC = sorted(p for p in LIBRARY if COURSE not in p.parents and CLI not in p.parents)
LESSONS = REPO / "docs" / "lessons"
#: Markdown renderers in topic packages that are not a lesson's, and why they stay there.
NOT_LESSON_MARKDOWN = {
    ("gpulesson.results.render", "comparison_to_markdown"): "the Markdown twin of the table "
    "`gpulesson compare` prints; no lesson shows it",
}
#: Site modules that read the clock: they time the build (a block's run, a worker's
#: timeout), never GPU work, and import nothing that measures.
TIMES_THE_BUILD = {"block_runner.py", "exec_cache.py", "exec_timing.py"}
MEASURING_CALLS = {"time.perf_counter", "torch.cuda.synchronize"}


def _dotted(path: Path) -> str:
    return ".".join(path.relative_to(REPO).with_suffix("").parts)


def names_used(tree: ast.AST) -> set[tuple[str, str]]:
    """Every (module, name) a source takes from a module: ``from m import n`` and, for a
    module imported under a name (``from p import m as r``, ``import p.m as r``), ``r.n``.

    >>> sorted(names_used(ast.parse("from a import b\\nfrom c import d as e\\ne.f()")))
    [('a', 'b'), ('c', 'd'), ('c.d', 'f')]
    """
    found, aliases = set(), {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                found.add((node.module, alias.name))
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
        ):
            found.add((aliases[node.value.id], node.attr))
    return found


def markdown_functions(tree: ast.AST) -> list[str]:
    """The functions a source defines whose name ends ``_markdown``."""
    return [
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.name.endswith("_markdown")
    ]


def _used_by(paths: list[Path]) -> set[tuple[str, str]]:
    return set().union(*(names_used(parsed(p)) for p in paths))


def test_topic_packages_render_no_lesson_markdown():
    # Allowed: what the command-line tool prints, and what the site's Results and Compare
    # pages (not lessons) show; a lesson that shows the same imports it from there.
    allowed = _used_by(sorted(CLI.glob("*.py")) + [SITE / "results_pages.py"])
    offenders = [
        f"{path.relative_to(REPO)}: {name}"
        for path in TOPIC
        for name in markdown_functions(parsed(path))
        if (_dotted(path), name) not in allowed and (_dotted(path), name) not in NOT_LESSON_MARKDOWN
    ]
    assert not offenders, (
        "lesson Markdown in a topic package; move it to gpulesson/course/<lesson>.py: "
        + ", ".join(offenders)
    )


def course_imports(path: Path) -> list[tuple[int, str]]:
    return [
        (line, f"imports {name}")
        for line, name in imported_modules(parsed(path))
        if name.startswith("gpulesson.course")
    ]


def test_topic_packages_never_import_the_course():
    found = offences(TOPIC, course_imports)
    assert not found, report("topic modules that import a lesson's module", found)


def lesson_order() -> list[str]:
    """The lessons' slugs in the course's order: the ``nav`` of ``mkdocs.yml``."""
    config = (REPO / "mkdocs.yml").read_text(encoding="utf-8").split("\nnav:", 1)[1]
    return re.findall(r"^\s*- [^\n]*?:\s*lessons/([\w-]+)\.md\s*$", config, re.M)


EXEC_FENCE = re.compile(r"^([ \t]*)```python exec[^\n]*\n(.*?)^\1```", re.M | re.S)


def exec_python(markdown: str) -> list[str]:
    """The Python of every ```` ```python exec ```` block, dedented (blocks may sit in tabs).

    >>> page = '```python exec="on"\\nprint(1)\\n```\\n\\n'
    >>> page += '    ```python exec="1"\\n    x = 2\\n    ```'
    >>> exec_python(page)
    ['print(1)\\n', 'x = 2\\n']
    """
    return [textwrap.dedent(m.group(2)) for m in EXEC_FENCE.finditer(markdown)]


def later_course_imports(slug: str, sources: list[str], order: list[str]) -> list[str]:
    """The course modules a lesson's blocks import that belong to no earlier lesson."""
    mine = order.index(slug)
    bad = []
    for source in sources:
        for _, name in imported_modules(ast.parse(source)):
            if name.startswith("gpulesson.course."):
                module = name.split(".")[2]
                if module not in order[: mine + 1] and module != "common":
                    bad.append(name)
    return bad


def test_lessons_import_their_own_or_earlier_course_modules():
    order = [slug.replace("-", "_") for slug in lesson_order()]
    assert len(order) > 15 and order[0] == "why_gpus", order
    bad = {
        slug: found
        for slug in order
        if (
            found := later_course_imports(
                slug,
                exec_python((LESSONS / f"{slug.replace('_', '-')}.md").read_text(encoding="utf-8")),
                order,
            )
        )
    }
    assert not bad, f"a lesson imports a later lesson's module: {bad}"
    modules = {p.stem for p in COURSE.glob("*.py")} - {"__init__", "common"}
    assert modules <= set(order), f"course modules named after no lesson: {modules - set(order)}"


def measuring(tree: ast.AST) -> list[tuple[int, str]]:
    """What in a source measures, with its line: an imported ``measure_*`` function, a
    call of the clock or of a CUDA barrier, or ``torch.utils.benchmark``."""
    found = [
        (line, name)
        for line, name in imported_modules(tree)
        if name.rsplit(".", 1)[-1].startswith("measure_")
    ]
    found += [
        (line, n) for line, n in imported_modules(tree) if n.startswith("torch.utils.benchmark")
    ]
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            text = ast.unparse(node)
            if text in MEASURING_CALLS or text.startswith("torch.utils.benchmark"):
                found.append((node.lineno, text))
    return found


RENDERING = sorted(COURSE.glob("*.py")) + sorted(SITE.glob("*.py"))


def calls_into_measuring(path: Path) -> list[tuple[int, str]]:
    """What a module calls or imports that measures however deep (:mod:`tests.measuring`),
    with its line; the body of the one way in, ``build_bundle.measure``, aside."""
    tree, module = parsed(path), measuring_code.dotted(path)
    names, defs = measuring_code.aliases(tree), measuring_code.definitions(tree)
    parts = [n for n in tree.body if f"{module}.{getattr(n, 'name', '')}" != measuring_code.GATEWAY]
    sites = set().union(*(measuring_code.call_sites(n, names, module, set(defs)) for n in parts))
    return sorted((line, f) for line, f in sites if f in measuring_code.measuring_functions())


def measurements(path: Path) -> list[tuple[int, str]]:
    found = measuring(parsed(path))
    if path.parent == SITE and path.name in TIMES_THE_BUILD:
        found = [(line, f) for line, f in found if f != "time.perf_counter"]
    found += calls_into_measuring(path)
    return [(line, f"measures: {f}") for line, f in found]


def test_the_course_and_the_site_do_not_measure():
    found = offences(RENDERING, measurements)
    assert not found, report("course and site modules that measure", found)


def test_the_room_checks_catch_what_they_look_for():
    topic = ast.parse("def ops_markdown(p):\n    return ''\ndef to_text(p):\n    return ''\n")
    assert markdown_functions(topic) == ["ops_markdown"]
    cli = ast.parse("from gpulesson.x import render as r\nr.ops_markdown(1)\n")
    assert ("gpulesson.x.render", "ops_markdown") in names_used(cli)
    course = ast.parse("from gpulesson.course import why_gpus\n")
    assert [n for _, n in imported_modules(course)] == ["gpulesson.course.why_gpus"]
    page = '```python exec="on"\nfrom gpulesson.course.multi_gpu import ring_markdown\n```\n'
    order = ["why_gpus", "timing", "multi_gpu"]
    assert later_course_imports("timing", exec_python(page), order) == [
        "gpulesson.course.multi_gpu.ring_markdown"
    ]
    assert later_course_imports("multi_gpu", exec_python(page), order) == []
    busy = ast.parse(
        "import time, torch\nfrom gpulesson.timing.launch import measure_launch_overhead\n"
        "t = time.perf_counter()\ntorch.cuda.synchronize()\n"
        "from torch.utils.benchmark import Timer\n"
    )
    assert sorted(measuring(busy)) == [
        (2, "gpulesson.timing.launch.measure_launch_overhead"),
        (3, "time.perf_counter"),
        (4, "torch.cuda.synchronize"),
        (5, "torch.utils.benchmark.Timer"),
    ]


def test_each_rule_reports_every_offender_in_one_sorted_list(tmp_path: Path):
    (tmp_path / "pkg").mkdir()
    late, early, clean = tmp_path / "pkg" / "late.py", tmp_path / "early.py", tmp_path / "ok.py"
    late.write_text(
        "import gpulesson.site\n" + "\n" * 8 + "from gpulesson.course import timing\n"
        "from gpulesson.site.claims import claim\nROOT = 'docs'\nt = time.perf_counter()\n"
    )
    early.write_text("x = 1\nimport gpulesson.course.why_gpus\n'docs/lessons'\n")
    clean.write_text("import gpulesson.probe\nname = 'documents'\n")
    paths = sorted([late, early, clean])
    assert offences(paths, site_imports, tmp_path) == [
        "pkg/late.py:1: imports gpulesson.site",
        "pkg/late.py:11: imports gpulesson.site.claims.claim",
    ]
    assert offences(paths, docs_folder_names, tmp_path) == [
        "early.py:3: names the docs/ folder: 'docs/lessons'",
        "pkg/late.py:12: names the docs/ folder: 'docs'",
    ]
    assert offences(paths, course_imports, tmp_path) == [
        "early.py:2: imports gpulesson.course.why_gpus",
        "pkg/late.py:10: imports gpulesson.course.timing",
    ]
    assert offences(paths, measurements, tmp_path) == [
        "pkg/late.py:13: measures: time.perf_counter"
    ]
    assert "\nearly.py:2: " in report("why", offences(paths, course_imports, tmp_path))


# --- one table helper: gpulesson.tables.markdown_table writes every Markdown table -----------

TABLE_HELPER = PACKAGE / "tables.py"
#: A string that starts a table row (``"| "``) or holds a rule cell (``"---|"``, ``"---:|"``).
TABLE_TEXT = re.compile(r"^\|\s|:?-{3,}:?\|")


def docstring_nodes(tree: ast.AST) -> set[int]:
    """The ``id`` of each docstring's node: a docstring's examples may show a table."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def table_strings(tree: ast.AST) -> list[tuple[int, str]]:
    """Each string (or f-string part) outside docstrings that writes a Markdown table row or
    rule by hand, with its line.

    >>> table_strings(ast.parse('h = "| n |"\\nr = "|---|---:|"\\nc = f"| {n} |"\\nx = "a | b"'))
    [(1, '| n |'), (2, '|---|---:|'), (3, '| ')]
    """
    docstrings = docstring_nodes(tree)
    return sorted(
        {
            (node.lineno, node.value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
            and TABLE_TEXT.search(node.value)
        }
    )


def hand_made_tables(path: Path) -> list[tuple[int, str]]:
    return [
        (line, f"writes a table by hand: {text!r}; use gpulesson.tables.markdown_table")
        for line, text in table_strings(parsed(path))
    ]


def test_every_markdown_table_is_written_by_the_one_helper():
    modules = sorted(p for p in PACKAGE.rglob("*.py") if p != TABLE_HELPER)
    found = offences(modules, hand_made_tables)
    assert not found, report("modules that write Markdown tables by hand", found)


def test_the_table_check_catches_what_it_looks_for():
    source = '"""| doc | table |\n|---|---|"""\nrule = "|---:|---|" + "---|" * 2\n'
    assert table_strings(ast.parse(source)) == [(3, "---|"), (3, "|---:|---|")]
    assert table_strings(ast.parse("def f():\n    '''| a |'''\n    return '| a |'\n")) == [
        (3, "| a |")
    ]


def test_a_wrapper_around_a_measuring_function_measures(tmp_path: Path):
    # async_illusion is named by no rule: it measures through measure_matmul, which reads
    # the clock, and a wrapper around it in a rendering module is caught the same way
    assert "gpulesson.timing.bench.async_illusion" in measuring_code.measuring_functions()
    wrapper = tmp_path / "lab.py"
    wrapper.write_text(
        "def lab():\n    from gpulesson.timing import bench\n    return bench.async_illusion(64)\n"
    )
    assert calls_into_measuring(wrapper) == [(3, "gpulesson.timing.bench.async_illusion")]
    reader = tmp_path / "reader.py"
    reader.write_text("from gpulesson.site import build_bundle\nbuild_bundle.measure('x', 'cpu')\n")
    assert calls_into_measuring(reader) == []  # the one way in
