"""The ``gpulesson`` command: exit codes, JSON, one-line errors, output errors, lazy torch.

Most tests call ``main`` in this process (the ``run_cli`` fixture); the subprocess tests
are the ones where the interpreter matters: the console script itself, a closed pipe, a
full disk, and which modules a bad argument imports.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpulesson.cli import build_parser, main
from gpulesson.cli.reference import _subcommands
from tests.conftest import REPO

SUBCOMMANDS = tuple(name for name, _ in _subcommands(build_parser()))

#: One cheap, successful run of each subcommand, for the output-error tests.
GOOD_RUNS = {
    "probe": ("probe", "--json"),
    "bench": ("bench", "--device", "cpu", "--sizes", "16", "--threads", "1", "--json"),
    "budget": ("budget", "--params", "7e9"),
    "diagnose": ("diagnose", "-"),
    "measure": ("measure", "--list"),
    "compare": ("compare", str(REPO / "tests" / "fixtures" / "bundles" / "fixture_t4.json")),
}
DIAGNOSE_INPUT = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."


def test_probe_prints_a_table_and_a_verdict(run_cli):
    result = run_cli("probe")
    assert result.returncode == 0, result.stderr
    assert "Device picked (cuda, mps, cpu)" in result.stdout
    assert "Verdict:" in result.stdout


def test_probe_json_is_one_object(run_cli):
    result = run_cli("probe", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["selected_device"] in ("cuda", "mps", "cpu")
    assert "verdict" in data


def test_no_command_exits_2_with_one_line(run_cli):
    result = run_cli()
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "required: COMMAND" in result.stderr


def test_unknown_command_exits_2_with_one_line(run_cli):
    result = run_cli("frobnicate")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "invalid choice" in result.stderr


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_unknown_option_exits_2_with_one_line_naming_it(run_cli, command: str):
    result = run_cli(*GOOD_RUNS.get(command, (command,)), "--jsno")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "--jsno" in result.stderr and f"gpulesson {command} --help" in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_help_lists_the_options_and_exits_0(run_cli, command: str):
    result = run_cli(command, "--help")
    assert result.returncode == 0
    assert result.stdout.startswith(f"usage: gpulesson {command}")
    assert "--json" in result.stdout
    assert result.stderr == ""


def test_version(run_cli):
    from gpulesson import __version__

    result = run_cli("--version")
    assert (result.returncode, result.stdout) == (0, f"gpulesson {__version__}\n")


class _FullDisk(io.StringIO):
    """A stdout that fails as a file on a full disk does (ENOSPC), on write or on flush."""

    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def flush(self) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_output_that_cannot_be_written_is_one_line_and_exit_1(
    command: str, monkeypatch: pytest.MonkeyPatch
):
    assert command in GOOD_RUNS, f"add a quick successful run of `gpulesson {command}`"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(DIAGNOSE_INPUT.encode())))
    err = io.StringIO()
    with contextlib.redirect_stdout(_FullDisk()), contextlib.redirect_stderr(err):
        status = main(list(GOOD_RUNS[command]))
    assert status == 1
    assert err.getvalue().count("\n") == 1, err.getvalue()
    assert err.getvalue().startswith(f"gpulesson {command}: error: cannot write the output (")
    assert os.strerror(errno.ENOSPC) in err.getvalue()


def test_help_that_cannot_be_written_is_one_line_and_exit_1():
    err = io.StringIO()
    with contextlib.redirect_stdout(_FullDisk()), contextlib.redirect_stderr(err):
        status = main(["--help"])
    assert status == 1
    assert err.getvalue().startswith("gpulesson: error: cannot write the output (")


def test_an_oserror_reading_input_is_not_called_an_output_error(monkeypatch, tmp_path: Path):
    """Only stdout's own failures are output errors; others keep their own handling."""
    import gpulesson.cli.probe as cli_probe

    def unreadable(args: object) -> int:
        raise PermissionError(errno.EACCES, "Permission denied", str(tmp_path / "x"))

    monkeypatch.setattr(cli_probe, "run", unreadable)
    with pytest.raises(PermissionError):
        main(["probe"])


# --- in a real interpreter ------------------------------------------------------------------


def _console_script() -> str:
    found = shutil.which("gpulesson", path=str(Path(sys.executable).parent))
    return found or shutil.which("gpulesson") or ""


def test_the_console_script_runs_and_bad_input_is_one_line():
    script = _console_script()
    if not script:
        pytest.skip("the gpulesson console script is not installed (pip install -e .)")
    good = subprocess.run(
        [script, "budget", "--params", "7e9", "--json"], capture_output=True, text=True, timeout=120
    )
    assert good.returncode == 0, good.stderr
    assert json.loads(good.stdout)["parameters"] == 7e9
    bad = subprocess.run([script, "budget", "--jsno"], capture_output=True, text=True, timeout=120)
    assert (bad.returncode, bad.stderr.count("\n")) == (2, 1), bad.stderr


def test_a_closed_pipe_is_not_a_traceback():
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the command writes
    result = subprocess.run(
        [sys.executable, "-m", "gpulesson", "budget", "--params", "7e9", "--json"],
        stdout=write_end,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
    )
    os.close(write_end)
    assert "Traceback" not in result.stderr
    assert result.returncode == 0


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_a_stdout_closed_before_the_start_stops_quietly(command: str, monkeypatch):
    """With fd 1 closed (``>&-``) Python sets sys.stdout to None: a closed pipe, not a crash."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(DIAGNOSE_INPUT.encode())))
    monkeypatch.setattr(sys, "stdout", None)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        status = main(list(GOOD_RUNS[command]))
    assert (status, err.getvalue()) == (0, "")


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash to close stdout (>&-)")
@pytest.mark.parametrize(
    "args", [("budget", "--params", "7e9"), ("budget", "--params", "7e9", "--json"), ("--help",)]
)
def test_a_closed_stdout_in_a_real_shell_is_not_a_traceback(args: tuple[str, ...]):
    """The issue's ``gpulesson budget ... >&-`` ended in AttributeError."""
    command = shlex.join([sys.executable, "-m", "gpulesson", *args]) + " >&-"
    result = subprocess.run(
        [shutil.which("bash") or "bash", "-c", command],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert "Traceback" not in result.stderr and "AttributeError" not in result.stderr
    assert (result.returncode, result.stderr) == (0, "")


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
def test_a_full_disk_is_one_line_and_a_nonzero_status():
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [sys.executable, "-m", "gpulesson", "budget", "--params", "7e9"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("gpulesson budget: error: cannot write the output (")


#: Arguments that must fail, or print help, without importing torch.
NO_TORCH_ARGS = [
    [],
    ["--help"],
    ["frobnicate"],
    *([command, "--jsno"] for command in SUBCOMMANDS),
    *([command, "--help"] for command in SUBCOMMANDS),
    ["bench", "--sizes", "abc"],
    ["bench", "--device", "tpu"],
    ["budget", "--params", "seven"],
    ["budget", "--params", "7e9", "--preset", "huge"],
    ["diagnose", "/no/such/file"],
]

_IMPORTS_PROBE = """
import contextlib, io, json, sys
from gpulesson.cli import main
report = []
for argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            status = main(argv)
        except SystemExit as exc:
            status = exc.code
    heavy = sorted(m for m in sys.modules if m.split(".")[0] == "torch")
    report.append({"argv": argv, "status": status, "stderr": err.getvalue(), "heavy": heavy[:5]})
print(json.dumps(report))
"""


def test_bad_arguments_and_help_never_import_torch():
    # One interpreter runs every case in turn: a case that imports torch leaves it in
    # sys.modules, so the first case to import it is the one named.
    result = subprocess.run(
        [sys.executable, "-c", _IMPORTS_PROBE, json.dumps(NO_TORCH_ARGS)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    for case in json.loads(result.stdout):
        assert case["heavy"] == [], f"gpulesson {' '.join(case['argv'])} imported {case['heavy']}"
        if "--help" in case["argv"]:
            assert case["status"] == 0, case
        else:
            assert case["status"] == 2, case
            assert case["stderr"].count("\n") == 1, case
