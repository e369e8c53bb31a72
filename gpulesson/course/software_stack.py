"""The lesson ``software-stack.md``: its renderers and texts.

Its pictures and tables: the probe report and the table of example machines (also used by
``where-to-run.md``).

Renderers take the frozen results of the topic packages and return Markdown, HTML or chart
markup; nothing here measures. See :mod:`gpulesson.course`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpulesson.course.common import about
from gpulesson.probe import ExampleMachine, ProbeReport, Verdict, _rows, _verdict_line
from gpulesson.tables import markdown_table
from gpulesson.text import inert as markdown_text  # the one escaping helper; kept under this name


def to_markdown(report: ProbeReport) -> str:
    """A Markdown table with the verdict as an admonition; every machine fact is escaped.

    >>> from dataclasses import replace
    >>> from gpulesson.probe import probe
    >>> hostile = "<img src=x onerror=alert(1)>"
    >>> report = replace(probe(), cuda_visible_devices=hostile, cpu_model=hostile)
    >>> report = replace(report, verdict=replace(report.verdict, summary=hostile))
    >>> "<img" in to_markdown(report), "&lt;img" in to_markdown(report)
    (False, True)
    """
    rows = [(key, markdown_text(value)) for key, value in _rows(report)]
    lines = [markdown_table(("question", "answer"), rows, align="ll")]
    kind = "success" if report.verdict.code == "ok" else "info"
    lines += [
        "",
        f'!!! {kind} "Verdict: {report.verdict.case}"',
        f"    {markdown_text(_verdict_line(report.verdict))}",  # machine facts inside
        "",
        f"    **Next step:** {report.verdict.fix}",
    ]
    for problem in report.problems:
        lines += ["", f"    Probe step failed: {markdown_text(problem)}"]
    return "\n".join(lines)


def cases_markdown(rows: tuple[tuple[ExampleMachine, Verdict], ...]) -> str:
    """The diagnosis tree as a table: one example machine per case, with its verdict."""
    return markdown_table(
        ("machine", "case", "what it means", "next step"),
        [(m.label, f"{v.code} `{v.case}`", v.summary, v.fix) for m, v in rows],
        align="llll",
    )


def gb_gib_readings(facts: Mapping[str, Any]) -> dict[str, str]:
    """A byte count read four ways: GB (right), GiB read as GB, and two mixed-up conversions.

    Reads one fact, a memory size in bytes. ``gb`` divides by 10^9 (right for GB);
    ``gib`` by 2^30 (the same bytes in GiB, the number a reader mistakes for GB);
    ``wrong_way`` applies the GB/GiB factor backwards; ``mixed`` divides by 2^20 and then
    by 1000 (MiB counted as if a thousand made a GB). Three significant figures keep the
    four apart (the closest pair differs by 2.4%). ``bytes`` is the count, separated.

    >>> r = gb_gib_readings({"stack.card_bytes": 24 * 2**30})
    >>> r["gb"], r["gib"], r["wrong_way"], r["mixed"], r["bytes"]
    ('25.8', '24.0', '22.4', '24.6', '25,769,803,776')
    """
    if len(facts) != 1:
        raise ValueError(
            f"gb_gib_readings reads exactly one fact (a size in bytes), got {len(facts)}: "
            "list one under facts"
        )
    (n_bytes,) = facts.values()
    gib = n_bytes / 2**30
    return {
        "gb": about(n_bytes / 1e9, 3),
        "gib": about(gib, 3),
        "wrong_way": about(gib / (2**30 / 1e9), 3),
        "mixed": about(n_bytes / 2**20 / 1000, 3),
        "bytes": f"{int(n_bytes):,}",
    }
