"""The lesson ``oom.md``: its renderers and texts.

Its pictures and tables: a diagnosis and the example error messages (also used by ``cuda-
errors.md`` and ``multi-gpu.md``).

Renderers take the frozen results of the topic packages and return Markdown, HTML or chart
markup; nothing here measures. See :mod:`gpulesson.course`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpulesson.errors.diagnose import Diagnosis
from gpulesson.errors.fix_ladder import FIX_LADDER, Step
from gpulesson.errors.numbers import format_bytes
from gpulesson.errors.render import number_rows
from gpulesson.tables import markdown_table


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _steps_lines(steps: tuple[Step, ...], ladder_href: str | None) -> list[str]:
    """The numbered steps; with ``ladder_href``, the fix ladder's rungs as one linked step.

    >>> from gpulesson.errors.fix_ladder import oom_steps
    >>> lines = _steps_lines(oom_steps("cuda_oom", "exhaustion"), "fix-ladder.md")
    >>> len(lines), lines[-1].startswith("1. **Climb the [fix ladder](fix-ladder.md)**")
    (1, True)
    """
    rungs = {rung.name: i for i, rung in enumerate(FIX_LADDER, 1)}
    lines: list[str] = []
    ladder: list[Step] = []

    def flush() -> None:
        if ladder:
            first, last = rungs[ladder[0].action], rungs[ladder[-1].action]
            lines.append(
                f"{len(lines) + 1}. **Climb the [fix ladder]({ladder_href})**: rungs {first} "
                f'to {last} in order, from "{ladder[0].action}" to "{ladder[-1].action}", '
                "each priced there."
            )
            ladder.clear()

    for step in steps:
        if ladder_href is not None and step.action in rungs:
            ladder.append(step)
            continue
        flush()
        tag = " *(free)*" if step.free else ""
        lines.append(f"{len(lines) + 1}. **{step.action}**{tag}: {step.detail}")
    flush()
    return lines


def to_markdown(diagnosis: Diagnosis, ladder_href: str | None = None) -> str:
    """A Markdown report: numbers table, verdict admonition, numbered steps.

    ``ladder_href`` links the fix ladder's rungs to the lesson that prices them, as one
    step, instead of listing them all (a page with several verdicts then repeats one line).
    """
    lines = [f"**Kind:** `{diagnosis.kind}`: {diagnosis.title}."]
    if diagnosis.wording:
        lines[0] += f" Wording: {diagnosis.wording}."
    rows = number_rows(diagnosis)
    if rows:
        cells = [(label, _cell(value)) for label, value in rows]
        lines += ["", markdown_table(("number in the message", "value"), cells, align="ll")]
    kind = "warning" if diagnosis.verdict else "info"
    head = f"Verdict: {diagnosis.verdict}" if diagnosis.verdict else "Diagnosis"
    lines += ["", f'!!! {kind} "{head}"', f"    {diagnosis.summary}"]
    if diagnosis.detail:
        lines += ["", f"    {diagnosis.detail}"]
    for note in diagnosis.notes:
        lines += ["", f"    {note}"]
    lines += ["", "What to do, in order:", ""]
    lines += _steps_lines(diagnosis.steps, ladder_href)
    return "\n".join(lines)


def example_markdown(
    name: str, message: str, diagnosis: Diagnosis, ladder_href: str | None = None
) -> str:
    """An example message as a labelled text block, then its diagnosis (:func:`to_markdown`).

    >>> from gpulesson.errors.diagnose import diagnose
    >>> text = "RuntimeError: CUDA error: an illegal memory access was encountered"
    >>> example_markdown("demo", text, diagnose(text)).splitlines()[0]
    '???+ example "Example message (demo): constructed for this lesson"'
    """
    block = "\n".join("    " + line for line in message.splitlines())
    return (
        f'???+ example "Example message ({name}): constructed for this lesson"\n'
        f"    ```text\n{block}\n    ```\n\n" + to_markdown(diagnosis, ladder_href)
    )


def examples_table_markdown(diagnoses: Mapping[str, Diagnosis]) -> str:
    """Tabulate diagnosed example messages: kind, verdict, key numbers, first step."""
    rows: list[tuple[str, ...]] = []
    for name, d in diagnoses.items():
        numbers = (d.requested_bytes, d.free_bytes, d.total_bytes)
        sizes = " / ".join(format_bytes(n) for n in numbers) if any(numbers) else "—"
        rows.append(
            (name, d.kind.replace("_", " "), d.verdict or "—", sizes, _cell(d.steps[0].action))
        )
    header = ("example", "kind", "verdict", "requested / free / total", "first step")
    return markdown_table(header, rows, align="lllll")


TORCH1X_FIELDS = ("requested", "total", "allocated", "free", "reserved", "reserved_unallocated")


def torch1x_cache(facts: Mapping[str, Any]) -> dict[str, str]:
    """A torch 1.x OOM message's numbers, and its cache against three misreadings.

    Reads ``oom.torch1x_<field>_bytes`` for each of ``TORCH1X_FIELDS`` (what
    ``gpulesson diagnose`` found in the page's torch 1.x example). In that wording
    "reserved" is live tensors plus the cache, so the cache is reserved minus
    allocated (``cache``, from the diagnosis). ``reserved`` reads the 1.x figure
    as torch 2.x's "reserved but unallocated"; ``free`` takes the card's free
    memory for the cache; ``added`` adds reserved and allocated. Each reads as the message
    prints it (:func:`gpulesson.errors.numbers.format_bytes`).

    >>> GiB, MiB = 2**30, 2**20
    >>> v = torch1x_cache({"oom.torch1x_requested_bytes": 512 * MiB,
    ...     "oom.torch1x_total_bytes": 11.17 * GiB, "oom.torch1x_allocated_bytes": 10.31 * GiB,
    ...     "oom.torch1x_free_bytes": 98.25 * MiB, "oom.torch1x_reserved_bytes": 10.58 * GiB,
    ...     "oom.torch1x_reserved_unallocated_bytes": 0.27 * GiB})
    >>> v["cache"], v["reserved"], v["free"], v["added"]
    ('276.48 MiB', '10.58 GiB', '98.25 MiB', '20.89 GiB')
    """
    names = [f"oom.torch1x_{field}_bytes" for field in TORCH1X_FIELDS]
    missing = [name for name in names if name not in facts]
    if missing:
        raise ValueError(f"torch1x_cache needs the facts {', '.join(missing)}: list them")
    n = {field: int(facts[name]) for field, name in zip(TORCH1X_FIELDS, names, strict=True)}
    return {
        **{field: format_bytes(n[field]) for field in TORCH1X_FIELDS[:5]},
        "cache": format_bytes(n["reserved_unallocated"]),
        "added": format_bytes(n["reserved"] + n["allocated"]),
    }
