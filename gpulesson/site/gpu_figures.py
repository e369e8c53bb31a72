"""GPU figures for a lesson: from this build's GPU, else from the newest reference bundle.

A lesson that shows GPU numbers has three cases. The build runs on a CUDA
device: the page asks the measurement suite for them (:func:`gpu_measurements`, which
goes through :func:`gpulesson.site.build_bundle.measure`, so they land in this build's
bundle). It does not, but a reference bundle
exists (``results/reference/``, made by the project's GPU runners with
``gpulesson measure``): the page shows that bundle's figures, stamped with the
bundle's own provenance, never as this build's measurement. Neither: the page
says the figures were not measured. A lesson block::

    from gpulesson.site import gpu_figures
    ref = gpu_figures.reference()            # None on a GPU build or with no GPU bundle
    if ref is not None:
        print(gpu_figures.stamp_markdown(ref))
        gpu_figures.publish(ref, {"timing.gpu_launch_us": "launch_overhead.eager"})

:func:`publish` makes the bundle's figures page facts (:mod:`gpulesson.site.facts`),
so checked claims about GPU numbers (``needs="cuda"``) are checked against the
reference bundle on a CPU build instead of being left unchecked.

>>> reference(root=Path("/no/such/results")) is None
True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gpulesson.results.bundle import Measurement
from gpulesson.results.compare import Sourced, load_dir
from gpulesson.site import build_bundle, facts
from gpulesson.site.results_pages import RESULTS_DIR
from gpulesson.text import inert

GPU_TYPES = ("cuda",)


def build_has_gpu() -> bool:
    """True when this build runs on a CUDA device (then the page measures for itself)."""
    import torch

    return bool(torch.cuda.is_available())


def newest_gpu_bundle(root: Path = RESULTS_DIR) -> Sourced | None:
    """The newest reference bundle measured on a CUDA device, or None."""
    bundles = [
        b
        for b in load_dir(Path(root) / "reference", "reference")
        if b.bundle.provenance.device_type in GPU_TYPES
    ]
    return bundles[-1] if bundles else None  # load_dir sorts oldest first


def reference(root: Path = RESULTS_DIR, *, on_gpu: bool | None = None) -> Sourced | None:
    """The reference bundle a lesson should show: None when this build has a GPU or none exists.

    ``on_gpu`` overrides the device check (tests; a page that already knows).
    """
    has_gpu = build_has_gpu() if on_gpu is None else on_gpu
    return None if has_gpu else newest_gpu_bundle(root)


def stamp_markdown(ref: Sourced) -> str:
    """The admonition that says where the GPU figures below were measured.

    >>> from gpulesson.results.bundle import load
    >>> ref = Sourced(load(_FIXTURE), "reference", "fixture_h100.json")
    >>> print(stamp_markdown(ref).splitlines()[0])
    !!! info "GPU figures from a reference result bundle, not from this build's machine"
    """
    p = ref.bundle.provenance
    software = ", ".join(
        part
        for part in (
            f"driver {inert(p.driver_version)}" if p.driver_version else "",
            f"CUDA {inert(p.cuda_version)}" if p.cuda_version else "",
            f"torch {inert(p.torch_version)}",
            f"gpulesson {inert(p.gpulesson_version)}"
            + (f" ({inert(p.gpulesson_commit)})" if p.gpulesson_commit else ""),
        )
        if part
    )
    suite = "the quick suite" if p.suite.quick else "the full suite"
    return (
        '!!! info "GPU figures from a reference result bundle, not from this build\'s machine"\n'
        f"    This build has no CUDA GPU. The GPU figures below were measured by "
        f"`gpulesson measure` ({suite}) on **{inert(p.device_name)}** on {inert(ref.date)} "
        f"({software}), bundle <code>results/reference/{inert(ref.file)}</code>. "
        "See [Results across GPUs](../../results/) for every bundle."
    )


def kinds_line(device_type: str, root: Path = RESULTS_DIR) -> str:
    """The one line a page with GPU rows carries in its stamp: which kinds of figure it shows.

    It replaces the per-page "not measured in this build" banner: every GPU row shows a
    prediction, a published figure where a source has one, and a measurement when this
    build has a CUDA GPU or a reference bundle exists.

    >>> kinds_line("cpu", Path("/no/such/results"))
    'GPU figures on this page: predicted, published where a source has one; none measured \
on this build.'
    >>> kinds_line("cuda", Path("/no/such/results")).endswith("measured on this build's GPU.")
    True
    """
    head = "GPU figures on this page: predicted, published where a source has one"
    if device_type in GPU_TYPES:
        return f"{head}; measured on this build's GPU."
    ref = newest_gpu_bundle(root)
    if ref is not None:
        return f"{head}; measured from the reference bundle results/reference/{inert(ref.file)}."
    return f"{head}; none measured on this build."


def kinds_stamp_html(device_type: str, root: Path = RESULTS_DIR) -> str:
    """:func:`kinds_line` as a stamp line (raw HTML, its text escaped)."""
    return f'<div class="gl-stamp gl-gpu-kinds" markdown="0">{kinds_line(device_type, root)}</div>'


@dataclass(frozen=True)
class GpuMeasurements:
    """A suite entry's GPU measurements for a page, and where they come from.

    ``ref`` is the reference bundle they were read from, None when this build's GPU
    measured them (through :func:`gpulesson.site.build_bundle.measure`).
    """

    measurements: tuple[Measurement, ...]
    ref: Sourced | None

    @property
    def machine(self) -> str:
        """Whose GPUs these are, in words: this build's, or the reference bundle's device."""
        if self.ref is None:
            return "this build's machine"
        return f"the bundle's machine ({self.ref.bundle.provenance.device_name})"

    def stamp(self) -> str:
        """The reference bundle's admonition (with a blank line after), or "" for this build's."""
        return "" if self.ref is None else stamp_markdown(self.ref) + "\n\n"


def gpu_measurements(entry: str, root: Path = RESULTS_DIR) -> GpuMeasurements | None:
    """Suite entry ``entry`` on a GPU: this build's CUDA device measures it (once per build,
    through the suite) when the entry runs there, else the newest reference bundle's rows of
    it (a one-GPU build shows a bundle's multi-GPU rows); None when neither.

    >>> gpu_measurements("decode", root=Path("/no/such/results")) is None or build_has_gpu()
    True
    """
    if build_has_gpu() and build_bundle.applies(entry, "cuda"):
        return GpuMeasurements(build_bundle.measure(entry, "cuda"), None)
    ref = newest_gpu_bundle(root)
    if ref is None:
        return None
    rows = tuple(m for m in ref.bundle.measurements if m.entry == entry)
    return GpuMeasurements(rows, ref) if rows else None


def measurement(ref: Sourced, name: str) -> Measurement:
    """The bundle's measurement ``name``; ``ValueError`` naming what the bundle has."""
    found = ref.bundle.measurement(name)
    if found is None:
        names = ", ".join(m.name for m in ref.bundle.measurements)
        raise ValueError(
            f"bundle {ref.file} has no measurement {name!r} (it has: {names}); "
            "run the full suite again or pick another name"
        )
    return found


def publish(ref: Sourced, names: Mapping[str, str]) -> dict[str, float]:
    """Publish bundle measurements as page facts: ``{fact name: measurement name}``.

    Returns the published values. Missing measurements raise ``ValueError``.
    """
    values = {}
    for fact_name, measurement_name in names.items():
        m = measurement(ref, measurement_name)
        facts.publish(fact_name, float(m.value), m.unit)
        values[fact_name] = float(m.value)
    return values


_FIXTURE = (
    Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "bundles" / ("fixture_h100.json")
)
