"""gpulesson.precision.quantize_error: each format's cast, its error against fp32, the guards."""

from __future__ import annotations

import pytest
import torch

from gpulesson.course.mixed_precision import low_precision_markdown
from gpulesson.precision import quantize_error as q
from gpulesson.precision.formats import LOW_PRECISION_FORMATS, low_precision_max


def test_e2m1_rounding_lands_on_the_grid_and_saturates():
    x = torch.linspace(-8, 8, 1001)
    r = q.round_e2m1(x)
    assert set(r.abs().unique().tolist()) <= set(q.E2M1_GRID)
    assert r.abs().max().item() == 6.0
    # nearest: no value moves by more than half the gap around it (1 between 4 and 6)
    inside = x.abs() <= 6
    assert (r[inside] - x[inside]).abs().max().item() <= 1.0 + 1e-6


def test_mx_scales_are_powers_of_two_that_fit_the_block_under_the_format_max():
    blocks = torch.randn(64, 32) * torch.logspace(-3, 3, 64).unsqueeze(1)
    scale = q.pow2_scales(blocks, q.E4M3_EMAX)
    assert torch.equal(torch.log2(scale), torch.log2(scale).round())
    assert ((blocks.abs().amax(dim=1, keepdim=True) / scale) < 2 * 2**q.E4M3_EMAX).all()


@pytest.mark.skipif(not hasattr(torch, "float8_e4m3fn"), reason="torch without fp8 dtypes")
def test_fp8_per_tensor_round_trip_is_within_its_resolution():
    x = torch.randn(4096)
    back = q.fp8_per_tensor(x, "float8_e4m3fn", q.E4M3_MAX)
    # 3 mantissa bits: a relative step of 2^-3, so rounding moves a normal value by <= 2^-4
    big = x.abs() > x.abs().max() / 2**6
    assert ((back[big] - x[big]).abs() / x[big].abs()).max().item() <= 2**-4 + 1e-6
    assert back.abs().max().item() == pytest.approx(x.abs().max().item(), rel=2**-4)


def test_errors_fall_with_bits_and_the_outliers_favour_small_blocks():
    t = q.gpt2_mlp_tensors(tokens=32)
    w = {e.name: e.relative_error for e in q.quantization_errors(t.weight)}
    a = {e.name: e.relative_error for e in q.quantization_errors(t.outlier_activation)}
    assert w["bf16"] < w["fp8 E4M3 (per tensor)"] < w["fp8 E5M2 (per tensor)"]
    assert w["fp8 E5M2 (per tensor)"] < w["MXFP4 E2M1 (emulated)"]
    assert a["NVFP4 E2M1 (emulated)"] < a["MXFP4 E2M1 (emulated)"]
    assert 2**-10 < w["bf16"] < 2**-8  # 7 mantissa bits: a rounding error under 2^-8 of a value


def test_a_missing_dtype_is_a_row_that_says_so_not_an_error(monkeypatch):
    monkeypatch.delattr(torch, "float8_e5m2")
    rows = {e.name: e for e in q.quantization_errors(torch.linspace(-1, 1, 64))}
    row = rows["fp8 E5M2 (per tensor)"]
    assert not row.available and row.relative_error is None
    assert "needs torch.float8_e5m2" in row.how
    assert rows["bf16"].available


def test_a_tensor_that_does_not_split_into_blocks_is_refused():
    with pytest.raises(ValueError, match="multiple of the block 32"):
        q.mxfp4(torch.ones(33))


def test_the_formats_rows_read_fp8_limits_from_torch_and_fp4_from_the_spec():
    got = {f.name: low_precision_max(f) for f in LOW_PRECISION_FORMATS}
    if hasattr(torch, "float8_e4m3fn"):
        assert got["fp8 E4M3"] == (448.0, "torch.finfo")
        assert got["fp8 E5M2"] == (57344.0, "torch.finfo")
    assert got["MXFP4 (E2M1 elements)"] == (6.0, "specification")
    table = low_precision_markdown()
    for name in ("fp8 E4M3", "fp8 E5M2", "MXFP8", "MXFP4", "NVFP4"):
        assert f"| {name}" in table
    assert "NVIDIA H100 SXM5 80GB [1,979]" in table  # the datasheet's 3,958 with sparsity, halved
    assert "opencompute.org" in table and "arxiv.org/abs/2209.05433" in table
