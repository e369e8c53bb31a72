"""The lesson ``profiling.md``: its renderers and texts.

Its pictures and tables: the profiler's op tables, regions, first and steady steps, memory,
the snapshot and the trace download. The functions only format: every figure they print
is a field, property or method result of a :class:`~gpulesson.timing.profile.StepProfile`
(or a snapshot summary). Times are shown in milliseconds, memory in MiB (2**20 bytes):
the profiler's own table divides by 1024 too but labels the result "MB".

>>> from gpulesson.timing.profile import OpStat, StepProfile
>>> row = OpStat(name="aten::mm", kind="op", calls=4, self_cpu_s=0.03, total_cpu_s=0.03,
...              self_device_s=0.0, total_device_s=0.0, self_memory_bytes=2**21,
...              total_memory_bytes=2**21)
>>> p = StepProfile(device="cpu", threads=1, wait=1, warmup=1, active=1, memory=True,
...                 ops=(row,), step_samples_s=(0.04,))
>>> print(ops_markdown(p).splitlines()[2])
| `aten::mm` | 4 | 30 | 30 | 100% |
"""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping
from typing import Any

from gpulesson.course.common import about
from gpulesson.tables import markdown_table
from gpulesson.text import code_span
from gpulesson.timing.profile import (
    FirstAndSteady,
    GptStepProfile,
    OpStat,
    SnapshotSummary,
    StepProfile,
)
from gpulesson.units import MIB


def _ms(seconds: float) -> str:
    """Milliseconds with three significant figures, thousands separated.

    >>> _ms(0.0123456), _ms(1.5), _ms(0.0)
    ('12.3', '1,500', '0')
    """
    value = seconds * 1e3
    if value == 0:
        return "0"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _mib(n_bytes: float) -> str:
    """A signed byte count in MiB with two decimals.

    >>> _mib(2**20), _mib(-3 * 2**19), _mib(0)
    ('1.00', '-1.50', '0.00')
    """
    value = n_bytes / MIB
    return "0.00" if abs(value) < 0.005 else f"{value:,.2f}"


def _pct(fraction: float) -> str:
    return f"{100 * fraction:.1f}%" if fraction < 0.995 else f"{100 * fraction:.0f}%"


def _name(row: OpStat) -> str:
    return code_span(row.name)  # a reference bundle's op name, shown literally


def _basis_note(p: StepProfile) -> str:
    steps = "step" if p.active == 1 else "steps"
    return (
        f"{p.device}, {p.threads} thread{'s' if p.threads != 1 else ''}; times summed over "
        f"{p.active} active {steps} of schedule(wait={p.wait}, warmup={p.warmup}, "
        f"active={p.active}). Share: each row's {p.basis} over the {p.basis} of every row "
        f"({_ms(p.self_sum_s)} ms)."
    )


def ops_markdown(p: StepProfile, rows: int = 10) -> str:
    """The operators with the most self time: calls, self and total time, share.

    On a CUDA profile the times are the GPU's (kernel time per op) and a column gives the
    CPU's self time beside them.
    """
    shown = p.op_rows[:rows]
    if p.device == "cuda":
        header = ("op", "calls", "self CUDA (ms)", "total CUDA (ms)", "self CPU (ms)", "share")
        cells = [
            (
                _name(r),
                f"{r.calls:,}",
                _ms(r.self_device_s),
                _ms(r.total_device_s),
                _ms(r.self_cpu_s),
                _pct(p.share(r)),
            )
            for r in shown
        ]
    else:
        header = ("op", "calls", "self (ms)", "total (ms)", "share")
        cells = [
            (_name(r), f"{r.calls:,}", _ms(r.self_cpu_s), _ms(r.total_cpu_s), _pct(p.share(r)))
            for r in shown
        ]
    return markdown_table(header, cells) + "\n\n" + _basis_note(p)


def rows_markdown(p: StepProfile, names: tuple[str, ...]) -> str:
    """Chosen rows (operators or labels) side by side: calls, self and total time, share."""
    shown = [p.op(name) for name in names]
    return markdown_table(
        ("row", "calls", "self (ms)", "total (ms)", "share"),
        [
            (_name(r), f"{r.calls:,}", _ms(p.self_s(r)), _ms(p.total_s(r)), _pct(p.share(r)))
            for r in shown
        ],
    )


def regions_markdown(p: StepProfile) -> str:
    """The labelled regions of the step: total time, share of the step, memory left behind."""
    table = markdown_table(
        ("region (`record_function`)", "total (ms)", "share of the step", "net memory (MiB)"),
        [
            (
                code_span(r.name),
                _ms(p.total_s(r)),
                _pct(p.region_share(r)),
                _mib(p.memory_per_step_bytes(r)),
            )
            for r in p.regions()
        ],
    )
    lines = [
        table,
        "",
        f"Median step {_ms(p.step_s)} ms of wall-clock time with the profiler on "
        f"({p.device}, {p.active} active step{'s' if p.active != 1 else ''}). Net memory: "
        "bytes allocated minus bytes freed while the region ran, per step"
        + ("." if p.memory else " (memory was not profiled: zeros)."),
    ]
    return "\n".join(lines)


def first_and_steady_markdown(pair: FirstAndSteady) -> str:
    """The regions' net memory in the very first step beside a steady step."""
    first, steady = pair.first.profile, pair.steady.profile
    table = markdown_table(
        ("region", "first step: net memory (MiB)", "steady step: net memory (MiB)"),
        [
            (
                code_span(r.name),
                _mib(first.memory_per_step_bytes(first.op(r.name))),
                _mib(steady.memory_per_step_bytes(r)),
            )
            for r in steady.regions()
        ],
    )
    lines = [
        table,
        "",
        f"The same model, {pair.first.parameters:,} parameters: its first step profiled with "
        "no schedule, then the step after a warm-up step, with schedule(wait=0, warmup=1, "
        "active=1).",
    ]
    return "\n".join(lines)


def memory_markdown(p: StepProfile, rows: int = 8) -> str:
    """The operators that allocated the most memory themselves (self memory, per step)."""
    table = markdown_table(
        ("op", "calls", "self memory (MiB)", "total memory (MiB)"),
        [
            (
                _name(r),
                f"{p.calls_per_step(r):,.0f}",
                _mib(p.memory_per_step_bytes(r, self_only=True)),
                _mib(p.memory_per_step_bytes(r)),
            )
            for r in p.by_memory()[:rows]
        ],
    )
    lines = [
        table,
        "",
        "Self memory: what the op allocated minus what it freed itself; total adds the ops it "
        f"called. Per step, {p.device} memory; MiB = 2^20 bytes.",
    ]
    return "\n".join(lines)


def trace_download_html(p: StepProfile, filename: str = "profile-step.json.gz") -> str:
    """A link that downloads the profile's Chrome trace from the page itself (a data: URL).

    The trace travels inside the page, so the site needs no extra file and works offline.
    """
    if p.trace_gz is None:
        raise ValueError("this profile has no trace: profile with trace=True")
    payload = base64.b64encode(p.trace_gz).decode("ascii")
    name = html.escape(filename, quote=True)
    size_kb = p.trace_size_bytes / 1e3
    return (
        f'<a class="md-button" href="data:application/gzip;base64,{payload}" '
        f'download="{name}">Download the trace ({name}, {size_kb:,.0f} kB)</a>'
    )


def snapshot_markdown(s: SnapshotSummary) -> str:
    """What a CUDA memory snapshot recorded: events, the replayed peak, the peak per region."""
    summary = markdown_table(
        ("", "value"),
        [
            ("events recorded (alloc, free, segment)", f"{s.events:,}"),
            ("of which allocations", f"{s.alloc_events:,}"),
            ("allocated before recording (MiB)", _mib(s.baseline_bytes)),
            ("peak, replaying the events (MiB)", _mib(s.peak_bytes)),
            ("peak, `torch.cuda.max_memory_allocated` (MiB)", _mib(s.max_allocated_bytes)),
            ("snapshot file (MiB)", _mib(s.pickle_bytes)),
        ],
    )
    peaks = markdown_table(
        ("region of the last step", "peak allocated (MiB)"),
        [(f"`{region}`", _mib(peak)) for region, peak in s.phase_peaks_bytes.items()],
    )
    return summary + "\n\n" + peaks


def step_markdown(g: GptStepProfile) -> str:
    """One line naming the profiled step: the model's shape, its size, the batch."""
    c = g.config
    return (
        f"The step: the course's GPT with {c.layers} blocks, hidden size {c.hidden}, "
        f"{c.heads} heads, a vocabulary of {c.vocab_size:,} ({g.parameters:,} parameters), "
        f"{c.attention} attention; a batch of {g.batch} x {c.seq_len} tokens; AdamW."
    )


def adam_first_step(facts: Mapping[str, Any]) -> dict[str, str]:
    """What the first ``optimizer.step`` allocated (MiB), and the sizes three slips give.

    Reads ``profiling.first_optimizer_mib`` (measured: AdamW's two fp32 moments, 8 bytes a
    parameter) and ``profiling.parameters``. ``one_moment`` counts one state tensor (4 bytes
    a parameter); ``whole_bill`` counts the whole Adam training bill (16 bytes a parameter:
    weights, gradients and both moments), which the optimizer does not allocate.

    >>> adam_first_step({"profiling.first_optimizer_mib": 16.3,
    ...                  "profiling.parameters": 2137088})
    {'measured': '16', 'parameters': '2,137,088', 'one_moment': '8.2', 'whole_bill': '33'}
    """
    measured, n = float(facts["profiling.first_optimizer_mib"]), int(facts["profiling.parameters"])
    return {
        "measured": about(measured),
        "parameters": f"{n:,}",
        "one_moment": about(4 * n / 2**20),
        "whole_bill": about(16 * n / 2**20),
    }
