"""The lesson ``mixed-precision.md``: its renderers and texts.

Its pictures and tables, from the results of :mod:`gpulesson.precision`: format ranges,
casts, loss scaling, the dtype trace, matmul errors, GradScaler steps, NaN checks, hardware
support, saved bytes, step timings, GPU figures and the low-precision formats. Nothing here
computes a figure: pages compute, then hand the results over. One display unit per column,
named in the header.

>>> from gpulesson.precision.formats import format_ranges
>>> ranges_markdown(format_ranges()).splitlines()[2].startswith("| fp32 | 8 | 23 |")
True

The rows below 16 bits (fp8, MXFP8 and FP4): layouts and scaling from
:data:`gpulesson.precision.formats.LOW_PRECISION_FORMATS`; the largest value from
``torch.finfo`` where this torch has the dtype; the GPUs that run fp8 at full rate, with
their dense fp8 peak, from the course's datasheet table.

>>> print(low_precision_markdown().splitlines()[2][:40])
| fp8 E4M3 | 4 | 3 | 448 (torch.finfo) |
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

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
from gpulesson.tables import markdown_table
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
    header = (
        "format",
        "exponent bits",
        "mantissa bits",
        "largest",
        "smallest normal",
        "smallest subnormal",
        "step after 1 (eps)",
        "decimal digits",
        "from",
    )
    rows: list[tuple[str, ...]] = []
    for f in ranges:
        subnormal = "—" if f.smallest_subnormal is None else _number(f.smallest_subnormal)
        rows.append(
            (
                f.name,
                f"{f.exponent_bits}",
                f"{f.mantissa_bits}",
                _number(f.max_value),
                _number(f.smallest_normal),
                subnormal,
                _number(f.eps),
                f"{f.decimal_digits:.1f}",
                f.source,
            )
        )
    return markdown_table(header, rows, align="lrrrrrrrl")


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
    rows = [
        (_stored(p.value), p.why, *(_cast_cell(p.result(name)) for name in formats)) for p in probes
    ]
    header = ("value", "why this value", *formats)
    return markdown_table(header, rows, align="rl" + "l" * len(formats))


def scaling_markdown(probes: Sequence[ScalingProbe]) -> str:
    """Gradients in fp16, in fp16 with a loss scale (unscaled in fp32), and in bf16."""
    scale = f"{probes[0].scale:,.0f}" if probes else "the scale"
    header = ("gradient", "fp16", f"fp16 with loss scale {scale}, unscaled in fp32", "bf16")
    rows = [
        (_stored(p.value), _cast_cell(p.fp16), _cast_cell(p.fp16_scaled), _cast_cell(p.bf16))
        for p in probes
    ]
    return markdown_table(header, rows, align="rlll")


_SHORT = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16", "float64": "fp64"}


def _short(dtype: str) -> str:
    """A dtype name as the lesson writes it: fp32, bf16, fp16 (others unchanged)."""
    return _SHORT.get(dtype, dtype)


def trace_markdown(rows: Sequence[TraceRow]) -> str:
    """The dtype trace, with PyTorch's autocast policy for each op on CUDA and CPU."""
    header = (
        "op",
        "module",
        "inputs",
        "output",
        "autocast on CUDA (docs)",
        "autocast on CPU (docs)",
    )
    cells: list[tuple[str, ...]] = []
    for r in rows:
        policy = r.policy
        cuda = policy.cuda if policy else "not in this table"
        cpu = policy.cpu if policy else "not in this table"
        inputs = ", ".join(_short(d) for d in r.input_dtypes)
        cells.append(
            (f"`{r.op}`", f"`{r.module}`", inputs, f"**{_short(r.output_dtype)}**", cuda, cpu)
        )
    return markdown_table(header, cells, align="llllll")


def errors_markdown(errors: MatmulErrors) -> str:
    """One matmul's error per precision, against fp64."""
    header = (
        f"precision ({errors.n} x {errors.n} matmul on {errors.device})",
        "largest absolute error",
        "relative error (largest / mean of the exact product)",
    )
    rows = [(r.label, f"{r.max_abs_error:.3g}", f"{r.relative_error:.3g}") for r in errors.rows]
    return markdown_table(header, rows)


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
    rows = [(inert(f.label), f"{f.value / factor:.4g}", source, f"`{f.name}`") for f in figures]
    return markdown_table((what, unit, "measured on", "suite measurement"), rows, align="lrll")


def scaler_markdown(run: ScalerRun) -> str:
    """A GradScaler run: the scale around each step and whether the step was taken."""
    header = (
        "step",
        "batch",
        "loss",
        "gradients finite",
        "scale before",
        "scale after",
        "step taken",
    )
    rows = [
        (
            f"{s.step}",
            s.batch,
            f"{s.loss:.4g}",
            "yes" if s.grads_finite else "no",
            f"{s.scale_before:,.0f}",
            f"{s.scale_after:,.0f}",
            "yes" if s.step_taken else "**no: skipped**",
        )
        for s in run.steps
    ]
    return markdown_table(header, rows, align="rlrlrrl")


def nonfinite_markdown(check: NonFiniteCheck) -> str:
    """What each NaN/inf check reported for the same backward pass."""
    grads = ", ".join(f"`{n}`" for n in check.nonfinite_grads) or "none"
    anomaly = f"`{check.anomaly}`" if check.anomaly else "nothing raised"
    rows = [
        ("`torch.isfinite(loss)`", f"{check.loss_finite} (loss {check.loss:.4g})"),
        (
            "`torch.isfinite(p.grad).all()` per parameter",
            f"not finite: {grads} ({len(check.nonfinite_grads)} of {check.parameters})",
        ),
        ("`torch.autograd.detect_anomaly()`", anomaly),
    ]
    return markdown_table(("check", "what it reported"), rows, align="ll")


def _peak_cell(row: HardwareRow, dtype: str) -> str:
    """A dense peak, labelled "fp32 acc." where the datasheet states it with FP32 accumulate."""
    label = " (fp32 acc.)" if dtype in row.fp32_accumulate else ""
    return f"{row.dense_tflops[dtype]:g}{label}"


def hardware_markdown(rows: Sequence[HardwareRow]) -> str:
    """Tensor-core dtypes by compute capability, with the datasheets' dense peaks."""
    header = (
        "GPU",
        "architecture",
        "compute capability",
        *(f"{d} (dense TFLOP/s)" for d in TENSOR_DTYPES),
    )
    cells: list[tuple[str, ...]] = []
    for r in rows:
        peaks = (_peak_cell(r, d) if d in r.dense_tflops else "none" for d in TENSOR_DTYPES)
        major, minor = r.capability
        cells.append((r.name, r.architecture, f"{major}.{minor} (sm_{major}{minor})", *peaks))
    return markdown_table(header, cells, align="lll" + "r" * len(TENSOR_DTYPES))


def activations_markdown(c: ActivationComparison) -> str:
    """The estimate's and the measurement's saved bytes, fp32 against autocast (MB)."""
    s = c.shape
    dtype = c.measured_autocast.autocast_dtype
    amp, fp32 = c.estimate_amp, c.estimate_fp32
    header = (
        f"GPT-2, {s.layers} layers, hidden {s.hidden}, seq {s.seq}, batch {s.batch}",
        "fp32",
        f"autocast ({dtype})",
        "ratio",
    )
    fp32_bpp, amp_bpp = fp32.recipe.total_bytes_per_param, amp.recipe.total_bytes_per_param
    measured_fp32, measured_amp = c.measured_fp32, c.measured_autocast
    rows = [
        (
            "bytes per parameter (weights, gradients, AdamW), recipe `fp32` / `amp`",
            f"{fp32_bpp:g}",
            f"{amp_bpp:g}",
            f"{amp_bpp / fp32_bpp:.2f}",
        ),
        (
            "activations, estimate (MB)",
            f"{fp32.activations_bytes / MB:.2f}",
            f"{amp.activations_bytes / MB:.2f}",
            f"{c.estimated_ratio:.2f}",
        ),
        (
            f"activations saved for backward, measured on {c.device} (MB)",
            f"{measured_fp32.activations_bytes / MB:.2f}",
            f"{measured_amp.activations_bytes / MB:.2f}",
            f"{c.measured_ratio:.2f}",
        ),
        (
            "of which fp32, measured (MB)",
            f"{measured_fp32.by_dtype.get('float32', 0) / MB:.2f}",
            f"{measured_amp.by_dtype.get('float32', 0) / MB:.2f}",
            "",
        ),
        (
            "16-bit weight copies autocast keeps for backward, measured (MB)",
            f"{measured_fp32.weight_copies_bytes / MB:.2f}",
            f"{measured_amp.weight_copies_bytes / MB:.2f}",
            "",
        ),
    ]
    return markdown_table(header, rows)


def steps_markdown(timings: Sequence[StepTiming]) -> str:
    """Training-step timings per precision on one device (ms, median and IQR)."""
    device = timings[0].device if timings else "?"
    header = (
        f"precision (on {device})",
        "median step (ms)",
        "IQR (ms)",
        "samples",
        "steps skipped by the scaler",
    )
    rows = [
        (
            t.precision,
            f"{t.result.median_s * 1e3:.1f}",
            f"{t.result.iqr_s * 1e3:.1f}",
            f"{t.result.repeats}",
            "no scaler" if t.final_scale is None else f"{t.skipped_steps} of {t.steps}",
        )
        for t in timings
    ]
    return markdown_table(header, rows)


def settings_markdown(s: Tf32Settings) -> str:
    """This torch's TF32 switches, as read at build time."""
    newer = "—" if s.cuda_matmul_fp32_precision is None else f"`{s.cuda_matmul_fp32_precision}`"
    conv = "—" if s.cudnn_conv_fp32_precision is None else f"`{s.cudnn_conv_fp32_precision}`"
    header = (f"switch (torch {inert(s.torch_version)})", "value on this build", "TF32 for")
    rows = [
        (
            "`torch.get_float32_matmul_precision()`",
            f'`"{s.float32_matmul_precision}"`',
            'matmuls when `"high"` or `"medium"`',
        ),
        (
            "`torch.backends.cuda.matmul.allow_tf32`",
            f"`{s.cuda_matmul_allow_tf32}`",
            "CUDA matmuls (older switch)",
        ),
        (
            "`torch.backends.cudnn.allow_tf32`",
            f"`{s.cudnn_allow_tf32}`",
            "cuDNN convolutions (older switch)",
        ),
        (
            "`torch.backends.cuda.matmul.fp32_precision` (torch 2.9+)",
            newer,
            'CUDA matmuls when `"tf32"`',
        ),
        (
            "`torch.backends.cudnn.conv.fp32_precision` (torch 2.9+)",
            conv,
            'cuDNN convolutions when `"tf32"`',
        ),
    ]
    return markdown_table(header, rows, align="lll")


def bf16_support_markdown(s: Bf16Support) -> str:
    """What torch says about bf16 on this build's GPU, beside its compute capability."""
    if s.capability is None:
        return (
            "This build has no CUDA GPU, so `torch.cuda.is_bf16_supported()` returns False "
            "here; run the line on your own GPU."
        )
    major, minor = s.capability
    return markdown_table(
        ("this build's GPU", "`torch.cuda.is_bf16_supported()`", "bf16 tensor cores"),
        [
            (
                f"compute capability {major}.{minor}",
                f"{s.torch_says}",
                "yes" if s.native else "no (torch emulates bf16)",
            )
        ],
        align="lll",
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
    header = (
        "format",
        "exponent bits",
        "mantissa bits",
        "largest value",
        "scale",
        "runs at full rate on (dense TFLOP/s from the datasheets)",
        "source",
    )
    rows: list[tuple[str, ...]] = []
    for fmt in LOW_PRECISION_FORMATS:
        value, where = low_precision_max(fmt)
        rows.append(
            (
                inert(fmt.name),
                f"{fmt.exponent_bits}",
                f"{fmt.mantissa_bits}",
                f"{value:,.0f} ({where})",
                inert(fmt.scale),
                _runs_on(fmt),
                f"[spec]({fmt.source})",
            )
        )
    return markdown_table(header, rows, align="lrrllll")


def activation_ratio_readings(facts: Mapping[str, Any]) -> dict[str, str]:
    """Autocast's measured activation share, and three shares a reader expects instead.

    Reads ``mp.act_meas_ratio`` (activations saved under autocast over fp32, measured)
    and ``mp.act_est_ratio`` (the same from the budget estimate, which prices every
    activation at 2 bytes). ``half`` is "every activation became 16-bit"; ``quarter``
    confuses 16-bit with 8-bit; ``same`` is "autocast only casts the weights".
    Refuses a measurement that would read like one of those three.

    >>> activation_ratio_readings({"mp.act_meas_ratio": 0.656, "mp.act_est_ratio": 0.501})
    {'measured': '0.66', 'estimate': '0.50', 'half': '0.50', 'quarter': '0.25', 'same': '1.00'}
    >>> activation_ratio_readings({"mp.act_meas_ratio": 0.5, "mp.act_est_ratio": 0.5})
    Traceback (most recent call last):
    ...
    ValueError: activation_ratio_readings: the measured share 0.50 reads like a distractor
    """
    measured = f"{float(facts['mp.act_meas_ratio']):.2f}"
    distractors = {"half": "0.50", "quarter": "0.25", "same": "1.00"}
    if measured in distractors.values():
        raise ValueError(
            f"activation_ratio_readings: the measured share {measured} reads like a distractor"
        )
    return {
        "measured": measured,
        "estimate": f"{float(facts['mp.act_est_ratio']):.2f}",
        **distractors,
    }
