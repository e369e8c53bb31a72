"""A disk cache for executed Python blocks, keyed by everything their output depends on.

markdown-exec runs every ``python exec="on"`` block on every build. This
module's ``formatter`` and ``validator`` replace markdown-exec's for Python
(``site.hooks.on_config`` registers them): a block's printed output is stored
under a key made of

* the block's code (snippet files pulled in with ``--8<--`` are already inside it)
  and its execution options,
* a hash of the imported gpulesson package and of ``snippets/`` (blocks may run them),
* the Python, torch and numpy versions,
* the device fingerprint: every field the page stamp shows about the device and
  torch, plus the driver, the GPUs and ``CUDA_VISIBLE_DEVICES``,
* ``GPULESSON_*`` environment variables, which gpulesson code may read,
* every fact published earlier on the page (:func:`gpulesson.site.facts.page_digest`).

The facts a block publishes (:mod:`gpulesson.site.facts`) are stored beside its
output and published again when the block is served from the cache.

Only the printed output is cached; markdown-exec still converts it to HTML on
every build, so headings, ids and the table of contents come out exactly as
from a fresh run. Blocks that fail, blocks in a markdown-exec ``session``,
blocks without an ``id`` and blocks marked ``cache="off"`` always run.
A damaged entry is ignored and recomputed; the cache never logs a warning,
so it cannot fail a ``--strict`` build.

>>> context = CacheContext("pkg", "snip", "3.11.0", "2.13.0", "2.4.6", '{"device_type":"cpu"}', "")
>>> key = block_key("print(1)", {"id": "a"}, context)
>>> key == block_key("print(1)", {"id": "a"}, context)
True
>>> key == block_key("print(2)", {"id": "a"}, context)
False
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gpulesson.site import exec_timing, facts

FRESH_ENV = "GPULESSON_FRESH"
CACHE_DIR_ENV = "GPULESSON_CACHE_DIR"
REQUIRE_ENV = "GPULESSON_REQUIRE_DEVICE"
DEFAULT_CACHE_DIR = Path(".cache", "gpulesson-exec")
SCHEMA = 2
LANGUAGES = ("python", "py")
_KEY_ENV_EXCLUDED = (FRESH_ENV, CACHE_DIR_ENV)

log = logging.getLogger("mkdocs.plugins.gpulesson.site.exec_cache")


@dataclass(frozen=True)
class CacheContext:
    """Everything besides a block's code and options that its output depends on."""

    package_sha256: str
    snippets_sha256: str
    python_version: str
    torch_version: str
    numpy_version: str
    device_fingerprint: str  # canonical JSON, see device_fingerprint()
    environment: str  # canonical JSON of the GPULESSON_* variables


@dataclass(frozen=True)
class CachePolicy:
    """Whether this build may read cached results, and why not when it may not."""

    read: bool
    write: bool
    reason: str


@dataclass
class ExecSettings:
    """What the formatter needs for one build; set by ``configure`` from the site hook."""

    store: ResultStore | None
    context: CacheContext | None
    policy: CachePolicy
    recorder: exec_timing.Recorder = field(default_factory=exec_timing.Recorder)


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


def _files_under(root: Path) -> Iterator[Path]:
    for path in sorted(root.rglob("*")):
        parts = path.relative_to(root).parts
        if path.is_file() and "__pycache__" not in parts and path.suffix not in (".pyc", ".pyo"):
            yield path


def tree_sha256(root: Path) -> str:
    """A hash of every file's relative path and bytes under ``root`` ('absent' if missing).

    >>> tree_sha256(Path("/nonexistent-dir"))
    'absent'
    """
    if not root.is_dir():
        return "absent"
    digest = hashlib.sha256()
    for path in _files_under(root):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def device_fingerprint(report: Any, record: Any) -> str:
    """The device and torch facts a result depends on, as canonical JSON.

    ``report`` is a ``probe.ProbeReport``; ``record`` the ``provenance.BuildRecord``
    whose stamp the page shows. Every device or torch field of the stamp is here,
    so a cached result is never shown under a stamp naming another device.
    """
    facts = {
        "device_type": record.device_type,
        "device_name": record.device_name,
        "device_memory_bytes": record.device_memory_bytes,
        "cpu_model": record.cpu_model,
        "cpu_cores_logical": record.cpu_cores_logical,
        "torch_version": record.torch_version,
        "torch_cuda_build": record.torch_cuda_build,
        "probe_verdict": record.probe_verdict,
        "gpus": [asdict(device) for device in report.devices],
        "driver_version": report.driver.version,
        "driver_cuda_version": report.driver.cuda_version,
        "mps_available": report.mps_available,
        "cuda_visible_devices": report.cuda_visible_devices,
    }
    return json.dumps(facts, sort_keys=True, separators=(",", ":"))


def _numpy_version() -> str:
    try:
        from importlib.metadata import version

        return version("numpy")
    except Exception:  # noqa: BLE001
        return "absent"


def build_context(
    report: Any, record: Any, package_dir: Path, snippets_dir: Path, environ: Mapping[str, str]
) -> CacheContext:
    """Collect the cache context for this build from the probe and the trees on disk."""
    import platform

    env = {
        name: value
        for name, value in environ.items()
        if name.startswith("GPULESSON_") and name not in _KEY_ENV_EXCLUDED
    }
    return CacheContext(
        package_sha256=tree_sha256(package_dir),
        snippets_sha256=tree_sha256(snippets_dir),
        python_version=platform.python_version(),
        torch_version=str(record.torch_version),
        numpy_version=_numpy_version(),
        device_fingerprint=device_fingerprint(report, record),
        environment=json.dumps(env, sort_keys=True),
    )


def block_key(code: str, options: Mapping[str, Any], context: CacheContext) -> str:
    """The cache key of one block: code, execution options and context, hashed."""
    payload = {
        "schema": SCHEMA,
        "code": code,
        "options": {name: options[name] for name in sorted(options)},
        "context": asdict(context),
    }
    text = json.dumps(payload, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


class ResultStore:
    """Printed outputs on disk, one JSON file per key; damage reads as a miss.

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
        return None if entry is None else entry[0]

    def get_entry(self, key: str) -> tuple[str, list[dict[str, Any]]] | None:
        """The stored output and published facts for ``key``, or None (absent or damaged)."""
        path = self.path_for(key)
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            output = entry["output"]
            published = entry["facts"]
            valid = (
                entry["schema"] == SCHEMA
                and entry["key"] == key
                and isinstance(output, str)
                and isinstance(published, list)
                and all(isinstance(f, dict) and "name" in f and "value" in f for f in published)
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
        return output, published

    def put(
        self,
        key: str,
        output: str,
        elapsed_s: float,
        published: list[dict[str, Any]] | None = None,
    ) -> bool:
        """Store ``output`` atomically; False (and nothing raised) when the disk refuses."""
        path = self.path_for(key)
        entry = {
            "schema": SCHEMA,
            "key": key,
            "output": output,
            "facts": published or [],
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


_settings = ExecSettings(store=None, context=None, policy=CachePolicy(False, False, "not set up"))


def configure(settings: ExecSettings) -> None:
    """Use ``settings`` for the blocks of the coming build."""
    global _settings
    _settings = settings


def settings() -> ExecSettings:
    """The settings of the current build."""
    return _settings


@functools.cache
def _markdown_exec_python() -> Any | None:
    """markdown-exec's Python runner module (private API), or None if it moved."""
    import importlib
    import warnings

    for name in ("markdown_exec._internal.formatters.python", "markdown_exec.formatters.python"):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                module = importlib.import_module(name)
                if callable(getattr(module, "_run_python", None)):
                    return module
        except ImportError:
            continue
    return None


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


def cached_runner(
    settings: ExecSettings, *, use_cache: bool, workdir: str | None, width: int | None
) -> Callable[..., str]:
    """A drop-in for markdown-exec's Python runner that reads and fills the cache."""
    python = _markdown_exec_python()
    if python is None:
        raise RuntimeError("markdown-exec's Python runner was not found; see formatter()")

    def run(
        code: str,
        returncode: int | None = None,
        session: str | None = None,
        id: str | None = None,  # noqa: A002 (markdown-exec's name)
        **extra: str,
    ) -> str:
        start = time.perf_counter()
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
                if entry is not None:
                    output, published = entry
                    # keep markdown-exec's block counter as a fresh run would leave it
                    count = getattr(python, "_code_block_id", None)
                    if callable(count):
                        count(id, session, extra.get("title"))
                    facts.begin_block(id or "(no id)")
                    facts.replay(published)
                    facts.end_block()
                    settings.recorder.block(id, "cached", time.perf_counter() - start)
                    return output
        facts.begin_block(id or "(no id)")
        try:
            output = python._run_python(
                code, returncode=returncode, session=session, id=id, **extra
            )
        except Exception:
            facts.end_block()
            settings.recorder.block(id or "(no id)", "failed", time.perf_counter() - start)
            raise
        published = [fact.to_dict() for fact in facts.end_block()]
        elapsed_s = time.perf_counter() - start
        if cacheable and policy.write and store is not None:
            store.put(key, output, elapsed_s, published)
        settings.recorder.block(id or "(no id)", "ran" if cacheable else "uncacheable", elapsed_s)
        return output

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
    """markdown-exec's Python formatter, running blocks through the cache."""
    import markdown_exec

    options = dict(options)
    use_cache = options.pop("cache", True)
    if _markdown_exec_python() is None:  # a markdown-exec without the runner we wrap
        return markdown_exec.formatter(source, language, css_class, options, md, **kwargs)
    run = cached_runner(
        _settings, use_cache=use_cache, workdir=options.get("workdir"), width=options.get("width")
    )
    return markdown_exec.base_format(language="python", run=run, code=source, md=md, **options)


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
