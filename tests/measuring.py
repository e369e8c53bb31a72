"""Which package functions measure, found from the source rather than listed by hand.

A function (or class) measures when its body calls a clock, a CUDA barrier or event, the
profiler or ``torch.utils.benchmark``, or calls a package function that measures: calls are
followed through each module's imports to a fixed point, so a wrapper (a site helper that
calls ``async_illusion``, which calls ``measure_matmul``, which reads the clock) is found
however many layers deep it sits. The site modules that time the build itself (a block's
run, a worker's timeout) read the clock without measuring GPU work: their clock calls do not
count, though a call of theirs into a measuring function would.

Calls are resolved by name only (``f()``, ``module.f()``, ``from m import f``); a call
through an object (``entry.run(context)``, how the build runs a suite entry) is not
followed. :func:`gpulesson.site.build_bundle.measure`, which runs a suite entry once per
build, is the one way in (:data:`GATEWAY`): calling it is not measuring.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from tests.conftest import REPO

PACKAGE = REPO / "gpulesson"
#: Calls that measure by themselves (resolved through the module's imports).
MEASURING_CALLS = frozenset(
    {
        "time.perf_counter",
        "time.perf_counter_ns",
        "torch.cuda.synchronize",
        "torch.cuda.Event",
        "torch.profiler.profile",
        "torch.utils.benchmark.Timer",
    }
)
#: The one way a block or the site reaches the suite: it runs an entry once per build.
GATEWAY = "gpulesson.site.build_bundle.measure"
#: Site modules whose clock calls time the build, not GPU work.
TIMES_THE_BUILD = frozenset({"block_runner.py", "exec_cache.py", "exec_timing.py"})


def dotted(path: Path, root: Path = REPO) -> str:
    """``gpulesson/timing/bench.py`` as ``gpulesson.timing.bench`` (a file outside ``root``:
    its stem)."""
    parts = (
        path.relative_to(root if path.is_relative_to(root) else path.parent).with_suffix("").parts
    )
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def aliases(tree: ast.AST) -> dict[str, str]:
    """What each imported name stands for, as a dotted name.

    >>> tree = ast.parse("import time\\nimport torch.cuda as tc\\nfrom a.b import c as d")
    >>> sorted(aliases(tree).items())
    [('d', 'a.b.c'), ('tc', 'torch.cuda'), ('time', 'time')]
    """
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0]
                )
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                found[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return found


def call_sites(
    node: ast.AST, names: dict[str, str], module: str, local: set[str]
) -> set[tuple[int, str]]:
    """``(line, dotted name)`` of what ``node`` calls or imports: ``f()`` of an import or of
    this module, ``m.f()`` of an imported module, and every ``from m import f`` inside it.

    >>> tree = ast.parse(
    ...     "import time\\nfrom x import y\\ndef g():\\n    h(time.perf_counter(), y())"
    ... )
    >>> sorted(call_sites(tree, aliases(tree), "mod", {"g", "h"}))
    [(2, 'x.y'), (4, 'mod.h'), (4, 'time.perf_counter'), (4, 'x.y')]
    """
    found = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.ImportFrom) and sub.module and not sub.level:
            found |= {(sub.lineno, f"{sub.module}.{alias.name}") for alias in sub.names}
        if not isinstance(sub, ast.Call):
            continue
        text = ast.unparse(sub.func)
        head, _, rest = text.partition(".")
        if head in names:
            found.add((sub.lineno, names[head] + ("." + rest if rest else "")))
        elif not rest and head in local:
            found.add((sub.lineno, f"{module}.{head}"))
        elif rest:
            found.add((sub.lineno, text))
    return found


def definitions(tree: ast.Module) -> dict[str, ast.AST]:
    """A module's top-level functions and classes by name."""
    kinds = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
    return {node.name: node for node in tree.body if isinstance(node, kinds)}


@functools.cache
def measuring_functions(package: Path = PACKAGE) -> frozenset[str]:
    """The dotted name of every package function or class that measures (module docstring)."""
    graph: dict[str, set[str]] = {}
    measures: set[str] = set()
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module, names, defs = dotted(path, package.parent), aliases(tree), definitions(tree)
        build_clock = path.parent.name == "site" and path.name in TIMES_THE_BUILD
        for name, node in defs.items():
            targets = {name for _, name in call_sites(node, names, module, set(defs))}
            if f"{module}.{name}" == GATEWAY:
                continue
            graph[f"{module}.{name}"] = targets
            if not build_clock and targets & MEASURING_CALLS:
                measures.add(f"{module}.{name}")
    grew = True
    while grew:
        grew = False
        for name, targets in graph.items():
            if name not in measures and targets & measures:
                measures.add(name)
                grew = True
    return frozenset(measures)
