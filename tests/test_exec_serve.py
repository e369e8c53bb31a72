"""``mkdocs serve`` shows a package edit on the next rebuild: the site hook starts a new block
worker when a package file changed (nothing is purged from ``sys.modules``), takes the spare
worker when a data file a module read changed, and keeps the worker when nothing did. Each
edit costs one rebuild, and an edit to a module the hooks imported names the restart."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.test_exec_cache import REPO

pytestmark = pytest.mark.site

MKDOCS_YML = (
    "site_name: fixture\nstrict: true\n"
    "hooks:\n  - gpulesson/site/hooks.py\n"
    "plugins:\n  - markdown-exec:\n      languages: [bash]\n"
    "markdown_extensions:\n  - pymdownx.superfences\n"
    "watch:\n  - gpulesson\n"
)
PAGE = (
    "# Home\n\n"
    '```python exec="on" id="value"\n'
    "from gpulesson import serve_fixture\n"
    'print("value: " + serve_fixture.VALUE + ", data: " + serve_fixture.DATA)\n'
    "```\n"
)

#: The hook's line at the end of every build (MkDocs drops a "Documentation built in 0.05
#: seconds" it has logged before, so that line cannot count builds).
BUILT = "executed blocks: 1 on 1 page"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _page_when(url: str, text: str, deadline_s: float) -> str:
    """The page at ``url`` once it contains ``text``; fails after ``deadline_s`` seconds."""
    end = time.monotonic() + deadline_s
    body = ""
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 (127.0.0.1)
                body = response.read().decode()
        except OSError:
            body = ""
        if text in body:
            return body
        time.sleep(0.5)
    raise AssertionError(f"{text!r} not on {url} within {deadline_s} s; last page: {body[-500:]}")


def _log_when(log: Path, text: str, count: int, deadline_s: float) -> None:
    """Wait until ``text`` stands ``count`` times in ``log``; fail after ``deadline_s`` seconds."""
    end = time.monotonic() + deadline_s
    while log.read_text().count(text) < count:
        if time.monotonic() > end:
            raise AssertionError(
                f"{text!r} not {count} times in the log: {log.read_text()[-3000:]}"
            )
        time.sleep(0.5)


def test_serve_shows_a_package_edit_on_the_next_rebuild(tmp_path):
    project = tmp_path / "project"
    shutil.copytree(
        REPO / "gpulesson", project / "gpulesson", ignore=shutil.ignore_patterns("__pycache__")
    )
    module = project / "gpulesson" / "serve_fixture.py"
    module_text = (
        "from pathlib import Path\n"
        'DATA = Path(__file__).parents[1].joinpath("docs", "data.txt").read_text().strip()\n'
    )
    module.write_text(module_text + 'VALUE = "first"\n')
    (project / "docs").mkdir()
    (project / "docs" / "data.txt").write_text("one\n")
    (project / "docs" / "index.md").write_text(PAGE)
    (project / "mkdocs.yml").write_text(MKDOCS_YML)
    port = _free_port()
    # PYTHONDONTWRITEBYTECODE too: with it set, no process writes bytecode and the count of
    # rebuilds per save could not fail
    skipped = ("CI", "GPULESSON_FRESH", "PYTHONDONTWRITEBYTECODE")
    environ = {k: v for k, v in os.environ.items() if k not in skipped}
    environ.update(NO_MKDOCS_2_WARNING="1", PYTHONPATH=str(project))
    environ["GPULESSON_CACHE_DIR"] = str(tmp_path / "cache")
    log = (tmp_path / "serve.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "mkdocs", "serve", "-a", f"127.0.0.1:{port}"],
        cwd=project,
        env=environ,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        url = f"http://127.0.0.1:{port}/"
        _page_when(url, "value: first, data: one", 240)
        time.sleep(1)  # a new modification time, even on a coarse clock
        module.write_text(module_text + 'VALUE = "second"\n')
        _page_when(url, "value: second, data: one", 240)
        time.sleep(3)  # the spare worker starts after each rebuild; let it boot and probe
        (project / "docs" / "data.txt").write_text("two\n")  # read by the module: stale
        _page_when(url, "value: second, data: two", 240)
        (project / "docs" / "index.md").write_text(PAGE + "\nA prose edit.\n")
        _page_when(url, "A prose edit.", 240)
        claims = project / "gpulesson" / "site" / "claims.py"  # imported by the hooks
        kept = claims.read_text()
        claims.write_text(kept + "# an edit the hooks cannot follow\n")
        _log_when(tmp_path / "serve.log", BUILT, 5, 240)
        time.sleep(1)
        claims.write_text(kept)  # undone: the hooks' code is the file's again, no restart
        _log_when(tmp_path / "serve.log", BUILT, 6, 240)
        time.sleep(3)  # room for a rebuild the edits should not cause
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()
    output = (tmp_path / "serve.log").read_text()
    # the module edit, the hooks' module edit and its undoing
    assert output.count("package files changed: starting a new block worker") == 3, output[-3000:]
    assert output.count("files the block worker's modules read changed") == 1, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    # One build at the start and one for each of the five edits: the worker writes no
    # bytecode into the watched package, which would start another.
    assert output.count(BUILT) == 6, output[-3000:]
    (restart,) = [line for line in output.splitlines() if "restart mkdocs serve" in line]
    assert "gpulesson/site/claims.py changed since mkdocs serve started" in restart
