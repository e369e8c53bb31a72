"""Hostile bundles: each refused in one line naming the file and field, by the loader and the CLI.

Every case is a real bundle (the H100 fixture) with one change made in its JSON text, so
what is refused is the change, not some other fault. The same cases go through
``load_dir`` (a ``ValueError``), through ``gpulesson compare FILE`` (exit 2, one line on
stderr) and, in one real strict build of a copy of the repository, through the site.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gpulesson.results import bundle as B
from gpulesson.results import bundle_input
from gpulesson.results.compare import load_dir
from tests.conftest import REPO, mkdocs_build

FIXTURES = Path(__file__).parent / "fixtures"
H100 = FIXTURES / "bundles" / "fixture_h100.json"
HARMLESS = FIXTURES / "hostile" / "harmless_markup_t4.json"
BASE = H100.read_text()
FIRST_VALUE = '"value": 524288000'  # measurements[0].value in the fixture


def _edit(old: str, new: str) -> Callable[[Path], None]:
    """A case: the fixture's text with the first ``old`` replaced by ``new``."""
    assert old in BASE, old

    def write(path: Path) -> None:
        path.write_text(BASE.replace(old, new, 1), encoding="utf-8")

    return write


def _symlink_to_dev_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _fifo(path: Path) -> None:
    os.mkfifo(path)  # a naive open would wait for a writer for ever


def _oversized(path: Path) -> None:
    # Valid JSON, padded with spaces past the limit.
    path.write_text(BASE + " " * bundle_input.MAX_BUNDLE_BYTES)


def _sparse_huge(path: Path) -> None:
    with path.open("wb") as f:
        f.truncate(64 * 2**30)  # 64 GiB of zeros that take no disk


_DEEP = "[" * 2000 + "]" * 2000

#: name: (how to write the file, the field the message names, words it must hold)
CASES: dict[str, tuple[Callable[[Path], None], str, str]] = {
    "symlink_dev_zero": (_symlink_to_dev_zero, "", "a symbolic link, not a regular file"),
    "fifo": (_fifo, "", "a FIFO (named pipe), not a regular file"),
    "oversized": (_oversized, "", f"larger than {bundle_input.MAX_BUNDLE_BYTES} bytes"),
    "sparse_64_gib": (_sparse_huge, "", f"larger than {bundle_input.MAX_BUNDLE_BYTES} bytes"),
    "digits_400": (
        _edit(FIRST_VALUE, '"value": 1' + "0" * 399),
        "measurements[0].value",
        "a 400-digit integer is beyond 1e+30",
    ),
    "nesting_2000": (
        _edit('"driver_version": "000.00.00"', f'"driver_version": {_DEEP}'),
        "provenance.driver_version" + "[0]" * (bundle_input.MAX_DEPTH - 2),
        "nested deeper than 16 levels",
    ),
    "infinity": (
        _edit(FIRST_VALUE, '"value": Infinity'),
        "measurements[0].value",
        "Infinity is not a finite number",
    ),
    "minus_infinity": (
        _edit(FIRST_VALUE, '"value": -Infinity'),
        "measurements[0].value",
        "-Infinity is not a finite number",
    ),
    "nan": (_edit(FIRST_VALUE, '"value": NaN'), "measurements[0].value", "NaN is not a finite"),
    "float_overflow": (
        _edit(FIRST_VALUE, '"value": 1e400'),
        "measurements[0].value",
        "1e400 is beyond the range of a number",
    ),
    "duplicate_key": (
        _edit('"device_count": 1,', '"device_count": 1, "device_count": 8,'),
        "provenance.device_count",
        "this key appears twice in one object",
    ),
    "date_2025_02_30": (
        _edit('"created_utc": "2000-01-02T03:04:05Z"', '"created_utc": "2025-02-30T03:04:05Z"'),
        "provenance.created_utc",
        "'2025-02-30T03:04:05Z' is not a real date and time (day is out of range for month)",
    ),
    "long_string": (
        _edit('"cpu_model": "fixture CPU"', '"cpu_model": "' + "x" * 5000 + '"'),
        "provenance.cpu_model",
        "5000 characters, over the 2000 a bundle string may have",
    ),
    "escape_in_string": (
        _edit(
            '"cpu_model": "fixture CPU"', '"cpu_model": "fixture \\u001b[2J\\u001b]0;pwned\\u0007"'
        ),
        "provenance.cpu_model",
        "holds U+001B at character 8, a control or invisible formatting character",
    ),
    "raw_newline_in_string": (
        _edit('"cpu_model": "fixture CPU"', '"cpu_model": "fixture\nCPU"'),
        "provenance.cpu_model",
        "holds U+000A at character 7",
    ),
    "c1_control": (
        _edit('"cpu_model": "fixture CPU"', '"cpu_model": "fixture \\u009b31m"'),
        "provenance.cpu_model",
        "holds U+009B",
    ),
    "bidi_override": (
        _edit('"cpu_model": "fixture CPU"', '"cpu_model": "fixture \\u202eUPC"'),
        "provenance.cpu_model",
        "holds U+202E",
    ),
    "control_in_key": (
        _edit('"params": {', '"params": {"evil\\u001b[31m": 1, '),
        "measurements[0].params['evil\\x1b[31m']",
        "this key: holds U+001B",
    ),
    "string_flop_count": (
        _edit('"flop": 1099511627776', '"flop": "1099511627776"'),
        "",  # the index is found below
        "is not a number: params.flop is the FLOP count",
    ),
}


def _case_file(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    CASES[name][0](path)
    return path


def _field(name: str) -> str:
    field = CASES[name][1]
    if name == "string_flop_count":
        data = json.loads(BASE)
        i = next(i for i, m in enumerate(data["measurements"]) if "flop" in m["params"])
        return f"measurements[{i}].params.flop"
    return field


def _one_line(message: str) -> None:
    assert "\n" not in message.rstrip("\n") and "\x1b" not in message and "\r" not in message
    assert "Traceback" not in message


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_loader_refuses_each_in_one_line_naming_the_file_and_field(tmp_path, name):
    community = tmp_path / "results" / "community"
    _case_file(community, name)
    start = time.perf_counter()
    with pytest.raises(ValueError) as info:
        load_dir(community, "community")
    elapsed_s = time.perf_counter() - start
    message = str(info.value)
    _one_line(message)
    assert isinstance(info.value, B.BundleError)
    field = _field(name)
    where = f"results/community/{name}.json" + (f": {field}" if field else "")
    assert message.startswith(where + ": "), message[:300]
    assert CASES[name][2] in message, message[:300]
    assert len(message) < 400  # one readable line, whatever the input held
    assert elapsed_s < 5  # refused at once: nothing unbounded is read or parsed


@pytest.mark.parametrize("name", sorted(CASES))
def test_compare_refuses_each_with_exit_2_and_one_line(run_cli, tmp_path, name):
    path = _case_file(tmp_path, name)
    result = run_cli("compare", str(path))
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1
    _one_line(result.stderr)
    field = _field(name)
    where = str(path) + (f": {field}" if field else "")
    assert result.stderr.startswith(f"gpulesson compare: error: {where}: "), result.stderr[:300]
    assert CASES[name][2] in result.stderr


def test_the_schema_states_the_readers_limits():
    text = B.schema()["description"]
    for limit in (
        f"over {bundle_input.MAX_BUNDLE_BYTES} bytes",
        f"beyond {bundle_input.MAX_MAGNITUDE:g}".replace("+", ""),
        f"below {bundle_input.MIN_MAGNITUDE:g}",
        f"deeper than {bundle_input.MAX_DEPTH}",
        f"over {bundle_input.MAX_STRING_CHARS} characters (keys over {bundle_input.MAX_KEY_CHARS})",
    ):
        assert limit in text, limit


def test_the_fixture_bundles_still_load_unchanged():
    for path in sorted((FIXTURES / "bundles").glob("*.json")):
        assert B.to_dict(B.load(path)) == json.loads(path.read_text())


def test_markup_characters_are_not_refused(tmp_path):
    """``< > & | * _ [ ] #`` are harmless text: refusing everything would not pass this."""
    reference = tmp_path / "reference"
    reference.mkdir()
    shutil.copy(HARMLESS, reference)
    [sourced] = load_dir(reference, "reference")
    p = sourced.bundle.provenance
    assert p.device_name == "Lab <GPU> & co | *fast* _x_ [1] #2"
    assert p.torch_version == "2.5.1+<lab>&[x]"
    labels = [m.label for m in sourced.bundle.measurements]
    assert "bf16 <matmul> & *peak* | _best_ [#1]" in labels
    assert all(c in json.dumps(B.to_dict(sourced.bundle)) for c in "<>&|*_[]#")


def test_a_string_at_the_limit_and_a_tiny_value_load():
    data = json.loads(BASE)
    data["provenance"]["cpu_model"] = "x" * bundle_input.MAX_STRING_CHARS
    data["provenance"]["platform"] = "tab-free, plain: ü, 日本, emoji 🙂"
    assert B.validate(data).provenance.cpu_model == "x" * bundle_input.MAX_STRING_CHARS
    data["provenance"]["cpu_model"] += "x"
    with pytest.raises(B.BundleError, match=r"^provenance\.cpu_model: 2001 characters"):
        B.validate(data)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (float("nan"), "nan is not a finite number"),
        (float("inf"), "inf is not a finite number"),
        (1e31, "1e+31 is beyond 1e+30"),
        (10**40, "1e+40 is beyond 1e+30"),
        (1e-31, "1e-31 is below 1e-30"),
    ],
)
def test_validate_checks_data_given_in_python_too(value, problem):
    data = json.loads(BASE)
    data["measurements"][0]["value"] = value
    with pytest.raises(B.BundleError, match=r"^measurements\[0\]\.value: ") as info:
        B.validate(data)
    assert problem in str(info.value)


def test_deep_data_given_in_python_is_refused_without_recursing():
    data = json.loads(BASE)
    deep: list = []
    for _ in range(100_000):  # far past the interpreter's recursion limit
        deep = [deep]
    data["provenance"]["driver_version"] = deep
    with pytest.raises(B.BundleError, match=r"nested deeper than 16 levels"):
        B.validate(data)


def test_the_writer_keeps_an_exception_message_to_one_line_the_reader_accepts():
    bundle = B.load(H100)
    reason = "error: RuntimeError: CUDA out of memory.\nTried to allocate\x1b[0m" + "x" * 3000
    m = dataclasses.replace(bundle.measurements[0], warning="spread\nlarge", note="a\tb")
    written = B.to_dict(
        dataclasses.replace(bundle, measurements=(m,), skipped=(B.Skipped("matmul", reason),))
    )
    again = B.validate(written)
    assert again.skipped[0].reason.startswith("error: RuntimeError: CUDA out of memory. Tried")
    assert len(again.skipped[0].reason) == bundle_input.MAX_STRING_CHARS
    assert (again.measurements[0].warning, again.measurements[0].note) == ("spread large", "a b")


def test_a_folder_named_json_and_a_linked_folder_are_refused(tmp_path):
    community = tmp_path / "results" / "community"
    (community / "folder.json").mkdir(parents=True)
    with pytest.raises(B.BundleError, match=r"^results/community/folder\.json: a folder, not a"):
        load_dir(community, "community")
    linked = tmp_path / "results" / "reference"
    linked.symlink_to("/dev")
    with pytest.raises(B.BundleError, match=r"reference: holds bundles only, .* a symbolic link"):
        load_dir(linked, "reference")
    assert load_dir(tmp_path / "results" / "absent", "reference") == ()


def test_a_file_name_with_control_characters_is_printed_escaped(tmp_path):
    path = tmp_path / "a\x1b[31mb\nc.json"
    path.write_text("{not json")
    with pytest.raises(B.BundleError) as info:
        B.load(path)
    assert str(info.value).startswith("a\\x1b[31mb\\nc.json: not JSON (line 1")
    shutil.copy(H100, path)  # a valid bundle: in a results folder, its name is refused
    with pytest.raises(B.BundleError) as info:
        load_dir(tmp_path, "community")
    message = str(info.value)
    assert message.startswith(f"{tmp_path.parent.name}/{tmp_path.name}/a\\x1b[31mb\\nc.json: ")
    assert "the file name holds a control" in message


def test_the_refusal_never_reads_past_the_limit(tmp_path, monkeypatch):
    """A file that grows after ``lstat`` (or lies about its size) is read to limit + 1 bytes."""
    path = tmp_path / "growing.json"
    path.write_text("{}")
    limit = 1000
    path.write_text(" " * (10 * limit))
    real_lstat = os.lstat

    def small_lstat(p, *args, **kwargs):
        info = real_lstat(p, *args, **kwargs)
        return os.stat_result((*info[:6], 2, *info[7:]))  # st_size 2 bytes

    monkeypatch.setattr(bundle_input.os, "lstat", small_lstat)
    with pytest.raises(bundle_input.FieldError, match=rf"larger than {limit} bytes"):
        bundle_input.read_bounded(path, limit)


# --- one real strict build of a copy of the repository ---------------------------------------

_TOP_LEVEL_SKIP = {".git", ".venv", ".cache", "site", ".pytest_cache", ".ruff_cache"}


def _skip(folder: str, names: list[str]) -> set[str]:
    """What the copy leaves out: the top level's git, venv, caches and built site."""
    skipped = {n for n in names if n == "__pycache__" or n.endswith(".egg-info")}
    if Path(folder) == REPO:
        skipped |= _TOP_LEVEL_SKIP & set(names)
    return skipped


#: The issue's cases for the build: each stops it with one line naming the file and the field.
BUILD_CASES = (
    "symlink_dev_zero",
    "digits_400",
    "nesting_2000",
    "infinity",
    "nan",
    "duplicate_key",
    "date_2025_02_30",
)


@pytest.fixture(scope="module")
def repo_copy(tmp_path_factory) -> Path:
    """One copy of the repository (no git, venv, caches or site) for the build cases."""
    copy = tmp_path_factory.mktemp("hostile-build") / "repo"
    shutil.copytree(REPO, copy, ignore=_skip, symlinks=True)
    return copy


def _strict_build(repo_copy: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict`` of the copy, with its own package and an empty cache."""
    return mkdocs_build(
        tmp_path / "site",
        root=repo_copy,
        timeout_s=300,
        GPULESSON_CACHE_DIR=str(tmp_path / "cache"),
    )


@pytest.mark.parametrize("name", BUILD_CASES)
def test_a_real_build_refuses_the_bad_bundle_in_one_line_naming_file_and_field(
    name, repo_copy, tmp_path
):
    """``mkdocs build --strict`` of a copy of the repository with one bad community bundle.

    The bundles are checked when the build starts, before any block reads them, so the
    build stops at once with the bundle's file and field and no traceback.
    """
    community = repo_copy / "results" / "community"
    shutil.rmtree(community, ignore_errors=True)
    _case_file(community, name)
    result = _strict_build(repo_copy, tmp_path)
    shutil.rmtree(community)
    assert result.returncode != 0
    _, field, words = CASES[name]
    prefix = f"result bundle refused: results/community/{name}.json: "
    lines = [line for line in result.stderr.splitlines() if prefix in line]
    assert len(lines) == 1, result.stderr[-3000:]
    assert words in lines[0] and (f"{field}: " in lines[0] if field else True), lines[0]
    assert "Traceback" not in result.stderr and "Error:" not in result.stdout


def test_a_real_build_refuses_an_unsourced_published_row_in_one_line(repo_copy, tmp_path):
    """The package's published rows are checked when the build starts, like the bundles."""
    data_file = repo_copy / "gpulesson" / "results" / "published.json"
    original = data_file.read_text(encoding="utf-8")
    data = json.loads(original)
    rows = data["rows"] if isinstance(data, dict) else data
    del rows[2]["source"]
    data_file.write_text(json.dumps(data), encoding="utf-8")
    try:
        result = _strict_build(repo_copy, tmp_path)
    finally:
        data_file.write_text(original, encoding="utf-8")
    assert result.returncode != 0
    wanted = "package data refused: gpulesson/results/published.json: rows: 3 ("
    lines = [line for line in result.stderr.splitlines() if wanted in line]
    assert len(lines) == 1 and "): source: missing; add it" in lines[0], result.stderr[-3000:]
    assert "Traceback" not in result.stderr
