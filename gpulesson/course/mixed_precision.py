"""The lesson ``mixed-precision.md``: its renderers and texts.

Its pictures and tables: format ranges, casts, loss scaling, the trace, matmul errors, GPU
figures, hardware support and the low-precision formats.

Markdown for the lesson "Mixed precision in practice": tables of what the modules computed.

One job: turn the results of :mod:`gpulesson.precision` (format ranges, casts, a dtype
trace, matmul errors, GradScaler steps, NaN checks, hardware rows, saved bytes, step
timings, GPU figures) into Markdown. Nothing here computes a figure: pages compute,
then hand the results over. One display unit per column, named in the header.

>>> from gpulesson.precision.formats import format_ranges
>>> ranges_markdown(format_ranges()).splitlines()[2].startswith("| fp32 | 8 | 23 |")
True

The mixed-precision lesson's rows below 16 bits: fp8, MXFP8 and FP4, as a Markdown table.

Layouts and scaling from :data:`gpulesson.precision.formats.LOW_PRECISION_FORMATS`; the
largest value from ``torch.finfo`` where this torch has the dtype; the GPUs that run fp8 at
full rate, with their dense fp8 peak, from the course's datasheet table.

>>> print(low_precision_markdown().splitlines()[2][:40])
| fp8 E4M3 | 4 | 3 | 448 (torch.finfo) |
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gpulesson.precision.activations import ActivationComparison
from gpulesson.precision.formats import (
    BLACKWELL,
    LOW_PRECISION_FORMATS,
    CastProbe,
    CastResult,
    FormatRange,
    LowPrecisionFormat,
    ScalingProbe,
    low_precision_max,
)
from gpulesson.precision.gpu import GpuFigure
from gpulesson.precision.hardware import TENSOR_DTYPES, Bf16Support, HardwareRow
from gpulesson.precision.scaler import NonFiniteCheck, ScalerRun
from gpulesson.precision.step import StepTiming
from gpulesson.precision.tf32 import MatmulErrors, Tf32Settings
from gpulesson.precision.trace import TraceRow
from gpulesson.results import datasheets
from gpulesson.text import inert
from gpulesson.units import MB


def _number(value: float) -> str:
    """A float for a table: whole numbers below 10^7 in full, others to four figures.

    >>> _number(65504.0), _number(6.103515625e-05), _number(float("inf"))
    ('65,504', '6.104e-05', 'inf')
    """
    if abs(value) < 1e7 and value == int(value):
        return f"{value:,.0f}"
    return f"{value:.4g}"


def _stored(value: float) -> str:
    """A stored value with enough digits to tell it from its neighbours (seven figures)."""
    if abs(value) < 1e7 and value == int(value):
        return f"{value:,.0f}"
    return f"{value:.7g}"


def _error(relative: float) -> str:
    """A relative error: as a percentage from 0.01 % up, else in scientific notation."""
    return f"{relative:.2%}" if relative >= 1e-4 else f"{relative:.1e}"


def ranges_markdown(ranges: Sequence[FormatRange]) -> str:
    """Each format's bits, largest number, smallest normal and subnormal, and eps."""
    out = [
        "| format | exponent bits | mantissa bits | largest | smallest normal "
        "| smallest subnormal | step after 1 (eps) | decimal digits | from |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for f in ranges:
        subnormal = "—" if f.smallest_subnormal is None else _number(f.smallest_subnormal)
        out.append(
            f"| {f.name} | {f.exponent_bits} | {f.mantissa_bits} | {_number(f.max_value)} | "
            f"{_number(f.smallest_normal)} | {subnormal} | {_number(f.eps)} | "
            f"{f.decimal_digits:.1f} | {f.source} |"
        )
    return "\n".join(out)


def _cast_cell(r: CastResult) -> str:
    if r.outcome in ("overflow to inf", "underflow to 0"):
        return f"**{_number(r.stored)}** ({r.outcome})"
    if r.outcome == "exact":
        return f"{_stored(r.stored)} (exact)"
    assert r.relative_error is not None
    return f"{_stored(r.stored)} ({r.outcome}, error {_error(r.relative_error)})"


def casts_markdown(probes: Sequence[CastProbe]) -> str:
    """Each probe value as each format stores it, with what happened."""
    formats = [r.format for r in probes[0].results] if probes else []
    out = [
        "| value | why this value | " + " | ".join(formats) + " |",
        "|---:|---|" + "---|" * len(formats),
    ]
    for p in probes:
        cells = " | ".join(_cast_cell(p.result(name)) for name in formats)
        out.append(f"| {_stored(p.value)} | {p.why} | {cells} |")
    return "\n".join(out)


def scaling_markdown(probes: Sequence[ScalingProbe]) -> str:
    """Gradients in fp16, in fp16 with a loss scale (unscaled in fp32), and in bf16."""
    scale = f"{probes[0].scale:,.0f}" if probes else "the scale"
    out = [
        f"| gradient | fp16 | fp16 with loss scale {scale}, unscaled in fp32 | bf16 |",
        "|---:|---|---|---|",
    ]
    for p in probes:
        out.append(
            f"| {_stored(p.value)} | {_cast_cell(p.fp16)} | {_cast_cell(p.fp16_scaled)} | "
            f"{_cast_cell(p.bf16)} |"
        )
    return "\n".join(out)


_SHORT = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16", "float64": "fp64"}


def _short(dtype: str) -> str:
    """A dtype name as the lesson writes it: fp32, bf16, fp16 (others unchanged)."""
    return _SHORT.get(dtype, dtype)


def trace_markdown(rows: Sequence[TraceRow]) -> str:
    """The dtype trace, with PyTorch's autocast policy for each op on CUDA and CPU."""
    out = [
        "| op | module | inputs | output | autocast on CUDA (docs) | autocast on CPU (docs) |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        policy = r.policy
        cuda = policy.cuda if policy else "not in this table"
        cpu = policy.cpu if policy else "not in this table"
        inputs = ", ".join(_short(d) for d in r.input_dtypes)
        out.append(
            f"| `{r.op}` | `{r.module}` | {inputs} | **{_short(r.output_dtype)}** | "
            f"{cuda} | {cpu} |"
        )
    return "\n".join(out)


def errors_markdown(errors: MatmulErrors) -> str:
    """One matmul's error per precision, against fp64."""
    out = [
        f"| precision ({errors.n} x {errors.n} matmul on {errors.device}) "
        "| largest absolute error | relative error (largest / mean of the exact product) |",
        "|---|---:|---:|",
    ]
    for r in errors.rows:
        out.append(f"| {r.label} | {r.max_abs_error:.3g} | {r.relative_error:.3g} |")
    return "\n".join(out)


_DISPLAY = {"FLOP/s": ("TFLOP/s", 1e12), "s": ("ms", 1e-3), "ratio": ("ratio", 1.0)}


def gpu_markdown(figures: Sequence[GpuFigure], wanted: Mapping[str, str], what: str) -> str:
    """GPU figures as a table, or a note naming the measurements this build could not show."""
    if not figures:
        names = ", ".join(f"`{n}`" for n in wanted)
        return (
            f'!!! note "{what}: needs a GPU"\n'
            f"    This build has no CUDA GPU and no reference result bundle, so these rows "
            f"are not shown. A CUDA build measures them; on a CPU build they come from the "
            f"newest bundle of `gpulesson measure` under `results/reference/` "
            f"(measurements {names})."
        )
    unit, factor = _DISPLAY.get(figures[0].unit, (figures[0].unit, 1.0))
    source = "this build's GPU" if figures[0].source == "this build" else "reference bundle"
    out = [f"| {what} | {unit} | measured on | suite measurement |", "|---|---:|---|---|"]
    for f in figures:
        out.append(f"| {inert(f.label)} | {f.value / factor:.4g} | {source} | `{f.name}` |")
    return "\n".join(out)


def scaler_markdown(run: ScalerRun) -> str:
    """A GradScaler run: the scale around each step and whether the step was taken."""
    out = [
        "| step | batch | loss | gradients finite | scale before | scale after | step taken |",
        "|---:|---|---:|---|---:|---:|---|",
    ]
    for s in run.steps:
        taken = "yes" if s.step_taken else "**no: skipped**"
        out.append(
            f"| {s.step} | {s.batch} | {s.loss:.4g} | {'yes' if s.grads_finite else 'no'} | "
            f"{s.scale_before:,.0f} | {s.scale_after:,.0f} | {taken} |"
        )
    return "\n".join(out)


def nonfinite_markdown(check: NonFiniteCheck) -> str:
    """What each NaN/inf check reported for the same backward pass."""
    grads = ", ".join(f"`{n}`" for n in check.nonfinite_grads) or "none"
    anomaly = f"`{check.anomaly}`" if check.anomaly else "nothing raised"
    return "\n".join(
        [
            "| check | what it reported |",
            "|---|---|",
            f"| `torch.isfinite(loss)` | {check.loss_finite} (loss {check.loss:.4g}) |",
            f"| `torch.isfinite(p.grad).all()` per parameter | not finite: {grads} "
            f"({len(check.nonfinite_grads)} of {check.parameters}) |",
            f"| `torch.autograd.detect_anomaly()` | {anomaly} |",
        ]
    )


def _peak_cell(row: HardwareRow, dtype: str) -> str:
    """A dense peak, labelled "fp32 acc." where the datasheet states it with FP32 accumulate."""
    label = " (fp32 acc.)" if dtype in row.fp32_accumulate else ""
    return f"{row.dense_tflops[dtype]:g}{label}"


def hardware_markdown(rows: Sequence[HardwareRow]) -> str:
    """Tensor-core dtypes by compute capability, with the datasheets' dense peaks."""
    head = " | ".join(f"{d} (dense TFLOP/s)" for d in TENSOR_DTYPES)
    out = [
        f"| GPU | architecture | compute capability | {head} |",
        "|---|---|---|" + "---:|" * len(TENSOR_DTYPES),
    ]
    for r in rows:
        cells = " | ".join(
            _peak_cell(r, d) if d in r.dense_tflops else "none" for d in TENSOR_DTYPES
        )
        major, minor = r.capability
        out.append(
            f"| {r.name} | {r.architecture} | {major}.{minor} (sm_{major}{minor}) | {cells} |"
        )
    return "\n".join(out)


def activations_markdown(c: ActivationComparison) -> str:
    """The estimate's and the measurement's saved bytes, fp32 against autocast (MB)."""
    s = c.shape
    dtype = c.measured_autocast.autocast_dtype
    amp, fp32 = c.estimate_amp, c.estimate_fp32
    return "\n".join(
        [
            f"| GPT-2, {s.layers} layers, hidden {s.hidden}, seq {s.seq}, batch {s.batch} "
            f"| fp32 | autocast ({dtype}) | ratio |",
            "|---|---:|---:|---:|",
            f"| bytes per parameter (weights, gradients, AdamW), recipe `fp32` / `amp` "
            f"| {fp32.recipe.total_bytes_per_param:g} | {amp.recipe.total_bytes_per_param:g} "
            f"| {amp.recipe.total_bytes_per_param / fp32.recipe.total_bytes_per_param:.2f} |",
            f"| activations, estimate (MB) | {fp32.activations_bytes / MB:.2f} "
            f"| {amp.activations_bytes / MB:.2f} | {c.estimated_ratio:.2f} |",
            f"| activations saved for backward, measured on {c.device} (MB) "
            f"| {c.measured_fp32.activations_bytes / MB:.2f} "
            f"| {c.measured_autocast.activations_bytes / MB:.2f} | {c.measured_ratio:.2f} |",
            "| of which fp32, measured (MB) "
            f"| {c.measured_fp32.by_dtype.get('float32', 0) / MB:.2f} "
            f"| {c.measured_autocast.by_dtype.get('float32', 0) / MB:.2f} | |",
            f"| 16-bit weight copies autocast keeps for backward, measured (MB) "
            f"| {c.measured_fp32.weight_copies_bytes / MB:.2f} "
            f"| {c.measured_autocast.weight_copies_bytes / MB:.2f} | |",
        ]
    )


def steps_markdown(timings: Sequence[StepTiming]) -> str:
    """Training-step timings per precision on one device (ms, median and IQR)."""
    device = timings[0].device if timings else "?"
    out = [
        f"| precision (on {device}) | median step (ms) | IQR (ms) | samples "
        "| steps skipped by the scaler |",
        "|---|---:|---:|---:|---:|",
    ]
    for t in timings:
        skipped = "no scaler" if t.final_scale is None else f"{t.skipped_steps} of {t.steps}"
        out.append(
            f"| {t.precision} | {t.result.median_s * 1e3:.1f} | {t.result.iqr_s * 1e3:.1f} | "
            f"{t.result.repeats} | {skipped} |"
        )
    return "\n".join(out)


def settings_markdown(s: Tf32Settings) -> str:
    """This torch's TF32 switches, as read at build time."""
    newer = "—" if s.cuda_matmul_fp32_precision is None else f"`{s.cuda_matmul_fp32_precision}`"
    conv = "—" if s.cudnn_conv_fp32_precision is None else f"`{s.cudnn_conv_fp32_precision}`"
    return "\n".join(
        [
            f"| switch (torch {inert(s.torch_version)}) | value on this build | TF32 for |",
            "|---|---|---|",
            f'| `torch.get_float32_matmul_precision()` | `"{s.float32_matmul_precision}"` '
            '| matmuls when `"high"` or `"medium"` |',
            f"| `torch.backends.cuda.matmul.allow_tf32` | `{s.cuda_matmul_allow_tf32}` "
            "| CUDA matmuls (older switch) |",
            f"| `torch.backends.cudnn.allow_tf32` | `{s.cudnn_allow_tf32}` "
            "| cuDNN convolutions (older switch) |",
            f"| `torch.backends.cuda.matmul.fp32_precision` (torch 2.9+) | {newer} "
            '| CUDA matmuls when `"tf32"` |',
            f"| `torch.backends.cudnn.conv.fp32_precision` (torch 2.9+) | {conv} "
            '| cuDNN convolutions when `"tf32"` |',
        ]
    )


def bf16_support_markdown(s: Bf16Support) -> str:
    """What torch says about bf16 on this build's GPU, beside its compute capability."""
    if s.capability is None:
        return (
            "This build has no CUDA GPU, so `torch.cuda.is_bf16_supported()` returns False "
            "here; run the line on your own GPU."
        )
    major, minor = s.capability
    return "\n".join(
        [
            "| this build's GPU | `torch.cuda.is_bf16_supported()` | bf16 tensor cores |",
            "|---|---|---|",
            f"| compute capability {major}.{minor} | {s.torch_says} | "
            f"{'yes' if s.native else 'no (torch emulates bf16)'} |",
        ]
    )


FP8_GPUS = ("rtx-4090", "h100-sxm", "h200", "b200")


def fp8_gpus_cell(dtype: str, ids: tuple[str, ...] = FP8_GPUS) -> str:
    """The GPUs among ``ids`` whose datasheet gives a ``dtype`` peak, with the dense figure.

    >>> fp8_gpus_cell("fp8", ("h100-sxm", "a100-80gb"))
    'NVIDIA H100 SXM5 80GB [1,979](https://www.nvidia.com/en-us/data-center/h100/)'
    """
    cells = []
    for i in ids:
        row = datasheets.get(i)
        peak = row.dense_flop_per_s(dtype)
        if peak is not None:
            cells.append(f"{inert(row.name)} [{peak / 1e12:,.0f}]({row.sources[0].url})")
    return ", ".join(cells) if cells else "—"


def _runs_on(fmt: LowPrecisionFormat) -> str:
    if fmt.full_rate_dtype:
        return f"{inert(fmt.full_rate_note)}: {fp8_gpus_cell(fmt.full_rate_dtype)}"
    return f"[{inert(fmt.full_rate_note)}]({BLACKWELL})"


def low_precision_markdown() -> str:
    """One row per format below 16 bits: bits, largest value, scaling, where it runs."""
    lines = [
        "| format | exponent bits | mantissa bits | largest value | scale | runs at full rate "
        "on (dense TFLOP/s from the datasheets) | source |",
        "|---|---:|---:|---|---|---|---|",
    ]
    for fmt in LOW_PRECISION_FORMATS:
        value, where = low_precision_max(fmt)
        lines.append(
            f"| {inert(fmt.name)} | {fmt.exponent_bits} | {fmt.mantissa_bits} "
            f"| {value:,.0f} ({where}) | {inert(fmt.scale)} | {_runs_on(fmt)} "
            f"| [spec]({fmt.source}) |"
        )
    return "\n".join(lines)
