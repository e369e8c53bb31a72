"""``gpulesson measure``: the whole --quick suite on this CPU, the bundle it writes, bad input."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gpulesson.cli import main
from gpulesson.cli.measure import SuiteProgress
from gpulesson.results import bundle as B


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory):
    """One real ``gpulesson measure --quick --out FILE`` on this CPU, of the issue's own suite.

    The lessons' later rows (decode, train_step, amp_step, profile_step, loader, fusion,
    alignment) are run by their own tests; the whole ``--quick`` suite takes about 25 s on a
    quiet 2-core machine (``gpulesson measure --quick --out b.json``).
    """
    from tests.conftest import _run_cli

    out = tmp_path_factory.mktemp("measure") / "b.json"
    result = _run_cli(
        "measure", "--quick", "--device", "cpu", "--out", str(out), "--only", ",".join(CORE)
    )
    return result, out


CORE = (
    "cuda_context",
    "stopwatch",
    "launch_overhead",
    "memory_bandwidth",
    "host_copies",
    "all_reduce",
    "matmul",
    "matmul_peak",
    "gpt_memory",
    "oom",
    "tf32_accuracy",
    "copy_call",
)


def test_quick_run_writes_a_bundle_that_validates(quick_run):
    result, out = quick_run
    assert result.returncode == 0, result.stderr
    bundle = B.load(out)
    p = bundle.provenance
    assert p.device_type == "cpu" and p.suite.quick
    names = {m.name for m in bundle.measurements}
    for expected in (
        "stopwatch.honest",
        "stopwatch.naive",
        "stopwatch.inflation",
        "launch_overhead.eager",
        "memory_bandwidth",
        "matmul_peak.fp32",
        "oom.requested",
    ):
        assert expected in names
    assert any(n.startswith("matmul.fp32.n") for n in names)
    assert any(n.startswith("gpt_memory.") for n in names)
    skipped = {s.entry: s.reason for s in bundle.skipped}
    assert skipped == {
        "cuda_context": "needs a CUDA device",
        "host_copies": "needs a GPU (CUDA or MPS)",
        "all_reduce": "needs more than one CUDA GPU",
        "copy_call": "needs a CUDA device",
    }
    assert set(p.suite.entries) == {e for e in (m.entry for m in bundle.measurements)}
    for m in bundle.measurements:
        assert m.samples and m.spread.count == len(m.samples)


def test_quick_run_prints_a_summary_of_the_headline_figures(quick_run):
    result, out = quick_run
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"wrote {out}: ")
    assert "best fp32 matmul (shape search)" in result.stdout
    assert "not measured here:" in result.stdout
    assert "cuda_context: needs a CUDA device" in result.stdout
    assert result.stderr == ""  # no progress bar when stderr is not a terminal


def test_json_prints_the_bundle_on_stdout(run_cli):
    result = run_cli("measure", "--quick", "--device", "cpu", "--only", "oom", "--json")
    assert result.returncode == 0, result.stderr
    bundle = B.validate(json.loads(result.stdout))
    assert [m.name for m in bundle.measurements] == ["oom.requested"]
    assert bundle.provenance.suite.entries == ("oom",)


def test_list_shows_every_entry_and_what_runs_here(run_cli):
    result = run_cli("measure", "--list", "--device", "cpu")
    assert result.returncode == 0
    assert "cuda_context" in result.stdout and "skipped: needs a CUDA device" in result.stdout
    data = json.loads(run_cli("measure", "--list", "--device", "cpu", "--json").stdout)
    runs = {e["name"]: e["runs_here"] for e in data["entries"]}
    assert runs["matmul_peak"] is True and runs["all_reduce"] is False


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ((), "nowhere to put the bundle: add --out FILE"),
        (("--json", "--only", "mfu"), "unknown suite entry 'mfu'"),
        (("--only", ","), "no entry names"),
        (("--out", "/no/such/folder/b.json"), "folder /no/such/folder does not exist"),
        (("--json", "--device", "cuda"), "torch.cuda.is_available() is False"),
        (("--device", "tpu"), "invalid choice: 'tpu'"),
        (("--jsno",), "--jsno"),
    ],
)
def test_bad_input_exits_2_with_one_line(run_cli, args, fragment):
    result = run_cli("measure", "--quick", *args)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and fragment in result.stderr
    assert result.stdout == ""


def test_a_folder_as_out_is_refused(run_cli, tmp_path):
    result = run_cli("measure", "--quick", "--out", str(tmp_path))
    assert result.returncode == 2 and "is a folder" in result.stderr


def test_an_unwritable_out_is_one_line_and_exit_1(tmp_path):
    target = tmp_path / "ro"
    target.mkdir()
    target.chmod(0o500)
    err = io.StringIO()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            status = main(
                [
                    "measure",
                    "--quick",
                    "--device",
                    "cpu",
                    "--only",
                    "oom",
                    "--out",
                    str(target / "b.json"),
                ]
            )
    finally:
        target.chmod(0o700)
    if status == 0:
        pytest.skip("this user can write into a read-only folder (root)")
    assert status == 1
    assert err.getvalue().count("\n") == 1
    assert "cannot write the output" in err.getvalue()


def test_help_and_bad_arguments_never_import_torch():
    code = (
        "import contextlib, io, sys\n"
        "from gpulesson.cli import main\n"
        "for argv in (['measure', '--help'], ['measure', '--jsno'], ['compare', '--help']):\n"
        "    out, err = io.StringIO(), io.StringIO()\n"
        "    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):\n"
        "        try:\n"
        "            main(argv)\n"
        "        except SystemExit:\n"
        "            pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'torch')[:3])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).parent.parent,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_only_on_a_terminal_and_without_colour_under_no_color(monkeypatch):
    quiet = SuiteProgress(3, stream=io.StringIO())
    assert not quiet.enabled and quiet.progress is None
    monkeypatch.setenv("NO_COLOR", "1")
    stream = _Tty()
    shown = SuiteProgress(2, stream=stream)
    assert shown.enabled
    assert shown.console.no_color
    shown.close()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_cuda_run_fills_the_gpu_rows(run_cli, tmp_path):
    out = tmp_path / "gpu.json"
    result = run_cli("measure", "--quick", "--device", "cuda", "--out", str(out))
    assert result.returncode == 0, result.stderr
    bundle = B.load(out)
    names = {m.name for m in bundle.measurements}
    for expected in (
        "cuda_context",
        "h2d.pinned",
        "h2d.pageable",
        "d2h.pinned",
        "launch_overhead.cuda_graph",
        "memory_bandwidth",
        "matmul_peak.fp16",
    ):
        assert expected in names
    p = bundle.provenance
    assert p.device_type == "cuda" and p.cuda_version and p.compute_capability
    if bundle.datasheet is not None:  # a known GPU: its stated memory holds what torch sees
        assert bundle.datasheet.memory_bytes >= p.device_memory_bytes
