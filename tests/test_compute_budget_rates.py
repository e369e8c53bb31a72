"""The example rates have one home, the package: the cost lab and `gpulesson budget` share it."""

from __future__ import annotations

import json
import shutil
from importlib import resources

import pytest

from gpulesson.memory import cost
from gpulesson.results import datasheets
from gpulesson.site import content, labs
from tests.conftest import REPO

RATES_TEXT = resources.files("gpulesson.results").joinpath("example_rates.json").read_text()


def test_the_cost_lab_shows_the_package_rates_with_their_source():
    rates = datasheets.example_rates()
    assert [
        (r.card_class, r.vram_gb, r.on_demand_usd_per_h, r.spot_usd_per_h) for r in rates.rates
    ] == [
        (r.card_class, r.vram_gb, r.on_demand_usd_per_h, r.spot_usd_per_h)
        for r in cost.card_rates()
    ]
    assert cost.rates_source() == rates.source
    assert "example" in rates.source
    data = json.loads(labs.to_json())["cost"]
    assert data["source"] == rates.source
    assert [r["on_demand_usd_per_h"] for r in data["rates"]] == [
        r.on_demand_usd_per_h for r in rates.rates
    ]


def test_each_class_prices_datasheet_ids_and_unpriced_gpus_have_none():
    rates = datasheets.example_rates()
    assert rates.for_gpu("t4").card_class == "T4-class"
    assert rates.for_gpu("a10").card_class == rates.for_gpu("l4").card_class == "A10 / L4-class"
    assert rates.for_gpu("a100-80gb").on_demand_usd_per_h == 1.60
    assert rates.for_gpu("h100-sxm") is None  # the source lesson gave no H100 example
    with pytest.raises(ValueError, match="unknown GPU id 'h300'"):
        rates.for_gpu("h300")
    for rate in rates.rates:
        for gpu in rate.datasheet_ids:
            sheet = datasheets.get(gpu)
            # the class's memory is the datasheet's (stated GB, as the lab's column shows it)
            assert sheet.memory_stated_gb == rate.vram_gb, gpu


def _broken(old: str, new: str) -> dict:
    assert old in RATES_TEXT
    return json.loads(RATES_TEXT.replace(old, new, 1))


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            '"on_demand_usd_per_h": 0.60',
            '"on_demand_usd_per_h": -0.60',
            'example_rates.json: rates: 2 ("A10 / L4-class"): on_demand_usd_per_h: '
            "must be a number of at least 0, not -0.6",
        ),
        (
            '"vram_gb": 16',
            '"vram_gb": 16.5',
            'example_rates.json: rates: 1 ("T4-class"): vram_gb: must be a whole number, not 16.5',
        ),
        (
            '"datasheet_ids": ["t4"]',
            '"datasheet_ids": ["t5"]',
            "example_rates.json: rates: 1 (\"T4-class\"): datasheet_ids: unknown GPU id 't5'",
        ),
        (
            '"datasheet_ids": ["t4"]',
            '"datasheet_ids": ["l4"]',
            "example_rates.json: rates: 2 (\"A10 / L4-class\"): datasheet_ids: 'l4' is already "
            "priced by 'T4-class': list each id once",
        ),
        (
            '"spot_usd_per_h": 0.15,',
            '"spot_usd_per_h": 0.15, "spot": 1,',
            'example_rates.json: rates: 1 ("T4-class"): spot: unknown field; the fields are '
            "card_class, vram_gb, on_demand_usd_per_h, spot_usd_per_h, datasheet_ids",
        ),
        (
            '"source": "example rates',
            '"source": "rates',
            "example_rates.json: source: must be text that calls the rates examples",
        ),
    ],
)
def test_a_malformed_rates_file_names_the_entry_and_field(old, new, message):
    with pytest.raises(ValueError) as error:
        datasheets.parse_example_rates(_broken(old, new), "example_rates.json")
    assert str(error.value).startswith(message)


def test_labs_yml_no_longer_holds_rates_and_refuses_a_second_copy(tmp_path):
    assert "on_demand_usd_per_h" not in (REPO / "docs" / "labs.yml").read_text()
    docs = tmp_path / "docs"
    shutil.copytree(REPO / "docs", docs, ignore=shutil.ignore_patterns("notebooks", "assets"))
    text = (docs / "labs.yml").read_text()
    (docs / "labs.yml").write_text("cost:\n  source: example\n" + text)
    with pytest.raises(content.ContentError) as error:
        content.load(docs)
    assert str(error.value) == (
        "docs/labs.yml: cost: unknown field; the fields are routes, dispatch"
    )


def test_the_rented_route_still_spans_the_example_rates():
    rates = datasheets.example_rates().rates
    low = min(r.spot_usd_per_h for r in rates)
    high = max(r.on_demand_usd_per_h for r in rates)
    assert labs.routes()[2].cost == f"≈ ${low:.2f}–{high:.2f}/h (example rates)"
