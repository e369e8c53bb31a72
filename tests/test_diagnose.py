"""gpulesson.errors.diagnose: every kind and wording in the corpus, the verdict rules, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpulesson.errors import diagnose as dg
from gpulesson.errors import examples as error_examples
from gpulesson.errors import fix_ladder
from gpulesson.errors import render as diagnose_render
from gpulesson.units import GIB, MIB

CORPUS = Path(__file__).resolve().parent / "data" / "errors"


def b(number: float, unit: str) -> int:
    return dg.to_bytes(str(number), unit)


# file -> the fields the diagnosis must have. Byte values are the message's numbers.
EXPECTED: dict[str, dict[str, object]] = {
    "cuda_2x_exhaustion.txt": dict(
        kind="cuda_oom",
        verdict="exhaustion",
        requested_bytes=4 * GIB,
        free_bytes=b(3.49, "GiB"),
        total_bytes=b(10.56, "GiB"),
        process_bytes=b(7.06, "GiB"),
        allocated_bytes=b(6.78, "GiB"),
        reserved_unallocated_bytes=b(97.98, "MiB"),
        device="GPU 0",
    ),
    "cuda_2x_fragmentation.txt": dict(
        kind="cuda_oom",
        verdict="fragmentation",
        requested_bytes=b(3.79, "GiB"),
        reserved_unallocated_bytes=b(6.25, "GiB"),
        total_bytes=b(79.15, "GiB"),
    ),
    "cuda_2x_too_large.txt": dict(
        kind="cuda_oom",
        verdict="too_large_for_device",
        requested_bytes=b(154.84, "GiB"),
        total_bytes=b(23.69, "GiB"),
        free_bytes=b(13.97, "GiB"),
        device="GPU 1",
    ),
    "cuda_2x_shared_gpu.txt": dict(
        kind="cuda_oom",
        verdict="exhaustion",
        requested_bytes=42 * MIB,
        process_bytes=b(3.14, "GiB"),
        free_bytes=b(9.38, "MiB"),
    ),
    "cuda_2x_private_pools.txt": dict(
        kind="cuda_oom",
        verdict="fragmentation",
        requested_bytes=b(1.31, "GiB"),
        allocated_bytes=b(132.82, "GiB"),
        reserved_unallocated_bytes=b(1.43, "GiB"),
        device="GPU 1",
    ),
    "cuda_2x_capped.txt": dict(
        kind="cuda_oom",
        verdict="exhaustion",
        requested_bytes=GIB,
        limit_bytes=8 * GIB,
        free_bytes=b(70.20, "GiB"),
    ),
    "cuda_2x_wrapped.txt": dict(
        kind="cuda_oom",
        verdict="exhaustion",
        requested_bytes=512 * MIB,
        free_bytes=b(111.81, "MiB"),
        total_bytes=b(14.56, "GiB"),
        reserved_unallocated_bytes=b(60.81, "MiB"),
    ),
    "cuda_20_typo.txt": dict(
        kind="cuda_oom",
        verdict="fragmentation",
        requested_bytes=570 * MIB,
        total_bytes=b(79.25, "GiB"),
        free_bytes=b(103.50, "MiB"),
        reserved_unallocated_bytes=b(2.24, "GiB"),
    ),
    "cuda_20_typo_process.txt": dict(
        kind="cuda_oom",
        verdict="exhaustion",
        requested_bytes=b(3.50, "GiB"),
        total_bytes=b(23.64, "GiB"),
        free_bytes=b(1.42, "GiB"),
        process_bytes=None,
    ),
    "cuda_1x_exhaustion.txt": dict(
        kind="cuda_oom",
        verdict="exhaustion",
        requested_bytes=512 * MIB,
        total_bytes=b(11.17, "GiB"),
        allocated_bytes=b(10.55, "GiB"),
        free_bytes=b(142.25, "MiB"),
        reserved_bytes=b(10.58, "GiB"),
    ),
    "cuda_1x_fragmentation.txt": dict(
        kind="cuda_oom",
        verdict="fragmentation",
        requested_bytes=2 * MIB,
        free_bytes=0,
        reserved_unallocated_bytes=b(6.44, "GiB") - b(203.44, "MiB"),
    ),
    "cuda_1x_cached.txt": dict(
        kind="cuda_oom",
        verdict="fragmentation",
        requested_bytes=20 * MIB,
        reserved_unallocated_bytes=b(21.80, "MiB"),
    ),
    "cuda_1x_wrapped.txt": dict(
        kind="cuda_oom",
        verdict="exhaustion",
        requested_bytes=2 * GIB,
        total_bytes=b(3.81, "GiB"),
        free_bytes=b(1.67, "GiB"),
    ),
    "cuda_malloc_async.txt": dict(
        kind="cuda_oom",
        verdict="exhaustion",
        requested_bytes=640 * MIB,
        allocated_bytes=b(9.43, "GiB"),
        total_bytes=b(11.59, "GiB"),
        free_bytes=b(7.12, "MiB"),
        limit_bytes=None,
    ),
    "cuda_runtime_oom.txt": dict(
        kind="cuda_oom",
        verdict="exhaustion",
        requested_bytes=None,
        free_bytes=None,
        total_bytes=None,
    ),
    "mps_oom.txt": dict(
        kind="mps_oom",
        verdict="exhaustion",
        requested_bytes=952 * MIB,
        allocated_bytes=b(11.70, "GiB"),
        other_allocations_bytes=b(14.83, "GiB"),
        limit_bytes=b(27.20, "GiB"),
        total_bytes=None,
    ),
    "mps_oom_legacy_units.txt": dict(
        kind="mps_oom",
        verdict="exhaustion",
        requested_bytes=b(152.30, "MiB"),
        limit_bytes=b(18.13, "GiB"),
    ),
    "mps_oom_too_large.txt": dict(
        kind="mps_oom",
        verdict="exhaustion",
        requested_bytes=b(33.92, "GiB"),
    ),
    "cpu_oom_linux.txt": dict(kind="cpu_oom", verdict="exhaustion", requested_bytes=2359296),
    "cpu_oom_windows.txt": dict(kind="cpu_oom", requested_bytes=GIB),
    "cpu_oom_killed.txt": dict(kind="cpu_oom", requested_bytes=None),
    "cpu_oom_numpy.txt": dict(kind="cpu_oom", requested_bytes=b(3.58, "GiB")),
    "device_assert.txt": dict(kind="device_assert", verdict=None, requested_bytes=None),
    "device_assert_index.txt": dict(kind="device_assert", verdict=None),
    "illegal_memory_access.txt": dict(kind="illegal_memory_access", verdict=None),
    "no_kernel_image.txt": dict(
        kind="no_kernel_image",
        compute_capability="12.0",
        supported_capabilities=("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"),
    ),
    "no_kernel_image_plain.txt": dict(kind="no_kernel_image", compute_capability=None),
    "driver_too_old.txt": dict(kind="driver_too_old", driver_cuda_version="12.4"),
    "no_driver.txt": dict(kind="no_driver", verdict=None),
    "cpu_only_wheel.txt": dict(kind="cpu_only_wheel", verdict=None),
    "unknown.txt": dict(kind="unknown", verdict=None),
}


def test_the_corpus_and_the_table_list_the_same_files():
    assert sorted(p.name for p in CORPUS.glob("*.txt")) == sorted(EXPECTED)


def test_the_corpus_covers_every_kind_and_verdict():
    assert {e["kind"] for e in EXPECTED.values()} == set(dg.KINDS)
    assert {e.get("verdict") for e in EXPECTED.values()} >= set(dg.VERDICTS)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_message(name: str):
    d = dg.diagnose((CORPUS / name).read_text())
    for field, expected in EXPECTED[name].items():
        assert getattr(d, field) == expected, f"{name}: {field}"
    assert d.steps, "every diagnosis says what to do"


def test_the_three_cuda_wordings_are_named():
    assert "1.x" in dg.diagnose((CORPUS / "cuda_1x_exhaustion.txt").read_text()).wording
    assert "capacty" in dg.diagnose((CORPUS / "cuda_20_typo.txt").read_text()).wording
    assert "2.2" in dg.diagnose((CORPUS / "cuda_2x_exhaustion.txt").read_text()).wording


def test_a_device_side_assert_is_never_told_to_shrink_the_batch():
    for name in ("device_assert.txt", "device_assert_index.txt"):
        d = dg.diagnose((CORPUS / name).read_text())
        actions = " ".join(s.action for s in d.steps)
        assert "Smaller batch" not in actions
        assert "CUDA_LAUNCH_BLOCKING=1" in actions
        assert "label" in actions.lower()
    assert "n_classes" in dg.diagnose((CORPUS / "device_assert.txt").read_text()).detail


def test_fragmentation_points_at_expandable_segments_and_a_restart():
    d = dg.diagnose((CORPUS / "cuda_2x_fragmentation.txt").read_text())
    first = d.steps[0].action + d.steps[0].detail
    assert "expandable_segments:True" in first and "restart" in first.lower()


def test_too_large_names_the_single_tensor():
    d = dg.diagnose((CORPUS / "cuda_2x_too_large.txt").read_text())
    assert "single tensor" in d.steps[0].action


def test_exhaustion_follows_the_ladder_in_order():
    d = dg.diagnose((CORPUS / "cuda_2x_exhaustion.txt").read_text())
    assert [s.action for s in d.steps] == [r.name for r in fix_ladder.FIX_LADDER]
    assert [s.free for s in d.steps] == [True] * 4 + [False] * 5


def test_no_kernel_image_names_the_capability():
    d = dg.diagnose((CORPUS / "no_kernel_image.txt").read_text())
    assert "12.0" in d.summary and "sm_120" in d.steps[0].detail


def test_a_card_held_by_other_processes_earns_a_note():
    d = dg.diagnose((CORPUS / "cuda_2x_shared_gpu.txt").read_text())
    assert d.outside_process_bytes > 0.5 * d.total_bytes
    assert any("outside this process" in n for n in d.notes)
    plain = dg.diagnose((CORPUS / "cuda_2x_exhaustion.txt").read_text())
    assert not any("outside this process" in n for n in plain.notes)


def test_legacy_unit_labels_are_read_as_binary_and_said_so():
    d = dg.diagnose((CORPUS / "mps_oom_legacy_units.txt").read_text())
    assert d.limit_bytes == round(18.13 * 2**30)
    assert any("binary" in n for n in d.notes)


@pytest.mark.parametrize(
    ("requested", "total", "free", "unallocated", "limit", "reserved", "verdict"),
    [
        (8 * GIB, 4 * GIB, 3 * GIB, None, None, None, "too_large_for_device"),
        (GIB, 16 * GIB, 2 * GIB, None, None, None, "fragmentation"),
        (GIB, 16 * GIB, 10 * MIB, 2 * GIB, None, None, "fragmentation"),
        (GIB, 16 * GIB, 10 * MIB, 10 * MIB, None, None, "exhaustion"),
        (GIB, 16 * GIB, 12 * GIB, 0, 4 * GIB, 4 * GIB, "exhaustion"),
        (4 * GIB, 16 * GIB, 12 * GIB, 0, 4 * GIB, 0, "too_large_for_device"),
        (None, None, None, None, None, None, "exhaustion"),
    ],
)
def test_verdict_rules(requested, total, free, unallocated, limit, reserved, verdict):
    assert dg.oom_verdict(requested, total, free, reserved, unallocated, limit)[0] == verdict


@pytest.mark.parametrize(
    ("text", "kind", "requested"),
    [
        (
            "CUDA out of memory. Tried to allocate 20.00 MiB. GPU 3 has a total capacity of "
            "7.79 GiB of which 1.31 MiB is free.",
            "cuda_oom",
            20 * MIB,
        ),
        (
            "HIP out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
            "63.98 GiB of which 1.00 GiB is free.",
            "cuda_oom",
            2 * GIB,
        ),
        (
            '{"exception_message": "CUDA out of memory. Tried to allocate 1,50 GiB.\\nGPU 0 has '
            'a total capacity of 8.00 GiB of which 0 bytes is free."}',
            "cuda_oom",
            round(1.5 * GIB),
        ),
        ("torch.OutOfMemoryError", "cuda_oom", None),
        (
            "RuntimeError: cuDNN error: CUBLAS_STATUS_ALLOC_FAILED when calling cublasCreate",
            "cuda_oom",
            None,
        ),
        ("MemoryError", "cpu_oom", None),
        (
            "RuntimeError: DataLoader worker (pid 4321) is killed by signal: Killed.",
            "cpu_oom",
            None,
        ),
        (
            "RuntimeError: CUDA driver version is insufficient for CUDA runtime version",
            "driver_too_old",
            None,
        ),
        ("CUDA error: an illegal memory access was encountered", "illegal_memory_access", None),
        ("oh no", "unknown", None),
    ],
)
def test_unseen_variants(text: str, kind: str, requested: int | None):
    d = dg.diagnose(text)
    assert (d.kind, d.requested_bytes) == (kind, requested)


def test_an_exception_object_is_accepted():
    assert dg.diagnose(MemoryError()).kind == "cpu_oom"
    assert dg.diagnose(RuntimeError("Torch not compiled with CUDA enabled")).kind == (
        "cpu_only_wheel"
    )


def test_the_last_oom_in_a_log_is_the_one_read():
    first = "CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of "
    text = first + "8.00 GiB of which 10.00 MiB is free.\n...\n" + first.replace("1.00", "3.00")
    text += "8.00 GiB of which 10.00 MiB is free."
    assert dg.diagnose(text).requested_bytes == 3 * GIB


def test_empty_text_is_a_value_error():
    with pytest.raises(ValueError, match="empty"):
        dg.diagnose("  \n")


def test_renderers_carry_the_numbers():
    d = dg.diagnose(error_examples.EXAMPLES["fragmentation"])
    text, markdown = diagnose_render.to_text(d), diagnose_render.to_markdown(d)
    assert "Verdict: fragmentation" in text and "2.00 GiB" in text
    assert "| Requested (one allocation) | 2.00 GiB" in markdown
    assert json.loads(diagnose_render.to_json(d))["requested_bytes"] == 2 * GIB
    assert "fragmentation" in diagnose_render.examples_table_markdown(("fragmentation",))
    assert "Example message" in diagnose_render.example_markdown("mps")
    with pytest.raises(ValueError, match="no example named"):
        diagnose_render.example_markdown("nope")


def test_every_example_is_diagnosed_as_its_name_says():
    expected = {
        "exhaustion": ("cuda_oom", "exhaustion"),
        "fragmentation": ("cuda_oom", "fragmentation"),
        "too_large": ("cuda_oom", "too_large_for_device"),
        "shared_card": ("cuda_oom", "exhaustion"),
        "torch_1x": ("cuda_oom", "exhaustion"),
        "mps": ("mps_oom", "exhaustion"),
        "host_ram": ("cpu_oom", "exhaustion"),
        "device_assert": ("device_assert", None),
        "illegal_access": ("illegal_memory_access", None),
        "no_kernel_image": ("no_kernel_image", None),
        "driver_too_old": ("driver_too_old", None),
        "no_driver": ("no_driver", None),
        "cpu_only_wheel": ("cpu_only_wheel", None),
    }
    assert set(expected) == set(error_examples.EXAMPLES)
    for name, (kind, verdict) in expected.items():
        d = dg.diagnose(error_examples.EXAMPLES[name])
        assert (d.kind, d.verdict) == (kind, verdict), name


# --- the CLI ---------------------------------------------------------------------


def run_cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "gpulesson", "diagnose", *args],
        input=stdin,
        capture_output=True,
        timeout=120,
    )


def test_cli_json_from_a_file():
    result = run_cli("--json", str(CORPUS / "cuda_2x_too_large.txt"))
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["kind"] == "cuda_oom" and data["verdict"] == "too_large_for_device"
    assert data["requested_bytes"] == b(154.84, "GiB")
    assert {"free_bytes", "total_bytes"} <= set(data)


def test_cli_json_nulls_what_the_message_lacks():
    result = run_cli("--json", stdin=(CORPUS / "device_assert.txt").read_bytes())
    data = json.loads(result.stdout)
    assert data["verdict"] is None and data["requested_bytes"] is None
    assert data["free_bytes"] is None and data["total_bytes"] is None


def test_cli_text_from_stdin():
    result = run_cli(stdin=(CORPUS / "cuda_1x_exhaustion.txt").read_bytes())
    out = result.stdout.decode()
    assert result.returncode == 0
    assert "Kind: cuda_oom" in out and "Verdict: exhaustion" in out
    assert "What to do, in order:" in out


@pytest.mark.parametrize(
    ("args", "stdin", "needle"),
    [
        ((), b"", "empty"),
        ((), b"   \n\t", "empty"),
        ((), b"\x7fELF\x00\x01", "binary"),
        ((), b"\xff\xfe\xfa", "not UTF-8"),
        (("/no/such/file.txt",), None, "no such file"),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(args, stdin, needle):
    result = run_cli(*args, stdin=stdin)
    assert result.returncode == 2
    err = result.stderr.decode()
    assert err.count("\n") == 1 and needle in err


def test_the_ladder_is_priced_by_the_budget_module():
    rows = fix_ladder.ladder_budget_rows()
    assert [name for name, *_ in rows[1:]] == [r.name for r in fix_ladder.FIX_LADDER[1:]]
    base = rows[0][2]
    by_name = {name: (peak, effective) for name, _, peak, effective in rows}
    assert by_name["Smaller batch"][0] < base and by_name["Smaller batch"][1] == 8
    assert by_name["Gradient accumulation"][1] == 16  # the effective batch is restored
    assert by_name["Gradient accumulation"][0] < base
    assert "| Smaller batch | batch 16 → 8 |" in fix_ladder.ladder_budget_markdown()
