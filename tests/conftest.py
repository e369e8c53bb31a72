"""Shared fixtures: the CLI in-process, a fake machine for the probe, the built site, markers.

Markers (registered in pyproject.toml) are set here from where a test lives and what it
uses, so ``pytest -m "not browser and not site and not notebooks"`` is the fast inner loop:

* ``site``: the test uses the strictly built site (``built_site``: the per-lesson page
  tests read what its blocks showed), builds one itself, or runs a lesson's blocks (a
  Python fence of ``docs/`` run alone, a page test running a block under a stub);
* ``browser``: the test drives Chromium (``tests/test_*browser*.py``);
* ``notebooks``: the test executes the companion notebooks (checks of their text are fast
  and stay in the loop);
* ``gpu``: the test needs a CUDA device (the test sets it; skipped here, with the reason,
  on a machine without one).
"""

from __future__ import annotations

import contextlib
import io
import os
import runpy
import shutil
import stat
import subprocess
import sys
import types
from collections.abc import Callable, Generator
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from filelock import FileLock
from pytest_markdown_docs.plugin import MarkdownDocstringCodeModule

from gpulesson import probe as probe_module
from gpulesson.results.bundle import Bundle, load
from gpulesson.site import block_outputs, exec_cache
from gpulesson.timing.inputs import usable_cpus

REPO = Path(__file__).resolve().parent.parent

#: Tests that run ``mkdocs build`` themselves (a fixture site, or the course until it fails).
_SLOW_BUILD_TESTS = ("test_a_real_build_", "test_require_cuda_fails_")
#: Test modules about one lesson page (they read the build, and run blocks under stubs).
_PAGE_MODULES = ("_page", "_lesson", "_lessons_quizzes")
DOCS = REPO / "docs"


class _MarkdownFilesOnly:
    """Keep pytest-markdown-docs to the Markdown files.

    With ``--markdown-docs`` the plugin also imports every Python module and walks each of
    its classes and functions for fenced code in docstrings: about 10 s of every run here,
    and it finds none, because this project's docstring examples are doctests (a test in
    ``test_docstrings.py`` keeps it so).
    """

    @pytest.hookimpl(wrapper=True)
    def pytest_collect_file(self, file_path: Path) -> Generator[None, list, list]:
        collected = yield
        if file_path.suffix != ".py":
            return collected
        return [c for c in collected if not isinstance(c, MarkdownDocstringCodeModule)]


def pytest_configure(config: pytest.Config) -> None:
    # Registered as a plugin (not a conftest hook) so it applies to gpulesson/ too.
    config.pluginmanager.register(_MarkdownFilesOnly(), "markdown-files-only")
    _share_the_cores()


#: The most workers ``-n auto`` starts: each holds torch and the collected tests (about
#: 1 GB), and past a few the built site, the browser pass and the notebooks set the pace.
MAX_WORKERS = 8
#: Where a Linux container's CPU quota is (cgroup v2): ``"<quota> <period>"`` or ``"max ..."``.
CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")


def cpu_quota(cpu_max: str) -> int | None:
    """The whole CPUs a cgroup v2 ``cpu.max`` line allows, or None when it sets no quota.

    A container's affinity mask can list every core of the host while its quota allows two.

    >>> cpu_quota("200000 100000\\n"), cpu_quota("50000 100000"), cpu_quota("max 100000")
    (2, 1, None)
    """
    quota, _, period = cpu_max.strip().partition(" ")
    if quota == "max" or not quota.isdigit() or not period.isdigit() or int(period) == 0:
        return None
    return max(1, int(quota) // int(period))


def auto_workers(cpus: int, accelerator: bool) -> int:
    """How many workers ``-n auto`` (in ``addopts``) starts: one a CPU, at most MAX_WORKERS.

    0 (the run stays in one process) where torch sees a GPU or Apple's MPS: the ``gpu``
    tests and the strict build time that one device, and workers sharing it would upset
    each other's timings.

    >>> auto_workers(2, accelerator=False), auto_workers(64, accelerator=False)
    (2, 8)
    >>> auto_workers(16, accelerator=True)
    0
    """
    return 0 if accelerator else max(1, min(cpus, MAX_WORKERS))


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto``: every CPU this run may use, or one process on a machine with a GPU.

    ``PYTEST_XDIST_AUTO_NUM_WORKERS`` still sets the count (pytest-xdist reads it), and
    ``-n 0`` or ``-n 2`` on the command line overrides ``addopts``.
    """
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    cpus = usable_cpus()
    try:
        quota = cpu_quota(CGROUP_CPU_MAX.read_text(encoding="ascii"))
    except OSError:
        quota = None
    accelerator = torch.cuda.is_available() or torch.backends.mps.is_available()
    return auto_workers(min(cpus, quota or cpus), accelerator)


def _share_the_cores() -> None:
    """Under pytest-xdist, give each worker its share of the cores for torch's threads.

    Two workers that each run 2-thread matmuls on 2 cores slow every multi-threaded kernel
    several-fold, and the lesson claims that compare timings (a large matmul outruns a
    small one) would read that contention. Subprocesses (snippets, site builds) keep
    torch's default.
    """
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        torch.set_num_threads(max(1, torch.get_num_threads() // workers))


def _executed_by_the_build(item: pytest.Item) -> bool:
    """A lesson fence markdown-exec runs (``exec="on"``): the strict build tests it."""
    start = getattr(item, "start_line", None)
    if start is None or Path(str(item.fspath)).suffix != ".md":
        return False
    lines = Path(str(item.fspath)).read_text(encoding="utf-8").splitlines()
    return 'exec="on"' in lines[start - 1]  # its info line (pytest-markdown-docs counts from 1)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark tests by what they need, so the fast loop can leave the slow ones out.

    pytest-markdown-docs collects every Python fence of ``docs/``; the ones markdown-exec
    runs are left to the strict build (``built_site``), whose record the page tests read,
    so each runs once per ``pytest``; the copyable fences stay.
    """
    items[:] = [item for item in items if not _executed_by_the_build(item)]
    no_cuda = (
        pytest.mark.skip(reason="needs a CUDA device") if not torch.cuda.is_available() else None
    )
    for item in items:
        if no_cuda and item.get_closest_marker("gpu"):
            item.add_marker(no_cuda)
        module = getattr(item, "module", None)
        module = module.__name__.rsplit(".", 1)[-1] if module else ""
        fixtures = getattr(item, "fixturenames", ())
        if module.startswith("test_") and "browser" in module:
            item.add_marker(pytest.mark.browser)
        if module == "test_notebooks" and item.name.startswith("test_notebook_runs_"):
            item.add_marker(pytest.mark.notebooks)
        runs_a_page = Path(str(item.fspath)).is_relative_to(DOCS) or (
            module.startswith("test_") and module.endswith(_PAGE_MODULES)
        )
        if "built_site" in fixtures or item.name.startswith(_SLOW_BUILD_TESTS) or runs_a_page:
            item.add_marker(pytest.mark.site)


@dataclass(frozen=True)
class CliResult:
    """What one in-process run of the ``gpulesson`` command left behind."""

    returncode: int
    stdout: str
    stderr: str


def keep_calls(monkeypatch: pytest.MonkeyPatch, owner: object, name: str) -> list[tuple]:
    """Wrap ``owner.NAME`` for the test: each call's ``(args, kwargs, result)`` is kept.

    A test of a suite entry compares what it read back with what the entry's own call
    returned, instead of measuring the same thing a second time.
    """
    real, kept = getattr(owner, name), []

    def keep(*args, **kwargs):
        kept.append((args, kwargs, real(*args, **kwargs)))
        return kept[-1][2]

    monkeypatch.setattr(owner, name, keep)
    return kept


def quick_cpu_bundle(out: Path, only: str) -> Bundle:
    """``gpulesson measure --quick --device cpu --only ONLY --out OUT``, in this process: the
    bundle file read back (schema, consistency and plausibility checked)."""
    result = _run_cli("measure", "--quick", "--device", "cpu", "--only", only, "--out", str(out))
    assert result.returncode == 0, result.stderr
    return load(out)


def _run_cli(*args: str, stdin: str | bytes | None = None) -> CliResult:
    """Run ``gpulesson ARGS`` in this process, as the console script would, and capture it."""
    from gpulesson.cli import main

    out, err = io.StringIO(), io.StringIO()
    data = stdin.encode() if isinstance(stdin, str) else (stdin or b"")
    fake_stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")
    saved_stdin = sys.stdin
    sys.stdin = fake_stdin
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exc:  # argparse errors, --help, --version
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    finally:
        sys.stdin = saved_stdin
    return CliResult(int(code), out.getvalue(), err.getvalue())


@pytest.fixture
def run_cli() -> Callable[..., CliResult]:
    """Call ``run_cli("budget", "--params", "7e9")``: exit status, stdout and stderr.

    In-process (fast); keep a subprocess test where the console script itself matters
    (import-time output, a closed pipe, a real stdin).
    """
    return _run_cli


def _run_snippet(name: str, *args: str) -> CliResult:
    """Run ``python snippets/NAME ARGS`` in this process (``runpy``) and capture it."""
    path = REPO / "snippets" / name
    out, err = io.StringIO(), io.StringIO()
    saved_argv = sys.argv
    sys.argv = [str(path), *args]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                runpy.run_path(str(path), run_name="__main__")
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
                if exc.code is not None and not isinstance(exc.code, int):
                    print(exc.code, file=sys.stderr)  # as the interpreter does for sys.exit(msg)
    finally:
        sys.argv = saved_argv
    return CliResult(code, out.getvalue(), err.getvalue())


@pytest.fixture
def run_snippet() -> Callable[..., CliResult]:
    """Call ``run_snippet("pick_device.py", "--help")``: exit status, stdout and stderr.

    In-process, with torch already imported (fast); an exception in the snippet fails the
    test with its traceback. Keep a subprocess where the interpreter matters (what the
    snippet prints on stderr at import, a real stdin).
    """
    return _run_snippet


class _Props:
    def __init__(self, name: str, total_memory: int, major: int, minor: int) -> None:
        self.name = name
        self.total_memory = total_memory
        self.major = major
        self.minor = minor


def _fake_nvml(driver: str, cuda_int: int) -> types.ModuleType:
    module = types.ModuleType("pynvml")
    module.nvmlInit = lambda: None  # type: ignore[attr-defined]
    module.nvmlShutdown = lambda: None  # type: ignore[attr-defined]
    module.nvmlSystemGetDriverVersion = lambda: driver  # type: ignore[attr-defined]
    module.nvmlSystemGetCudaDriverVersion = lambda: cuda_int  # type: ignore[attr-defined]
    return module


def _failing_nvml() -> types.ModuleType:
    module = types.ModuleType("pynvml")

    def fail() -> None:
        raise RuntimeError("NVML Shared Library Not Found")

    module.nvmlInit = fail  # type: ignore[attr-defined]
    return module


@pytest.fixture
def fake_machine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[..., None]:
    """Configure a fake machine; call it with the facts the test needs."""

    def configure(
        *,
        pci_vendors: tuple[str, ...] = (),
        nvml: tuple[str, int] | None = None,
        smi: tuple[str, str] | None = None,
        torch_cuda: str | None = None,
        cuda_available: bool = False,
        devices: tuple[_Props, ...] = (),
        mps_available: bool = False,
        visible: str | None = None,
    ) -> None:
        pci = tmp_path / "pci"
        pci.mkdir()
        for i, vendor in enumerate(pci_vendors):
            dev = pci / f"0000:00:{i:02x}.0"
            dev.mkdir()
            (dev / "vendor").write_text(vendor + "\n")
        monkeypatch.setattr(probe_module, "PCI_ROOT", pci)
        monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml(*nvml) if nvml else _failing_nvml())
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        if smi:
            driver, cuda = smi
            script = bin_dir / "nvidia-smi"
            script.write_text(
                "#!/bin/sh\n"
                'if [ "$1" = "--query-gpu=driver_version" ]; then echo "' + driver + '"; '
                'else echo "| NVIDIA-SMI '
                + driver
                + "   Driver Version: "
                + driver
                + "   CUDA Version: "
                + cuda
                + ' |"; fi\n'
            )
            script.chmod(script.stat().st_mode | stat.S_IEXEC)
        monkeypatch.setenv("PATH", str(bin_dir) + os.pathsep + "/usr/bin:/bin")
        monkeypatch.setattr(torch.version, "cuda", torch_cuda)
        monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda_available)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: len(devices))
        monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: devices[i])
        monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps_available)
        monkeypatch.setattr(torch.backends.mps, "is_built", lambda: mps_available)
        if visible is None:
            monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        else:
            monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)

    return configure


@pytest.fixture
def props() -> type[_Props]:
    """The fake device-properties class, for tests that list GPUs."""
    return _Props


def mkdocs_build(
    site_dir: Path, *, root: Path = REPO, timeout_s: int = 900, **env: str
) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict`` of ``root`` (the repository, or a test's copy of it).

    A copy builds with its own package (``PYTHONPATH``) and, through ``env``, its own
    cache; the ``GPULESSON_*`` variables of the calling shell are left out of a copy's build.
    """
    environment = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    if root != REPO:
        environment = {k: v for k, v in environment.items() if not k.startswith("GPULESSON_")}
        environment["PYTHONPATH"] = str(root)
    environment.update(env)
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site_dir)],
        cwd=root,
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def warm_cache(target: Path) -> Path:
    """A copy of the repository build's execution cache at ``target``, for a copy's build.

    Cache entries name the files a block read relative to the repository, so a copy of it
    reuses every block whose inputs the copy left as they are and runs the rest (a fixture
    that calls this asks for ``built_site`` first, so the cache is filled).
    """
    source = exec_cache.cache_dir(REPO, os.environ)
    if source.is_dir():
        shutil.copytree(source, target, ignore=shutil.ignore_patterns(".*.tmp"))
    return target


@pytest.fixture(scope="session")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The course, built strictly once a run.

    Under pytest-xdist every worker asks for it; the first builds it into the run's shared
    temporary folder while the others wait on a lock, then all read the same site (the
    recipe in pytest-xdist's docs). Tests read it and never change it.
    """
    run_dir = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        run_dir = run_dir.parent  # shared by the run's workers
    site, done = run_dir / "built-site", run_dir / "built-site.done"
    with FileLock(run_dir / "built-site.lock"):
        if not done.exists():
            result = mkdocs_build(site, **{block_outputs.ENV: "1"})
            assert result.returncode == 0, f"strict build failed:\n{result.stderr[-4000:]}"
            done.touch()
    return site
