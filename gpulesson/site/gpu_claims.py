"""GPU claims a CPU build can check: published measurements against datasheet predictions.

The course says things about GPUs ("the best bf16 matmul reaches 70-90% of the dense
peak", "a launch costs a few microseconds") that used to wait for a GPU build. Each
claim here relates a *published* measurement (``published.json``, someone else's
number, cited) to a *predicted* figure (the datasheet through :mod:`predict`) or to a
cited threshold, so it can fail when the published rows say otherwise. A lesson block
publishes the facts (:func:`publish_facts`, each with its kind) and prints the claims
(:func:`claim_markdown`), which :mod:`gpulesson.site.claims` checks and records.

When a reference bundle of ours exists, :func:`gpu_facts` adds its measurement
(``ours.*``, kind ``measured``) and :data:`MEASURED_CLAIMS` check the same rules on it.

>>> values = gpu_facts()
>>> values["pub.bf16.h100_sxm"].value, values["pred.bf16.h100_sxm"].unit
(794.5, 'TFLOP/s')
>>> sorted(CLAIMS)[:3]
['a100_hbm_fraction', 'amd_below_nvidia', 'b200_bf16_fraction']
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gpulesson.results import predict, published
from gpulesson.results.bundle import Bundle
from gpulesson.site import facts
from gpulesson.site.claims import claim

# PCIe 3.0: 8 GT/s per lane, 128b/130b encoding, x16 lanes (PCI-SIG, PCI Express Base
# Specification 3.0): 8e9 x 16 x 128 / 130 / 8 bytes per second in one direction.
PCIE3_X16_ONE_WAY_B_PER_S = 8e9 * 16 * 128 / 130 / 8
PCIE3_SOURCE = "PCI-SIG PCI Express Base Specification 3.0: 8 GT/s per lane, 128b/130b"


@dataclass(frozen=True)
class GpuFact:
    """One number a GPU claim rests on, with its unit, kind and where it comes from."""

    value: float
    unit: str
    kind: str  # facts.PUBLISHED, facts.PREDICTED, facts.CONSTANT or facts.MEASURED
    source: str


#: Units a reader reads (the bundle unit, its display unit, the factor between them).
_DISPLAY = {"FLOP/s": ("TFLOP/s", 1e-12), "B/s": ("GB/s", 1e-9), "s": ("µs", 1e6)}


def _shown(value: float, unit: str, kind: str, source: str) -> GpuFact:
    """The fact in the unit a page shows (TFLOP/s, GB/s, µs); other units as they are."""
    shown, factor = _DISPLAY.get(unit, (unit, 1.0))
    return GpuFact(value * factor, shown, kind, source)


def _pub(device: str, figure: str) -> published.Published:
    rows = [r for r in published.load() if r.device == device and r.figure == figure]
    if not rows:
        raise ValueError(
            f"published.json has no {figure!r} row for {device!r}: the GPU claims need it "
            "(gpulesson/results/published.json)"
        )
    return rows[0]


def _published_fact(device: str, figure: str) -> GpuFact:
    row = _pub(device, figure)
    return _shown(row.value_in_bundle_unit, row.bundle_unit, facts.PUBLISHED, row.source)


def _predicted_fact(prediction: predict.Prediction | predict.NoModel) -> GpuFact:
    if not isinstance(prediction, predict.Prediction):
        raise ValueError(f"no prediction for a GPU claim: {prediction.reason}")
    return _shown(prediction.value, prediction.unit, facts.PREDICTED, prediction.arithmetic)


_MAMF_NVIDIA = ("h100-sxm", "b200")  # NVIDIA rows of the MAMF bf16 table with a datasheet
_FP8 = ("h100-sxm", "h200", "b200")


def _key(device: str) -> str:
    return device.replace("-", "_")


def gpu_facts(bundles: Iterable[Bundle] = ()) -> dict[str, GpuFact]:
    """Every fact the GPU claims use: published rows, datasheet predictions, cited constants.

    A bundle of ours adds ``ours.<figure>.<device>`` (measured) and the matching prediction.
    """
    out: dict[str, GpuFact] = {}
    for device in (*_MAMF_NVIDIA, "mi300x"):
        out[f"pub.bf16.{_key(device)}"] = _published_fact(device, "matmul_peak.bf16")
        out[f"pred.bf16.{_key(device)}"] = _predicted_fact(
            predict.predict_for(device, "matmul_peak.bf16")
        )
    for device in _FP8:
        out[f"pub.fp8.{_key(device)}"] = _published_fact(device, "matmul_peak.fp8")
        out[f"pred.fp8.{_key(device)}"] = _predicted_fact(
            predict.predict_for(device, "matmul_peak.fp8")
        )
    out["pred.bf16.h200"] = _predicted_fact(predict.predict_for("h200", "matmul_peak.bf16"))
    for device in ("h100-pcie", "a100-80gb"):
        out[f"pub.copy.{_key(device)}"] = _published_fact(device, "memory_bandwidth")
        out[f"pred.copy.{_key(device)}"] = _predicted_fact(
            predict.predict_for(device, "memory_bandwidth")
        )
    launch = "RTX 5070 Ti Laptop (sm_120)"
    out["pub.launch.eager"] = _published_fact(launch, "launch_overhead.eager")
    out["pub.launch.graph"] = _published_fact(launch, "launch_overhead.cuda_graph")
    out["pred.matmul256.h100_sxm"] = _predicted_fact(
        predict.matmul_time("h100-sxm", 256, 256, 256, "bf16")
    )
    out["pub.h2d.pinned_p100"] = _published_fact("Tesla P100-PCIE-16GB", "h2d.pinned")
    out["pub.h2d.small_v100"] = _published_fact("Tesla V100 PCIe 16GB", "h2d.small_copy_time")
    out["pub.um.oversubscribed_v100"] = _published_fact(
        "Tesla V100 PCIe 16GB", "unified_memory.triad_oversubscribed"
    )
    out["cited.pcie3_x16"] = _shown(PCIE3_X16_ONE_WAY_B_PER_S, "B/s", facts.CONSTANT, PCIE3_SOURCE)
    out["pub.busbw.h100_pcie"] = _published_fact("h100-pcie", "all_reduce.bus_bandwidth")
    out["pred.link.h100_pcie"] = _predicted_fact(
        predict.predict_for("h100-pcie", "all_reduce.bus_bandwidth")
    )
    out["pub.p2p.h100_sxm"] = _published_fact("h100-sxm", "p2p.unidirectional")
    out["pred.link.h100_sxm"] = _predicted_fact(
        predict.predict_for("h100-sxm", "all_reduce.bus_bandwidth")
    )
    for b in bundles:
        sheet = b.datasheet
        if sheet is None:
            continue
        pairs = (
            ("bf16", "matmul_peak.bf16"),
            ("copy", "memory_bandwidth"),
            ("h2d_pinned", "h2d.pinned"),
        )
        for short, figure in pairs:
            m = b.measurement(figure)
            p = predict.predict_for(sheet.id, figure)
            if m is None or not isinstance(p, predict.Prediction) or m.unit != p.unit:
                continue
            out[f"ours.{short}"] = _shown(float(m.value), m.unit, facts.MEASURED, sheet.id)
            out[f"ours_pred.{short}"] = _predicted_fact(p)
        pageable = b.measurement("h2d.pageable")
        if pageable is not None and pageable.unit == "B/s":
            out["ours.h2d_pageable"] = _shown(
                float(pageable.value), "B/s", facts.MEASURED, sheet.id
            )
        m = b.measurement("launch_overhead.eager")
        if m is not None and m.unit == "s":
            out["ours.launch"] = _shown(float(m.value), m.unit, facts.MEASURED, sheet.id)
    return out


@dataclass(frozen=True)
class GpuClaim:
    """A sentence about GPUs and the rule that checks it against :func:`gpu_facts`."""

    text: str
    rule: str


CLAIMS: dict[str, GpuClaim] = {
    "h100_bf16_fraction": GpuClaim(
        "In Bekman's MAMF table the best bf16 matmul on an H100 SXM reaches "
        "{pub.bf16.h100_sxm:.0f} TFLOP/s, between 70% and 90% of the dense datasheet peak "
        "({pred.bf16.h100_sxm:.1f} TFLOP/s).",
        "0.7 * pred.bf16.h100_sxm <= pub.bf16.h100_sxm <= 0.9 * pred.bf16.h100_sxm",
    ),
    "b200_bf16_fraction": GpuClaim(
        "On a B200 the same table's best bf16 matmul, {pub.bf16.b200:.0f} TFLOP/s, is again "
        "between 70% and 90% of the dense peak ({pred.bf16.b200:.0f} TFLOP/s): a new "
        "generation does not close the gap to its datasheet.",
        "0.7 * pred.bf16.b200 <= pub.bf16.b200 <= 0.9 * pred.bf16.b200",
    ),
    "amd_below_nvidia": GpuClaim(
        "An MI300X reaches {pub.bf16.mi300x:.0f} TFLOP/s of its {pred.bf16.mi300x:.0f} TFLOP/s "
        "dense bf16 peak: a smaller share than either NVIDIA GPU above, so a datasheet "
        "peak is a poor guide across vendors.",
        "pub.bf16.mi300x / pred.bf16.mi300x < "
        "min(pub.bf16.h100_sxm / pred.bf16.h100_sxm, pub.bf16.b200 / pred.bf16.b200)",
    ),
    "fp8_fraction": GpuClaim(
        "fp8 matmuls land further from their peak: {pub.fp8.h100_sxm:.0f} TFLOP/s on an H100 "
        "SXM, {pub.fp8.h200:.0f} on an H200 and {pub.fp8.b200:.0f} TFLOP/s on a B200, each between "
        "65% and 85% of the dense fp8 datasheet figure.",
        "0.65 * pred.fp8.h100_sxm <= pub.fp8.h100_sxm <= 0.85 * pred.fp8.h100_sxm "
        "and 0.65 * pred.fp8.h200 <= pub.fp8.h200 <= 0.85 * pred.fp8.h200 "
        "and 0.65 * pred.fp8.b200 <= pub.fp8.b200 <= 0.85 * pred.fp8.b200",
    ),
    "fp8_less_than_2x": GpuClaim(
        "The datasheet doubles the rate from bf16 to fp8; measured, an H100 SXM gains "
        "{pub.fp8.h100_sxm:.0f} against {pub.bf16.h100_sxm:.0f} TFLOP/s: more than bf16, "
        "less than twice it.",
        "pub.bf16.h100_sxm < pub.fp8.h100_sxm and pub.fp8.h100_sxm / pub.bf16.h100_sxm < "
        "pred.fp8.h100_sxm / pred.bf16.h100_sxm",
    ),
    "h100_hbm_fraction": GpuClaim(
        "A published copy kernel (gpu-benches' scale) moves {pub.copy.h100_pcie:.0f} GB/s on "
        "an H100 PCIe, 80% to 95% of its {pred.copy.h100_pcie:.0f} GB/s datasheet bandwidth.",
        "0.8 * pred.copy.h100_pcie <= pub.copy.h100_pcie <= 0.95 * pred.copy.h100_pcie",
    ),
    "a100_hbm_fraction": GpuClaim(
        "An A100 80GB's measured HBM roof, {pub.copy.a100_80gb:.0f} GB/s, is likewise 80% to "
        "95% of the datasheet's {pred.copy.a100_80gb:.0f} GB/s.",
        "0.8 * pred.copy.a100_80gb <= pub.copy.a100_80gb <= 0.95 * pred.copy.a100_80gb",
    ),
    "launch_few_us": GpuClaim(
        "A published chain of empty kernels costs {pub.launch.eager:.2f} µs per eager launch: "
        "a few microseconds (1 to 10), more than the roofline's "
        "{pred.matmul256.h100_sxm:.2f} µs for a whole 256x256 bf16 matmul on an H100.",
        "1 <= pub.launch.eager <= 10 and pub.launch.eager > pred.matmul256.h100_sxm",
    ),
    "graph_cheaper": GpuClaim(
        "Replayed from a CUDA graph, the same kernels cost {pub.launch.graph:.2f} µs each, "
        "under a microsecond and less than a fifth of the eager launch.",
        "pub.launch.graph < 1 and pub.launch.graph < pub.launch.eager / 5",
    ),
    "pinned_near_link": GpuClaim(
        "A pinned host-to-device copy (gearshifft, P100 on PCIe 3.0) moves "
        "{pub.h2d.pinned_p100:.2f} GB/s, 70% to 100% of the link's {cited.pcie3_x16:.2f} GB/s "
        "one-way rate.",
        "0.7 * cited.pcie3_x16 <= pub.h2d.pinned_p100 <= cited.pcie3_x16",
    ),
    "small_copy_fixed_cost": GpuClaim(
        "A 1 kB host-to-device copy takes {pub.h2d.small_v100:.0f} µs (gpu-benches, V100): "
        "over 100 times what the PCIe 3.0 rate alone predicts for 1 kB, so small copies "
        "pay a fixed cost, not bandwidth.",
        # 1 kB at x GB/s takes 1e3 B / (x * 1e9 B/s) = 1e-6 / x s = 1 / x µs
        "pub.h2d.small_v100 > 100 * 1 / cited.pcie3_x16",
    ),
    "oversubscribed_um": GpuClaim(
        "Unified memory larger than the GPU runs a STREAM triad at "
        "{pub.um.oversubscribed_v100:.0f} GB/s (gpu-benches, V100): below even the PCIe 3.0 "
        "link's {cited.pcie3_x16:.2f} GB/s, because pages migrate on demand.",
        "pub.um.oversubscribed_v100 < cited.pcie3_x16",
    ),
    "busbw_under_nvlink": GpuClaim(
        "nccl-tests' all-reduce bus bandwidth on two NVLinked H100 PCIe reached "
        "{pub.busbw.h100_pcie:.0f} GB/s, under one direction of the NVLink datasheet figure "
        "({pred.link.h100_pcie:.0f} GB/s).",
        "pub.busbw.h100_pcie < pred.link.h100_pcie",
    ),
    "p2p_under_nvlink": GpuClaim(
        "NVIDIA's P2P test on HGX H100 reached {pub.p2p.h100_sxm:.0f} GB/s in one direction: "
        "75% to 100% of the {pred.link.h100_sxm:.0f} GB/s NVLink datasheet figure.",
        "0.75 * pred.link.h100_sxm <= pub.p2p.h100_sxm <= pred.link.h100_sxm",
    ),
}

#: The same rules checked against a bundle of ours, when one exists.
MEASURED_CLAIMS: dict[str, GpuClaim] = {
    "ours_bf16": GpuClaim(
        "Our reference bundle's best bf16 matmul, {ours.bf16:.0f} TFLOP/s, is, like the MAMF "
        "table's, between 70% and 90% of its dense datasheet peak ({ours_pred.bf16:.1f} "
        "TFLOP/s).",
        "0.7 * ours_pred.bf16 <= ours.bf16 <= 0.9 * ours_pred.bf16",
    ),
    "ours_copy": GpuClaim(
        "Our reference bundle's copy bandwidth, {ours.copy:.0f} GB/s, is, like gpu-benches', "
        "80% to 95% of its datasheet bandwidth ({ours_pred.copy:.0f} GB/s).",
        "0.8 * ours_pred.copy <= ours.copy <= 0.95 * ours_pred.copy",
    ),
    "ours_launch": GpuClaim(
        "Our reference bundle's eager launch costs {ours.launch:.2f} µs: a few microseconds "
        "(1 to 10), as published.",
        "1 <= ours.launch <= 10",
    ),
    "ours_pinned": GpuClaim(
        "Our reference bundle's pinned copy, {ours.h2d_pinned:.1f} GB/s, beats its pageable "
        "one ({ours.h2d_pageable:.1f} GB/s) and stays under one direction of the PCIe link "
        "({ours_pred.h2d_pinned:.0f} GB/s).",
        "ours.h2d_pageable < ours.h2d_pinned <= ours_pred.h2d_pinned",
    ),
}


#: Which measured claim checks the same rule as a published one, on a bundle of ours.
MEASURED_FOR = {
    "h100_bf16_fraction": "ours_bf16",
    "h100_hbm_fraction": "ours_copy",
    "launch_few_us": "ours_launch",
    "pinned_near_link": "ours_pinned",
}


def with_measured(keys: Iterable[str]) -> list[str]:
    """``keys`` with, after each, the measured claim that checks it on a bundle of ours.

    >>> with_measured(["launch_few_us", "graph_cheaper"])
    ['launch_few_us', 'ours_launch', 'graph_cheaper']
    """
    out: list[str] = []
    for key in keys:
        out.append(key)
        if key in MEASURED_FOR:
            out.append(MEASURED_FOR[key])
    return out


def publish_facts(values: Mapping[str, GpuFact]) -> None:
    """Publish the facts on the page being built, each with its kind."""
    for name, f in values.items():
        facts.publish(name, f.value, f.unit, kind=f.kind)


def claim_markdown(keys: Iterable[str], values: Mapping[str, GpuFact]) -> str:
    """Check the claims ``keys`` against facts already published; their Markdown, one a line.

    Measured claims whose facts are absent (no bundle of ours) are left out.
    """
    lines = []
    for key in keys:
        if key in MEASURED_CLAIMS:
            c = MEASURED_CLAIMS[key]
            if not all(n.split(":")[0] in values for n in _needed(c)):
                continue
        elif key in CLAIMS:
            c = CLAIMS[key]
        else:
            known = ", ".join([*CLAIMS, *MEASURED_CLAIMS])
            raise ValueError(f"no GPU claim {key!r}: use one of {known}")
        lines.append(claim(c.text, c.rule))
    return "\n\n".join(lines)


def _needed(c: GpuClaim) -> list[str]:
    from gpulesson.site.claims import fact_names, text_fields

    return [*fact_names(c.rule), *text_fields(c.text)]
