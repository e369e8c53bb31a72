"""Executed Python blocks: run in a worker process, cached on disk, and loud when they fail.

markdown-exec runs every ``python exec="on"`` block on every build. This module's
``formatter`` and ``validator`` replace markdown-exec's for Python
(``site.hooks.on_config`` registers them).

**Where blocks run.** In the build's worker process (:mod:`gpulesson.site.block_runner`),
through markdown-exec's own runner (:mod:`gpulesson.site.markdown_exec_api`). A block
that raises, calls ``sys.exit``, raises ``KeyboardInterrupt``, ends its process
(``os._exit``, a crash) or runs longer than ``GPULESSON_BLOCK_TIMEOUT_S`` (default
600 s) is logged as an error naming its page, its id and what happened, shows the
failure on the page, and fails the build (``site.hooks.on_post_build``); the next
block runs in a new worker if the old one is gone.

**What a block leaves.** Its printed output (at most :data:`OUTPUT_LIMIT_CHARS`
characters are embedded; beyond that the page shows an "Output truncated" note and
the build logs a warning), the facts it published (:mod:`gpulesson.site.facts`), the
suite entries it measured (:mod:`gpulesson.site.build_bundle`) and the warnings and
errors it logged. All four are stored, and replayed when the block is served from the
cache, so a cached build has the same figures, warns and fails exactly as a fresh one.

**The key** has two levels, since what a block reads is known only once it ran:

* its identity: the block's code (snippet files pulled in with ``--8<--`` are already
  inside it) and execution options; every fact published earlier on the page
  (:func:`gpulesson.site.facts.page_digest`); the Python, torch and numpy versions; the
  device fingerprint (every field of the probe's report and of the page stamp); the
  threads torch uses; the environment variables of the families blocks and the libraries
  under them read (:data:`ENV_FAMILIES`: ``GPULESSON_*``, ``OMP_*``, ``MKL_*``,
  ``CUDA_*``, ``TORCH_*``, ``PYTORCH_*`` and the ``*_NUM_THREADS`` kin); the worker's
  own code (:data:`MACHINERY`);
* what its run read, recorded in the worker (:mod:`gpulesson.site.exec_reads`) and
  stored with the result: the files of the repository modules it used (the modules it
  imported and theirs, transitively), the files it or those modules opened for reading
  and the folders they listed (inside the repository, outside ``.venv``, the cache and
  the site), the environment variables read through ``os.environ``, and the suite
  measurements of earlier blocks it was given (:mod:`gpulesson.site.build_bundle`), each
  with its hash or value then.

A stored result is shown only when its identity matches and every recorded hash and
value still holds (:func:`dependencies_hold`); else the block runs again and its entry
is replaced. So a quiz edit re-runs no block that does not read the quiz file, and an
edit to a module re-runs exactly the blocks that used it. State a block leaves in the
worker is put back before the next block (:mod:`gpulesson.site.exec_isolation`).

Only the printed output is cached; markdown-exec still converts it to HTML on
every build, so headings, ids and the table of contents come out exactly as
from a fresh run. Blocks that fail, blocks in a markdown-exec ``session``,
blocks without an ``id`` and blocks marked ``cache="off"`` always run.
A damaged entry is ignored and recomputed.

>>> context = CacheContext(
...     python_version="3.11.0", torch_version="2.13.0", numpy_version="2.4.6",
...     device_fingerprint="{}", environment="",
... )
>>> key = block_key("print(1)", {"id": "a"}, context)
>>> key == block_key("print(1)", {"id": "a"}, context)
True
>>> key == block_key("print(2)", {"id": "a"}, context)
False
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import logging
import math
import os
import stat
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from pymdownx.superfences import SuperFencesException

from gpulesson.site import block_outputs, build_bundle, exec_timing, facts, markdown_exec_api

FRESH_ENV = "GPULESSON_FRESH"
CACHE_DIR_ENV = "GPULESSON_CACHE_DIR"
REQUIRE_ENV = "GPULESSON_REQUIRE_DEVICE"
TIMEOUT_ENV = "GPULESSON_BLOCK_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 600.0
OUTPUT_LIMIT_CHARS = 200_000  # 40 times the longest output a lesson prints today
DEFAULT_CACHE_DIR = Path(".cache", "gpulesson-exec")
SCHEMA = 6  # 6: files under the repository are named relative to it
LANGUAGES = ("python", "py")
# Variables of these families are in every block's key (libraries read them in C, unseen).
ENV_FAMILIES = ("GPULESSON_", "OMP_", "MKL_", "CUDA_", "TORCH_", "PYTORCH_")
# The worker code every block runs through, in every block's key (relative to gpulesson/).
MACHINERY = (
    "site/block_worker.py",
    "site/exec_reads.py",
    "site/exec_isolation.py",
    "site/markdown_exec_api.py",
    "site/facts.py",
    "site/build_bundle.py",
)
THREAD_ENV = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)
# Variables that change how a build runs, never what a block prints.
_KEY_ENV_EXCLUDED = (FRESH_ENV, CACHE_DIR_ENV, TIMEOUT_ENV, block_outputs.ENV)

log = logging.getLogger("mkdocs.plugins.gpulesson.site.exec_cache")


class BlockMachineryError(SuperFencesException, PluginError):
    """The block machinery itself broke (not a block): stops the build with the reason.

    A SuperFencesException, so pymdownx does not swallow it and show the block as
    plain code; a PluginError, so MkDocs prints the message without a traceback.
    """


@dataclass(frozen=True)
class CacheContext:
    """Everything besides a block's code and options that its output depends on."""

    python_version: str
    torch_version: str
    numpy_version: str
    device_fingerprint: str  # canonical JSON, see device_fingerprint()
    environment: str  # canonical JSON of the ENV_FAMILIES variables, see key_environment()
    threads: str = "{}"  # canonical JSON, see thread_settings()
    machinery_sha256: str = "absent"  # the MACHINERY files


@dataclass(frozen=True)
class CachePolicy:
    """Whether this build may read cached results, and why not when it may not."""

    read: bool
    write: bool
    reason: str


@dataclass(frozen=True)
class BlockFailure:
    """A block that failed: where, and what happened, in words."""

    page: str
    block_id: str
    what: str

    def __str__(self) -> str:
        return f"{self.page}: block {self.block_id!r} {self.what}"


@dataclass(frozen=True)
class CachedResult:
    """A stored result: what the block printed, published and logged."""

    output: str  # at most OUTPUT_LIMIT_CHARS characters
    output_chars: int  # how many characters the block printed
    published: list[dict[str, Any]]
    records: list[dict[str, Any]]  # {"logger", "level", "message"}, WARNING and above
    dependencies: dict[str, str | None] = field(default_factory=dict)  # see dependencies()
    measured: list[dict[str, Any]] = field(default_factory=list)  # see site.build_bundle


@dataclass
class ExecSettings:
    """What the formatter needs for one build; set by ``configure`` from the site hook."""

    store: ResultStore | None
    context: CacheContext | None
    policy: CachePolicy
    recorder: exec_timing.Recorder = field(default_factory=exec_timing.Recorder)
    runner: Any = None  # a block_runner.BlockRunner; None: a shared one, started on first use
    limit_s: float | None = None  # per block; None: from GPULESSON_BLOCK_TIMEOUT_S
    failures: list[BlockFailure] = field(default_factory=list)
    # blocks served from the cache since the last run, for markdown-exec's block counter
    counted: list[tuple[str | None, str | None, str | None]] = field(default_factory=list)
    # this build's hashes of files and folders, by dependency name (see dependency_value)
    hashes: dict[str, str | None] = field(default_factory=dict)
    # the repository: what blocks read under it is recorded relative to it (see dependencies)
    base_dir: Path | None = None


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() not in ("", "0", "no", "off", "false")


def cache_policy(environ: Mapping[str, str]) -> CachePolicy:
    """Decide from the environment whether cached results may be shown.

    Fresh builds still write what they compute, so the next preview reuses it.

    >>> cache_policy({}).read
    True
    >>> cache_policy({"GPULESSON_FRESH": "1"}).reason
    'GPULESSON_FRESH=1'
    >>> cache_policy({"CI": "true"}).read
    False
    >>> cache_policy({"GPULESSON_REQUIRE_DEVICE": "cuda"}).reason
    'GPULESSON_REQUIRE_DEVICE=cuda'
    """
    for name in (FRESH_ENV, "CI"):
        if _truthy(environ.get(name)):
            return CachePolicy(False, True, f"{name}={environ[name]}")
    if environ.get(REQUIRE_ENV, "").strip():
        return CachePolicy(False, True, f"{REQUIRE_ENV}={environ[REQUIRE_ENV]}")
    return CachePolicy(True, True, "cache on")


def block_limit_s(environ: Mapping[str, str]) -> float:
    """Seconds one block may run: ``GPULESSON_BLOCK_TIMEOUT_S``, else 600.

    >>> block_limit_s({}), block_limit_s({"GPULESSON_BLOCK_TIMEOUT_S": "20"})
    (600.0, 20.0)
    >>> block_limit_s({"GPULESSON_BLOCK_TIMEOUT_S": "soon"})
    Traceback (most recent call last):
    ...
    ValueError: GPULESSON_BLOCK_TIMEOUT_S='soon' is not a number of seconds above 0: \
set it to e.g. 1200, or unset it for 600 s
    """
    text = environ.get(TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ValueError(
            f"{TIMEOUT_ENV}={text!r} is not a number of seconds above 0: set it to e.g. 1200, "
            f"or unset it for {DEFAULT_TIMEOUT_S:g} s"
        )
    return value


def _is_editor_file(relative: Path) -> bool:
    """Hidden files and editor leftovers (``.x.swp``, ``x~``, ``#x#``), which no block reads."""
    return any(part.startswith((".", "#")) for part in relative.parts) or relative.name.endswith(
        "~"
    )


def key_environment(environ: Mapping[str, str]) -> str:
    """The variables of :data:`ENV_FAMILIES` and :data:`THREAD_ENV`, as canonical JSON.

    Variables that change how a build runs, never what a block prints, are left out.

    >>> key_environment({"OMP_NUM_THREADS": "2", "HOME": "/x", "GPULESSON_FRESH": "1"})
    '{"OMP_NUM_THREADS":"2"}'
    """
    env = {
        name: value
        for name, value in environ.items()
        if (name.startswith(ENV_FAMILIES) or name in THREAD_ENV) and name not in _KEY_ENV_EXCLUDED
    }
    return json.dumps(env, sort_keys=True, separators=(",", ":"))


def machinery_sha256(package_dir: Path) -> str:
    """A hash of the worker code every block runs through (:data:`MACHINERY`)."""
    digest = hashlib.sha256()
    for name in MACHINERY:
        path = package_dir / name
        digest.update(name.encode() + b"\0")
        digest.update(path.read_bytes() if path.is_file() else b"absent")
    return digest.hexdigest()


def dependencies(reads: Mapping[str, Any], base: Path | None = None) -> list[str]:
    """The dependency names of what a block read: ``file:``, ``listing:`` and ``env:``.

    A file or folder under ``base`` (the repository) is named relative to it, so a copy of
    the repository checks the entry against its own files (:func:`dependency_value`).

    >>> dependencies({"modules": ["/r/m.py"], "files": ["/r/q.yml"], "listings": ["/r/d"],
    ...               "environ": [["FOO", "1"]]})
    ['file:/r/m.py', 'file:/r/q.yml', 'listing:/r/d', 'env:FOO']
    >>> dependencies({"files": ["/r/docs/q.yml", "/elsewhere/x"]}, base=Path("/r"))
    ['file:docs/q.yml', 'file:/elsewhere/x']
    """

    def named(path: str) -> str:
        if base is not None and Path(path).is_relative_to(base):
            return Path(path).relative_to(base).as_posix()
        return path

    names = [f"file:{named(path)}" for path in reads.get("modules", ())]
    names += [f"file:{named(path)}" for path in reads.get("files", ())]
    names += [f"listing:{named(path)}" for path in reads.get("listings", ())]
    names += [f"env:{name}" for name, _value in reads.get("environ", ())]
    return names


def _listing_sha256(folder: Path) -> str | None:
    try:
        names = sorted(
            entry.name for entry in folder.iterdir() if not _is_editor_file(Path(entry.name))
        )
    except OSError:
        return None
    return hashlib.sha256("\n".join(names).encode()).hexdigest()


def dependency_value(name: str, environ: Mapping[str, str], base: Path | None = None) -> str | None:
    """What a dependency is now: a file's hash, a folder listing's hash, a variable's value.

    None when the file or folder is absent, or the variable unset. A relative path is
    under ``base`` (see :func:`dependencies`); without a base it names nothing.

    >>> dependency_value("env:FOO", {"FOO": "1"}), dependency_value("env:FOO", {})
    ('1', None)
    >>> dependency_value("file:/nonexistent/x.yml", {}) is None
    True
    """
    kind, _, target = name.partition(":")
    if kind == "env":
        return environ.get(target)
    if name.startswith(build_bundle.DEPENDENCY):
        return build_bundle.current(name)
    path = Path(target)
    if not path.is_absolute():
        if base is None:
            return None
        path = base / path
    if kind == "listing":
        return _listing_sha256(path)
    return _file_sha256(path)


#: The most bytes a recorded file is hashed from; past it the file counts as changed.
MAX_HASHED_BYTES = 64 * 2**20


def _file_sha256(path: Path) -> str | None:
    """The hash of a regular file (not through a symlink, not a device), or None.

    A block may have opened a link or a device (a hostile ``results/x.json -> /dev/zero``
    that the bundle loader refused); the cache never reads one, and reads at most
    :data:`MAX_HASHED_BYTES`, so checking a key is bounded.

    >>> _file_sha256(Path("/dev/zero")) is None
    True
    """
    try:
        if not stat.S_ISREG(path.lstat().st_mode):
            return None
        with path.open("rb") as f:
            data = f.read(MAX_HASHED_BYTES + 1)
    except OSError:
        return None
    if len(data) > MAX_HASHED_BYTES:
        return f"over {MAX_HASHED_BYTES} bytes, size {path.stat().st_size}"
    return hashlib.sha256(data).hexdigest()


def dependencies_hold(
    recorded: Mapping[str, str | None],
    hashes: dict[str, str | None],
    environ: Mapping[str, str],
    base: Path | None = None,
) -> bool:
    """True when every recorded dependency is as it was; ``hashes`` memoises files and folders.

    >>> dependencies_hold({"env:FOO": "1"}, {}, {"FOO": "1"})
    True
    >>> dependencies_hold({"env:FOO": "1"}, {}, {"FOO": "2"})
    False
    """
    for name, value in recorded.items():
        if name.startswith(("env:", build_bundle.DEPENDENCY)):  # not memoised: they change
            now = dependency_value(name, environ, base)
        else:
            if name not in hashes:
                hashes[name] = dependency_value(name, environ, base)
            now = hashes[name]
        if now != value:
            return False
    return True


def thread_settings(threads: Mapping[str, int], environ: Mapping[str, str]) -> str:
    """The threads torch uses and the ``*_NUM_THREADS`` variables, as canonical JSON.

    >>> thread_settings({"torch_num_threads": 4}, {"OMP_NUM_THREADS": "4"})
    '{"OMP_NUM_THREADS":"4","torch_num_threads":4}'
    """
    data: dict[str, Any] = dict(threads)
    data.update({name: environ[name] for name in THREAD_ENV if name in environ})
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def device_fingerprint(report: Any, record: Any) -> str:
    """The machine, device and torch facts a result depends on, as canonical JSON.

    ``report`` is a ``probe.ProbeReport`` (every field: kernel, RAM, GPUs, driver,
    ``CUDA_VISIBLE_DEVICES``...); ``record`` the ``provenance.BuildRecord`` whose
    stamp the page shows. Every device or torch field of the stamp is here, so a
    cached result is never shown under a stamp naming another device.
    """
    data = {
        "device_type": record.device_type,
        "device_name": record.device_name,
        "device_memory_bytes": record.device_memory_bytes,
        "cpu_model": record.cpu_model,
        "cpu_cores_logical": record.cpu_cores_logical,
        "torch_version": record.torch_version,
        "torch_cuda_build": record.torch_cuda_build,
        "probe_verdict": record.probe_verdict,
        "probe": asdict(report),
    }
    return json.dumps(data, sort_keys=True, separators=(",", ":"), default=repr)


def _numpy_version() -> str:
    try:
        from importlib.metadata import version

        return version("numpy")
    except Exception:  # noqa: BLE001
        return "absent"


def build_context(
    report: Any,
    record: Any,
    *,
    package_dir: Path,
    threads: Mapping[str, int],
    environ: Mapping[str, str],
) -> CacheContext:
    """Collect the identity part of every block's key for this build."""
    import platform

    return CacheContext(
        python_version=platform.python_version(),
        torch_version=str(record.torch_version),
        numpy_version=_numpy_version(),
        device_fingerprint=device_fingerprint(report, record),
        environment=key_environment(environ),
        threads=thread_settings(threads, environ),
        machinery_sha256=machinery_sha256(package_dir),
    )


def block_key(code: str, options: Mapping[str, Any], context: CacheContext) -> str:
    """The identity key of one block: code, execution options and context, hashed."""
    payload = {
        "schema": SCHEMA,
        "code": code,
        "options": {name: options[name] for name in sorted(options)},
        "context": asdict(context),
    }
    text = json.dumps(payload, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


def _valid_measured(m: Any) -> bool:
    """One suite entry a cached block measured: its measurements, and files as base64 text.

    >>> _valid_measured({"measurements": [], "files": {"t.gz": "AQI="}})
    True
    >>> _valid_measured({"measurements": [], "files": {"t.gz": "not base64!"}})
    False
    """
    if not isinstance(m, dict) or "measurements" not in m:
        return False
    files = m.get("files", {})
    if not isinstance(files, dict):
        return False
    try:
        for text in files.values():
            base64.b64decode(text, validate=True)  # a str or bytes, else TypeError
    except (ValueError, TypeError):  # binascii.Error is a ValueError
        return False
    return True


def _valid_record(record: Any) -> bool:
    return (
        isinstance(record, dict)
        and isinstance(record.get("warning", False), bool)
        and isinstance(record.get("logger"), str)
        and isinstance(record.get("level"), int)
        and isinstance(record.get("message"), str)
    )


class ResultStore:
    """Block results on disk, one JSON file per key; damage reads as a miss.

    >>> import tempfile
    >>> store = ResultStore(Path(tempfile.mkdtemp()))
    >>> store.get("ab" * 32) is None
    True
    >>> store.put("ab" * 32, "| a |\\n", 0.5)
    True
    >>> store.get("ab" * 32)
    '| a |\\n'
    """

    def __init__(self, root: Path) -> None:
        self.root = root

    def path_for(self, key: str) -> Path:
        """Where the entry for ``key`` lives."""
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> str | None:
        """The stored output for ``key``, or None when absent, unreadable or damaged."""
        entry = self.get_entry(key)
        return None if entry is None else entry.output

    def get_entry(self, key: str) -> CachedResult | None:
        """The stored result for ``key``, or None (absent, unreadable or damaged)."""
        path = self.path_for(key)
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            output = entry["output"]
            published = entry["facts"]
            records = entry["records"]
            output_chars = entry["output_chars"]
            deps = entry["dependencies"]
            measured = entry["measured"]
            valid = (
                entry["schema"] == SCHEMA
                and entry["key"] == key
                and isinstance(output, str)
                and isinstance(output_chars, int)
                and output_chars >= len(output)
                and isinstance(published, list)
                and all(isinstance(f, dict) and "name" in f and "value" in f for f in published)
                and isinstance(records, list)
                and all(_valid_record(r) for r in records)
                and isinstance(deps, dict)
                and all(isinstance(v, str | None) for v in deps.values())
                and isinstance(measured, list)
                and all(_valid_measured(m) for m in measured)
                and entry["output_sha256"] == hashlib.sha256(output.encode()).hexdigest()
            )
        except FileNotFoundError:
            return None
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            log.debug("ignoring unreadable cache entry %s: %s", path, exc)
            return None
        if not valid:
            log.debug("ignoring damaged cache entry %s", path)
            return None
        return CachedResult(output, output_chars, published, records, deps, measured)

    def put(
        self,
        key: str,
        output: str,
        elapsed_s: float,
        published: list[dict[str, Any]] | None = None,
        records: list[dict[str, Any]] | None = None,
        output_chars: int | None = None,
        dependencies: Mapping[str, str | None] | None = None,
        measured: list[dict[str, Any]] | None = None,
    ) -> bool:
        """Store a result atomically; False (and nothing raised) when the disk refuses."""
        path = self.path_for(key)
        entry = {
            "schema": SCHEMA,
            "key": key,
            "output": output,
            "output_chars": len(output) if output_chars is None else output_chars,
            "facts": published or [],
            "records": records or [],
            "dependencies": dict(dependencies or {}),
            "measured": measured or [],
            "output_sha256": hashlib.sha256(output.encode()).hexdigest(),
            "elapsed_s": round(elapsed_s, 6),
        }
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(entry), encoding="utf-8")
            os.replace(tmp, path)
        except OSError as exc:
            log.debug("could not write cache entry %s: %s", path, exc)
            try:
                tmp.unlink()
            except OSError:
                pass
            return False
        return True


def limit_output(output: str, limit_chars: int | None = None) -> tuple[str, int]:
    """The part of ``output`` a page embeds (cut at a line end), and the full length.

    ``limit_chars`` defaults to :data:`OUTPUT_LIMIT_CHARS`.

    >>> limit_output("ab\\ncd\\nef", 7)
    ('ab\\ncd\\n', 8)
    >>> limit_output("short", 7)
    ('short', 5)
    """
    limit_chars = OUTPUT_LIMIT_CHARS if limit_chars is None else limit_chars
    if len(output) <= limit_chars:
        return output, len(output)
    cut = output.rfind("\n", 0, limit_chars) + 1
    if cut < limit_chars // 2:
        cut = limit_chars
    return output[:cut], len(output)


def truncation_note(block_id: str, output_chars: int, shown_chars: int) -> str:
    """The visible note under an output that was cut.

    >>> print(truncation_note("big", 3_000_000, 200_000))
    <BLANKLINE>
    <div class="admonition warning"><p class="admonition-title">Output truncated</p><p>Block \
<code>big</code> printed 3,000,000 characters; the page shows the first 200,000.</p></div>
    <BLANKLINE>
    """
    return (
        '\n<div class="admonition warning"><p class="admonition-title">Output truncated</p>'
        f"<p>Block <code>{html.escape(block_id)}</code> printed {output_chars:,} characters; "
        f"the page shows the first {shown_chars:,}.</p></div>\n"
    )


def _embedded(output: str, output_chars: int, page: str, block_id: str) -> str:
    """The output as the page embeds it; a warning when it was cut."""
    if output_chars <= len(output):
        return output
    log.warning(
        "%s: block %r printed %s characters; the page shows the first %s (output truncated). "
        "Print a summary, or write the data to a file under docs/ and link it.",
        page,
        block_id,
        f"{output_chars:,}",
        f"{len(output):,}",
    )
    return output + "\n" + truncation_note(block_id, output_chars, len(output))


def replay_records(records: list[dict[str, Any]], page: str, block_id: str) -> None:
    """Log again, on the same loggers and levels, what a block logged or warned when it ran.

    A ``warnings.warn`` is on an ``mkdocs.*`` logger too, so it fails a strict build.
    """
    for record in records:
        verb = "called warnings.warn" if record.get("warning") else "logged"
        logging.getLogger(record["logger"]).log(
            record["level"], "%s: block %r %s: %s", page, block_id, verb, record["message"]
        )


def failure_summary(failures: list[BlockFailure]) -> str:
    """The build-stopping message listing every block that failed.

    >>> print(failure_summary([BlockFailure("a.md", "x", "called sys.exit(0)")]))
    1 executed block failed, so the build stops:
      a.md: block 'x' called sys.exit(0)
    """
    count = len(failures)
    lines = [f"{count} executed block{'' if count == 1 else 's'} failed, so the build stops:"]
    lines += [f"  {failure}" for failure in failures]
    return "\n".join(lines)


_settings = ExecSettings(store=None, context=None, policy=CachePolicy(False, False, "not set up"))
_shared_runner: Any = None


def configure(settings: ExecSettings) -> None:
    """Use ``settings`` for the blocks of the coming build."""
    global _settings
    _settings = settings


def settings() -> ExecSettings:
    """The settings of the current build."""
    return _settings


def setup_request(
    roots: list[Path] | None = None, excluded: list[Path] | None = None
) -> dict[str, Any]:
    """What a new worker needs first: this process's import path, where inputs may lie.

    ``roots`` defaults to the folder holding gpulesson; ``excluded`` to this Python's
    prefix (a ``.venv`` inside the repository) and the default cache folder.
    """
    repository = Path(__file__).resolve().parents[2]
    return {
        "op": "setup",
        "sys_path": list(sys.path),
        "roots": [str(p) for p in (roots or [repository])],
        "excluded": [str(p) for p in (excluded or [Path(sys.prefix), repository / ".cache"])],
    }


def shared_runner() -> Any:
    """The worker for blocks run outside a configured build (tests), started on first use."""
    global _shared_runner
    if _shared_runner is None:
        from gpulesson.site.block_runner import BlockRunner

        package_parent = Path(__file__).resolve().parents[2]
        _shared_runner = BlockRunner(package_parent=package_parent)
        _shared_runner.set_up(setup_request(), DEFAULT_TIMEOUT_S)
    return _shared_runner


def content_state() -> tuple[str, int] | None:
    """The content folder this process configured (:mod:`gpulesson.site.content`), or None.

    Blocks read quizzes, glossary and labs through that module; the worker configures
    the same folder, again whenever this process configures it anew (the second value
    names the configured content, so a re-read of an edited quiz reaches the worker).
    """
    module = sys.modules.get("gpulesson.site.content")
    content = module.configured() if module is not None else None
    if content is None:
        return None
    return str(content.docs_dir), id(content)


def validator(
    language: str,
    inputs: dict[str, str],
    options: dict[str, Any],
    attrs: dict[str, Any],
    md: Any,
) -> bool:
    """markdown-exec's validator, plus the ``cache="off"`` option."""
    import markdown_exec

    cache_value = inputs.pop("cache", "on")
    if not markdown_exec.validator(language, inputs, options, attrs, md):
        return False
    options["cache"] = _truthy(cache_value)
    return True


def _failure_text(data: dict[str, Any], status: str, detail: str, limit_s: float) -> str:
    """What happened to a block that did not finish normally, in words."""
    if status == "timeout":
        return f"{detail} ({TIMEOUT_ENV}; default {DEFAULT_TIMEOUT_S:g} s)"
    if status == "died":
        return f"{detail} (os._exit, a crash or a kill); the next block runs in a new worker"
    what = data.get("what") or "failed"
    if data.get("status") == "exit":
        return f"{what}, which would end the build: a block must finish normally"
    return what


def cached_runner(
    settings: ExecSettings, *, use_cache: bool, workdir: str | None, width: int | None
) -> Callable[..., str]:
    """A drop-in for markdown-exec's Python runner: the cache, else the worker process."""
    import markdown_exec

    runner = settings.runner or shared_runner()
    limit_s = settings.limit_s or block_limit_s(os.environ)

    def run(
        code: str,
        returncode: int | None = None,
        session: str | None = None,
        id: str | None = None,  # noqa: A002 (markdown-exec's name)
        **extra: str,
    ) -> str:
        start = time.perf_counter()
        page = facts.current_page() or "(no page)"
        block_id = id or "(no id)"
        store, context, policy = settings.store, settings.context, settings.policy
        cacheable = bool(use_cache and id and not session and store and context)
        key = ""
        if cacheable and store is not None and context is not None:
            options = {
                "id": id,
                "returncode": returncode,
                "workdir": workdir,
                "width": width,
                "page_facts": facts.page_digest(),
            }
            key = block_key(code, {**options, "extra": extra}, context)
            if policy.read:
                entry = store.get_entry(key)
                if entry is not None and dependencies_hold(
                    entry.dependencies, settings.hashes, os.environ, settings.base_dir
                ):
                    settings.counted.append((id, session, extra.get("title")))
                    facts.begin_block(block_id)
                    facts.replay(entry.published)
                    facts.end_block()
                    build_bundle.record(page, block_id, entry.measured)
                    replay_records(entry.records, page, block_id)
                    settings.recorder.block(block_id, "cached", time.perf_counter() - start)
                    shown = _embedded(entry.output, entry.output_chars, page, block_id)
                    block_outputs.record_python(block_id, shown)
                    return shown
        request = {
            "op": "run",
            "code": code,
            "returncode": returncode,
            "session": session,
            "id": id,
            "extra": extra,
            "page": page,
            "page_facts": [fact.to_dict() for fact in facts.page_facts().values()],
            "cwd": os.getcwd(),
            "columns": os.environ.get("COLUMNS"),
            "counted": list(settings.counted),
            "content": content_state(),
            "measured_so_far": build_bundle.available(),
        }
        settings.counted.clear()
        reply = runner.request(request, limit_s)
        data = reply.data
        records = data.get("records", [])
        replay_records(records, page, block_id)
        elapsed_s = time.perf_counter() - start
        if reply.status == "ok" and data.get("status") == "ok":
            published = data["published"]
            facts.begin_block(block_id)
            facts.replay(published)
            facts.end_block()
            measured = data.get("measured", [])
            build_bundle.record(page, block_id, measured)
            output, output_chars = limit_output(data["output"])
            changed = data.get("reads", {}).get("changed", [])
            if changed:  # saved while the block ran it: this output is the old code's
                log.info(
                    "%s: block %r not cached: %s changed while it ran; the next build runs it",
                    page,
                    block_id,
                    ", ".join(changed[:3]),
                )
            withheld = [f["name"] for f in published if f.get("withheld")]
            if withheld:  # what the machine lacked (a compiler) may be there next time
                log.info(
                    "%s: block %r not cached: it could not measure %s; the next build runs it",
                    page,
                    block_id,
                    ", ".join(withheld[:3]),
                )
            if cacheable and policy.write and store is not None and not changed and not withheld:
                names = dependencies(data.get("reads", {}), settings.base_dir)
                for name in names:  # the block may have written them: hash them anew
                    settings.hashes.pop(name, None)
                deps = {
                    name: dependency_value(name, os.environ, settings.base_dir) for name in names
                }
                deps.update(data.get("measured_reads", {}))
                store.put(key, output, elapsed_s, published, records, output_chars, deps, measured)
            status = "ran" if cacheable else "uncacheable"
            settings.recorder.block(block_id, status, elapsed_s)
            shown = _embedded(output, output_chars, page, block_id)
            block_outputs.record_python(block_id, shown)
            return shown
        what = _failure_text(data, reply.status, reply.detail, limit_s)
        settings.failures.append(BlockFailure(page, block_id, what))
        settings.recorder.block(block_id, "failed", elapsed_s)
        log.error("%s: block %r %s", page, block_id, what)
        message = data.get("message") or markdown_exec.code_block(
            "python", data.get("trace") or f"Block {block_id!r} {what}."
        )
        raise markdown_exec.ExecutionError(message, data.get("returncode"))

    return run


def formatter(
    source: str,
    language: str,
    css_class: str,
    options: dict[str, Any],
    md: Any,
    classes: list[str] | None = None,
    id_value: str = "",
    attrs: dict[str, Any] | None = None,
    **kwargs: Any,
) -> str:
    """markdown-exec's Python formatter, running blocks through the cache and the worker."""
    import markdown_exec

    options = dict(options)
    use_cache = options.pop("cache", True)
    where = f"{facts.current_page() or '(no page)'}: block {options.get('id') or '(no id)'!r}"
    try:
        markdown_exec_api.load()
        run = cached_runner(
            _settings,
            use_cache=use_cache,
            workdir=options.get("workdir"),
            width=options.get("width"),
        )
        return markdown_exec.base_format(language="python", run=run, code=source, md=md, **options)
    except BlockMachineryError:
        raise
    except markdown_exec_api.MarkdownExecChanged as error:
        raise BlockMachineryError(f"{where}: {error}") from error
    except Exception as error:  # pymdownx would swallow it and show the block as plain code
        raise BlockMachineryError(
            f"{where}: gpulesson/site/exec_cache.py could not run it: "
            f"{type(error).__name__}: {error}"
        ) from error


def custom_fences() -> list[dict[str, Any]]:
    """The superfences entries that route Python blocks through this module."""
    return [
        {"name": name, "class": name, "validator": validator, "format": formatter}
        for name in LANGUAGES
    ]


def cache_dir(config_dir: Path, environ: Mapping[str, str]) -> Path:
    """The cache folder: ``$GPULESSON_CACHE_DIR``, else ``.cache/gpulesson-exec`` by mkdocs.yml.

    >>> cache_dir(Path("/repo"), {}).as_posix()
    '/repo/.cache/gpulesson-exec'
    >>> cache_dir(Path("/repo"), {"GPULESSON_CACHE_DIR": "/tmp/c"}).as_posix()
    '/tmp/c'
    """
    override = environ.get(CACHE_DIR_ENV, "").strip()
    return Path(override) if override else config_dir / DEFAULT_CACHE_DIR
