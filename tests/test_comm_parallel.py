"""Tensor-parallel all-reduce bytes and the pipeline bubble (gpulesson.memory.parallel)."""

from __future__ import annotations

import pytest

from gpulesson.course.multi_gpu import bubble_markdown, zero_markdown
from gpulesson.memory import parallel
from gpulesson.memory.comm import ring_all_reduce_bytes, zero_tradeoffs


def test_megatron_sends_four_layer_outputs_per_layer_per_micro_batch():
    step = parallel.tensor_parallel_step(
        batch=2, seq=2048, hidden=4096, layers=10, tensor_parallel=4, bytes_per_value=2
    )
    message = 2 * 2048 * 4096 * 2
    assert step.message_bytes == message and step.all_reduces == 40
    assert step.sent_bytes == round(40 * ring_all_reduce_bytes(message, 4))
    # Twice the layers, twice the bytes; the link's share grows toward 2 with t.
    deeper = parallel.tensor_parallel_step(
        batch=2, seq=2048, hidden=4096, layers=20, tensor_parallel=4, bytes_per_value=2
    )
    assert deeper.sent_bytes == 2 * step.sent_bytes


def test_tensor_parallel_needs_at_least_two_gpus():
    with pytest.raises(ValueError, match="tensor_parallel=1 must be a whole number, at least 2"):
        parallel.tensor_parallel_step(
            batch=1, seq=1, hidden=1, layers=1, tensor_parallel=1, bytes_per_value=2
        )


@pytest.mark.parametrize(("p", "m"), [(1, 1), (2, 1), (4, 8), (8, 64), (16, 3)])
def test_the_bubble_is_idle_slots_over_all_slots(p, m):
    # A step of m micro-batches on p stages takes m + p - 1 slots; each stage works m.
    assert parallel.bubble_fraction(stages=p, microbatches=m) == pytest.approx(
        (m + p - 1 - m) / (m + p - 1)
    )


def test_more_micro_batches_shrink_the_bubble_and_more_stages_grow_it():
    rows = parallel.bubble_table((2, 8), (1, 4, 32))
    for row in rows:
        shares = [f for _, f in row.fractions]
        assert shares == sorted(shares, reverse=True)
    assert all(a < b for (_, a), (_, b) in zip(rows[0].fractions, rows[1].fractions, strict=True))
    assert bubble_markdown(rows).splitlines()[0] == "| stages (p) | m = 1 | m = 4 | m = 32 |"


def test_microbatches_for_is_the_smallest_count_under_the_target():
    m = parallel.microbatches_for(0.05, 4)
    assert m == 57
    assert parallel.bubble_fraction(stages=4, microbatches=m) <= 0.05
    assert parallel.bubble_fraction(stages=4, microbatches=m - 1) > 0.05
    with pytest.raises(ValueError, match="bubble=1.5 must be a share above 0 and below 1"):
        parallel.microbatches_for(1.5, 4)


def test_the_zero_table_divides_memory_and_times_the_bytes_on_a_link():
    rows = zero_tradeoffs({"params": 7e9, "preset": "amp"}, 8, link_gpu="h100-sxm")
    assert [r.budget.total_bytes for r in rows] == sorted(
        (r.budget.total_bytes for r in rows), reverse=True
    )
    assert rows[3].link_time.seconds == pytest.approx(73.5e9 / 450e9)
    assert "| 3 (FSDP full shard) | 14.00 |" in zero_markdown(rows)
    with pytest.raises(ValueError, match="does not train"):
        zero_tradeoffs({"params": 7e9, "preset": "infer-fp16"}, 8)
