"""Measure once: lesson blocks ask the measurement suite for figures; they time nothing.

A lesson block gets its measured figures from :func:`gpulesson.site.build_bundle.measure`,
which runs a suite entry (the code behind ``gpulesson measure``) once per build and puts
its result into this build's bundle. This test reads every executed block of every lesson
and lists the measuring calls it still makes itself: a ``measure*`` function, one of the
sweeps in ``MEASURING``, the profiler or a clock. ``NOT_YET`` is the list of blocks not
yet moved onto the suite; the test fails when a block not on it measures (a new second
path) and when one on it no longer does (so the list only shrinks).
"""

from __future__ import annotations

import ast
import re

import pytest

from tests.lesson_blocks import LESSONS, exec_blocks

#: Package functions that measure (time, trace, profile, track memory), besides every
#: ``measure*`` name.
MEASURING = {
    "all_reduce_sweep",
    "async_illusion",
    "compare_devices",
    "find_syncs",
    "first_block_saved",
    "gpu_mfu",
    "gpu_sweep",
    "matmul_errors",
    "peak_rows",
    "profile_first_and_steady",
    "profile_gpt_step",
    "run_accuracy",
    "run_copy_call",
    "run_host_copies",
    "run_impl_comparison",
    "run_launch_overhead",
    "snapshot_gpt_step",
    "sweep",
    "time_attention",
    "trace_gpt2",
}
#: Modules and attributes that time or trace.
CLOCKS = {"perf_counter", "perf_counter_ns", "monotonic", "synchronize", "profile", "Timer"}
_MEASURE_NAME = re.compile(r"^measure(_|$)")

#: Blocks that still measure for themselves, by lesson and block id, with what they call.
#: Each is to become a suite entry read through build_bundle.measure (issue 21).
NOT_YET: dict[tuple[str, str], set[str]] = {
    # Its Chrome trace, offered for download, is ~100 kB: more than a bundle's strings hold.
    ("profiling", "profiling-regions"): {"profile", "profile_gpt_step"},
}


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
            names = [] if reads_suite else [node.attr]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            names = [node.func.id]
        found |= {n for n in names if _MEASURE_NAME.match(n) or n in MEASURING | CLOCKS}
    return found


def _every_block() -> dict[tuple[str, str], set[str]]:
    out = {}
    for path in sorted(LESSONS.glob("*.md")):
        for block_id, code in exec_blocks(path.stem):
            calls = measuring_calls(code)
            if calls:
                out[(path.stem, block_id)] = calls
    return out


def test_no_lesson_block_measures_beyond_the_list_still_to_move():
    found = _every_block()
    new = {k: v for k, v in found.items() if k not in NOT_YET or v - NOT_YET[k]}
    assert not new, f"blocks measuring for themselves: ask build_bundle.measure instead: {new}"


def test_the_list_still_to_move_only_shrinks():
    found = _every_block()
    moved = {k: v for k, v in NOT_YET.items() if k not in found or found[k] != v}
    assert not moved, f"these blocks no longer measure as listed: update NOT_YET: {moved}"


@pytest.mark.parametrize(
    "code",
    [
        "from gpulesson.timing.launch import measure_launch_overhead",
        "import time\nstart = time.perf_counter()",
        "from gpulesson.timing.bench import compare_devices\ncompare_devices('fp32')",
        "import torch\ntorch.cuda.synchronize()",
    ],
)
def test_the_check_sees_a_measuring_call(code):
    assert measuring_calls(code)


def test_a_block_reading_the_suite_is_not_measuring():
    code = "from gpulesson.site import build_bundle\nrows = build_bundle.measure('decode', 'cpu')\n"
    assert measuring_calls(code) == set()  # build_bundle.measure: the one way in
