"""Executed blocks: the cache (what invalidates it, what it survives) and the worker process
(a block that fails, exits, crashes, hangs, warns or prints too much is reported, fresh and
cached, with its page and id)."""

from __future__ import annotations

import dataclasses
import importlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import markdown
import pytest

from gpulesson.probe import DriverInfo, GpuDevice, probe
from gpulesson.site import exec_cache, exec_timing, facts, markdown_exec_api
from gpulesson.site.provenance import BuildRecord, collect_build_record, stamp_html

REPO = Path(__file__).resolve().parent.parent

CONTEXT = exec_cache.CacheContext(
    python_version="3.11.7",
    torch_version="2.13.0+cpu",
    numpy_version="2.4.6",
    device_fingerprint='{"device_name":"Test CPU"}',
    environment="{}",
    threads='{"torch_num_threads":2}',
    machinery_sha256="machinery-1",
)


def _page(counter: Path, prose: str = "Some prose.") -> str:
    """A page whose block counts its runs in ``counter`` and prints a heading and a table."""
    return (
        f"# Page\n\n{prose}\n\n"
        '```python exec="on" id="counted"\n'
        f"with open({str(counter)!r}, 'a') as f:\n"
        "    f.write('x')\n"
        'print("## Result\\n\\n| a | b |\\n|---|---|\\n| 1 | 2 |")\n'
        "```\n"
    )


def _runs(counter: Path) -> int:
    return len(counter.read_text()) if counter.exists() else 0


def _convert(text: str) -> str:
    md = markdown.Markdown(
        extensions=["pymdownx.superfences", "tables", "toc"],
        extension_configs={"pymdownx.superfences": {"custom_fences": exec_cache.custom_fences()}},
    )
    return md.convert(text)


@pytest.fixture
def cache(tmp_path: Path):
    """Configure the formatter with a cache in tmp_path, on page p.md; give back a reconfigure
    function. Blocks run in the shared worker (started once for the test session)."""
    store = exec_cache.ResultStore(tmp_path / "cache")

    def configure(
        context: exec_cache.CacheContext = CONTEXT,
        environ: dict[str, str] | None = None,
        limit_s: float | None = None,
    ) -> exec_cache.ExecSettings:
        settings = exec_cache.ExecSettings(
            store=store,
            context=context,
            policy=exec_cache.cache_policy(environ or {}),
            limit_s=limit_s,
        )
        exec_cache.configure(settings)
        return settings

    facts.reset()
    facts.begin_page("p.md")
    configure()
    yield store, configure
    exec_cache.configure(
        exec_cache.ExecSettings(None, None, exec_cache.CachePolicy(False, False, "not set up"))
    )
    facts.reset()


def test_second_conversion_comes_from_the_cache_byte_identical(tmp_path, cache):
    _store, configure = cache
    settings = configure()
    settings.recorder.begin_page("p.md")
    counter = tmp_path / "runs"
    fresh = _convert(_page(counter))
    cached = _convert(_page(counter))
    settings.recorder.end_page()
    assert [b.status for b in settings.recorder.pages()[0].block_timings] == ["ran", "cached"]
    assert _runs(counter) == 1
    assert cached == fresh
    assert "<table>" in fresh and 'id="counted-result"' in fresh


def test_output_matches_markdown_exec_own_python_formatter(tmp_path, cache):
    import markdown_exec

    counter = tmp_path / "runs"
    theirs = markdown.Markdown(
        extensions=["pymdownx.superfences", "tables", "toc"],
        extension_configs={
            "pymdownx.superfences": {
                "custom_fences": [
                    {
                        "name": "python",
                        "class": "python",
                        "validator": markdown_exec.validator,
                        "format": markdown_exec.formatter,
                    }
                ]
            }
        },
    ).convert(_page(counter))
    ours_fresh = _convert(_page(counter))
    ours_cached = _convert(_page(counter))
    assert _runs(counter) == 2  # markdown-exec's run and our first; the third was cached
    assert ours_fresh == theirs
    assert ours_cached == theirs


def test_a_prose_edit_reuses_the_result(tmp_path, cache):
    counter = tmp_path / "runs"
    _convert(_page(counter, "First wording."))
    html = _convert(_page(counter, "Second, better wording."))
    assert _runs(counter) == 1
    assert "Second, better wording." in html and "<table>" in html


@pytest.mark.parametrize(
    "field",
    [
        "torch_version",
        "device_fingerprint",
        "python_version",
        "environment",
        "threads",
        "machinery_sha256",
    ],
)
def test_a_change_to_what_results_depend_on_reruns_the_block(tmp_path, cache, field):
    _store, configure = cache
    counter = tmp_path / "runs"
    _convert(_page(counter))
    configure(dataclasses.replace(CONTEXT, **{field: "changed"}))
    _convert(_page(counter))
    assert _runs(counter) == 2
    configure(CONTEXT)  # back to the first context: its entry is still there
    _convert(_page(counter))
    assert _runs(counter) == 2


def test_a_code_edit_reruns_the_block(tmp_path, cache):
    counter = tmp_path / "runs"
    _convert(_page(counter))
    html = _convert(_page(counter).replace("| 1 | 2 |", "| 3 | 4 |"))
    assert _runs(counter) == 2
    assert "<td>3</td>" in html


@pytest.mark.parametrize(
    "environ", [{"GPULESSON_FRESH": "1"}, {"CI": "true"}, {"GPULESSON_REQUIRE_DEVICE": "cuda"}]
)
def test_fresh_builds_never_read_the_cache(tmp_path, cache, environ):
    _store, configure = cache
    counter = tmp_path / "runs"
    _convert(_page(counter))
    configure(environ=environ)
    _convert(_page(counter))
    assert _runs(counter) == 2


def test_opted_out_and_session_blocks_always_run(tmp_path, cache):
    _store, configure = cache
    settings = configure()
    settings.recorder.begin_page("p.md")
    counter = tmp_path / "runs"
    page = _page(counter)
    for variant in ('id="counted" cache="off"', 'id="counted" session="s"'):
        text = page.replace('id="counted"', variant)
        _convert(text)
        html = _convert(text)
        assert "<table>" in html
    assert _runs(counter) == 4
    settings.recorder.end_page()
    (timing,) = settings.recorder.pages()
    assert (timing.blocks, timing.ran, timing.uncacheable, timing.cached) == (4, 4, 4, 0)


def test_a_module_a_block_imports_gets_no_bytecode_file_beside_it(tmp_path, cache):
    """``mkdocs serve`` watches the package folder: a ``.pyc`` the worker wrote there, after
    a module was saved, would start a second rebuild once the first ended."""
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        pytest.skip("PYTHONDONTWRITEBYTECODE is set: the worker would write none whatever it did")
    folder = tmp_path / "modules"
    folder.mkdir()
    name = f"saved_module_{uuid.uuid4().hex}"
    (folder / f"{name}.py").write_text("VALUE = 7\n")
    code = f"import sys\nsys.path.insert(0, {str(folder)!r})\nimport {name}\nprint({name}.VALUE*6)"
    html = _convert(f'```python exec="on" id="imports"\n{code}\n```\n')
    assert "42" in html
    assert sorted(p.name for p in folder.iterdir()) == [f"{name}.py"]


def test_without_a_configured_build_blocks_run_uncached(tmp_path):
    exec_cache.configure(
        exec_cache.ExecSettings(None, None, exec_cache.CachePolicy(False, False, "not set up"))
    )
    counter = tmp_path / "runs"
    _convert(_page(counter))
    _convert(_page(counter))
    assert _runs(counter) == 2


def _the_only_entry(store: exec_cache.ResultStore) -> Path:
    entries = list(store.root.rglob("*.json"))
    assert len(entries) == 1
    return entries[0]


def _tampered_output(path: Path) -> None:
    entry = json.loads(path.read_text())
    entry["output"] = entry["output"].replace("| 1 | 2 |", "| 9 | 9 |")  # sha no longer matches
    path.write_text(json.dumps(entry))


DAMAGE = {
    "garbage bytes": lambda p: p.write_bytes(b"\xff\xfe\x00garbage"),
    "truncated json": lambda p: p.write_text(p.read_text()[:40]),
    "empty file": lambda p: p.write_text(""),
    "wrong types": lambda p: p.write_text(json.dumps({"schema": 1, "key": 3, "output": None})),
    "a list": lambda p: p.write_text("[1, 2]"),
    "output edited": _tampered_output,
    "a folder": lambda p: (p.unlink(), p.mkdir()),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_entry_is_recomputed_never_shown(tmp_path, cache, damage):
    store, _configure = cache
    counter = tmp_path / "runs"
    fresh = _convert(_page(counter))
    DAMAGE[damage](_the_only_entry(store))
    html = _convert(_page(counter))
    assert _runs(counter) == 2
    assert html == fresh
    assert "<td>9</td>" not in html


def test_an_unwritable_cache_does_not_stop_the_build(tmp_path, cache):
    _store, configure = cache
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder should be")
    settings = configure()
    settings.store = exec_cache.ResultStore(blocker / "cache")
    counter = tmp_path / "runs"
    assert "<table>" in _convert(_page(counter))
    assert "<table>" in _convert(_page(counter))
    assert _runs(counter) == 2


def test_a_recorded_link_or_device_is_never_read_when_a_key_is_checked(tmp_path):
    """A block that opened results/z.json -> /dev/zero must not make the cache read it."""
    link = tmp_path / "z.json"
    link.symlink_to("/dev/zero")
    assert exec_cache.dependency_value(f"file:{link}", {}) is None
    assert exec_cache.dependency_value("file:/dev/zero", {}) is None
    plain = tmp_path / "x.dat"
    plain.write_bytes(b"1")
    before = exec_cache.dependency_value(f"file:{plain}", {})
    plain.write_bytes(b"2")
    assert before is not None and exec_cache.dependency_value(f"file:{plain}", {}) != before


def _record(**changes: object) -> BuildRecord:
    record = BuildRecord(
        "0.1.0", "abc", "2.13.0", None, "cpu", "Test CPU", 2**33, "Test CPU", 4,
        "no_nvidia_gpu", "2026-01-01T00:00:00Z",
    )  # fmt: skip
    return dataclasses.replace(record, **changes)


def test_the_fingerprint_covers_everything_the_stamp_says_about_device_and_torch():
    report = probe()
    base = _record()
    changed_values = {
        "gpulesson_version": "9.9.9",
        "torch_version": "2.99.0",
        "torch_cuda_build": "12.4",
        "device_type": "cuda",
        "device_name": "Another GPU",
        "device_memory_bytes": 2**35,
        "cpu_model": "Another CPU",
        "cpu_cores_logical": 64,
        "probe_verdict": "cuda_ok",
    }
    assert set(changed_values) | {"git_commit", "built_at_utc"} == {
        f.name for f in dataclasses.fields(BuildRecord)
    }
    for name, value in changed_values.items():
        other = _record(**{name: value})
        if stamp_html(other, "r.json") != stamp_html(base, "r.json"):
            assert exec_cache.device_fingerprint(report, other) != exec_cache.device_fingerprint(
                report, base
            ), name


def test_another_gpu_or_driver_changes_the_fingerprint():
    report = probe()
    record = collect_build_record(report)
    base = exec_cache.device_fingerprint(report, record)
    gpu = GpuDevice(0, "NVIDIA H100 80GB HBM3", 80 * 2**30, "9.0")
    other_gpu = dataclasses.replace(report, devices=(gpu,))
    other_driver = dataclasses.replace(report, driver=DriverInfo("999.1", "13.0", "nvml"))
    assert exec_cache.device_fingerprint(other_gpu, record) != base
    assert exec_cache.device_fingerprint(other_driver, record) != base


def test_a_block_that_includes_a_snippet_reruns_when_the_snippet_changes(tmp_path, cache):
    snippet = tmp_path / "table.py"
    snippet.write_text('print("| a |\\n|---|\\n| 1 |")\n')
    page = '# P\n\n```python exec="on" id="inc"\n--8<-- "table.py"\n```\n'

    def convert() -> str:
        md = markdown.Markdown(
            extensions=["pymdownx.snippets", "pymdownx.superfences", "tables"],
            extension_configs={
                "pymdownx.snippets": {"base_path": [str(tmp_path)], "check_paths": True},
                "pymdownx.superfences": {"custom_fences": exec_cache.custom_fences()},
            },
        )
        return md.convert(page)

    assert "<td>1</td>" in convert()
    snippet.write_text('print("| a |\\n|---|\\n| 2 |")\n')
    assert "<td>2</td>" in convert()


# --- every input a block reads is part of its key ----------------------------------------


@pytest.fixture(scope="module")
def machine() -> tuple:
    report = probe()
    return report, collect_build_record(report)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A checkout's package with the worker's machinery files."""
    for name in exec_cache.MACHINERY:
        (tmp_path / "pkg" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "pkg" / name).write_text("# machinery\n")
    return tmp_path


def _context(
    root: Path,
    machine: tuple,
    *,
    environ: dict[str, str] | None = None,
    threads: dict[str, int] | None = None,
    report: object = None,
) -> exec_cache.CacheContext:
    probed, record = machine
    return exec_cache.build_context(
        report or probed,
        record,
        package_dir=root / "pkg",
        threads={"torch_num_threads": 2, "torch_num_interop_threads": 2}
        if threads is None
        else threads,
        environ=environ or {},
    )


@pytest.mark.parametrize(
    "name", ["GPULESSON_BENCH_N", "OMP_PROC_BIND", "MKL_VERBOSE", "CUDA_VISIBLE_DEVICES",
             "TORCH_LOGS", "PYTORCH_CUDA_ALLOC_CONF", "OPENBLAS_NUM_THREADS"],
)  # fmt: skip
def test_the_identity_follows_the_variable_families_blocks_and_libraries_read(tree, machine, name):
    first = _context(tree, machine)
    assert _context(tree, machine, environ={"HOME": "/x"}) == first
    assert _context(tree, machine, environ={"GPULESSON_FRESH": "1"}) == first
    assert _context(tree, machine, environ={name: "3"}) != first


def test_the_identity_follows_the_worker_machinery_not_the_rest_of_the_package(tree, machine):
    first = _context(tree, machine)
    (tree / "pkg" / "units.py").write_text("X = 2\n")
    assert _context(tree, machine) == first
    (tree / "pkg" / "site" / "block_worker.py").write_text("# changed\n")
    assert _context(tree, machine) != first


def test_the_key_follows_the_threads_torch_uses(tree, machine):
    first = _context(tree, machine)
    one_thread = {"torch_num_threads": 1, "torch_num_interop_threads": 2}
    assert _context(tree, machine, threads=one_thread) != first
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        assert _context(tree, machine, environ={name: "1"}) != first, name


def test_the_key_follows_the_machine_facts_the_probe_reports(tree, machine):
    report, _record = machine
    first = _context(tree, machine)
    changes = {
        "platform": "Linux-9.9.9-other-kernel-x86_64-with-glibc2.36",
        "ram_bytes": (report.ram_bytes or 0) + 2**30,
        "cpu_cores_physical": 99,
        "cuda_visible_devices": "1",
        "python_version": "3.99.0",
    }
    for name, value in changes.items():
        other = dataclasses.replace(report, **{name: value})
        assert _context(tree, machine, report=other) != first, name


def test_the_time_limit_is_not_part_of_the_key(tree, machine):
    first = _context(tree, machine)
    assert _context(tree, machine, environ={"GPULESSON_BLOCK_TIMEOUT_S": "30"}) == first


def test_recorded_dependencies_are_compared_by_hash_value_and_listing(tmp_path):
    data = tmp_path / "x.dat"
    data.write_text("1")
    names = exec_cache.dependencies(
        {"files": [str(data)], "listings": [str(tmp_path)], "environ": [["FOO_SETTING", "a"]]}
    )
    recorded = {name: exec_cache.dependency_value(name, {"FOO_SETTING": "a"}) for name in names}
    assert exec_cache.dependencies_hold(recorded, {}, {"FOO_SETTING": "a"})
    assert not exec_cache.dependencies_hold(recorded, {}, {"FOO_SETTING": "b"})
    data.write_text("2")
    assert not exec_cache.dependencies_hold(recorded, {}, {"FOO_SETTING": "a"})
    data.write_text("1")
    (tmp_path / "y.dat").write_text("")  # a new name in the listed folder
    assert not exec_cache.dependencies_hold(recorded, {}, {"FOO_SETTING": "a"})
    (tmp_path / "y.dat").unlink()
    (tmp_path / ".x.dat.swp").write_text("editor state")
    assert exec_cache.dependencies_hold(recorded, {}, {"FOO_SETTING": "a"})


def test_a_copy_of_the_repository_checks_what_was_read_against_its_own_files(tmp_path):
    """Files under the repository are named relative to it: a copy reuses an entry when its
    own files are the same, and not when they differ, wherever the original's files are."""
    original, copy = tmp_path / "repo", tmp_path / "copy"
    (original / "docs").mkdir(parents=True)
    (original / "docs" / "q.yml").write_text("answer: 1")
    shutil.copytree(original, copy)
    reads = {"files": [str(original / "docs" / "q.yml")], "listings": [str(original / "docs")]}
    names = exec_cache.dependencies(reads, original)
    assert names == ["file:docs/q.yml", "listing:docs"]
    recorded = {name: exec_cache.dependency_value(name, {}, original) for name in names}
    assert None not in recorded.values()
    assert exec_cache.dependencies_hold(recorded, {}, {}, copy)
    (copy / "docs" / "q.yml").write_text("answer: 2")  # the copy differs, the original not
    assert not exec_cache.dependencies_hold(recorded, {}, {}, copy)
    assert exec_cache.dependencies_hold(recorded, {}, {}, original)
    (copy / "docs" / "q.yml").write_text("answer: 1")
    (copy / "docs" / "new.yml").write_text("")  # a new name in the copy's folder
    assert not exec_cache.dependencies_hold(recorded, {}, {}, copy)
    assert exec_cache.dependency_value("file:docs/q.yml", {}) is None  # no base: nothing


# --- blocks that fail, exit, crash, hang, warn or print too much --------------------------


def _block(block_id: str, code: str) -> str:
    return f'# P\n\n```python exec="on" id="{block_id}"\n{code}\n```\n'


def _text(page: str) -> str:
    """What a reader sees of an HTML fragment: tags (syntax highlighting) removed."""
    import html

    return html.unescape(re.sub(r"<[^>]+>", "", page))


_ENDS_BUILD = ", which would end the build: a block must finish normally"
FAILURES = {  # id: (code, what the log and the failure list say, what the page shows)
    "raises": ("raise ValueError('boom')", "raised ValueError: boom", "ValueError: boom"),
    "exit-0": ("import sys\nsys.exit(0)", "called sys.exit(0)" + _ENDS_BUILD, "SystemExit: 0"),
    "exit-1": ("import sys\nsys.exit(1)", "called sys.exit(1)" + _ENDS_BUILD, "SystemExit: 1"),
    "interrupt": (
        "raise KeyboardInterrupt",
        "raised KeyboardInterrupt" + _ENDS_BUILD,
        "KeyboardInterrupt",
    ),
    "os-exit": (
        "import os\nos._exit(3)",
        "ended the worker process that runs the blocks: it exited with status 3 "
        "(os._exit, a crash or a kill); the next block runs in a new worker",
        "exited with status 3",
    ),
    "reads-input": ("input()", "raised EOFError: EOF when reading a line", "EOFError"),
}


@pytest.mark.parametrize("block_id", sorted(FAILURES))
def test_a_failing_block_is_reported_with_page_and_id_and_never_cached(
    tmp_path, cache, caplog, block_id
):
    store, _configure = cache
    code, what, shown = FAILURES[block_id]
    with caplog.at_level(logging.WARNING):
        html = _convert(_block(block_id, code))
    expected = f"p.md: block {block_id!r} {what}"
    assert [str(f) for f in exec_cache.settings().failures] == [expected]
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert errors == [expected]
    assert shown in _text(html)
    assert not list(store.root.rglob("*.json"))
    counter = tmp_path / "runs"
    assert "<table>" in _convert(_page(counter))  # the build goes on, in a new worker if need be
    assert _runs(counter) == 1


@pytest.mark.parametrize(
    "code", ["while True:\n    pass", "import time\ntime.sleep(600)"], ids=["loop", "sleep"]
)
def test_a_block_past_the_time_limit_is_stopped_and_named_with_the_limit(tmp_path, cache, code):
    _store, configure = cache
    settings = configure(limit_s=1.0)
    html = _convert(_block("slow", code))
    what = "did not finish within the 1 s limit and was stopped"
    assert [str(f) for f in settings.failures] == [
        f"p.md: block 'slow' {what} (GPULESSON_BLOCK_TIMEOUT_S; default 600 s)"
    ]
    assert what in _text(html)
    counter = tmp_path / "runs"
    assert "<table>" in _convert(_page(counter))
    assert _runs(counter) == 1


def test_warnings_a_block_logs_are_replayed_from_the_cache(tmp_path, cache, caplog):
    counter = tmp_path / "runs"
    code = (
        "import logging\n"
        f"open({str(counter)!r}, 'a').write('x')\n"
        'logging.getLogger("mkdocs.plugins.lesson").warning("careful: %s", 42)\n'
        'logging.getLogger("mkdocs.plugins.lesson").info("not kept")\n'
        'print("done")'
    )
    seen = []
    for _ in range(2):
        caplog.clear()
        with caplog.at_level(logging.INFO):
            html = _convert(_block("warns", code))
        assert "done" in html
        seen.append(
            [(r.name, r.levelno, r.getMessage()) for r in caplog.records if "lesson" in r.name]
        )
    assert _runs(counter) == 1  # the second conversion came from the cache
    logged = ("mkdocs.plugins.lesson", logging.WARNING, "p.md: block 'warns' logged: careful: 42")
    assert seen == [[logged], [logged]]


def test_an_output_over_the_limit_is_cut_with_a_note_and_a_warning_fresh_and_cached(
    tmp_path, cache, caplog, monkeypatch
):
    store, _configure = cache
    monkeypatch.setattr(exec_cache, "OUTPUT_LIMIT_CHARS", 1000)
    counter = tmp_path / "runs"
    code = f"open({str(counter)!r}, 'a').write('x')\nfor i in range(100):\n    print('y' * 99)"
    for _ in range(2):
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            html = _convert(_block("big", code))
        assert html.count("y" * 99) == 10
        assert "Output truncated" in html
        assert "printed 10,000 characters; the page shows the first 1,000." in html
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert warnings == [
            "p.md: block 'big' printed 10,000 characters; the page shows the first 1,000 "
            "(output truncated). Print a summary, or write the data to a file under docs/ "
            "and link it."
        ]
    assert _runs(counter) == 1
    assert len(json.loads(_the_only_entry(store).read_text())["output"]) == 1000


def test_facts_published_in_the_worker_reach_later_blocks_fresh_and_cached(tmp_path, cache):
    counter = tmp_path / "runs"
    page = (
        '# P\n\n```python exec="on" id="pub"\nfrom gpulesson.site import facts\n'
        f"open({str(counter)!r}, 'a').write('x')\n"
        'facts.publish("t.speedup", 812.5, "x")\nprint("published")\n```\n\n'
        '```python exec="on" id="read"\nfrom gpulesson.site import facts\n'
        "fact = facts.get('t.speedup')\n"
        'print(f"speedup {fact.value} {fact.unit} from {fact.block_id}")\n```\n'
    )
    for _ in range(2):
        facts.begin_page("p.md")
        html = _convert(page)
        assert "speedup 812.5 x from pub" in html
        assert facts.get("t.speedup") == facts.Fact("t.speedup", 812.5, "x", "p.md", "pub")
    assert _runs(counter) == 1


def test_a_block_that_withheld_a_figure_runs_again_next_build_and_passes_the_reason_on(
    tmp_path, cache
):
    """What the machine lacked (a C++ compiler) may be installed before the next build, so
    such a block is never served from the cache; a later block still reads the reason."""
    counter = tmp_path / "runs"
    page = (
        '# P\n\n```python exec="on" id="pub"\nfrom gpulesson.site import facts\n'
        f"open({str(counter)!r}, 'a').write('x')\n"
        'facts.withhold("t.compiled_us", "no C++ compiler here", "µs")\nprint("timed")\n```\n\n'
        '```python exec="on" id="read"\nfrom gpulesson.site import facts\n'
        'print("reason:", facts.get("t.compiled_us").withheld)\n```\n'
    )
    for _ in range(2):
        facts.begin_page("p.md")
        assert "reason: no C++ compiler here" in _convert(page)
    assert _runs(counter) == 2


def test_a_failed_block_publishes_nothing(cache):
    html = _convert(
        _block("half", "from gpulesson.site import facts\nfacts.publish('h.x', 1)\n1/0")
    )
    assert "ZeroDivisionError" in html
    assert facts.page_facts() == {}


def test_a_block_writing_to_the_process_stdout_cannot_garble_the_channel(cache):
    code = (
        "import os, sys\nsys.stdout.write('noise\\n')\nsys.stdout.flush()\n"
        "os.write(1, b'raw noise\\n')\nprint('| a |\\n|---|\\n| 1 |')"
    )
    html = _convert(_block("noisy", code))
    assert "<td>1</td>" in html and "noise" not in html
    assert exec_cache.settings().failures == []


def test_a_bad_time_limit_is_refused_with_the_fix():
    for bad in ("0", "-5", "nan", "inf", "ten"):
        with pytest.raises(ValueError, match=f"GPULESSON_BLOCK_TIMEOUT_S='{bad}' is not a number"):
            exec_cache.block_limit_s({"GPULESSON_BLOCK_TIMEOUT_S": bad})


# --- markdown-exec's private runner: pinned, checked, and loud when it changes ------------

_RUNNER_MODULE = "markdown_exec._internal.formatters.python"


def test_a_markdown_exec_without_the_private_runner_stops_with_the_fix(
    tmp_path, cache, monkeypatch
):
    monkeypatch.delattr(importlib.import_module(_RUNNER_MODULE), "_run_python")
    with pytest.raises(markdown_exec_api.MarkdownExecChanged) as error:
        markdown_exec_api.load()
    message = str(error.value)
    version = markdown_exec_api.installed_version()
    assert message.startswith(f"markdown-exec {version} changed the private API")
    assert "(_run_python() is missing)" in message
    assert 'pip install "markdown-exec>=1.12.6,<1.13"' in message
    counter = tmp_path / "runs"
    with pytest.raises(exec_cache.BlockMachineryError, match=r"p\.md: block 'counted': "):
        _convert(_page(counter))  # never the block shown as plain code, never run uncached
    assert _runs(counter) == 0


def test_a_changed_runner_signature_is_named(monkeypatch):
    module = importlib.import_module(_RUNNER_MODULE)
    monkeypatch.setattr(module, "_code_block_id", lambda block=None: "")
    pattern = r"_code_block_id\(\) has no parameter id, session, title"
    with pytest.raises(markdown_exec_api.MarkdownExecChanged, match=pattern):
        markdown_exec_api.load()


def test_pyproject_pins_markdown_exec_to_the_tested_range():
    from packaging.requirements import Requirement

    pins = re.findall(r'"(markdown-exec[^"]*)"', (REPO / "pyproject.toml").read_text())
    assert pins == [markdown_exec_api.TESTED]
    specifier = Requirement(markdown_exec_api.TESTED).specifier
    assert specifier.contains(markdown_exec_api.installed_version())
    assert not specifier.contains("1.13.0")


# --- real strict builds of small fixture sites through the site hook ----------------------

MKDOCS_YML = (
    "site_name: fixture\nstrict: true\n"
    "hooks:\n  - gpulesson/site/hooks.py\n"
    "plugins:\n  - markdown-exec:\n      languages: [bash, console, pycon]\n"
    "markdown_extensions:\n  - tables\n  - pymdownx.superfences\n"
)


def _project(tmp_path: Path, pages: dict[str, str]) -> Path:
    """A fixture site with its own copy of gpulesson next to mkdocs.yml, as in a clone."""
    project = tmp_path / "project"
    docs = project / "docs"
    docs.mkdir(parents=True, exist_ok=True)
    if not (project / "gpulesson").exists():
        shutil.copytree(
            REPO / "gpulesson", project / "gpulesson", ignore=shutil.ignore_patterns("__pycache__")
        )
    (project / "mkdocs.yml").write_text(MKDOCS_YML)
    for name, text in pages.items():
        (docs / name).write_text(text)
    return project


def _run_build(
    project: Path, cache_dir: Path, *, cwd: Path | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    environ = {
        k: v
        for k, v in os.environ.items()
        if k
        not in ("CI", "GPULESSON_FRESH", "GPULESSON_REQUIRE_DEVICE", "GPULESSON_BLOCK_TIMEOUT_S")
    }
    environ.update(NO_MKDOCS_2_WARNING="1", GPULESSON_CACHE_DIR=str(cache_dir))
    environ.update({"PYTHONPATH": str(project), **env})
    config = project / "mkdocs.yml"
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config)]
        + ["-d", str(project / "site")],
        cwd=cwd or project,
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _build(project: Path, cache_dir: Path) -> tuple[dict, str]:
    result = _run_build(project, cache_dir)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"gpulesson from {project / 'gpulesson'}" in result.stderr  # the copy was used
    site = project / "site"
    timings = json.loads((site / exec_timing.TIMINGS_FILE).read_text())
    return timings, (site / "index.html").read_text()


def _after(html: str, marker: str) -> str:
    """The page after ``marker``, without the theme's build-date comment."""
    return re.sub(r"<!--.*?-->", "", html.split(marker)[1], flags=re.DOTALL)


def _ran_cached(timings: dict) -> tuple[int, int]:
    return timings["pages"][0]["ran"], timings["pages"][0]["cached"]


def test_a_real_build_reuses_results_after_prose_edits_only(tmp_path):
    """Strict builds through the site hook: prose edit, damaged cache, gpulesson edit."""
    cache_dir = tmp_path / "cache"
    counter = tmp_path / "runs"
    first = {"index.md": _page(counter, "First wording.")}
    cold, cold_html = _build(_project(tmp_path, first), cache_dir)
    assert _ran_cached(cold) == (1, 0)

    project = _project(tmp_path, {"index.md": _page(counter, "Second wording.")})
    warm, warm_html = _build(project, cache_dir)
    assert _ran_cached(warm) == (0, 1)
    assert _runs(counter) == 1
    assert "Second wording." in warm_html
    assert _after(warm_html, "Second wording.") == _after(cold_html, "First wording.")

    for entry in cache_dir.rglob("*.json"):
        entry.write_text('{"schema": 1, "key": "')  # cut off mid-write
    damaged, damaged_html = _build(project, cache_dir)
    assert _ran_cached(damaged) == (1, 0)
    assert _runs(counter) == 2
    assert _after(damaged_html, "Second wording.") == _after(warm_html, "Second wording.")

    units = project / "gpulesson" / "units.py"  # no block imports it: nothing re-runs
    units.write_text(units.read_text() + "\n# an edit to the package\n")
    edited, _html = _build(project, cache_dir)
    assert _ran_cached(edited) == (0, 1)
    assert _runs(counter) == 2
    worker = project / "gpulesson" / "site" / "block_worker.py"  # every block runs through it
    worker.write_text(worker.read_text() + "\n# an edit to the worker\n")
    edited, _html = _build(project, cache_dir)
    assert _ran_cached(edited) == (1, 0)
    assert _runs(counter) == 3


_INDEX = """# Home

```python exec="on" id="pages"
from pathlib import Path
from gpulesson.site import facts
pages = sorted(p.name for p in Path("docs").glob("*.md"))
facts.publish("fixture.pages", len(pages))
print("Pages: " + ", ".join(pages) + ".")
```

```python exec="on" id="count"
from gpulesson.site import facts
print(f"There are {facts.value('fixture.pages')} pages.")
```
"""
_WARN = (
    '# Warn\n\n```python exec="on" id="warn"\nimport logging\n'
    'logging.getLogger("mkdocs.plugins.lesson").warning("careful here")\nprint("ok")\n```\n'
)
_BIG = '# Big\n\n```python exec="on" id="big"\nfor i in range(3000):\n    print("y" * 99)\n```\n'
CRASH_PAGES = {  # page: (block id, code, what the build says)
    "exit0.md": ("exit0", "import sys\nsys.exit(0)", "called sys.exit(0)" + _ENDS_BUILD),
    "exit1.md": ("exit1", "import sys\nsys.exit(1)", "called sys.exit(1)" + _ENDS_BUILD),
    "interrupt.md": (
        "interrupt",
        "raise KeyboardInterrupt",
        "raised KeyboardInterrupt" + _ENDS_BUILD,
    ),
    "os-exit.md": (
        "os-exit",
        "import os\nos._exit(3)",
        "ended the worker process that runs the blocks: it exited with status 3",
    ),
    "hang.md": (
        "hang",
        "while True:\n    pass",
        "did not finish within the 2 s limit and was stopped (GPULESSON_BLOCK_TIMEOUT_S",
    ),
}
_WARNED = (
    "WARNING -  warn.md: block 'warn' logged: careful here",
    "WARNING -  big.md: block 'big' printed 300,000 characters; the page shows the first 200,000",
)


def _statuses(project: Path) -> dict[str, str]:
    data = json.loads((project / "site" / exec_timing.TIMINGS_FILE).read_text())
    return {b["block_id"]: b["status"] for p in data["pages"] for b in p["block_timings"]}


def test_a_real_build_fails_on_every_crash_warning_and_flood_fresh_and_cached(tmp_path):
    """Warnings and floods fail a strict build from the cache too; crashes always fail it,
    naming page, block and what happened; the page list a block reads is in its key."""
    cache_dir = tmp_path / "cache"
    base = {"index.md": _INDEX, "warn.md": _WARN, "big.md": _BIG}
    project = _project(tmp_path, base)
    fresh = _run_build(project, cache_dir, GPULESSON_BLOCK_TIMEOUT_S="2")
    assert fresh.returncode == 1, fresh.stderr[-3000:]
    for line in (*_WARNED, "Aborted with 2 warnings in strict mode!"):
        assert line in fresh.stderr + fresh.stdout, line
    assert set(_statuses(project).values()) == {"ran"}
    index = (project / "site" / "index.html").read_text()
    assert "Pages: big.md, index.md, warn.md." in index and "There are 3 pages." in index
    assert "Output truncated" in (project / "site" / "big" / "index.html").read_text()

    crashes = {page: f"# {block}\n\n```python exec=\"on\" id=\"{block}\"\n{code}\n```\n"
               for page, (block, code, _what) in CRASH_PAGES.items()}  # fmt: skip
    _project(tmp_path, crashes)
    for attempt in ("fresh", "cached"):
        result = _run_build(project, cache_dir, GPULESSON_BLOCK_TIMEOUT_S="2")
        assert result.returncode == 1, (attempt, result.stderr[-3000:])
        for page, (block, _code, what) in CRASH_PAGES.items():
            assert f"ERROR   -  {page}: block {block!r} {what}" in result.stderr, (attempt, page)
        assert "5 executed blocks failed, so the build stops:" in result.stderr, attempt
        for line in _WARNED:
            assert line in result.stderr, (attempt, line)
        index = (project / "site" / "index.html").read_text()
        assert "There are 8 pages." in index, attempt  # new page names: the block re-ran
        statuses = _statuses(project)
        assert {statuses[block] for block, _c, _w in CRASH_PAGES.values()} == {"failed"}
        expected = "ran" if attempt == "fresh" else "cached"
        assert {statuses[b] for b in ("pages", "count")} == {expected}  # listed docs/, its fact
        assert {statuses[b] for b in ("warn", "big")} == {"cached"}  # read nothing that changed

    for page in CRASH_PAGES:
        (project / "docs" / page).unlink()  # removed again: the listing block runs again
    cached = _run_build(project, cache_dir, GPULESSON_BLOCK_TIMEOUT_S="2")
    assert cached.returncode == 1
    for line in (*_WARNED, "Aborted with 2 warnings in strict mode!"):
        assert line in cached.stderr + cached.stdout, line
    statuses = _statuses(project)
    assert statuses["pages"] == "ran"  # one entry per block identity: it was replaced
    assert {statuses[b] for b in ("count", "warn", "big")} == {"cached"}  # count: same fact
    assert "There are 3 pages." in (project / "site" / "index.html").read_text()


def test_a_real_build_refuses_another_clones_gpulesson(tmp_path):
    project = _project(tmp_path, {"index.md": "# Home\n"})
    other = tmp_path / "other-clone"
    shutil.copytree(project / "gpulesson", other / "gpulesson")
    result = _run_build(project, tmp_path / "cache", cwd=tmp_path, PYTHONPATH=str(other))
    assert result.returncode == 1
    assert (
        f"This build runs the hooks in {project / 'gpulesson'} but Python imported gpulesson "
        f"from {other / 'gpulesson'}"
    ) in result.stderr
    assert f"Fix: pip install -e {project} in this venv" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_real_build_stops_when_markdown_exec_changed(tmp_path):
    project = _project(tmp_path, {"index.md": _page(tmp_path / "runs")})
    simulate = tmp_path / "simulate"
    simulate.mkdir()
    (simulate / "sitecustomize.py").write_text(
        f"import {_RUNNER_MODULE} as runner\n\ndel runner._run_python\n"
    )
    result = _run_build(project, tmp_path / "cache", PYTHONPATH=f"{project}{os.pathsep}{simulate}")
    assert result.returncode == 1
    version = markdown_exec_api.installed_version()
    assert f"markdown-exec {version} changed the private API" in result.stderr
    assert "_run_python() is missing" in result.stderr
    assert _runs(tmp_path / "runs") == 0


def test_a_damaged_template_cache_file_is_recompiled(tmp_path):
    import jinja2

    from gpulesson.site.hooks import SafeBytecodeCache

    def render() -> str:
        env = jinja2.Environment(
            loader=jinja2.DictLoader({"page.html": "<p>{{ text }}</p>"}),
            bytecode_cache=SafeBytecodeCache(str(tmp_path)),
        )
        return env.get_template("page.html").render(text="hello")

    assert render() == "<p>hello</p>"
    (entry,) = tmp_path.iterdir()
    entry.write_bytes(entry.read_bytes()[:20] + b"\x00damaged")
    assert render() == "<p>hello</p>"
