"""The execution cache is keyed on what each block read, blocks do not see each other's state,
and ``warnings.warn`` in a block fails the strict build, fresh and from the cache.

Each test builds a small fixture site (its own copy of gpulesson, as in a clone) with the
real site hook, several times, and reads which blocks ran from ``exec-timings.json``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.test_exec_cache import _project, _run_build, _statuses

pytestmark = pytest.mark.site
FIXTURES = Path(__file__).parent / "fixtures" / "bundles"


def _fence(block_id: str, code: str) -> str:
    return f'```python exec="on" id="{block_id}"\n{code}\n```\n'


def _ok(project: Path, cache_dir: Path, **env: str) -> dict[str, str]:
    result = _run_build(project, cache_dir, **env)
    assert result.returncode == 0, result.stderr[-3000:]
    return _statuses(project)


def _ran(statuses: dict[str, str]) -> set[str]:
    return {block for block, status in statuses.items() if status == "ran"}


def _html(project: Path, page: str = "index") -> str:
    path = project / "site" / ("index.html" if page == "index" else f"{page}/index.html")
    return path.read_text()


READS = "# Reads\n\n" + "\n".join(
    [
        _fence("env", 'import os\nprint("setting: " + os.environ.get("FOO_SETTING", "unset"))'),
        _fence("dat", 'print("data: " + open("docs/assets/x.dat").read().strip())'),
        _fence("scan", 'from gpulesson.errors import scan\nprint("scan: " + scan.__name__)'),
        _fence("plain", 'print("plain: " + str(6 * 7))'),
    ]
)


def test_each_input_a_block_read_reruns_it_and_nothing_else(tmp_path):
    cache_dir = tmp_path / "cache"
    project = _project(tmp_path, {"index.md": READS})
    (project / "docs" / "assets").mkdir()
    (project / "docs" / "assets" / "x.dat").write_text("first\n")
    (project / "docs" / "lessons").mkdir()
    quiz = project / "docs" / "lessons" / "reads.quiz.yml"
    quiz.write_text("questions: []\n")

    assert _ran(_ok(project, cache_dir)) == {"env", "dat", "scan", "plain"}
    assert _ran(_ok(project, cache_dir)) == set()

    assert _ran(_ok(project, cache_dir, FOO_SETTING="on")) == {"env"}
    assert "setting: on" in _html(project)
    assert _ran(_ok(project, cache_dir, FOO_SETTING="on")) == set()

    (project / "docs" / "assets" / "x.dat").write_text("second\n")
    assert _ran(_ok(project, cache_dir, FOO_SETTING="on")) == {"dat"}
    assert "data: second" in _html(project)

    quiz.write_text("questions: []\n# an edit to a quiz no block reads\n")
    assert _ran(_ok(project, cache_dir, FOO_SETTING="on")) == set()

    units = project / "gpulesson" / "units.py"  # no block imports it
    units.write_text(units.read_text() + "\n# a comment\n")
    assert _ran(_ok(project, cache_dir, FOO_SETTING="on")) == set()

    scan = project / "gpulesson" / "errors" / "scan.py"
    scan.write_text(scan.read_text() + "\n# a comment\n")
    assert _ran(_ok(project, cache_dir, FOO_SETTING="on")) == {"scan"}


def test_a_folder_a_block_looked_for_in_vain_reruns_it_when_it_appears(tmp_path):
    """The first reference bundle reaches the blocks that found none (they listed nothing)."""
    cache_dir = tmp_path / "cache"
    code = (
        "from gpulesson.results.compare import load_dir\n"
        'print("bundles:", len(load_dir("results/reference", "reference")))'
    )
    project = _project(tmp_path, {"index.md": "# B\n\n" + _fence("bundles", code)})
    assert _ran(_ok(project, cache_dir)) == {"bundles"}
    assert "bundles: 0" in _html(project)
    assert _ran(_ok(project, cache_dir)) == set()
    (project / "results" / "reference").mkdir(parents=True)
    shutil.copy(FIXTURES / "fixture_h100.json", project / "results" / "reference")
    assert _ran(_ok(project, cache_dir)) == {"bundles"}
    assert "bundles: 1" in _html(project)


def test_a_module_the_imported_module_imports_is_in_the_key(tmp_path):
    """A module an earlier block imported is still followed to the modules it imports."""
    cache_dir = tmp_path / "cache"
    pages = {
        "index.md": "# A\n\n"
        + _fence("first", "import gpulesson.errors.diagnose\nprint('first')")
        + "\n"
        + _fence("second", "import gpulesson.errors.diagnose\nprint('second')"),
    }
    project = _project(tmp_path, pages)
    assert _ran(_ok(project, cache_dir)) == {"first", "second"}
    scan = project / "gpulesson" / "errors" / "scan.py"  # imported by diagnose
    scan.write_text(scan.read_text() + "\n# a comment\n")
    assert _ran(_ok(project, cache_dir)) == {"first", "second"}


def test_a_module_edited_while_a_block_runs_it_is_not_cached_with_its_new_hash(tmp_path):
    """A save during a long block (``mkdocs serve``): the block ran the module as it was when
    imported, so its result is not stored under the edited file's hash, and the next build
    runs it anew (before, that build served the old code's output from the cache)."""
    cache_dir = tmp_path / "cache"
    code = (
        "import pathlib\nfrom gpulesson.errors import scan\n"
        "path = pathlib.Path('gpulesson/errors/scan.py')  # the contributor saves an edit now\n"
        "path.write_text(path.read_text() + '\\nVERSION = 2\\n')\n"
        "print('version:', getattr(scan, 'VERSION', 1))"
    )
    project = _project(tmp_path, {"index.md": "# E\n\n" + _fence("long", code)})
    assert _ran(_ok(project, cache_dir)) == {"long"}
    assert "version: 1" in _html(project)  # the module as imported, before the save
    assert _ran(_ok(project, cache_dir)) == {"long"}
    assert "version: 2" in _html(project)


LEAKS = "# Leaks\n\n" + "\n".join(
    [
        _fence(
            "set",
            "import os\nimport random\nimport torch\nimport gpulesson.units as units\n"
            "units.LEFT_BEHIND = 'left'\ntorch.set_default_dtype(torch.float64)\n"
            "torch.manual_seed(0)\nrandom.seed(0)\n"
            "os.environ['GPULESSON_LEFT'] = 'left'\nos.chdir('/')\nprint('set')",
        ),
        _fence(
            "see",
            "import os\nimport torch\nimport gpulesson.units as units\n"
            "print('module:', getattr(units, 'LEFT_BEHIND', 'clean'))\n"
            "print('dtype:', torch.get_default_dtype())\n"
            "print('env:', os.environ.get('GPULESSON_LEFT', 'clean'))\n"
            "print('cwd:', 'root' if os.getcwd() == '/' else 'clean')",
        ),
    ]
)


def test_a_block_never_sees_state_an_earlier_block_left(tmp_path):
    cache_dir = tmp_path / "cache"
    project = _project(tmp_path, {"index.md": LEAKS})
    _ok(project, cache_dir)
    clean = ("module: clean", "dtype: torch.float32", "env: clean", "cwd: clean")
    for line in clean:
        assert line in _html(project), line
    (project / "docs" / "index.md").write_text(LEAKS.replace("'left'", "'other'"))
    statuses = _ok(project, cache_dir)
    assert statuses == {"set": "ran", "see": "cached"}
    for line in clean:
        assert line in _html(project), line


WARNS = "# Warns\n\n" + _fence("warns", "import warnings\nwarnings.warn('careful')\nprint('ok')")
WARNED = (
    "WARNING -  warns.md: block 'warns' called warnings.warn: UserWarning: careful "
    "(<code block: id warns>, line 2)"
)


def test_warnings_warn_in_a_block_fails_the_strict_build_fresh_and_cached(tmp_path):
    cache_dir = tmp_path / "cache"
    project = _project(tmp_path, {"index.md": "# Home\n", "warns.md": WARNS})
    for attempt in ("ran", "cached"):
        result = _run_build(project, cache_dir)
        assert result.returncode == 1, (attempt, result.stderr[-3000:])
        assert WARNED in result.stderr, (attempt, result.stderr[-3000:])
        assert "Aborted with 1 warnings in strict mode!" in result.stdout + result.stderr
        assert _statuses(project) == {"warns": attempt}
