"""MkDocs hooks: provenance on every executed page and a build record in the site.

Named in ``mkdocs.yml`` under ``hooks:``. At the start of a build the probe
runs once; ``GPULESSON_REQUIRE_DEVICE=cuda`` makes the build fail, with the
probe's diagnosis, when no CUDA device is visible, so CPU figures can never be
published as GPU figures.

Before each build (``mkdocs serve`` rebuilds included) every imported
``gpulesson`` module is forgotten and imported again, so an edit to the package
shows on the next rebuild without a restart. Executed Python blocks go through
``gpulesson.site.exec_cache`` (a disk cache keyed by code, package, torch and device);
the time each page spends in them is logged at the end of the build and
written into the site as ``exec-timings.json``.
"""

from __future__ import annotations

import importlib
import logging
import os
import re
import sys
from pathlib import Path
from typing import Any

import jinja2
import jinja2.bccache
from mkdocs.exceptions import PluginError

from gpulesson import probe as probe_module
from gpulesson.site import exec_cache, exec_timing, facts, provenance
from gpulesson.site.provenance import BuildRecord

RECORD_FILE = "build-record.json"
REQUIRE_ENV = "GPULESSON_REQUIRE_DEVICE"
PACKAGE = "gpulesson"
JINJA_CACHE_DIR = Path(".cache", "jinja-bytecode")
log = logging.getLogger("mkdocs.plugins.gpulesson")
_EXECUTED_FENCE = re.compile(r'^\s*(```|~~~).*\bexec="(on|1|true|yes)"', re.MULTILINE)
_H1 = re.compile(r"^# .*$", re.MULTILINE)

_state: dict[str, BuildRecord] = {}


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
        f"{REQUIRE_ENV}={required} but this build would run on {selected}. {summary} "
        f"Next step: {fix}"
    )


def purge_package_modules(package: str = PACKAGE) -> list[str]:
    """Forget every imported module of ``package``, so the next import reads the disk.

    >>> import types
    >>> sys.modules["fakepkg"] = sys.modules["fakepkg.sub"] = types.ModuleType("fakepkg")
    >>> purge_package_modules("fakepkg")
    ['fakepkg', 'fakepkg.sub']
    >>> "fakepkg.sub" in sys.modules
    False
    """
    names = sorted(n for n in sys.modules if n == package or n.startswith(package + "."))
    for name in names:
        del sys.modules[name]
    return names


def _reload_package(config: Any) -> None:
    """Forget gpulesson, then run every hook module again so its imports are fresh.

    MkDocs loads a hook file once per process and keeps its module; running the
    module again in place rebinds the names its functions look up, so the other
    hooks (and this one) call the package code now on disk.
    """
    global exec_cache, exec_timing, facts, probe_module, provenance
    purge_package_modules()
    hooks = list((config.get("hooks") or {}).values())
    for module in hooks:
        spec = getattr(module, "__spec__", None)
        if spec is None or spec.loader is None or not spec.origin:
            continue
        saved_path = sys.path.copy()
        sys.path.insert(0, os.path.dirname(spec.origin))  # as MkDocs loads hooks
        try:
            spec.loader.exec_module(module)
        finally:
            sys.path[:] = saved_path
    if not any(vars(module) is globals() for module in hooks):  # imported, not a hook
        exec_cache = importlib.import_module(f"{PACKAGE}.site.exec_cache")
        exec_timing = importlib.import_module(f"{PACKAGE}.site.exec_timing")
        facts = importlib.import_module(f"{PACKAGE}.site.facts")
        probe_module = importlib.import_module(f"{PACKAGE}.probe")
        provenance = importlib.import_module(f"{PACKAGE}.site.provenance")


def _set_up_exec_cache(config: Any, report: Any, record: BuildRecord) -> None:
    """Route Python blocks through the result cache for this build."""
    config_dir = Path(config["config_file_path"]).resolve().parent
    package_dir = Path(importlib.import_module(PACKAGE).__file__ or "").resolve().parent
    context = exec_cache.build_context(
        report, record, package_dir, config_dir / "snippets", os.environ
    )
    policy = exec_cache.cache_policy(os.environ)
    store = exec_cache.ResultStore(exec_cache.cache_dir(config_dir, os.environ))
    exec_cache.configure(exec_cache.ExecSettings(store=store, context=context, policy=policy))
    superfences = config["mdx_configs"].setdefault("pymdownx.superfences", {})
    others = [
        fence
        for fence in superfences.get("custom_fences", [])
        if fence.get("name") not in exec_cache.LANGUAGES
    ]
    superfences["custom_fences"] = others + exec_cache.custom_fences()
    log.info(
        "executed blocks: %s; cache at %s; gpulesson from %s",
        policy.reason,
        store.root,
        package_dir,
    )


def on_config(config: Any) -> Any:
    """Reload gpulesson, probe once, enforce GPULESSON_REQUIRE_DEVICE, keep the record."""
    _reload_package(config)
    report = probe_module.probe()
    required = os.environ.get(REQUIRE_ENV, "").strip().lower()
    if required:
        if required not in ("cuda", "mps", "cpu"):
            raise PluginError(
                f"{REQUIRE_ENV}={required!r} is not a device: use cuda, mps or cpu, or unset it."
            )
        message = required_device_error(
            required, report.selected_device, report.verdict.summary, report.verdict.fix
        )
        if message:
            raise PluginError(message)
    _state["record"] = provenance.collect_build_record(report)
    facts.reset()
    _set_up_exec_cache(config, report, _state["record"])
    return config


def _record() -> BuildRecord:
    if "record" not in _state:
        _state["record"] = provenance.collect_build_record()
    return _state["record"]


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
    if not has_executed_code(markdown):
        return markdown
    record = _record()
    block = provenance.stamp_html(record, record_url_for(page.url))
    if page.meta.get("gpu_figures") and record.device_type != "cuda":
        block += "\n\n" + provenance.no_gpu_notice_markdown(record)
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
    """Close the page's execution timing."""
    exec_cache.settings().recorder.end_page()
    return html


def on_post_build(config: Any) -> None:
    """Write the build record and the execution timings into the site; log the slow pages."""
    Path(config["site_dir"], RECORD_FILE).write_text(provenance.to_json(_record()))
    settings = exec_cache.settings()
    pages = settings.recorder.pages()
    reason = settings.policy.reason
    Path(config["site_dir"], exec_timing.TIMINGS_FILE).write_text(
        exec_timing.to_json(pages, reason)
    )
    log.info(exec_timing.to_text(pages, reason))
