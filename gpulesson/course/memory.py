"""The lesson ``memory.md``: its renderers and texts.

Its pictures and tables: the budget ledger, bytes per dtype, the weights, the saved
activations and the measured step against the estimate.

Renderers take the frozen results of the topic packages and return Markdown, HTML or chart
markup; nothing here measures. See :mod:`gpulesson.course`.
"""

from __future__ import annotations

from gpulesson.memory.budget import (
    Budget,
)
from gpulesson.memory.impl_accuracy import ImplRow, ImplSummary
from gpulesson.memory.measure import (
    TARGET_MAX_ERROR,
    TARGET_MEDIAN_ERROR,
    AccuracyRow,
    MeasuredStep,
    accuracy_summary,
)
from gpulesson.memory.recipes import DTYPE_BYTES
from gpulesson.memory.render import _ledger_rows
from gpulesson.memory.saved import SavedTensor
from gpulesson.tables import markdown_table
from gpulesson.units import GB


def to_markdown(budget: Budget) -> str:
    """The ledger as a Markdown table (GB = 10^9 bytes), then the phases."""
    terms = [(name, f"{value / GB:,.3f}") for name, value in _ledger_rows(budget)]
    terms += [
        (f"of the peak, impl {budget.impl}: {t.name}", f"{t.peak_bytes / GB:,.3f}")
        for t in budget.impl_terms
    ]
    terms.append(
        (f"**peak of the step ({budget.peak_phase})**", f"**{budget.total_bytes / GB:,.3f}**")
    )
    phases = []
    for phase in budget.phases:
        alive = ", ".join(f"{k} {v / GB:,.3f}" for k, v in phase.alive_bytes.items() if v)
        mark = " (peak)" if phase.name == budget.peak_phase else ""
        phases.append((f"{phase.name}{mark}", alive, f"{phase.total_bytes / GB:,.3f}"))
    return (
        markdown_table(("term", "GB"), terms)
        + "\n\n"
        + markdown_table(("phase", "alive at its peak", "GB"), phases, align="llr")
    )


def dtype_bytes_markdown(table: dict[str, float] = DTYPE_BYTES) -> str:
    """The bytes per number the calculator uses for each dtype.

    >>> print(dtype_bytes_markdown().splitlines()[2])
    | fp32 | 4 |
    """
    rows = [(name, f"{size:.4g}") for name, size in table.items()]
    return markdown_table(("dtype", "bytes per number"), rows)


def weights_markdown(budgets: dict[str, Budget]) -> str:
    """One line per budget: its weights in GB (10^9 bytes).

    >>> from gpulesson.memory.budget import estimate
    >>> weights_markdown({"infer-int8": estimate(7e9, preset="infer-int8")})
    '- `infer-int8`: 7.0 GB of weights'
    """
    return "\n".join(
        f"- `{name}`: {b.weights_bytes / GB:.1f} GB of weights" for name, b in budgets.items()
    )


def saved_to_markdown(models: dict[str, tuple[SavedTensor, ...]], unit_bytes: int) -> str:
    """One table per model: each saved tensor, what made it, its shape and size in units.

    ``unit_bytes`` is the bytes of the unit the last column counts (for
    example one batch x seq x hidden fp32 tensor).
    """
    tables = []
    for name, saved in models.items():
        rows = [
            (
                s.module,
                s.made_by,
                " x ".join(str(n) for n in s.shape),
                s.dtype,
                f"{s.storage_bytes / unit_bytes:.2f}",
            )
            for s in saved
        ]
        total = sum(s.storage_bytes for s in saved)
        rows.append(("**total**", "", "", "", f"**{total / unit_bytes:.2f}**"))
        header = (f"{name}: module", "made by", "shape", "dtype", "units")
        tables.append(markdown_table(header, rows, align="llllr"))
    return "\n\n".join(tables)


def impl_comparison_to_markdown(rows: tuple[ImplRow, ...], summaries: list[ImplSummary]) -> str:
    """The table (MiB = 2^20 bytes): measured peak, then each implementation's estimate and error.

    Then one summary line per implementation.
    """
    impls = [s.impl for s in summaries]
    header = ["transformers' GPT-2, case", "measured peak (MiB)"]
    for impl in impls:
        header += [f"`--impl {impl}` (MiB)", "error"]
    cells = []
    for r in rows:
        row = [r.case.label(), f"{r.measured.peak_bytes / 2**20:,.2f}"]
        for impl in impls:
            row += [f"{r.estimates_bytes[impl] / 2**20:,.2f}", f"{r.error(impl):+.1%}"]
        cells.append(row)
    out = [markdown_table(header, cells)]
    method = rows[0].measured.method if rows else "none"
    out.append("")
    for s in summaries:
        out.append(
            f"- `--impl {s.impl}`: {s.cases} cases measured with {method}: median error "
            f"{s.median_abs_error:.1%}, largest {s.max_abs_error:.1%} (signed errors from "
            f"{s.lowest_error:+.1%} to {s.highest_error:+.1%}; target: every case within "
            f"{TARGET_MAX_ERROR:.0%}, {'met' if s.meets_target else 'NOT met'})."
        )
    return "\n".join(out)


def accuracy_to_markdown(rows: tuple[AccuracyRow, ...]) -> str:
    """The estimate-vs-measured table (MiB = 2^20 bytes), then the summary line."""
    header = (
        "case",
        "estimate (MiB)",
        "measured peak (MiB)",
        "error",
        "estimated phase",
        "measured phase",
    )
    cells = [
        (
            r.case.label(),
            f"{r.estimate_bytes / 2**20:,.2f}",
            f"{r.measured.peak_bytes / 2**20:,.2f}",
            f"{r.error:+.1%}",
            r.estimate_phase,
            r.measured.peak_phase,
        )
        for r in rows
    ]
    s = accuracy_summary(rows)
    method = rows[0].measured.method if rows else "none"
    out = [
        markdown_table(header, cells, align="lrrrll"),
        "",
        f"{s['cases']:.0f} cases measured with {method}: median error "
        f"{s['median_abs_error']:.1%}, largest {s['max_abs_error']:.1%} "
        f"(target: every case within {TARGET_MAX_ERROR:.0%}, median at most "
        f"{TARGET_MEDIAN_ERROR:.0%}; {'met' if s['meets_target'] else 'NOT met'}).",
    ]
    return "\n".join(out)


def measured_to_markdown(step: MeasuredStep) -> str:
    """The phase peaks and what was alive at the overall peak, in MiB (2^20 bytes)."""
    phases = []
    for name, value in step.phase_peaks_bytes.items():
        mark = " (peak)" if name == step.peak_phase else ""
        phases.append((f"{name}{mark}", f"{value / 2**20:,.2f}"))
    alive = [(k, f"{v / 2**20:,.2f}") for k, v in step.at_peak_bytes.items() if v]
    out = [
        f"Measured with {step.method} on {step.device}.",
        "",
        markdown_table(("phase", "peak (MiB)"), phases),
        "",
        markdown_table((f"alive at the peak ({step.peak_phase})", "MiB"), alive),
    ]
    return "\n".join(out)
