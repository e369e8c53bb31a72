"""GPU claims checked on a CPU build: each holds on the published rows and fails on a row
that contradicts it (the row is changed in ``published.load`` and the facts recomputed)."""

from __future__ import annotations

import dataclasses

import pytest

from gpulesson.results import published
from gpulesson.site import claims, facts, gpu_claims

# claim key -> (device, figure) of the published row to change, and the contradicting value
# in the row's own unit (what a source would have to print for the claim to be false).
CONTRADICTIONS = {
    "h100_bf16_fraction": ("h100-sxm", "matmul_peak.bf16", 950.0),  # 96% of 989.5
    "b200_bf16_fraction": ("b200", "matmul_peak.bf16", 1400.0),  # 62% of 2250
    "amd_below_nvidia": ("mi300x", "matmul_peak.bf16", 1200.0),  # 92%, above NVIDIA's
    "fp8_fraction": ("h200", "matmul_peak.fp8", 1900.0),  # 96% of 1979
    "fp8_less_than_2x": ("h100-sxm", "matmul_peak.fp8", 700.0),  # below its bf16
    "h100_hbm_fraction": ("h100-pcie", "memory_bandwidth", 1200.0),  # 60% of 2000
    "a100_hbm_fraction": ("a100-80gb", "memory_bandwidth", 2030.0),  # 99.6% of 2039
    "launch_few_us": ("RTX 5070 Ti Laptop (sm_120)", "launch_overhead.eager", 40.0),
    "graph_cheaper": ("RTX 5070 Ti Laptop (sm_120)", "launch_overhead.cuda_graph", 3.0),
    "pinned_near_link": ("Tesla P100-PCIE-16GB", "h2d.pinned", 6000.0),  # MB/s: 38%
    # ms: 5 µs, under 100 x the 0.063 µs that 1 kB takes at PCIe 3.0's 15.75 GB/s
    "small_copy_fixed_cost": ("Tesla V100 PCIe 16GB", "h2d.small_copy_time", 0.005),
    "oversubscribed_um": ("Tesla V100 PCIe 16GB", "unified_memory.triad_oversubscribed", 20.0),
    "busbw_under_nvlink": ("h100-pcie", "all_reduce.bus_bandwidth", 320.0),
    "p2p_under_nvlink": ("h100-sxm", "p2p.unidirectional", 200.0),  # 44% of 450
}


def _numbers() -> dict[str, float]:
    return {name: f.value for name, f in gpu_claims.gpu_facts().items()}


def test_at_least_ten_gpu_claims_each_with_a_contradiction():
    assert len(gpu_claims.CLAIMS) >= 10
    assert set(CONTRADICTIONS) == set(gpu_claims.CLAIMS)


@pytest.mark.parametrize("key", sorted(gpu_claims.CLAIMS))
def test_each_claim_holds_on_the_published_rows(key):
    assert claims.check_rule(gpu_claims.CLAIMS[key].rule, _numbers())


@pytest.mark.parametrize("key", sorted(gpu_claims.CLAIMS))
def test_each_claim_relates_a_published_fact_to_a_prediction_or_cited_figure(key):
    c = gpu_claims.CLAIMS[key]
    values = gpu_claims.gpu_facts()
    kinds = {values[n].kind for n in claims.fact_names(c.rule)}
    assert facts.PUBLISHED in kinds, key
    # another kind, or a cited threshold written into the rule (never a constant vs itself)
    assert kinds - {facts.PUBLISHED} or any(ch.isdigit() for ch in c.rule), key


@pytest.mark.parametrize("key", sorted(CONTRADICTIONS))
def test_each_claim_fails_on_a_contradicting_published_row(key, monkeypatch):
    device, figure, bad = CONTRADICTIONS[key]
    rows = published.load()
    target = [r for r in rows if r.device == device and r.figure == figure]
    assert len(target) == 1
    changed = tuple(dataclasses.replace(r, value=bad) if r is target[0] else r for r in rows)
    monkeypatch.setattr(published, "load", lambda: changed)
    assert not claims.check_rule(gpu_claims.CLAIMS[key].rule, _numbers())


def test_claims_on_a_page_record_the_kinds_of_their_numbers():
    facts.reset()
    facts.begin_page("lessons/why-gpus.md")
    values = gpu_claims.gpu_facts()
    gpu_claims.publish_facts(values)
    out = gpu_claims.claim_markdown(["h100_bf16_fraction", "ours_bf16"], values)
    assert "gl-claim-holds" in out and "Our reference bundle" not in out
    (c,) = claims.claims()
    assert c.status == claims.HOLDS
    assert c.kinds == {"pred.bf16.h100_sxm": "predicted", "pub.bf16.h100_sxm": "published"}


def test_a_bundle_of_ours_adds_measured_claims_checked_on_it():
    from pathlib import Path

    from gpulesson.results.bundle import load

    bundle = load(Path(__file__).parent / "fixtures" / "bundles" / "fixture_h100.json")
    values = gpu_claims.gpu_facts([bundle])
    assert values["ours.bf16"].kind == facts.MEASURED
    facts.reset()
    facts.begin_page("lessons/why-gpus.md")
    gpu_claims.publish_facts(values)
    gpu_claims.claim_markdown(list(gpu_claims.MEASURED_CLAIMS), values)
    checked = claims.claims()
    assert checked and all(c.status in (claims.HOLDS, claims.FAILS) for c in checked)
    assert any(c.kinds.get("ours.bf16") == "measured" for c in checked)


def test_an_unknown_claim_key_names_the_known_ones():
    with pytest.raises(ValueError, match="no GPU claim 'nope': use one of h100_bf16_fraction"):
        gpu_claims.claim_markdown(["nope"], {})


# measured claim -> the bundle figure (fact) to change and a value in its display unit
MEASURED_CONTRADICTIONS = {
    "ours_bf16": ("ours.bf16", 950.0),  # 96% of the H100's 989.5 TFLOP/s
    "ours_copy": ("ours.copy", 1500.0),  # 45% of 3350 GB/s
    "ours_launch": ("ours.launch", 50.0),  # µs
    "ours_pinned": ("ours.h2d_pageable", 60.0),  # GB/s: pageable above pinned
}


def _bundle_numbers() -> dict[str, float]:
    from pathlib import Path

    from gpulesson.results.bundle import load

    bundle = load(Path(__file__).parent / "fixtures" / "bundles" / "fixture_h100.json")
    return {name: f.value for name, f in gpu_claims.gpu_facts([bundle]).items()}


@pytest.mark.parametrize("key", sorted(MEASURED_CONTRADICTIONS))
def test_each_measured_claim_holds_on_the_fixture_and_fails_on_a_contradicting_figure(key):
    assert set(MEASURED_CONTRADICTIONS) == set(gpu_claims.MEASURED_CLAIMS)
    rule = gpu_claims.MEASURED_CLAIMS[key].rule
    numbers = _bundle_numbers()
    assert claims.check_rule(rule, numbers)
    name, bad = MEASURED_CONTRADICTIONS[key]
    assert not claims.check_rule(rule, {**numbers, name: bad})
