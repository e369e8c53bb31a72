"""MkDocs hooks: provenance on every executed page and a build record in the site.

Named in ``mkdocs.yml`` under ``hooks:``. At the start of a build the site hook
checks that Python imported the gpulesson next to it (not another clone's), starts
the worker process that runs executed blocks (``gpulesson.site.block_runner``) and
runs the probe there, once; ``GPULESSON_REQUIRE_DEVICE=cuda`` makes the build fail,
with the probe's diagnosis, when no CUDA device is visible, so CPU figures can
never be published as GPU figures.

All package code that executed blocks run, runs in the worker. ``mkdocs serve``
keeps the worker (and its torch import) between rebuilds until a file of the package
or of ``snippets/`` changes (:func:`package_signature`, compared at each ``on_config``)
or a file a module in the worker read changes (the worker's ``stale`` answer): then a
new worker starts, so the next rebuild runs the code now on disk. Nothing is purged
from ``sys.modules`` here: the modules the hooks themselves import (this file, the other
hooks, and what they import: much of ``gpulesson.site``) are imported once per ``mkdocs
serve``, so an edit to one of those needs a restart of ``mkdocs serve``; each rebuild's log
names those that changed since the first build (:func:`restart_note`). Executed Python
blocks go through ``gpulesson.site.exec_cache`` (a disk cache keyed by code, options and
what each block read); a block that fails, exits, crashes, hangs or calls
``warnings.warn`` fails the build with its page and id. The time each page spends in
blocks is logged at the end of the build and written into the site as
``exec-timings.json``.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
import os
import re
import sys
from pathlib import Path
from typing import Any

import jinja2
import jinja2.bccache
from mkdocs.exceptions import PluginError

from gpulesson.results import datasheets, published
from gpulesson.site import (
    block_outputs,
    block_runner,
    build_bundle,
    claim_fence,
    claims,
    exec_cache,
    exec_timing,
    facts,
    gpu_figures,
    provenance,
    results_pages,
    spread_notes,
)
from gpulesson.site.provenance import BuildRecord

RECORD_FILE = "build-record.json"
PACKAGE = "gpulesson"
JINJA_CACHE_DIR = Path(".cache", "jinja-bytecode")
log = logging.getLogger("mkdocs.plugins.gpulesson")
_EXECUTED_FENCE = re.compile(r'^\s*(```|~~~).*\bexec="(on|1|true|yes)"', re.MULTILINE)
_H1 = re.compile(r"^# .*$", re.MULTILINE)

_state: dict[str, Any] = {}


def required_device_error(required: str, selected: str, summary: str, fix: str) -> str | None:
    """The build-stopping message when the required device is not the one picked.

    >>> required_device_error("cuda", "cuda", "", "") is None
    True
    >>> print(required_device_error("cuda", "cpu", "No GPU.", "Attach one."))
    GPULESSON_REQUIRE_DEVICE=cuda but this build would run on cpu. No GPU. Next step: Attach one.
    """
    if required == selected:
        return None
    return (
        f"{exec_cache.REQUIRE_ENV}={required} but this build would run on {selected}. "
        f"{summary} Next step: {fix}"
    )


def package_location_error(hook_package: Path, imported: Path) -> str | None:
    """The build-stopping message when Python imported a gpulesson other than the hook's.

    >>> package_location_error(Path("/a/gpulesson"), Path("/a/gpulesson")) is None
    True
    >>> message = package_location_error(Path("/a/gpulesson"), Path("/b/gpulesson"))
    >>> "imported gpulesson from /b/gpulesson" in message, message.endswith("from /a.")
    (True, True)
    """
    if hook_package == imported:
        return None
    return (
        f"This build runs the hooks in {hook_package} but Python imported gpulesson from "
        f"{imported}, another copy (often: the venv's editable install points at another "
        "clone), so the site would be built with that copy's code. Fix: pip install -e "
        f"{hook_package.parent} in this venv, or run python -m mkdocs from {hook_package.parent}."
    )


def package_signature(folders: list[Path]) -> str:
    """A hash of every file's path, size and modification time under ``folders``.

    Cheap enough for every rebuild; a change means the worker runs stale code.

    >>> package_signature([Path("/nonexistent")]) == package_signature([Path("/no-such")])
    True
    """
    digest = hashlib.sha256()
    for folder in folders:
        if not folder.is_dir():
            continue
        for path in sorted(folder.rglob("*")):
            if "__pycache__" in path.parts or not path.is_file():
                continue
            stat = path.stat()
            digest.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def hook_module_files(package_dir: Path) -> dict[str, str]:
    """Each module file under ``package_dir`` this process imported: a hash of its contents.

    In the MkDocs process these are the modules the hooks import (and what they import);
    blocks import theirs in the worker.

    >>> files = hook_module_files(Path(__file__).resolve().parents[1])
    >>> any(f.endswith("hooks.py") for f in files), all(len(h) == 64 for h in files.values())
    (True, True)
    """
    found: dict[str, str] = {}
    for module in list(sys.modules.values()):
        file = Path(getattr(module, "__file__", None) or "/").resolve()
        if file.is_relative_to(package_dir):  # a removed file: changed, for a restart
            data = file.read_bytes() if file.is_file() else b"removed"
            found[str(file)] = hashlib.sha256(data).hexdigest()
    return found


def restart_note(started: dict[str, str], now: dict[str, str], root: Path) -> str | None:
    """What to tell a reader of ``mkdocs serve`` whose edit the hooks cannot follow; None when
    every module the hooks imported at the first build holds what it held then.

    >>> restart_note({"/r/gpulesson/site/claims.py": "a1"},
    ...              {"/r/gpulesson/site/claims.py": "a1"}, Path("/r")) is None
    True
    >>> print(restart_note({"/r/gpulesson/site/claims.py": "a1"},
    ...                    {"/r/gpulesson/site/claims.py": "b2"}, Path("/r")))
    ... # doctest: +NORMALIZE_WHITESPACE
    gpulesson/site/claims.py changed since mkdocs serve started: the site's hooks imported it
    then and still run the old code, so restart mkdocs serve to see what they make from it
    (executed blocks run the new code already).
    """
    changed = sorted(f for f, seen in started.items() if now.get(f) != seen)
    if not changed:
        return None
    names = ", ".join(Path(f).relative_to(root).as_posix() for f in changed)
    it = "it" if len(changed) == 1 else "them"
    return (
        f"{names} changed since mkdocs serve started: the site's hooks imported {it} then and"
        f" still run the old code, so restart mkdocs serve to see what they make from {it}"
        " (executed blocks run the new code already)."
    )


def _hook_package() -> Path:
    """The gpulesson folder this hook file belongs to (``gpulesson/site/hooks.py``)."""
    return Path(__file__).resolve().parents[1]


def _start_worker(
    previous: Any, package_dir: Path, setup: dict[str, Any], signature: str, limit_s: float
) -> Any:
    """The block worker for this build: the previous build's if it still fits, else a new one.

    It fits when it runs the same package and no file under the package or ``snippets/``
    changed since it started (``signature``), nor a file one of its modules read.
    """
    runner = previous
    fits = (
        runner is not None
        and runner.package_parent == package_dir.parent
        and runner.signature == signature
    )
    if runner is not None and not fits:
        log.info("package files changed: starting a new block worker")
        runner.shutdown()
    if not fits:
        runner = block_runner.BlockRunner(package_parent=package_dir.parent)
    reply = runner.set_up(setup, limit_s)
    if reply.status == "ok" and reply.data.get("stale"):
        log.info(
            "files the block worker's modules read changed (%s): starting a new one",
            ", ".join(reply.data["stale"][:3]),
        )
        runner.close(wait=False)
        reply = runner.set_up(setup, limit_s)
    runner.signature = signature
    data = reply.data
    if reply.status != "ok" or data.get("status") != "ok":
        raise PluginError(
            "the worker process that runs executed blocks could not start: "
            f"{reply.detail or data.get('what')}\n{data.get('trace', '')}".rstrip()
        )
    message = package_location_error(package_dir, Path(data["gpulesson"]))
    if message:
        raise PluginError(f"in the block worker: {message}")
    if data.get("markdown_exec"):
        raise PluginError(data["markdown_exec"])
    return runner


def _probe_in_worker(runner: Any, limit_s: float) -> tuple[Any, dict[str, int]]:
    """The probe's report and torch's thread counts, from the worker (torch loads there)."""
    reply = runner.request({"op": "probe"}, limit_s)
    data = reply.data
    if reply.status != "ok" or data.get("status") != "ok":
        raise PluginError(
            f"the probe failed in the block worker: {reply.detail or data.get('what')}\n"
            f"{data.get('trace', '')}".rstrip()
        )
    for record in data.get("records", []):
        logging.getLogger(record["logger"]).log(record["level"], "%s", record["message"])
    return data["report"], data["threads"]


def _set_up_exec_cache(
    config: Any,
    report: Any,
    record: BuildRecord,
    threads: dict[str, int],
    runner: Any,
    limit_s: float,
) -> None:
    """Route Python blocks through the result cache and the worker for this build."""
    config_dir = Path(config["config_file_path"]).resolve().parent
    package_dir = Path(importlib.import_module(PACKAGE).__file__ or "").resolve().parent
    context = exec_cache.build_context(
        report, record, package_dir=package_dir, threads=threads, environ=os.environ
    )
    policy = exec_cache.cache_policy(os.environ)
    store = exec_cache.ResultStore(exec_cache.cache_dir(config_dir, os.environ))
    exec_cache.configure(
        exec_cache.ExecSettings(
            store=store,
            context=context,
            policy=policy,
            runner=runner,
            limit_s=limit_s,
            base_dir=config_dir,
        )
    )
    superfences = config["mdx_configs"].setdefault("pymdownx.superfences", {})
    others = [
        fence
        for fence in superfences.get("custom_fences", [])
        if fence.get("name") not in (*exec_cache.LANGUAGES, *claim_fence.LANGUAGES)
    ]
    superfences["custom_fences"] = others + exec_cache.custom_fences() + claim_fence.custom_fences()
    log.info(
        "executed blocks: %s; cache at %s; gpulesson from %s; worker pid %s; %g s per block",
        policy.reason,
        store.root,
        package_dir,
        runner.pid,
        limit_s,
    )


def worker_setup(config: Any, package_dir: Path) -> dict[str, Any]:
    """The worker's setup: where a block's inputs may lie, and what inside does not count."""
    config_dir = Path(config["config_file_path"]).resolve().parent
    roots = sorted({config_dir, package_dir.parent, Path(config["docs_dir"]).resolve()})
    excluded = [
        Path(sys.prefix).resolve(),
        exec_cache.cache_dir(config_dir, os.environ).resolve(),
        Path(config["site_dir"]).resolve(),
        config_dir / ".git",
        config_dir / ".cache",
    ]
    return exec_cache.setup_request(roots, excluded)


def bundles_error(results_dir: Path) -> str | None:
    """One line naming the first data file that pages cannot carry, else None.

    Checked once when the build starts, before any block reads them, so a refused file
    stops the build with its file, row and field (never a traceback): the result bundles
    under ``results_dir``, then the package's published rows and datasheet table.

    >>> bundles_error(Path("/no/such/folder")) is None
    True
    """
    try:
        results_pages.load_results(results_dir)
    except ValueError as error:
        return (
            f"result bundle refused: {error}. Fix the bundle or remove it; "
            "results/README.md says what a bundle holds"
        )
    try:
        published.load()
        datasheets.all_rows()
    except ValueError as error:
        return f"package data refused: {error}"
    return None


def on_config(config: Any) -> Any:
    """Start (or keep) the block worker, probe once, enforce GPULESSON_REQUIRE_DEVICE."""
    previous_runner = exec_cache.settings().runner  # kept across mkdocs serve rebuilds
    package_dir = Path(importlib.import_module(PACKAGE).__file__ or "").resolve().parent
    message = package_location_error(_hook_package(), package_dir)
    if message:
        raise PluginError(message)
    try:
        limit_s = exec_cache.block_limit_s(os.environ)
        exec_cache.markdown_exec_api.load()
    except (ValueError, exec_cache.markdown_exec_api.MarkdownExecChanged) as error:
        raise PluginError(str(error)) from None
    # Starting the worker and the probe (which imports torch) get the default limit at least.
    setup_limit_s = max(limit_s, exec_cache.DEFAULT_TIMEOUT_S)
    config_dir = Path(config["config_file_path"]).resolve().parent
    message = bundles_error(config_dir / "results")
    if message:
        raise PluginError(message)
    note = restart_note(
        _state.get("hook_files", {}), hook_module_files(package_dir), package_dir.parent
    )
    if note:  # info, not a warning: the course builds strict, and the build is right
        log.info(note)
    signature = package_signature([package_dir, config_dir / "snippets"])
    setup = worker_setup(config, package_dir)
    runner = _start_worker(previous_runner, package_dir, setup, signature, setup_limit_s)
    report, threads = _probe_in_worker(runner, setup_limit_s)
    require_env = exec_cache.REQUIRE_ENV
    required = os.environ.get(require_env, "").strip().lower()
    if required:
        if required not in ("cuda", "mps", "cpu"):
            raise PluginError(
                f"{require_env}={required!r} is not a device: use cuda, mps or cpu, or unset it."
            )
        message = required_device_error(
            required, report.selected_device, report.verdict.summary, report.verdict.fix
        )
        if message:
            raise PluginError(message)
    _state["record"] = provenance.collect_build_record(report)
    _state["report"] = report
    _state["threads"] = threads
    facts.reset()
    build_bundle.reset()
    block_outputs.reset()
    _set_up_exec_cache(config, report, _state["record"], threads, runner, limit_s)
    return config


def _record() -> BuildRecord:
    if "record" not in _state:
        _state["record"] = provenance.collect_build_record()
    record: BuildRecord = _state["record"]
    return record


def has_executed_code(markdown: str) -> bool:
    """True when the page has a fence that markdown-exec runs.

    >>> has_executed_code('```python exec="on" id="x"\\nprint(1)\\n```')
    True
    >>> has_executed_code('```python\\nprint(1)\\n```')
    False
    """
    return bool(_EXECUTED_FENCE.search(markdown))


def record_url_for(page_url: str) -> str:
    """The record's URL relative to a page at ``page_url`` (directory URLs).

    >>> record_url_for("lessons/software-stack/")
    '../../build-record.json'
    >>> record_url_for("")
    'build-record.json'
    """
    return "../" * page_url.count("/") + RECORD_FILE


def insert_after_h1(markdown: str, block: str) -> str:
    """Insert ``block`` right after the page's first H1, or at the top."""
    match = _H1.search(markdown)
    if not match:
        return f"{block}\n\n{markdown}"
    end = match.end()
    return f"{markdown[:end]}\n\n{block}\n{markdown[end:]}"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Stamp pages with executed code; warn on GPU pages built without a CUDA GPU."""
    file = getattr(page, "file", None)
    page_path = getattr(file, "src_uri", None) or page.url
    exec_cache.settings().recorder.begin_page(page_path)
    facts.begin_page(page_path)
    block_outputs.begin_page(page_path)
    if not has_executed_code(markdown):
        return markdown
    record = _record()
    block = provenance.stamp_html(record, record_url_for(page.url))
    if page.meta.get("gpu_figures"):  # one line naming the kinds of GPU figure shown
        block += "\n" + gpu_figures.kinds_stamp_html(record.device_type)
    return insert_after_h1(markdown, block)


class SafeBytecodeCache(jinja2.FileSystemBytecodeCache):
    """Jinja's on-disk template cache; a damaged file is recompiled, never an error."""

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        """Load the bucket, or leave it empty so Jinja compiles the template."""
        try:
            super().load_bytecode(bucket)
        except Exception:  # noqa: BLE001 (any damage means: compile again)
            bucket.reset()

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        """Store the bucket; a full or read-only disk only costs the speed-up."""
        try:
            super().dump_bytecode(bucket)
        except OSError:
            pass


def on_env(env: Any, config: Any, files: Any) -> Any:
    """Keep compiled theme templates in .cache/, so a rebuild skips compiling them."""
    folder = Path(config["config_file_path"]).resolve().parent / JINJA_CACHE_DIR
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return env
    env.bytecode_cache = SafeBytecodeCache(str(folder))
    return env


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    """Close the page's execution timing; gather its spread warnings; list its checks."""
    exec_cache.settings().recorder.end_page()
    page_path = getattr(getattr(page, "file", None), "src_uri", None) or page.url
    made = [c for c in claims.claims() if c.page == page_path]
    return spread_notes.collapse(html) + claims.checks_html(made, record_url_for(page.url))


def _claims_log() -> logging.Logger:
    """A logger for claims that do not hold: printed, but not a strict-mode warning.

    A claim that fails on a contributor's machine is shown on the page and in the
    log; it stops only the publish build (``GPULESSON_REQUIRE_DEVICE`` set).
    """
    logger = logging.getLogger("gpulesson.claims")
    if not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)-7s -  %(message)s"))
        logger.addHandler(handler)
        logger.propagate = False
    return logger


def record_json(record: BuildRecord, checked: list[claims.Claim]) -> str:
    """The build record written into the site: provenance, every checked claim and every
    published fact (its value, unit, kind, page and block)."""
    data = provenance.to_dict(record)
    data["claims"] = [c.to_dict() for c in checked]
    data["facts"] = [
        f.to_dict()
        for page in facts.all_facts().values()
        for f in page.values()
        if not f.name.startswith(claims.FACT_PREFIX)  # the claims, listed above
    ]
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def claims_error(checked: list[claims.Claim], required: str) -> str | None:
    """The build-stopping message when a claim fails on a publish build, else None.

    >>> ok = claims.Claim("a.md", "b", "Fine.", "x > 1", claims.HOLDS, {"x": 2})
    >>> bad = claims.Claim("a.md", "b", "Wrong.", "x > 3", claims.FAILS, {"x": 2})
    >>> claims_error([ok, bad], "") is None, claims_error([ok], "cuda") is None
    (True, True)
    >>> print(claims_error([bad], "cuda"))
    1 checked claim does not hold on this cuda build (GPULESSON_REQUIRE_DEVICE=cuda):
      a.md: Wrong. [x > 3 with x = 2]
    """
    failing = [c for c in checked if c.status in (claims.FAILS, claims.NOT_SHOWN)]
    if not failing or not required:
        return None
    lines = [f"  {c.page}: {c.text} [{c.rule} with {claims.numbers_text(c)}]" for c in failing]
    noun = "claim does" if len(failing) == 1 else "claims do"
    return (
        f"{len(failing)} checked {noun} not hold on this {required} build "
        f"({exec_cache.REQUIRE_ENV}={required}):\n" + "\n".join(lines)
    )


def _report_claims(checked: list[claims.Claim]) -> None:
    counts = {status: sum(c.status == status for c in checked) for status in claims.STATUSES}
    log.info(
        "checked claims: %d hold, %d not checked on this build, %d do not hold, "
        "%d teaching claims not shown",
        counts[claims.HOLDS],
        counts[claims.NOT_CHECKED],
        counts[claims.FAILS],
        counts[claims.NOT_SHOWN],
    )
    for c in checked:
        if c.status in (claims.FAILS, claims.NOT_SHOWN):
            _claims_log().warning(
                "%s: claim does not hold on this build: %s [%s with %s]",
                c.page,
                c.text,
                c.rule,
                claims.numbers_text(c),
            )


def on_startup(command: str, dirty: bool) -> None:
    """Note whether MkDocs serves: only then is a spare worker kept between rebuilds."""
    _state["serving"] = command == "serve"


def on_post_build(config: Any) -> None:
    """Write the build record, this build's bundle and the execution timings into the site.

    Under ``mkdocs serve``, a spare worker then starts and probes while the reader edits,
    so a rebuild that needs a new worker (a data file its modules read changed) gets one
    at once; after the first build, the files of the modules the hooks imported are noted
    (:func:`restart_note` compares them at each rebuild).
    """
    try:
        _post_build(config)
    finally:
        if _state.get("serving") and "hook_files" not in _state:
            _state["hook_files"] = hook_module_files(_hook_package())
        runner = exec_cache.settings().runner
        if _state.get("serving") and runner is not None:
            runner.keep_spare([{"op": "probe"}])


def _post_build(config: Any) -> None:
    checked = claims.claims()
    Path(config["site_dir"], RECORD_FILE).write_text(record_json(_record(), checked))
    _report_claims(checked)
    settings = exec_cache.settings()
    pages = settings.recorder.pages()
    reason = settings.policy.reason
    Path(config["site_dir"], exec_timing.TIMINGS_FILE).write_text(
        exec_timing.to_json(pages, reason)
    )
    log.info(exec_timing.to_text(pages, reason))
    if settings.failures:
        raise PluginError(exec_cache.failure_summary(settings.failures))
    if os.environ.get(block_outputs.ENV, "").strip() not in ("", "0"):
        Path(config["site_dir"], block_outputs.FILE).write_text(block_outputs.to_json())
    threads = _state.get("threads") or {}
    problems = build_bundle.write(
        Path(config["site_dir"]), _state.get("report"), threads.get("torch_num_threads")
    )
    if problems:
        raise PluginError("this build's own bundle did not validate: " + "; ".join(problems))
    message = claims_error(checked, os.environ.get(exec_cache.REQUIRE_ENV, "").strip().lower())
    if message:
        raise PluginError(message)


def on_shutdown() -> None:
    """Stop the block worker when MkDocs exits (``mkdocs serve`` keeps it between builds)."""
    runner = exec_cache.settings().runner
    if runner is not None:
        runner.shutdown()
