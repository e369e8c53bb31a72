"""The lesson's GPU figures: rows rebuilt from the measurement suite's measurements.

Three groups of rows need a GPU: matmul speed in fp32, TF32 and bf16 (suite entry
``matmul_peak``); the time of a training step per precision (``amp_step``); and TF32's
real error on the tensor cores (``tf32_accuracy``). The page measures nothing itself: it
asks :func:`gpulesson.site.gpu_figures.gpu_measurements` for the entry (this build's CUDA
GPU through the suite, else the newest reference bundle) and turns the measurements of
the names below into rows (:func:`from_measurements`); with neither the page lists the
names it is missing.

Each figure carries its suite measurement name, so a fact published from it has the
same name whichever way it came (``mp.`` plus the name with dots as underscores:
:func:`fact_name`).

>>> from_measurements((), SPEED, this_build=False)
()
>>> fact_name("matmul_peak.tf32")
'mp.matmul_peak_tf32'
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gpulesson.results.bundle import Measurement

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


def from_measurements(
    measurements: Iterable[Measurement], names: Mapping[str, str], *, this_build: bool
) -> tuple[GpuFigure, ...]:
    """The measurements among ``names`` (name -> label), in the order of ``names``.

    ``this_build``: measured by this build's GPU (else read from a reference bundle).
    Names the measurements lack are left out.

    >>> from gpulesson.results.measurements import single
    >>> m = single(0.5, name="amp_step.fp32", entry="amp_step", unit="s", label="x")
    >>> [(f.label, f.value, f.source) for f in from_measurements([m], STEP, this_build=True)]
    [('fp32', 0.5, 'this build')]
    """
    by_name = {m.name: m for m in measurements}
    return tuple(
        GpuFigure(
            name=name,
            label=label,
            value=float(by_name[name].value),
            unit=by_name[name].unit,
            source="this build" if this_build else "bundle",
        )
        for name, label in names.items()
        if name in by_name
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
