"""The executed-results cache: what invalidates it, what does not, and damage it survives."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import markdown
import pytest

from gpulesson.probe import DriverInfo, GpuDevice, probe
from gpulesson.site import exec_cache, exec_timing
from gpulesson.site.provenance import BuildRecord, collect_build_record, stamp_html

REPO = Path(__file__).resolve().parent.parent

CONTEXT = exec_cache.CacheContext(
    package_sha256="pkg-1",
    snippets_sha256="snip-1",
    python_version="3.11.7",
    torch_version="2.13.0+cpu",
    numpy_version="2.4.6",
    device_fingerprint='{"device_name":"Test CPU"}',
    environment="{}",
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
    """Configure the formatter with a cache in tmp_path; give back a reconfigure function."""
    store = exec_cache.ResultStore(tmp_path / "cache")

    def configure(
        context: exec_cache.CacheContext = CONTEXT, environ: dict[str, str] | None = None
    ) -> exec_cache.ExecSettings:
        settings = exec_cache.ExecSettings(
            store=store, context=context, policy=exec_cache.cache_policy(environ or {})
        )
        exec_cache.configure(settings)
        return settings

    configure()
    yield store, configure
    exec_cache.configure(
        exec_cache.ExecSettings(None, None, exec_cache.CachePolicy(False, False, "not set up"))
    )


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
    ["package_sha256", "snippets_sha256", "torch_version", "device_fingerprint", "python_version"],
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


def test_without_a_configured_build_blocks_run_uncached(tmp_path):
    exec_cache.configure(
        exec_cache.ExecSettings(None, None, exec_cache.CachePolicy(False, False, "not set up"))
    )
    counter = tmp_path / "runs"
    _convert(_page(counter))
    _convert(_page(counter))
    assert _runs(counter) == 2


def test_failing_blocks_are_not_cached(tmp_path, cache):
    store, _configure = cache
    text = '# P\n\n```python exec="on" id="boom"\nraise ValueError("boom")\n```\n'
    assert "ValueError" in _convert(text)
    assert not list(store.root.rglob("*.json"))


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


def test_the_tree_hash_follows_file_contents_not_bytecode(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "render.py").write_text("def render():\n    return 1\n")
    before = exec_cache.tree_sha256(package)
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "render.cpython-311.pyc").write_bytes(b"\x00")
    assert exec_cache.tree_sha256(package) == before
    (package / "render.py").write_text("def render():\n    return 2\n")
    assert exec_cache.tree_sha256(package) != before


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


def test_the_context_follows_the_package_and_gpulesson_variables(tmp_path):
    report = probe()
    record = collect_build_record(report)
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "a.py").write_text("X = 1\n")
    snippets = tmp_path / "snippets"

    def context(environ: dict[str, str]) -> exec_cache.CacheContext:
        return exec_cache.build_context(report, record, package, snippets, environ)

    first = context({})
    assert context({"HOME": "/x"}) == first
    assert context({"GPULESSON_FRESH": "1"}) == first
    assert context({"GPULESSON_BENCH_N": "3"}) != first
    (package / "a.py").write_text("X = 2\n")
    second = context({})
    assert second != first
    snippets.mkdir()
    (snippets / "script.py").write_text("print(1)\n")
    assert context({}) != second


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


# --- a real strict build of a one-page site through the site hook --------------------------


def _site(tmp_path: Path, prose: str) -> Path:
    """A one-page project using a private copy of gpulesson (edits elsewhere cannot leak in)."""
    project = tmp_path / "project"
    docs = project / "docs"
    docs.mkdir(parents=True, exist_ok=True)
    package = tmp_path / "lib" / "gpulesson"
    if not package.exists():
        shutil.copytree(REPO / "gpulesson", package, ignore=shutil.ignore_patterns("__pycache__"))
    (docs / "index.md").write_text(_page(tmp_path / "runs", prose))
    (project / "mkdocs.yml").write_text(
        "site_name: cache test\nstrict: true\n"
        f"hooks:\n  - {package / 'site' / 'hooks.py'}\n"
        "plugins:\n  - markdown-exec:\n      languages: [bash, console, pycon]\n"
        "markdown_extensions:\n  - tables\n  - pymdownx.superfences\n"
    )
    return project


def _build(project: Path, cache_dir: Path) -> tuple[dict, str]:
    site = project / "site"
    environ = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CI", "GPULESSON_FRESH", "GPULESSON_REQUIRE_DEVICE")
    }
    environ.update(
        NO_MKDOCS_2_WARNING="1",
        GPULESSON_CACHE_DIR=str(cache_dir),
        PYTHONPATH=str(project.parent / "lib"),
    )
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)],
        cwd=project,
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert str(project.parent / "lib" / "gpulesson") in result.stderr  # the copy was used
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
    cold, cold_html = _build(_site(tmp_path, "First wording."), cache_dir)
    assert _ran_cached(cold) == (1, 0)

    warm, warm_html = _build(_site(tmp_path, "Second wording."), cache_dir)
    assert _ran_cached(warm) == (0, 1)
    assert _runs(counter) == 1
    assert "Second wording." in warm_html
    assert _after(warm_html, "Second wording.") == _after(cold_html, "First wording.")

    for entry in cache_dir.rglob("*.json"):
        entry.write_text('{"schema": 1, "key": "')  # cut off mid-write
    damaged, damaged_html = _build(_site(tmp_path, "Second wording."), cache_dir)
    assert _ran_cached(damaged) == (1, 0)
    assert _runs(counter) == 2
    assert _after(damaged_html, "Second wording.") == _after(warm_html, "Second wording.")

    units = tmp_path / "lib" / "gpulesson" / "units.py"
    units.write_text(units.read_text() + "\n# an edit to the package\n")
    edited, _html = _build(_site(tmp_path, "Second wording."), cache_dir)
    assert _ran_cached(edited) == (1, 0)
    assert _runs(counter) == 3


def test_without_markdown_exec_private_runner_blocks_still_run(tmp_path, cache, monkeypatch):
    monkeypatch.setattr(exec_cache, "_markdown_exec_python", lambda: None)
    counter = tmp_path / "runs"
    assert "<table>" in _convert(_page(counter))
    assert "<table>" in _convert(_page(counter))
    assert _runs(counter) == 2


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
