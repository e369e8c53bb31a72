"""The block worker's runner: a spare worker started ahead (``mkdocs serve``) takes over
when the build needs a new one, and stopping never leaves a process behind."""

from __future__ import annotations

import os
import time

import psutil

from gpulesson.site.block_runner import BlockRunner
from gpulesson.site.exec_cache import setup_request
from tests.test_exec_cache import REPO


def _children() -> set[int]:
    return {p.pid for p in psutil.Process(os.getpid()).children() if p.is_running()}


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:  # it ended between the listing and this look
        return False


def _gone(pids: set[int], deadline_s: float = 20.0) -> bool:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if not any(_running(p) for p in pids):
            return True
        time.sleep(0.1)
    return False


def test_a_spare_worker_takes_over_without_starting_another():
    before = _children()
    runner = BlockRunner(package_parent=REPO)
    try:
        assert runner.set_up(setup_request(), 120).status == "ok"
        first = runner.pid
        runner.keep_spare([{"op": "echo", "text": "queued for the spare"}])
        assert runner.starts == 2
        spare = _children() - before - {first}
        assert len(spare) == 1
        runner.close()
        reply = runner.request({"op": "echo", "text": "hi"}, 120)
        assert (reply.status, reply.data["text"]) == ("ok", "hi")  # not the queued echo
        assert runner.starts == 2 and {runner.pid} == spare
    finally:
        runner.shutdown()
    assert _gone(_children() - before)


def test_a_spare_that_ended_is_not_used():
    before = _children()
    runner = BlockRunner(package_parent=REPO)
    try:
        runner.set_up(setup_request(), 120)
        first = runner.pid
        runner.keep_spare([])
        (spare,) = _children() - before - {first}
        psutil.Process(spare).kill()
        assert _gone({spare})
        runner.close()
        reply = runner.request({"op": "echo", "text": "hi"}, 120)
        assert reply.status == "ok" and runner.starts == 3 and runner.pid not in (first, spare)
    finally:
        runner.shutdown()
    assert _gone(_children() - before)


def test_close_without_waiting_still_stops_the_worker():
    runner = BlockRunner(package_parent=REPO)
    runner.set_up(setup_request(), 120)
    pid = runner.pid
    assert pid is not None
    runner.close(wait=False)
    assert not runner.alive
    assert _gone({pid})
