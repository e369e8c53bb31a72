"""Per-device sizes of the timed measurements: one table that bench, alignment and decode read."""

from __future__ import annotations

import ast

import pytest

from gpulesson.timing import alignment, bench, decode, plans
from tests.conftest import REPO


def test_every_module_builds_its_plans_from_the_one_table():
    for device in plans.DEVICE_KINDS:
        assert bench.plan_for(device) == bench.DevicePlan(**plans.sizes(device, "bench"))
        assert alignment.plan_for(device) == alignment.AlignmentPlan(
            **plans.sizes(device, "alignment")
        )
        for quick, row in ((False, "decode"), (True, "decode_quick")):
            sizes = plans.sizes(device, row)
            plan = decode.plan_for(device, quick=quick)
            assert plan.config == decode.GPT2Config(**sizes.pop("config"))
            assert {k: getattr(plan, k) for k in sizes} == sizes
    assert set(bench.PLANS) == set(alignment.PLANS) == set(plans.DEVICE_KINDS)
    assert set(decode.PLANS) == {(d, q) for d in plans.DEVICE_KINDS for q in (False, True)}


def test_an_edit_to_the_table_reaches_no_plan_already_built():
    copy = plans.sizes("cpu", "bench")
    copy["illusion_n"] = 1
    assert plans.sizes("cpu", "bench")["illusion_n"] == bench.plan_for("cpu").illusion_n != 1


def test_the_quick_decode_sweep_is_smaller_than_the_full_one():
    for device in plans.DEVICE_KINDS:
        full, quick = decode.plan_for(device), decode.plan_for(device, quick=True)
        assert len(quick.batches) < len(full.batches) and quick.matmul_n <= full.matmul_n


def test_no_timing_module_keeps_its_own_per_device_sizes():
    for name in ("bench", "alignment", "decode"):
        tree = ast.parse((REPO / "gpulesson" / "timing" / f"{name}.py").read_text())
        literals = [
            node
            for node in ast.walk(tree)
            if isinstance(node, ast.Dict)
            and (keys := node.keys)
            and any(isinstance(k, ast.Constant) and k.value in plans.DEVICE_KINDS for k in keys)
        ]
        assert not literals, f"{name}.py has a per-device dict at line {literals[0].lineno}"


@pytest.mark.parametrize(
    ("device", "measurement", "message"),
    [
        ("tpu", "bench", "device='tpu' must be cpu, mps or cuda"),
        ("cpu", "sweep", "measurement='sweep' must be one of bench, alignment, decode"),
    ],
)
def test_an_unknown_device_or_measurement_is_named(device, measurement, message):
    with pytest.raises(ValueError, match=message):
        plans.sizes(device, measurement)
