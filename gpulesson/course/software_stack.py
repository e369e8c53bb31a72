"""The lesson ``software-stack.md``: its renderers and texts.

Its pictures and tables: the probe report and the table of example machines (also used by
``where-to-run.md``).

Renderers take the frozen results of the topic packages and return Markdown, HTML or chart
markup; nothing here measures. See :mod:`gpulesson.course`.
"""

from __future__ import annotations

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
