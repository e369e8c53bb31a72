"""The recipe table is data (gpulesson/memory/recipes.json), checked by its schema on load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpulesson import schema_check
from gpulesson.memory import recipes


def _table(tmp_path: Path, edit) -> Path:
    data = json.loads(recipes.TABLE.read_text())
    edit(data)
    path = tmp_path / "recipes.json"
    path.write_text(json.dumps(data))
    return path


def _error(tmp_path: Path, edit) -> str:
    with pytest.raises(ValueError) as error:
        recipes.load_presets(_table(tmp_path, edit))
    return str(error.value)


def test_the_table_loads_into_the_frozen_recipes_in_its_order():
    data = json.loads(recipes.TABLE.read_text())
    assert list(recipes.PRESETS) == [row["name"] for row in data["recipes"]]
    assert recipes.load_presets() == recipes.PRESETS
    assert recipes.PRESETS["qlora"].adapters and not recipes.PRESETS["qlora"].inference
    assert (
        recipes.PRESETS["infer-int8"].inference and recipes.PRESETS["infer-int8"].grad_dtype is None
    )
    with pytest.raises(AttributeError):
        recipes.PRESETS["amp"].name = "x"  # type: ignore[misc]


def test_the_schema_is_a_valid_schema_and_describes_every_field():
    schema = schema_check.load_schema(recipes.SCHEMA)
    row = schema["properties"]["recipes"]["items"]["properties"]
    assert set(row) == {f for f in recipes.Recipe.__dataclass_fields__}
    assert all(p.get("description") for p in row.values())


def _set(field, value, row=0):
    def edit(data):
        data["recipes"][row][field] = value

    return edit


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            _set("colour", "red", 2),
            "recipes.json: recipes: 3: colour: unknown field; the fields are name, weight_dtype",
        ),
        (
            lambda d: d["recipes"][1].pop("gives_up"),
            "recipes.json: recipes: 2: gives_up: missing; add it",
        ),
        (
            _set("source", 7),
            "recipes.json: recipes: 1: source: must be text, not 7: put it in quotes",
        ),
        (_set("gives_up", "  "), "recipes.json: recipes: 1: gives_up: is empty: write it out"),
        (
            _set("grad_dtype", 16),
            "recipes.json: recipes: 1: grad_dtype: 16 is not a dtype or null: name the gradients'",
        ),
        (
            _set("name", "Big Model"),
            "recipes.json: recipes: 1: name: 'Big Model' is not a preset name: name the preset",
        ),
        (
            _set("inference", "yes"),
            "recipes.json: recipes: 1: inference: must be true or false, not 'yes'",
        ),
        (
            lambda d: d.update(recipes=[]),
            "recipes.json: recipes: must be a list with at least one item",
        ),
        (
            lambda d: d["recipes"].__setitem__(0, "amp"),
            "recipes.json: recipes: 1: expected fields (name, weight_dtype",
        ),
        (lambda d: d.update(format=2), "recipes.json: format: 2 is not the layout version 1"),
    ],
)
def test_a_row_the_schema_refuses_names_file_recipe_and_field(tmp_path, edit, message):
    assert _error(tmp_path, edit).startswith(message)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            _set("weight_dtype", "fp12"),
            "recipes.json: recipes: 1: weight_dtype: 'fp12' is not a dtype: use one of fp32, bf16",
        ),
        (
            _set("optimizer", "lion"),
            "recipes.json: recipes: 1: optimizer: 'lion' is not an optimizer: use one of sgd",
        ),
        (
            _set("name", "amp", 1),
            "recipes.json: recipes: 2: name: 'amp' is already a recipe: give each its own name",
        ),
    ],
)
def test_names_the_schema_cannot_know_are_checked_in_code_alike(tmp_path, edit, message):
    assert _error(tmp_path, edit).startswith(message)


def test_a_broken_json_file_names_the_line(tmp_path):
    path = tmp_path / "recipes.json"
    path.write_text('{"format": 1,\n "recipes": [}\n')
    with pytest.raises(ValueError, match=r"recipes.json: line 2, column \d+: not valid JSON"):
        recipes.load_presets(path)
