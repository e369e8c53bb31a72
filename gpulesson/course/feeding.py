"""The lesson ``feeding.md``: its renderers and texts.

Its pictures and tables: the loader runs, fusion, shapes, hidden syncs and the measured GPU
rows (the host copies and the copy call among them), from the results of
:mod:`gpulesson.timing.loader`, :mod:`~gpulesson.timing.fusion`,
:mod:`~gpulesson.timing.alignment` and :mod:`~gpulesson.timing.syncs`. The functions
format those results' fields and properties and compute no figure of their own; one unit
per column, named in the header. The lesson's claims about these figures are Markdown
blocks (:mod:`gpulesson.site.claim_fence`), one rule each, never chosen by the number.

>>> from gpulesson.timing.syncs import SyncCheck
>>> print(syncs_markdown((SyncCheck(name="loss.item()", hidden_sync=True, warnings=1),)))
| line in the loop | PyTorch's tuning guide | warned on this build |
|---|---|---|
| `loss.item()` | a synchronization | yes (1 warning) |
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from gpulesson.tables import markdown_table
from gpulesson.text import inert
from gpulesson.timing.fusion import FusionResult
from gpulesson.timing.loader import LoaderComparison, LoaderRun
from gpulesson.timing.results import LaunchOverhead, Spread
from gpulesson.timing.syncs import Probe, SyncCheck

if TYPE_CHECKING:
    from gpulesson.results.bundle import Measurement
from gpulesson.course.inside_gpu import _ms, _spread_warnings


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.3g}"


def _first_later(run: LoaderRun) -> str:
    later = run.later_first_batch_s
    return "–" if later is None else _ms(later)


def loader_markdown(c: LoaderComparison) -> str:
    """The loader runs as a table, after a line on the work per item and the step.

    >>> from gpulesson.timing.loader import ItemTiming
    >>> run = LoaderRun(num_workers=0, prefetch_factor=None, persistent_workers=False,
    ...                 batch_size=8, batches_per_epoch=4, epochs=2, step_s=0.004,
    ...                 samples_s=(0.01, 0.01), gaps_s=(0.01,) * 6, first_batch_s=(0.02, 0.01),
    ...                 start_method=None)
    >>> c = LoaderComparison(item=ItemTiming(samples_s=(0.001,)), runs=(run,), items=32,
    ...                      words_per_item=100, cpus=2, step_share=0.5)
    >>> print(loader_markdown(c).splitlines()[-1])
    | 0 workers (main process loads) | 100 | 60% | 20 | 10 | 1.00 |
    """
    first = c.runs[0]
    lines = [
        f"Each item: {c.words_per_item} words generated and tokenized in pure Python, "
        f"{_ms(c.item.median_s)} ms (median of {c.item.repeats}); one batch of "
        f"{first.batch_size} items, {_ms(c.batch_load_s)} ms in the main process. The "
        f"stand-in step sleeps {_ms(first.step_s)} ms per batch ({c.step_share:g} times that "
        f"load). {first.epochs} epochs of "
        f"{first.batches_per_epoch} batches per setting, on {c.cpus} CPU cores.",
        "",
        markdown_table(
            (
                "setting",
                "batches/s",
                "step idle (share of each batch)",
                "first batch, epoch 1 (ms)",
                "first batch, later epochs (ms)",
                "speedup over 0 workers (x)",
            ),
            [
                (
                    run.setting.label,
                    f"{run.batches_per_s:.3g}",
                    f"{run.step_idle_share:.0%}",
                    _ms(run.first_batch_s[0]),
                    _first_later(run),
                    f"{c.speedup(run):.2f}",
                )
                for run in c.runs
            ],
        ),
    ]
    lines += _spread_warnings([(r.setting.label, r) for r in c.runs])
    return "\n".join(lines)


def fusion_markdown(f: FusionResult, launch: LaunchOverhead | None = None) -> str:
    """Eager against compiled per call, the compile, and (given) one tiny op's cost.

    >>> from gpulesson.timing.fusion import CallTiming
    >>> e = CallTiming(mode="eager", samples_s=(1e-4,), calls_per_sample=10)
    >>> k = CallTiming(mode="compiled", samples_s=(2e-5,), calls_per_sample=10)
    >>> r = FusionResult(device="cpu", n_elements=1024, ops_per_call=30, threads=1,
    ...                  eager=e, compiled=k, compile_s=2.0, max_abs_diff=0.0)
    >>> print(fusion_markdown(r).splitlines()[2])
    | eager: 30 PyTorch calls | 100 | 3.33 | 0 | 1 |
    >>> failed = FusionResult(device="cpu", n_elements=1024, ops_per_call=30, threads=1, eager=e,
    ...     compiled=None, compile_s=None, max_abs_diff=None, compile_error="no <C++> compiler")
    >>> print(fusion_markdown(failed).splitlines()[3])
    | compiled: one fused kernel | not measured | – | – | – |
    >>> print(fusion_markdown(failed).splitlines()[-1])
        no &lt;C++&gt; compiler
    """
    header = (
        f"the chain on {f.n_elements:,} fp32 elements, {f.device}, {f.threads} thread"
        f"{'s' if f.threads > 1 else ''}",
        "median per call (µs)",
        "per op (µs)",
        "IQR (µs)",
        "samples",
    )
    rows = [
        (
            f"eager: {f.ops_per_call} PyTorch calls",
            _us(f.eager.median_s),
            _us(f.eager_per_op_s),
            _us(f.eager.iqr_s),
            str(f.eager.repeats),
        ),
        (
            ("compiled: one fused kernel", "not measured", "–", "–", "–")
            if f.compiled is None
            else (
                "compiled: one fused kernel",
                _us(f.compiled.median_s),
                "–",
                _us(f.compiled.iqr_s),
                str(f.compiled.repeats),
            )
        ),
    ]
    if launch is not None:
        rows.append(
            (
                "one tiny op (`torch.add` of one element), eager",
                _us(launch.median_s),
                _us(launch.median_s),
                _us(launch.eager.iqr_s),
                str(launch.eager.repeats),
            )
        )
        if launch.graph is not None:
            rows.append(
                (
                    "the tiny op replayed from a CUDA graph",
                    _us(launch.graph.median_s),
                    _us(launch.graph.median_s),
                    _us(launch.graph.iqr_s),
                    str(launch.graph.repeats),
                )
            )
    lines = [markdown_table(header, rows)]
    named: list[tuple[str, Spread]] = [("eager", f.eager)]
    if f.compiled is not None and f.compile_s is not None and f.saved_per_call_s is not None:
        pays = (
            "it saves nothing, so it never pays for itself"
            if f.breakeven_calls is None
            else f"it pays for itself after {f.breakeven_calls:,.0f} calls"
        )
        lines += [
            "",
            f"The first compiled call took {f.compile_s:.2f} s: tracing, generating the fused "
            f"kernel and compiling it. At {_us(f.saved_per_call_s)} µs saved per call {pays}. "
            f"Compiled and eager outputs differ by at most {f.max_abs_diff:.1e}.",
        ]
        named.append(("compiled", f.compiled))
    if launch is not None:
        named.append(("tiny op", launch.eager))
    lines += _spread_warnings(named)
    if f.compiled is None:
        lines += [
            "",
            '!!! warning "Not compiled on this build"',
            "",
            f"    {inert(f.compile_error)}",
        ]
    return "\n".join(lines)


def syncs_markdown(checks: Sequence[SyncCheck]) -> str:
    """Each probe, what the tuning guide says of it, and whether the debug mode warned."""
    rows = []
    for c in checks:
        said = "a synchronization" if c.hidden_sync else "stays on the device"
        warned = f"yes ({c.warnings} warning{'s' if c.warnings > 1 else ''})" if c.warned else "no"
        rows.append((f"`{c.name}`", said, warned))
    return markdown_table(
        ("line in the loop", "PyTorch's tuning guide", "warned on this build"), rows, align="lll"
    )


def rows_markdown(rows: Sequence[Measurement]) -> str:
    """GPU rows (from this build's GPU or a bundle): label, median, spread, samples.

    >>> from gpulesson.results.measurements import single
    >>> print(rows_markdown([single(2e-5, name="a.b", entry="a", unit="s", label="call")]))
    | measurement | median | unit | samples |
    |---|---:|---|---:|
    | call | 20.0 | µs | 1 |
    """
    from gpulesson.results.render import display_unit, format_number

    cells = []
    for m in rows:
        unit, size = display_unit(m.unit, [m.value])
        cells.append(
            (inert(m.label or m.name), format_number(m.value / size), unit, str(len(m.samples)))
        )
    return markdown_table(("measurement", "median", "unit", "samples"), cells, align="lrlr")


def gpu_needed(names: Sequence[str], has_bundle: bool) -> str:
    """What a CPU build says where GPU rows would be: which rows, and how to get them.

    >>> print(gpu_needed(["h2d.pinned"], has_bundle=False))  # doctest: +ELLIPSIS
    !!! note "These rows need a CUDA GPU"
        This build has no CUDA GPU, and no reference result bundle exists yet...
    """
    why = (
        "the newest reference result bundle does not have them (it predates these entries)"
        if has_bundle
        else "no reference result bundle exists yet"
    )
    listed = ", ".join(f"`{n}`" for n in names)
    return (
        '!!! note "These rows need a CUDA GPU"\n'
        f"    This build has no CUDA GPU, and {why}. `gpulesson measure` on a CUDA machine "
        f"makes them: {listed}."
    )


def sync_needed(probes: Sequence[Probe]) -> str:
    """What a CPU build says where the sync debug mode's report would be: the lines it runs.

    >>> from gpulesson.timing.syncs import PROBES
    >>> print(sync_needed(PROBES).splitlines()[0])
    !!! note "This table needs a CUDA GPU"
    """
    hidden = ", ".join(f"`{p.name}`" for p in probes if p.hidden_sync)
    free = ", ".join(f"`{p.name}`" for p in probes if not p.hidden_sync)
    return (
        '!!! note "This table needs a CUDA GPU"\n'
        "    `torch.cuda.set_sync_debug_mode` works only on CUDA, and this build has no CUDA "
        f"GPU, so no line ran. On a CUDA build the table lists the hidden synchronizations "
        f"({hidden}) and the device-side replacements ({free}), each with what the debug "
        "mode reported."
    )
