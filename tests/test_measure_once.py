"""Measure once: lesson blocks ask the measurement suite for figures; they time nothing.

A lesson block gets its measured figures from :func:`gpulesson.site.build_bundle.measure`,
which runs a suite entry (the code behind ``gpulesson measure``) once per build and puts
its result into this build's bundle. This test reads every executed block of every lesson
and lists the measuring calls it still makes itself: a package function that times (found
from the source, however deep the clock sits), a ``measure*`` function, one of the tracers
in ``MEASURING``, the profiler or a clock; any is a second measuring path.
"""

from __future__ import annotations

import ast
import re

import pytest

from tests.lesson_blocks import LESSONS, exec_blocks
from tests.measuring import aliases, call_sites, definitions, measuring_functions

#: Package functions that measure without a clock the source scan sees (they trace dtypes,
#: track memory or compare precisions), besides every ``measure*`` name; the functions that
#: time are found from the source (:func:`tests.measuring.measuring_functions`).
MEASURING = {
    "first_block_saved",
    "matmul_errors",
    "run_accuracy",
    "run_impl_comparison",
    "trace_gpt2",
}
#: Modules and attributes that time or trace.
CLOCKS = {"perf_counter", "perf_counter_ns", "monotonic", "synchronize", "profile", "Timer"}
_MEASURE_NAME = re.compile(r"^measure(_|$)")


def measuring_calls(code: str) -> set[str]:
    """The measuring names a block imports or calls (``measure_x``, ``gpu.measure_x``...).

    >>> sorted(measuring_calls("from a import measure_add, render\\nx = gpu.measure_steps()"))
    ['measure_add', 'measure_steps']
    >>> sorted(measuring_calls("import time\\nt = time.perf_counter()\\nprint(measured)"))
    ['perf_counter']
    """
    found: set[str] = set()
    for node in ast.walk(ast.parse(code)):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.Attribute):
            reads_suite = isinstance(node.value, ast.Name) and node.value.id == "build_bundle"
            # a result's .profile field is not the profiler: torch.profiler.profile is
            field = node.attr == "profile" and _name(node.value) != "profiler"
            names = [] if reads_suite or field else [node.attr]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            names = [node.func.id]
        found |= {n for n in names if _MEASURE_NAME.match(n) or n in MEASURING | CLOCKS}
    # and any package function that measures however deep, found from the source
    tree = ast.parse(code)
    sites = call_sites(tree, aliases(tree), "block", set(definitions(tree)))
    return found | {name.rsplit(".", 1)[1] for _, name in sites if name in measuring_functions()}


def _name(node: ast.expr) -> str:
    return node.id if isinstance(node, ast.Name) else getattr(node, "attr", "")


def _every_block() -> dict[tuple[str, str], set[str]]:
    out = {}
    for path in sorted(LESSONS.glob("*.md")):
        for block_id, code in exec_blocks(path.stem):
            calls = measuring_calls(code)
            if calls:
                out[(path.stem, block_id)] = calls
    return out


def test_no_lesson_block_measures_for_itself():
    found = _every_block()
    assert not found, f"blocks measuring for themselves: ask build_bundle.measure instead: {found}"


@pytest.mark.parametrize(
    "code",
    [
        "from gpulesson.timing.launch import measure_launch_overhead",
        "import time\nstart = time.perf_counter()",
        "from gpulesson.timing.bench import compare_devices\ncompare_devices('fp32')",
        "import torch\ntorch.cuda.synchronize()",
        "import torch\nwith torch.profiler.profile() as prof:\n    pass",
        "from gpulesson.results.entries_device import run_stopwatch\nrun_stopwatch(context)",
    ],
)
def test_the_check_sees_a_measuring_call(code):
    assert measuring_calls(code)


def test_a_result_s_profile_field_is_not_the_profiler():
    assert not measuring_calls("print(g.profile.step_s)")


def test_a_block_reading_the_suite_is_not_measuring():
    code = "from gpulesson.site import build_bundle\nrows = build_bundle.measure('decode', 'cpu')\n"
    assert measuring_calls(code) == set()  # build_bundle.measure: the one way in
