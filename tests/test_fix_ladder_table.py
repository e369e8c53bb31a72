"""The fix ladder and its steps are data (gpulesson/errors/fix_ladder.json), checked on load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpulesson import schema_check
from gpulesson.errors import fix_ladder


def _error(tmp_path: Path, edit) -> str:
    data = json.loads(fix_ladder.TABLE.read_text())
    edit(data)
    path = tmp_path / "fix_ladder.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError) as error:
        fix_ladder.load_ladder(path)
    return str(error.value)


def test_the_table_loads_into_the_frozen_rungs_and_steps():
    data = json.loads(fix_ladder.TABLE.read_text())
    assert [r.key for r in fix_ladder.FIX_LADDER] == [r["key"] for r in data["rungs"]]
    assert fix_ladder.load_ladder() == fix_ladder._TABLE
    first = fix_ladder.nccl_steps("nccl_timeout")[0]
    assert first is fix_ladder.nccl_steps("nccl_error")[0]  # one step, named in two lists
    assert first == fix_ladder.Step(**data["steps"]["nccl.first_failure"])


def test_every_step_of_the_table_is_in_some_list():
    data = json.loads(fix_ladder.TABLE.read_text())
    used = {name for names in data["lists"].values() for name in names}
    assert used == set(data["steps"])


def test_the_schema_describes_every_field():
    schema = schema_check.load_schema(fix_ladder.SCHEMA)
    rung = schema["properties"]["rungs"]["items"]["properties"]
    assert set(rung) == set(fix_ladder.Rung.__dataclass_fields__)
    step = schema["properties"]["steps"]["additionalProperties"]["properties"]
    assert set(step) == set(fix_ladder.Step.__dataclass_fields__)
    assert all(p.get("description") for p in (*rung.values(), *step.values()))


def test_the_capability_reaches_the_no_kernel_image_step():
    detail = fix_ladder.other_steps("no_kernel_image", capability="8.6")[0].detail
    assert "compute capability 8.6 (sm_86)" in detail and "{cc}" not in detail
    assert "this GPU's compute capability" in fix_ladder.other_steps("no_kernel_image")[0].detail


def _step(name, field, value):
    def edit(data):
        data["steps"][name][field] = value

    return edit


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            _step("unknown.probe", "free", "yes"),
            "fix_ladder.json: steps: unknown.probe: free: must be true or false, not 'yes'",
        ),
        (
            _step("unknown.probe", "why", "x"),
            "fix_ladder.json: steps: unknown.probe: why: unknown field; "
            "the fields are action, detail, free",
        ),
        (
            _step("unknown.probe", "action", ""),
            "fix_ladder.json: steps: unknown.probe: action: is empty: write it out",
        ),
        (
            lambda d: d["steps"].update({"Probe it": d["steps"]["unknown.probe"]}),
            "fix_ladder.json: steps: 'Probe it' is not a step name: name a step topic.step",
        ),
        (
            lambda d: d["lists"].pop("nccl_error"),
            "fix_ladder.json: lists: nccl_error: missing; add it",
        ),
        (
            lambda d: d["lists"].update(unknown=[]),
            "fix_ladder.json: lists: unknown: must be a list with at least one item",
        ),
        (
            lambda d: d["rungs"][1].update(key="Smaller batch"),
            "fix_ladder.json: rungs: 2: key: 'Smaller batch' is not a rung key: name the rung",
        ),
        (
            lambda d: d["rungs"][2].pop("cost"),
            "fix_ladder.json: rungs: 3: cost: missing; add it",
        ),
        (
            lambda d: d.update(restart_note=None),
            "fix_ladder.json: restart_note: must be text, not None: put it in quotes",
        ),
    ],
)
def test_a_table_the_schema_refuses_names_the_entry_and_field(tmp_path, edit, message):
    assert _error(tmp_path, edit).startswith(message)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda d: d["lists"]["unknown"].append("unknown.pray"),
            "fix_ladder.json: lists: unknown: 3: no step 'unknown.pray': name one under steps (",
        ),
        (
            lambda d: d["rungs"][3].update(key="batch"),
            "fix_ladder.json: rungs: 4: key: 'batch' is already a rung: give each its own key",
        ),
    ],
)
def test_names_the_schema_cannot_check_are_checked_in_code_alike(tmp_path, edit, message):
    assert _error(tmp_path, edit).startswith(message)


def _rung(key: str) -> fix_ladder.Rung:
    return next(r for r in fix_ladder.FIX_LADDER if r.key == key)


def test_accumulation_names_its_throughput_cost_and_the_loss_normalisation():
    """A second expert reading: accumulation is not free, and summed losses need the token count."""
    cost = _rung("accumulation").cost
    assert "throughput" in cost and "total token count" in cost
    assert "nothing" not in _rung("batch").cost


def test_the_release_note_does_not_offer_empty_cache_as_memory_for_this_process():
    """PyTorch's CUDA notes: releasing cached blocks cannot give this process more memory."""
    note = fix_ladder._TABLE.restart_note
    assert "gc.collect()" in note and "`del`" in note
    assert "frees nothing for this one" in note


def test_mixed_precision_does_not_promise_half_the_activations():
    """The mixed-precision lesson measures about two thirds, and calls half a lower bound."""
    assert "roughly by half" not in _rung("mixed_precision").what_it_cuts
