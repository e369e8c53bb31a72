"""Provenance: what built this page, on which device, from which commit, when.

Every site build writes a ``BuildRecord`` as ``build-record.json``; every page
with executed output shows ``stamp_html`` naming the device and linking to the
record. Used by ``gpulesson/site/hooks.py`` and the home page.

>>> record = collect_build_record()
>>> record.device_type in ("cuda", "mps", "cpu")
True
>>> "build-record.json" in stamp_html(record, "build-record.json")
True
"""

from __future__ import annotations

import datetime as dt
import html
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gpulesson import __version__
from gpulesson.probe import ProbeReport, probe
from gpulesson.results.provenance import package_commit
from gpulesson.tables import markdown_table
from gpulesson.text import inert as markdown_text
from gpulesson.units import format_gb, format_gib

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class BuildRecord:
    """The provenance of one build of the site."""

    gpulesson_version: str
    git_commit: str
    torch_version: str | None
    torch_cuda_build: str | None
    device_type: str  # "cuda", "mps" or "cpu": the device the executed code ran on
    device_name: str
    device_memory_bytes: int | None
    cpu_model: str
    cpu_cores_logical: int | None
    probe_verdict: str
    built_at_utc: str

    @property
    def has_gpu(self) -> bool:
        """True when the executed code ran on a GPU (CUDA or MPS)."""
        return self.device_type in ("cuda", "mps")


def collect_build_record(report: ProbeReport | None = None) -> BuildRecord:
    """Probe the machine (or use a given report) and describe this build."""
    report = report or probe()
    if report.selected_device == "cuda" and report.devices:
        name = report.devices[0].name
        memory: int | None = report.devices[0].total_memory_bytes
    elif report.selected_device == "mps":
        name = f"Apple MPS ({report.cpu_model})"
        memory = report.ram_bytes  # unified memory, shared with the CPU
    else:
        name = report.cpu_model
        memory = report.ram_bytes
    now = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    return BuildRecord(
        gpulesson_version=__version__,
        git_commit=package_commit() or "unknown",
        torch_version=report.torch_version,
        torch_cuda_build=report.torch_cuda_build,
        device_type=report.selected_device,
        device_name=name,
        device_memory_bytes=memory,
        cpu_model=report.cpu_model,
        cpu_cores_logical=report.cpu_cores_logical,
        probe_verdict=report.verdict.case,
        built_at_utc=now.isoformat().replace("+00:00", "Z"),
    )


def to_dict(record: BuildRecord) -> dict[str, Any]:
    """The record as plain data."""
    return asdict(record)


def to_json(record: BuildRecord) -> str:
    """The record as the JSON written into the site."""
    return json.dumps(to_dict(record), indent=2, sort_keys=True) + "\n"


def device_label(record: BuildRecord) -> str:
    """A short name for the device, with its memory.

    >>> device_label(BuildRecord("0", "abc", "2.13.0", None, "cpu", "Xeon", 2**34, "Xeon",
    ...     2, "no_nvidia_gpu", "2026-01-01T00:00:00Z"))
    'CPU: Xeon, 2 threads, 17.2 GB (16.0 GiB) RAM'
    """
    memory = record.device_memory_bytes
    size = f"{format_gb(memory)} ({format_gib(memory)})" if memory else "unknown memory"
    if record.device_type == "cuda":
        return f"CUDA GPU: {record.device_name}, {size}"
    if record.device_type == "mps":
        return f"{record.device_name}, {size} unified memory"
    threads = f", {record.cpu_cores_logical} threads" if record.cpu_cores_logical else ""
    return f"CPU: {record.device_name}{threads}, {size} RAM"


def stamp_html(record: BuildRecord, record_url: str) -> str:
    """The one-line stamp shown on every page with executed output (machine facts escaped).

    >>> bad = BuildRecord("0", "abc", "2.13.0", None, "cpu", "<b>X</b>", None, "X", None,
    ...     "no_nvidia_gpu", "2026-01-01T00:00:00Z")
    >>> "&lt;b&gt;X&lt;/b&gt;" in stamp_html(bad, "r.json"), "<b>" in stamp_html(bad, "r.json")
    (True, False)
    """
    cuda = f" (CUDA {record.torch_cuda_build})" if record.torch_cuda_build else ""
    return (
        '<div class="gl-stamp" markdown="0">'
        f"The output on this page was computed when the site was built, on "
        f"<strong>{html.escape(device_label(record))}</strong> · "
        f"torch {html.escape(f'{record.torch_version}{cuda}')} · "
        f"commit <code>{html.escape(record.git_commit)}</code> · "
        f"{html.escape(record.built_at_utc)} · "
        f'<a href="{html.escape(record_url)}">build record</a></div>'
    )


def no_gpu_notice_markdown(record: BuildRecord) -> str:
    """The notice for a page with GPU figures built on a machine without a CUDA GPU."""
    return (
        '!!! warning "GPU figures were not measured in this build"\n'
        f"    This copy of the site was built on {markdown_text(device_label(record))}. "
        "Every measured number below comes from that device, not from a GPU. The published "
        "course is rebuilt on a CUDA GPU; to measure your own machine, run `gpulesson bench`.\n"
    )


def record_markdown(record: BuildRecord) -> str:
    """The record as a two-column Markdown table, for the home page."""
    memory = record.device_memory_bytes
    rows = [
        ("Device the code ran on", device_label(record)),
        ("Probe verdict", record.probe_verdict),
        ("torch", f"{record.torch_version} (CUDA build: {record.torch_cuda_build or 'none'})"),
        ("gpulesson", f"{record.gpulesson_version}, commit {record.git_commit}"),
        ("Device memory (bytes)", f"{memory:,}" if memory else "unknown"),
        ("Built at (UTC)", record.built_at_utc),
    ]
    return markdown_table(
        ("field", "value"), [(key, markdown_text(value)) for key, value in rows], align="ll"
    )
