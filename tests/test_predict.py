"""Predictions from the datasheets: each formula on a case checked by hand, units, errors."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from gpulesson.results import bundle, predict
from gpulesson.results.bundle import Measurement

FIXTURES = Path(__file__).parent / "fixtures" / "bundles"


def h100_fixture() -> bundle.Bundle:
    return bundle.load(FIXTURES / "fixture_h100.json")


def test_matmul_time_is_the_slower_of_compute_and_memory():
    # A100 80GB, bf16: 312e12 FLOP/s dense, 2039e9 B/s.
    big = predict.matmul_time("a100-80gb", 4096, 4096, 4096, "bf16")
    assert big.value == pytest.approx(2 * 4096**3 / 312e12)  # compute-bound
    assert "compute-bound" in big.arithmetic
    small = predict.matmul_time("a100-80gb", 64, 64, 64, "bf16")
    assert small.value == pytest.approx(3 * 64 * 64 * 2 / 2039e9)  # memory-bound
    assert "memory-bound" in small.arithmetic
    odd = predict.matmul_time("a100-80gb", 1, 8192, 8192, "fp32")  # a matrix-vector product
    assert odd.value == pytest.approx((8192 + 8192 * 8192 + 8192) * 4 / 2039e9)
    assert {i.name for i in big.inputs} >= {"dense bf16 peak", "memory bandwidth"}


def test_matmul_rate_is_flops_over_the_roofline_time():
    rate = predict.matmul_rate("h100-sxm", 8192, "bf16")
    assert rate.unit == "FLOP/s"
    assert rate.value == pytest.approx(1979e12 / 2)  # compute-bound: the dense peak
    small = predict.matmul_rate("h100-sxm", 256, "bf16")
    assert small.value == pytest.approx(256 * 3.35e12 / 3)  # 2n^3 / (3n^2 x 2 B / bandwidth)


def test_the_sparsity_figure_is_halved_and_said_so():
    p = predict.peak_rate("h100-sxm", "bf16")
    assert p.value == pytest.approx(989.5e12)
    assert "halved" in p.inputs[0].source and "1,979" in p.inputs[0].source
    assert p.inputs[0].url.startswith("https://")


def test_copy_bandwidth_is_the_datasheet_figure_in_bytes_per_second():
    p = predict.copy_bandwidth("rtx-4090")
    assert (p.value, p.unit, p.kind) == (1008e9, "B/s", "upper bound")


def test_host_copy_uses_one_direction_of_the_stated_pcie_figure():
    p = predict.host_copy_time("h100-sxm", 64e9)
    assert p.value == pytest.approx(1.0)  # 64 GB at 128 GB/s / 2
    assert "PCIe Gen5: 128GB/s" in p.inputs[0].source
    with pytest.raises(ValueError, match="no PCIe figure"):
        predict.host_copy_time("rtx-4090", 1e9)
    with pytest.raises(ValueError, match="copy_bytes=0 must be a positive number"):
        predict.host_copy_time("h100-sxm", 0)


def test_decode_is_bounded_by_bandwidth_over_bytes_per_token():
    p = predict.decode_tokens_per_s("h100-sxm", 3.35e9)
    assert (p.value, p.unit) == (pytest.approx(1000.0), "tokens/s")


def test_all_reduce_uses_the_ring_formula_over_one_direction():
    p = predict.all_reduce_time("a100-80gb", 3e9, 4)
    assert p.value == pytest.approx(2 * 3 / 4 * 3e9 / 300e9)  # NVLink 600 GB/s, half each way
    two = predict.all_reduce_time("a100-80gb", 3e9, 2)
    assert two.value == pytest.approx(3e9 / 300e9)
    with pytest.raises(ValueError, match="gives no interconnect"):
        predict.all_reduce_time("t4", 1e9, 2)


def test_training_step_time_is_6nd_over_peak_times_mfu():
    p = predict.train_step_time("a100-80gb", 1e9, 1e4, "bf16", 0.5)
    assert p.value == pytest.approx(6e13 / (312e12 * 0.5))
    t4 = predict.train_step_time("t4", 1e9, 1e4, "bf16", 0.5)  # no bf16: its fp16 peak
    assert t4.value == pytest.approx(6e13 / (65e12 * 0.5))
    with pytest.raises(ValueError, match="mfu=40"):
        predict.train_step_time("a100-80gb", 1e9, 1e4, "bf16", 40)


def test_launch_overhead_is_the_published_range():
    p = predict.launch_overhead("a100-80gb")
    assert p.low < p.high and p.value == p.high
    assert all(i.url.startswith("https://github.com/") for i in p.inputs)
    assert "another GPU" in p.model  # nobody published an A100 launch here
    graph = predict.launch_overhead("a100-80gb", "launch_overhead.cuda_graph")
    assert graph.value == pytest.approx(0.58e-6)


def test_unknown_devices_and_dtypes_are_refused_with_the_fix():
    for call in (
        lambda: predict.copy_bandwidth("h300"),
        lambda: predict.matmul_time("h300", 1, 1, 1, "bf16"),
        lambda: predict.predict_for("h300", "memory_bandwidth"),
        lambda: predict.launch_overhead("h300"),
    ):
        with pytest.raises(ValueError, match="unknown GPU id 'h300': use one of t4"):
            call()
    with pytest.raises(ValueError, match="gives no bf16 peak; use one of fp32, fp16"):
        predict.matmul_time("t4", 8, 8, 8, "bf16")
    with pytest.raises(ValueError, match="dtype 'int8' must be one of"):
        predict.matmul_time("h100-sxm", 8, 8, 8, "int8")
    with pytest.raises(ValueError, match="n=0 must be a whole number"):
        predict.matmul_time("h100-sxm", 8, 0, 8, "bf16")


def test_suite_names_map_to_a_model_or_say_there_is_none():
    assert predict.predict_for("h100-sxm", "memory_bandwidth").value == pytest.approx(3.35e12)
    assert predict.predict_for("h100-sxm", "matmul.fp32.n4096").unit == "FLOP/s"
    assert predict.predict_for("h100-sxm", "h2d.pinned").value == pytest.approx(64e9)
    assert predict.predict_for("h100-sxm", "all_reduce.bus_bandwidth").value == pytest.approx(450e9)
    train = predict.predict_for("h100-sxm", "train_step.bf16")
    assert "MFU <= 1" in train.model and train.value == pytest.approx(989.5e12)
    for figure in ("profile_step.busy_share", "cuda_context", "fusion.eager", "stopwatch.naive"):
        none = predict.predict_for("h100-sxm", figure)
        assert isinstance(none, predict.NoModel) and none.reason.startswith("no model")
    pcie = predict.predict_for("t4", "h2d.pinned")
    assert isinstance(pcie, predict.NoModel) and pcie.reason.startswith("no PCIe figure")


def measurement(name: str, value: float, unit: str, **params) -> Measurement:
    dtype = params.pop("dtype", None)
    return Measurement(
        name=name,
        entry=name.split(".")[0],
        unit=unit,
        value=value,
        samples=(value,),
        samples_unit=unit,
        dtype=dtype,
        params=params,
    )


def test_bundle_rows_use_their_params():
    gpt = measurement("gpt_memory.x", 1.1e9, "bytes", estimate_bytes=1e9, estimate_phase="step")
    p = predict.predict_measurement("h100-sxm", gpt)
    assert (p.value, p.unit) == (1e9, "bytes")
    decode = measurement("decode.b1", 100.0, "tokens/s", parameters=1e9, dtype="bf16")
    p = predict.predict_measurement("h100-sxm", decode)
    assert p.value == pytest.approx(3.35e12 / 2e9)
    rate = measurement("decode.matmul", 5e14, "FLOP/s", dtype="bf16")
    assert predict.predict_measurement("h100-sxm", rate).value == pytest.approx(989.5e12)
    batch = predict.predict_measurement("h100-sxm", measurement("decode.b8", 1.0, "tokens/s"))
    assert isinstance(batch, predict.NoModel)


def test_compare_is_measured_over_predicted_in_one_unit():
    c = predict.compare(1.675e12, "B/s", predict.copy_bandwidth("h100-sxm"))
    assert c.ratio == pytest.approx(0.5)
    with pytest.raises(ValueError, match="compare figures in one unit"):
        predict.compare(1.0, "FLOP/s", predict.copy_bandwidth("h100-sxm"))
    with pytest.raises(ValueError, match="measured=-1 must be a positive number"):
        predict.compare(-1, "B/s", predict.copy_bandwidth("h100-sxm"))


def test_table_rows_one_per_reference_gpu_with_the_bundle_measured():
    fixture = h100_fixture()
    rows = predict.table_rows("memory_bandwidth", [fixture])
    devices = [r.device for r in rows]
    assert devices[:5] == ["t4", "rtx-4090", "a100-80gb", "h100-sxm", "h200"]
    assert len(devices) == len(set(devices))
    h100 = next(r for r in rows if r.device == "h100-sxm")
    measured = fixture.measurement("memory_bandwidth").value
    assert h100.measured == measured
    assert h100.ratio == pytest.approx(measured / 3.35e12)
    others = [r for r in rows if r.device != "h100-sxm"]
    assert all(r.measured is None and r.ratio is None for r in others)
    a100 = next(r for r in rows if r.device == "a100-80gb")
    assert [p.value for p in a100.published] == [1818.21]  # simllm's A100 HBM roof
    with pytest.raises(AttributeError):
        h100.ratio = 1.0  # frozen


# --- figures with a lesson's params: decode.b1, all_reduce.time, train_step.time ------------

SHEETS = {
    d["id"]: d
    for d in json.loads(
        (Path(predict.__file__).parent / "datasheets.json").read_text(encoding="utf-8")
    )["devices"]
}


def by_hand(figure: str, device: str, params: dict) -> float | None:
    """The model's arithmetic from datasheets.json's stated figures, or None (no input)."""
    d = SHEETS[device]
    if figure == "decode.b1":
        return d["memory_bandwidth_stated_gb_per_s"] * 1e9 / params["bytes_per_token"]
    if figure == "all_reduce.time":
        link = d.get("interconnect")
        if link is None:
            return None
        n = params["gpus"]
        # a PCIe card's NVLink bridge joins pairs: a larger ring runs over PCIe
        pcie_card = "PCIe" in d["name"] and "SXM" not in d["name"]
        nvlink = None if pcie_card and n > 2 else link.get("nvlink_stated_gb_per_s")
        stated = nvlink or link["pcie_stated_gb_per_s"]
        return 2 * (n - 1) / n * params["message_bytes"] / (stated * 1e9 / 2)
    for dtype in ("bf16", "fp16"):  # train_step.time: a 16-bit run, bf16 else fp16
        if dtype in d.get("peaks", {}):
            peak = d["peaks"][dtype]
            dense = peak["stated_tflops"] * 1e12 / (2 if peak["with_sparsity"] else 1)
            return params["flops"] / (dense * params["mfu"])
    return None


CASES = [
    ("decode.b1", {"bytes_per_token": 8e9 * 2}),
    ("all_reduce.time", {"message_bytes": 7e9 * 4, "gpus": 8}),
    ("train_step.time", {"flops": 6 * 124e6 * 8192, "mfu": 0.4}),
]


@pytest.mark.parametrize(("figure", "params"), CASES)
def test_parameterised_rows_are_the_models_arithmetic_on_every_gpu_that_has_the_input(
    figure, params
):
    rows = predict.table_rows(figure, params=params)
    assert [r.device for r in rows][:5] == ["t4", "rtx-4090", "a100-80gb", "h100-sxm", "h200"]
    predicted = 0
    for r in rows:
        expected = by_hand(figure, r.device, params)
        if expected is None:
            assert isinstance(r.predicted, predict.NoModel), r.device
            continue
        assert r.predicted.value == pytest.approx(expected, rel=1e-12), r.device
        assert r.predicted.figure == figure and r.predicted.arithmetic
        assert r.measured is None and r.ratio is None  # no bundle given
        predicted += 1
    assert predicted >= 4


def test_a_gpu_without_the_input_gets_a_row_saying_why():
    ring = {"message_bytes": 28e9, "gpus": 8}
    t4 = predict.predict_for("t4", "all_reduce.time", ring)
    assert isinstance(t4, predict.NoModel)
    assert t4.reason.startswith("no NVLink or PCIe figure: NVIDIA T4 (t4)")
    mac = predict.predict_for("apple-m4-max", "train_step.time", {"flops": 1e15, "mfu": 0.4})
    assert mac.reason.startswith("no bf16 or fp16 peak: Apple M4 Max")
    bare = predict.predict_for("h100-sxm", "decode.b1")  # the figure needs its params
    assert bare.reason == "no model without params: decode.b1 needs bytes_per_token"


def test_train_step_time_takes_6nd_or_its_parts_and_the_dtype_picks_the_peak():
    parts = predict.predict_for(
        "h100-sxm", "train_step.time", {"parameters": 124e6, "tokens": 8192, "mfu": 0.4}
    )
    flops = predict.predict_for(
        "h100-sxm", "train_step.time", {"flops": 6 * 124e6 * 8192, "mfu": 0.4}
    )
    assert parts.value == pytest.approx(flops.value)
    assert parts.arithmetic.startswith("6 x 1.24e+08 x 8192 = 6.095e+12 FLOP / (dense bf16")
    fp32 = predict.predict_for(
        "h100-sxm", "train_step.time", {"flops": 67e12, "mfu": 0.5, "dtype": "fp32"}
    )
    assert fp32.value == pytest.approx(2.0)  # 67 TFLOP/s fp32 at half


@pytest.mark.parametrize(
    ("figure", "params", "message"),
    [
        ("decode.b1", {"bytes_per_tokens": 1e9}, "unknown params bytes_per_tokens"),
        ("decode.b1", {"bytes_per_token": 0}, r"params\['bytes_per_token'\]=0 must be a positive"),
        ("all_reduce.time", {"message_bytes": 1e9}, "params need gpus"),
        ("all_reduce.time", {"message_bytes": 1e9, "gpus": 2.5}, "whole number of GPUs"),
        ("train_step.time", {"flops": 1e15, "mfu": 40}, "for 40% write 0.4"),
        ("train_step.time", {"flops": 1e15, "mfu": 0.4, "dtype": "int4"}, "must be one of"),
        ("train_step.time", {"flops": 1e15, "tokens": 8, "mfu": 0.4}, "not a mix"),
        ("memory_bandwidth", {"bytes": 1}, "takes no params"),
    ],
)
def test_a_lessons_params_mistake_fails_with_the_fix(figure, params, message):
    with pytest.raises(ValueError, match=message):
        predict.table_rows(figure, params=params)


def with_measurements(*extra: Measurement) -> bundle.Bundle:
    b = h100_fixture()
    return dataclasses.replace(b, measurements=(*b.measurements, *extra))


def test_a_bundle_measurement_counts_only_with_the_same_figure_and_params():
    ring = {"message_bytes": 28e9, "gpus": 8}
    measured = measurement("all_reduce.time", 0.15, "s", message_bytes=28e9, gpus=8)
    other_size = measurement("all_reduce.time", 0.01, "s", message_bytes=1e9, gpus=8)
    rows = predict.table_rows("all_reduce.time", [with_measurements(other_size, measured)], ring)
    h100 = next(r for r in rows if r.device == "h100-sxm")
    assert h100.measured == 0.15 and h100.measured_unit == "s"
    assert h100.ratio == pytest.approx(0.15 / by_hand("all_reduce.time", "h100-sxm", ring))
    assert h100.params == (("gpus", 8), ("message_bytes", 28e9))
    four = predict.table_rows("all_reduce.time", [with_measurements(other_size)], ring)
    assert next(r for r in four if r.device == "h100-sxm").measured is None
    # a decode row of the suite (parameters and dtype) matches bytes per token = both
    decode = measurement("decode.b1", 150.0, "tokens/s", parameters=8e9, dtype="fp16")
    rows = predict.table_rows("decode.b1", [with_measurements(decode)], {"bytes_per_token": 16e9})
    h100 = next(r for r in rows if r.device == "h100-sxm")
    assert h100.ratio == pytest.approx(150.0 / (3350e9 / 16e9))
    rows = predict.table_rows("decode.b1", [with_measurements(decode)], {"bytes_per_token": 8e9})
    assert all(r.measured is None for r in rows)
