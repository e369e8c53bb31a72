"""One worker process that runs a site build's executed blocks, so no block can end the build.

The build process (MkDocs) never runs lesson code itself: :class:`BlockRunner`
starts ``gpulesson.site.block_worker`` once, on first use, and sends it one request
at a time (set up, probe, run a block) as length-prefixed pickles over the worker's
stdin and stdout. Every request has a time limit. When the worker does not answer in
time it is killed and the reply says so; when it ends while busy (``os._exit``, a
segfault, the kernel's OOM killer) the reply says how it ended. Either way the next
request starts a new worker, so one bad block costs one block, not the build.

The worker is reused for every block of the build (torch is imported once, by the
probe) and, under ``mkdocs serve``, across rebuilds until the package changes
(``site.hooks`` compares :attr:`BlockRunner.signature` and starts a new one). There a
spare worker boots and probes between rebuilds (:meth:`BlockRunner.keep_spare`), so a
rebuild that needs a new worker does not wait for torch to load.

The worker runs as ``python -B``: it writes no bytecode into the package's
``__pycache__`` folders, which ``mkdocs serve`` watches, so saving a module costs one
rebuild, not a second one started by the ``.pyc`` the new worker wrote. It still reads
the bytecode that is there; compiling every module of the package costs about 0.2 s.

>>> import pathlib
>>> runner = BlockRunner(package_parent=pathlib.Path(__file__).resolve().parents[2])
>>> reply = runner.request({"op": "echo", "text": "hi"}, limit_s=60)
>>> reply.status, reply.data["text"]
('ok', 'hi')
>>> runner.close()
"""

from __future__ import annotations

import atexit
import pickle
import queue
import signal
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

_HEADER = struct.Struct("!Q")
# Run as ``python -c``: the worker imports gpulesson from the same folder as the build.
_BOOT = (
    "import sys; sys.path[0:1] = [sys.argv[1]]; "
    "from gpulesson.site.block_worker import main; sys.exit(main())"
)


def write_message(stream: IO[bytes], message: Any) -> None:
    """Send one message: its pickled length, then the pickle."""
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def _read_exact(stream: IO[bytes], size: int) -> bytes:
    chunks = []
    while size:
        chunk = stream.read(size)
        if not chunk:
            raise EOFError("the other end closed the channel")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def read_frame(stream: IO[bytes]) -> bytes:
    """Receive one message's pickle, not yet unpickled; EOFError when the channel closed.

    >>> import io
    >>> channel = io.BytesIO()
    >>> write_message(channel, {"a": 1})
    >>> _ = channel.seek(0)
    >>> pickle.loads(read_frame(channel))
    {'a': 1}
    """
    (size,) = _HEADER.unpack(_read_exact(stream, _HEADER.size))
    return _read_exact(stream, size)


def exit_description(returncode: int | None) -> str:
    """How a process ended, in words.

    >>> exit_description(3), exit_description(-11)
    ('exited with status 3', 'was killed by signal SIGSEGV')
    """
    if returncode is None:
        return "stopped answering"
    if returncode < 0:
        try:
            return f"was killed by signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with status {returncode}"


@dataclass(frozen=True)
class Reply:
    """The worker's answer to one request, or why there is none."""

    status: str  # "ok" (data holds the answer), "timeout" or "died" (detail says what)
    data: dict[str, Any]
    detail: str
    elapsed_s: float


def _read_frames(stream: IO[bytes], frames: queue.Queue[bytes | None]) -> None:
    try:
        while True:
            frames.put(read_frame(stream))
    except (EOFError, OSError, ValueError, struct.error):
        frames.put(None)


@dataclass
class _Worker:
    process: subprocess.Popen[bytes]
    frames: queue.Queue[bytes | None] = field(default_factory=queue.Queue)
    unread: int = 1  # answers it owes before the next request's (its "ready" at first)


class BlockRunner:
    """Sends requests to one worker process; starts a new one after a timeout or a crash."""

    def __init__(
        self, *, package_parent: Path, python: str = sys.executable, start_limit_s: float = 600.0
    ) -> None:
        self.package_parent = package_parent
        self.python = python
        self.start_limit_s = start_limit_s  # for a new worker to start and take the setup
        self.starts = 0  # workers started so far
        self.signature = ""  # what the code it runs looked like (set by site.hooks)
        self._worker: _Worker | None = None
        self._spare: _Worker | None = None  # started ahead, for mkdocs serve (keep_spare)
        self._setup: dict[str, Any] | None = None

    @property
    def alive(self) -> bool:
        """True while a worker is running."""
        return self._worker is not None and self._worker.process.poll() is None

    @property
    def pid(self) -> int | None:
        """The running worker's process id, or None."""
        return self._worker.process.pid if self._worker is not None else None

    def set_up(self, setup: dict[str, Any], limit_s: float) -> Reply:
        """Send ``setup`` now, and again to every worker started later."""
        self._setup = setup
        return self.request(setup, limit_s)

    def request(self, message: dict[str, Any], limit_s: float) -> Reply:
        """Send one request and wait at most ``limit_s`` seconds for the answer.

        A worker started for it first gets ``start_limit_s`` to start and take the setup.
        """
        if not self.alive:
            self._worker = None
            started = self._start(self.start_limit_s)
            if started.status != "ok" or message is self._setup:
                return started
        return self._exchange(message, limit_s, time.perf_counter())

    def keep_spare(self, requests: list[dict[str, Any]]) -> None:
        """Start a second worker now and queue the setup and ``requests`` (the probe) for it.

        It boots while nothing else runs (``mkdocs serve`` between rebuilds), so the next
        worker the build needs answers at once; it gets the setup again when it takes
        over, so files it read since it started are checked like any worker's.
        """
        if self._setup is None or (self._spare is not None and self._spare.process.poll() is None):
            return
        self._stop(self._spare)
        spare = self._launch()
        assert spare.process.stdin is not None
        try:
            for message in (self._setup, *requests):
                write_message(spare.process.stdin, message)
                spare.unread += 1
        except OSError:  # it ended at once: the next worker starts the usual way
            self._stop(spare)
            return
        self._spare = spare

    def close(self, *, wait: bool = True) -> None:
        """Stop the worker (asked first, killed if it does not stop).

        With ``wait=False`` the worker is asked to stop and a thread waits for it, so a
        build that needs a new worker does not wait for the old one's exit.
        """
        worker, self._worker = self._worker, None
        if wait:
            self._stop(worker)
        elif worker is not None:
            threading.Thread(target=self._stop, args=(worker,), daemon=True).start()

    def shutdown(self) -> None:
        """Stop the worker and the spare (:meth:`keep_spare`)."""
        self.close()
        spare, self._spare = self._spare, None
        self._stop(spare)

    @classmethod
    def _stop(cls, worker: _Worker | None) -> None:
        if worker is None:
            return
        try:
            if worker.process.poll() is None and worker.process.stdin is not None:
                write_message(worker.process.stdin, {"op": "stop"})
            worker.process.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            worker.process.kill()
            worker.process.wait()
        cls._close_pipes(worker)

    def _launch(self) -> _Worker:
        process = subprocess.Popen(
            [self.python, "-B", "-c", _BOOT, str(self.package_parent)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        worker = _Worker(process)
        assert process.stdout is not None
        threading.Thread(
            target=_read_frames, args=(process.stdout, worker.frames), daemon=True
        ).start()
        self.starts += 1
        if self.starts == 1:
            atexit.register(self.shutdown)
        return worker

    def _start(self, limit_s: float) -> Reply:
        start = time.perf_counter()
        spare, self._spare = self._spare, None
        if spare is not None and spare.process.poll() is not None:
            self._stop(spare)  # a spare that ended on its own is not used
            spare = None
        worker = spare if spare is not None else self._launch()
        self._worker = worker
        while True:  # "ready", then a spare's answers to what was queued for it
            ready = self._answer(limit_s, start)
            if ready.status != "ok":
                return ready
            worker.unread -= 1
            if worker.unread == 0:
                break
        if self._setup is None:
            return ready
        return self._exchange(self._setup, limit_s, start)

    def _exchange(self, message: dict[str, Any], limit_s: float, start: float) -> Reply:
        worker = self._worker
        assert worker is not None and worker.process.stdin is not None
        try:
            write_message(worker.process.stdin, message)
        except OSError:
            return self._ended(start)
        return self._answer(limit_s, start)

    def _answer(self, limit_s: float, start: float) -> Reply:
        worker = self._worker
        assert worker is not None
        try:
            frame = worker.frames.get(timeout=max(0.0, limit_s - (time.perf_counter() - start)))
        except queue.Empty:
            worker.process.kill()
            worker.process.wait()
            self._close_pipes(worker)
            self._worker = None
            detail = f"did not finish within the {limit_s:g} s limit and was stopped"
            return Reply("timeout", {}, detail, time.perf_counter() - start)
        if frame is None:
            return self._ended(start)
        return Reply("ok", pickle.loads(frame), "", time.perf_counter() - start)

    def _ended(self, start: float) -> Reply:
        worker, self._worker = self._worker, None
        assert worker is not None
        try:
            returncode: int | None = worker.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            worker.process.kill()
            worker.process.wait()
            returncode = None
        self._close_pipes(worker)
        detail = f"ended the worker process that runs the blocks: it {exit_description(returncode)}"
        return Reply("died", {"returncode": returncode}, detail, time.perf_counter() - start)

    @staticmethod
    def _close_pipes(worker: _Worker) -> None:
        for stream in (worker.process.stdin, worker.process.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
