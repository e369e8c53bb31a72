"""MkDocs hooks: provenance on every executed page and a build record in the site.

Named in ``mkdocs.yml`` under ``hooks:``. At the start of a build the probe
runs once; ``GPULESSON_REQUIRE_DEVICE=cuda`` makes the build fail, with the
probe's diagnosis, when no CUDA device is visible, so CPU figures can never be
published as GPU figures.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

from gpulesson.probe import probe
from gpulesson.provenance import (
    BuildRecord,
    collect_build_record,
    no_gpu_notice_markdown,
    stamp_html,
    to_json,
)

RECORD_FILE = "build-record.json"
REQUIRE_ENV = "GPULESSON_REQUIRE_DEVICE"
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


def on_config(config: Any) -> Any:
    """Probe once, enforce GPULESSON_REQUIRE_DEVICE, and keep the build record."""
    report = probe()
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
    _state["record"] = collect_build_record(report)
    return config


def _record() -> BuildRecord:
    if "record" not in _state:
        _state["record"] = collect_build_record()
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
    if not has_executed_code(markdown):
        return markdown
    record = _record()
    block = stamp_html(record, record_url_for(page.url))
    if page.meta.get("gpu_figures") and record.device_type != "cuda":
        block += "\n\n" + no_gpu_notice_markdown(record)
    return insert_after_h1(markdown, block)


def on_post_build(config: Any) -> None:
    """Write the build record into the site."""
    Path(config["site_dir"], RECORD_FILE).write_text(to_json(_record()))
