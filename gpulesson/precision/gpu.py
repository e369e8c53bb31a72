"""The lesson's GPU figures: measured on this build's CUDA GPU, or read from a result bundle.

Three groups of rows need a GPU: matmul speed in fp32, TF32 and bf16; the time of a
training step per precision; and TF32's real error on the tensor cores. On a CUDA
build the page measures them with the functions below, the same ones the suite entries
call. On a CPU build it reads the newest reference bundle's measurements of the same
names (:func:`from_bundle`); with no bundle the page lists the names it is missing.

Each figure carries its suite measurement name, so a fact published from it has the
same name whichever way it came (``mp.`` plus the name with dots as underscores:
:func:`fact_name`).

>>> from_bundle(None, SPEED)
()
>>> fact_name("matmul_peak.tf32")
'mp.matmul_peak_tf32'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

from gpulesson.precision.hardware import tensor_core_dtypes
from gpulesson.precision.step import STEP_PLANS, precisions_for, time_step
from gpulesson.precision.tf32 import matmul_errors
from gpulesson.results.bundle import Bundle
from gpulesson.timing.bench import measure_matmul

# Suite measurement name -> what the row is.
SPEED: dict[str, str] = {
    "matmul_peak.fp32": "fp32 matmul (TF32 off)",
    "matmul_peak.tf32": "TF32 matmul (fp32 tensors, TF32 tensor cores)",
    "matmul_peak.bf16": "bf16 matmul",
}
STEP: dict[str, str] = {
    "amp_step.fp32": "fp32",
    "amp_step.tf32": "fp32 tensors, TF32 matmuls",
    "amp_step.bf16": "bf16 autocast",
    "amp_step.fp16": "fp16 autocast + GradScaler",
}
ACCURACY: dict[str, str] = {
    "tf32_accuracy.fp32": "fp32 (TF32 off)",
    "tf32_accuracy.tf32": "TF32 on the tensor cores",
    "tf32_accuracy.tf32_emulated": "TF32, emulated",
    "tf32_accuracy.bf16": "bf16",
    "tf32_accuracy.fp16": "fp16",
}
SPEED_N = 8192  # the square matmul a CUDA build times
ACCURACY_N = 4096


@dataclass(frozen=True, kw_only=True)
class GpuFigure:
    """One GPU row: the suite measurement it is (or would be), its value, unit and origin."""

    name: str
    label: str
    value: float
    unit: str
    source: str


def fact_name(measurement: str) -> str:
    """The page fact a GPU figure is published as."""
    return "mp." + measurement.replace(".", "_")


def from_bundle(bundle: Bundle | None, names: Mapping[str, str]) -> tuple[GpuFigure, ...]:
    """The bundle's measurements among ``names`` (name -> label); those it lacks are left out."""
    if bundle is None:
        return ()
    found = []
    for name, label in names.items():
        m = bundle.measurement(name)
        if m is not None:
            found.append(
                GpuFigure(
                    name=name, label=label, value=float(m.value), unit=m.unit, source="bundle"
                )
            )
    return tuple(found)


def measure_speeds(device: str = "cuda", n: int = SPEED_N) -> tuple[GpuFigure, ...]:
    """Time an n x n matmul in fp32, and TF32 and bf16 where the tensor cores take them."""
    has = ("fp32", *tensor_core_dtypes(torch.cuda.get_device_capability()))
    rows = []
    for name, label in SPEED.items():
        dtype = name.rsplit(".", 1)[1]
        if dtype not in has:
            continue
        result = measure_matmul(n, device, dtype)
        rows.append(
            GpuFigure(
                name=name,
                label=f"{label}, n={n}",
                value=result.flop_per_s,
                unit="FLOP/s",
                source="this build",
            )
        )
    return tuple(rows)


def measure_steps(device: str = "cuda") -> tuple[GpuFigure, ...]:
    """Time the quick suite's training step in each precision this GPU runs (seconds)."""
    plan = STEP_PLANS[(device, True)]
    capability = torch.cuda.get_device_capability() if device == "cuda" else None
    rows = []
    for precision in precisions_for(device, capability, quick=True):
        timing = time_step(plan.config, plan.batch, device, precision, plan.min_run_time_s)
        name = f"amp_step.{precision}"
        rows.append(
            GpuFigure(
                name=name,
                label=STEP[name],
                value=timing.result.median_s,
                unit="s",
                source="this build",
            )
        )
    return tuple(rows)


def measure_accuracy(device: str = "cuda", n: int = ACCURACY_N) -> tuple[GpuFigure, ...]:
    """One n x n matmul's relative error per precision on this GPU (ratio)."""
    errors = matmul_errors(n, device)
    return tuple(
        GpuFigure(
            name=f"tf32_accuracy.{row.method}",
            label=ACCURACY[f"tf32_accuracy.{row.method}"],
            value=row.relative_error,
            unit="ratio",
            source="this build",
        )
        for row in errors.rows
    )


# Derived facts: (fact, numerator measurement, denominator measurement, unit).
RATIOS: tuple[tuple[str, str, str], ...] = (
    ("mp.tf32_speedup", "matmul_peak.tf32", "matmul_peak.fp32"),
    ("mp.bf16_speedup", "matmul_peak.bf16", "matmul_peak.fp32"),
    ("mp.step_tf32_speedup", "amp_step.fp32", "amp_step.tf32"),
    ("mp.step_bf16_speedup", "amp_step.fp32", "amp_step.bf16"),
    ("mp.step_fp16_speedup", "amp_step.fp32", "amp_step.fp16"),
)


def page_facts(figures: tuple[GpuFigure, ...]) -> dict[str, tuple[float, str]]:
    """The facts a page publishes from its GPU figures: each figure, and the speedups.

    A speedup is published when both of its figures are there (a rate over the fp32
    rate, or the fp32 time over a time).

    >>> f = (GpuFigure(name="matmul_peak.fp32", label="", value=50e12, unit="FLOP/s",
    ...                source="bundle"),
    ...      GpuFigure(name="matmul_peak.tf32", label="", value=400e12, unit="FLOP/s",
    ...                source="bundle"))
    >>> page_facts(f)["mp.tf32_speedup"]
    (8.0, 'x')
    """
    values = {f.name: f.value for f in figures}
    out = {fact_name(f.name): (f.value, f.unit) for f in figures}
    for fact, top, bottom in RATIOS:
        if top in values and bottom in values:
            out[fact] = (values[top] / values[bottom], "x")
    return out
