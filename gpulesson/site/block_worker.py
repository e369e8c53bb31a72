"""The worker process that runs a site build's executed Python blocks, one at a time.

Started by :class:`gpulesson.site.block_runner.BlockRunner`, which talks to it over
its stdin and stdout. Those two pipes carry only requests and answers: before any
block runs, file descriptor 1 is pointed at stderr and 0 at ``/dev/null``, so a block
that writes to ``sys.stdout`` shows on the build's stderr and one that reads input
gets end-of-file instead of waiting forever. ``faulthandler`` is on, so a block that
crashes the interpreter leaves a traceback naming its ``<code block: id ...>``.

Requests (a dict with ``op``) and what the answer holds:

* ``setup``: the build's ``sys_path`` and the folders whose files count as a block's
  inputs (``roots`` minus ``excluded``, see :mod:`gpulesson.site.exec_reads`). Nothing is
  re-imported: the build starts a new worker when the package changed
  (``site.hooks``). Answer: where gpulesson is imported from, any problem with
  markdown-exec's runner, and the files modules here read that changed since
  (``stale``: the build then starts a new worker).
* ``probe``: :func:`gpulesson.probe.probe`'s report and torch's thread counts.
* ``run``: one block, run by markdown-exec's runner with the page's facts so far and
  the content folder the build configured (:func:`gpulesson.site.exec_cache.content_state`).
  Answer: ``status`` ``ok`` (``output``), ``error`` (it raised: markdown-exec's
  message) or ``exit`` (``sys.exit``, ``KeyboardInterrupt`` or another
  ``BaseException``: ``trace``); ``what`` in words; the facts it published; the
  suite entries it measured (:mod:`gpulesson.site.build_bundle`); the
  warnings and errors it logged and the ``warnings.warn`` calls it made (``records``);
  what it read (``reads``: :meth:`gpulesson.site.exec_reads.ReadRecorder.end`).
  Whatever it changed in the worker is put back afterwards
  (:mod:`gpulesson.site.exec_isolation`).
* ``echo`` (tests) and ``stop``.
"""

from __future__ import annotations

import faulthandler
import importlib
import linecache
import logging
import os
import sys
import traceback
import warnings
from pathlib import Path
from typing import IO, Any

from gpulesson.site import exec_isolation
from gpulesson.site.block_runner import read_frame, write_message
from gpulesson.site.exec_reads import ReadRecorder

PACKAGE = "gpulesson"
_BLOCK_FILE = "<code block: "
WARNINGS_LOGGER = "mkdocs.plugins.gpulesson.warnings"
_recorder = ReadRecorder()


def warning_record(message: warnings.WarningMessage) -> dict[str, Any]:
    """A ``warnings.warn`` a block made, as a record the build replays on an mkdocs logger.

    >>> caught = warnings.WarningMessage(UserWarning("slow"), UserWarning, "<code block: a>", 3)
    >>> warning_record(caught)["message"]
    'UserWarning: slow (<code block: a>, line 3)'
    """
    return {
        "logger": WARNINGS_LOGGER,
        "level": logging.WARNING,
        "message": f"{message.category.__name__}: {message.message} "
        f"({message.filename}, line {message.lineno})",
        "warning": True,
    }


class LogCapture(logging.Handler):
    """Keeps the warnings and errors logged while a block runs; prints the others."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[dict[str, Any]] | None = None

    def start(self) -> None:
        """Keep what is logged from now on."""
        self.records = []

    def stop(self) -> list[dict[str, Any]]:
        """Stop keeping; the records kept since :meth:`start`."""
        records, self.records = self.records or [], None
        return records

    def emit(self, record: logging.LogRecord) -> None:
        """Keep the record while a block runs, else write it to stderr."""
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 (a bad format string must not lose the record)
            message = str(record.msg)
        if self.records is None:
            sys.stderr.write(f"{record.levelname} {record.name}: {message}\n")
            return
        self.records.append({"logger": record.name, "level": record.levelno, "message": message})


def _first_line(text: str, limit: int = 300) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


def block_trace(error: BaseException, code: str) -> str:
    """The traceback of ``error`` from the block's first frame, with the block's lines."""
    tb = error.__traceback__
    while tb is not None and not tb.tb_frame.f_code.co_filename.startswith(_BLOCK_FILE):
        tb = tb.tb_next
    tb = tb or error.__traceback__
    lines = code.splitlines(keepends=True)
    walk = tb
    while walk is not None:
        name = walk.tb_frame.f_code.co_filename
        if name.startswith(_BLOCK_FILE):
            linecache.cache[name] = (len(code), None, lines, name)
        walk = walk.tb_next
    return "".join(traceback.format_exception(type(error), error, tb))


def describe(error: BaseException) -> str:
    """What a block did that ended it, in words.

    >>> describe(SystemExit(0)), describe(KeyboardInterrupt()), describe(ValueError("no\\nx"))
    ('called sys.exit(0)', 'raised KeyboardInterrupt', 'raised ValueError: no')
    """
    if isinstance(error, SystemExit):
        return f"called sys.exit({error.code!r})"
    detail = _first_line(str(error))
    return f"raised {type(error).__name__}" + (f": {detail}" if detail else "")


def _setup(request: dict[str, Any]) -> dict[str, Any]:
    sys.path[:] = request["sys_path"]
    _recorder.configure(
        [Path(p) for p in request.get("roots", ())], [Path(p) for p in request.get("excluded", ())]
    )
    _recorder.install()
    package = importlib.import_module(PACKAGE)
    api = importlib.import_module(f"{PACKAGE}.site.markdown_exec_api")
    try:
        api.load()
        problem = None
    except api.MarkdownExecChanged as error:
        problem = str(error)
    return {
        "status": "ok",
        "pid": os.getpid(),
        "gpulesson": str(Path(package.__file__ or "").resolve().parent),
        "markdown_exec": problem,
        "stale": _recorder.stale(),
    }


def _probe(capture: LogCapture) -> dict[str, Any]:
    probe = importlib.import_module(f"{PACKAGE}.probe")
    capture.start()
    try:
        report = probe.probe()
    finally:
        records = capture.stop()
    threads: dict[str, int] = {}
    torch = sys.modules.get("torch")
    if torch is not None:
        threads = {
            "torch_num_threads": torch.get_num_threads(),
            "torch_num_interop_threads": torch.get_num_interop_threads(),
        }
    return {"status": "ok", "report": report, "threads": threads, "records": records}


_content: list[Any] = [None]  # the build's content state last configured here


def _follow_content(state: Any) -> None:
    """Configure gpulesson.site.content as the build process did (see exec_cache)."""
    if state == _content[0]:
        return
    content = importlib.import_module(f"{PACKAGE}.site.content")
    if state is None:
        content.reset()
    else:
        content.configure(Path(state[0]))
    _content[0] = state


def _run(request: dict[str, Any], capture: LogCapture) -> dict[str, Any]:
    api = importlib.import_module(f"{PACKAGE}.site.markdown_exec_api").load()
    facts = importlib.import_module(f"{PACKAGE}.site.facts")
    measured = importlib.import_module(f"{PACKAGE}.site.build_bundle")
    _follow_content(request.get("content"))
    before = exec_isolation.capture(_recorder.local_modules())
    try:
        return _run_block(request, capture, api, facts, measured)
    finally:
        exec_isolation.restore(before, _recorder.local_modules())


def _run_block(
    request: dict[str, Any], capture: LogCapture, api: Any, facts: Any, measured: Any
) -> dict[str, Any]:
    for counted in request.get("counted", ()):
        api.code_block_id(*counted)
    block_id = request["id"] or "(no id)"
    facts.reset()
    facts.begin_page(request["page"])
    facts.restore(request["page_facts"])
    facts.begin_block(block_id)
    measured.begin_block(request.get("measured_so_far"))
    reply: dict[str, Any] = {"status": "ok", "output": "", "what": "", "trace": ""}
    os.chdir(request["cwd"])
    if request.get("columns") is not None:
        os.environ["COLUMNS"] = request["columns"]
    capture.start()
    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            _recorder.begin()
            try:
                reply["output"] = api.run_python(
                    request["code"],
                    returncode=request["returncode"],
                    session=request["session"],
                    id=request["id"],
                    **request["extra"],
                )
            finally:
                reply["reads"] = _recorder.end()
    except api.execution_error as error:
        cause = error.__cause__
        reply.update(
            status="error",
            message=str(error),
            returncode=error.returncode,
            what=describe(cause) if cause is not None else "failed",
        )
    except BaseException as error:  # noqa: BLE001 (sys.exit, KeyboardInterrupt and kin)
        reply.update(status="exit", what=describe(error), trace=block_trace(error, request["code"]))
    finally:
        reply["records"] = capture.stop() + [warning_record(w) for w in caught]
        reply["published"] = [fact.to_dict() for fact in facts.end_block()]
        reply["measured"] = measured.end_block()
        reply["measured_reads"] = measured.end_reads()
    return reply


def handle(request: dict[str, Any], capture: LogCapture) -> dict[str, Any]:
    """Answer one request; an error outside a block is answered, never raised."""
    op = request.get("op")
    try:
        if op == "setup":
            return _setup(request)
        if op == "probe":
            return _probe(capture)
        if op == "run":
            return _run(request, capture)
        if op == "echo":
            return {"status": "ok", "text": request.get("text")}
        return {"status": "error", "what": f"unknown request {op!r}", "trace": ""}
    except BaseException as error:  # noqa: BLE001 (answered, so the build can say what broke)
        return {"status": "error", "what": describe(error), "trace": traceback.format_exc()}


def _take_channel() -> tuple[IO[bytes], IO[bytes]]:
    """Move the request pipes off fds 0 and 1; blocks get /dev/null and stderr there."""
    channel_in = os.fdopen(os.dup(0), "rb")
    channel_out = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    return channel_in, channel_out


def main() -> int:
    """Answer requests until the channel closes or ``stop`` arrives."""
    channel_in, channel_out = _take_channel()
    faulthandler.enable()
    capture = LogCapture()
    logging.getLogger().addHandler(capture)
    import pickle

    try:
        write_message(channel_out, {"status": "ready", "pid": os.getpid()})
        while True:
            try:
                request = pickle.loads(read_frame(channel_in))
            except EOFError:
                return 0
            if request.get("op") == "stop":
                return 0
            write_message(channel_out, handle(request, capture))
    except KeyboardInterrupt:  # Ctrl-C on the build reaches its worker too
        return 130
    except BrokenPipeError:  # the build went away
        return 0
