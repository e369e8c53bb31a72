"""The labs' numbers: the simulations, the cost arithmetic, the dispatch data, the planner."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from gpulesson.site import content, labs
from gpulesson.site import labs_hook as site_labs
from tests.conftest import REPO


def test_race_has_a_crossover_where_the_gpu_starts_to_win():
    results = [labs.race(n) for n in labs.RACE_SIZES]
    winners = [r.speedup > 1 for r in results]
    assert winners[0] is False and winners[-1] is True
    assert winners == sorted(winners)  # once the GPU wins it keeps winning
    assert labs.race(2 * 1024).flops == 8 * labs.race(1024).flops


def test_race_rejects_a_bad_size():
    with pytest.raises(ValueError, match="n=0"):
        labs.race(0)


def test_stopwatch_reproduces_the_sources_teaching_ratios():
    naive, honest = labs.stopwatch(False), labs.stopwatch(True)
    assert naive.measured_s == pytest.approx(0.005)
    assert honest.measured_s == pytest.approx(0.205)
    assert naive.claimed_speedup / honest.claimed_speedup == pytest.approx(41, abs=0.1)


def test_cost_is_rate_times_hours_times_runs():
    assert labs.run_cost_usd(1.60, 4, 20) == pytest.approx(128.0)
    with pytest.raises(ValueError, match="runs=0"):
        labs.run_cost_usd(1.0, 1, 0)
    table = labs.cost_markdown(hours_per_run=4, runs=20)
    assert "| A100 80 GB-class | 80 | 1.60 | 0.80 | 128.00 | 64.00 |" in table


def test_routes_price_range_follows_the_rates():
    rented = labs.routes()[2]
    assert "0.15" in rented.cost and "1.60" in rented.cost
    cheap = labs.CardRate(card_class="x", vram_gb=8, on_demand_usd_per_h=0.9, spot_usd_per_h=0.05)
    assert labs.routes((cheap,))[2].cost == "≈ $0.05–0.90/h (example rates)"
    assert labs.routes((cheap,))[0] == labs.routes()[0]  # the others name no rate


@pytest.mark.skipif(torch.version.cuda is not None, reason="needs a CPU-only torch build")
def test_cpu_laptop_column_matches_what_this_cpu_torch_does():
    """Run each line on this CPU-only torch and compare with the simulator's CPU column."""
    for line in labs.dispatch_script():
        if line.code.startswith("!"):
            continue
        printed: list[str] = []
        scope = {"torch": torch, "print": lambda *a, _p=printed: _p.append(" ".join(map(str, a)))}
        try:
            exec(line.code, scope)  # noqa: S102 - the simulator's own fixed lines
            outcome = printed[-1]
        except Exception as error:  # noqa: BLE001 - the error is the outcome
            outcome = f"{type(error).__name__}: {error}"
        assert outcome == line.cpu, line.code
        assert labs.is_error(outcome) == labs.is_error(line.cpu)


def test_labs_json_has_what_the_script_reads():
    data = json.loads(labs.to_json())
    assert data["race"]["launch_s"] == labs.TEACHING_LAUNCH_S
    assert len(data["dispatch"]["lines"]) == len(labs.dispatch_script())
    assert {"nvidia", "mac", "cpu"} == {m["key"] for m in data["dispatch"]["machines"]}
    assert "example" in data["cost"]["source"]
    assert [r["card_class"] for r in data["cost"]["rates"]] == [
        r.card_class for r in labs.card_rates()
    ]
    for line in data["dispatch"]["lines"]:  # the script reads the error rule, not its own copy
        assert line["errors"] == {k: labs.is_error(line[k]) for k in labs.MACHINE_KEYS}
    assert any(line["errors"]["cpu"] for line in data["dispatch"]["lines"])
    assert not all(line["errors"]["cpu"] for line in data["dispatch"]["lines"])


LABS_YML = REPO / "docs" / "labs.yml"


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            "on_demand_usd_per_h: 0.60",
            "on_demand_usd_per_h: -0.60",
            'docs/labs.yml: cost: rates: 2 ("A10 / L4-class"): on_demand_usd_per_h: '
            "must be a number of at least 0, not -0.6",
        ),
        (
            "vram_gb: 16",
            "vram_gb: 16.5",
            'docs/labs.yml: cost: rates: 1 ("T4-class"): vram_gb: must be a whole number, not 16.5',
        ),
        (
            "{on_demand_high_usd_per_h:.2f}",
            "{on_demand_max:.2f}",
            'docs/labs.yml: routes: 3 ("Rented cloud instance"): cost: unknown placeholder '
            "{on_demand_max}: a cost may name spot_low_usd_per_h, on_demand_high_usd_per_h",
        ),
        (
            "    - key: mac\n",
            "    - key: macos\n",
            "docs/labs.yml: dispatch: machines: the keys must be nvidia, mac, cpu (one each), "
            "not nvidia, macos, cpu",
        ),
        (
            '      mac: "True"',
            "      mac: True",
            'docs/labs.yml: dispatch: lines: 4 ("print(torch.backends.mps.is_available())"): mac: '
            "must be text, not 'true': put it in quotes",
        ),
        (
            "    best_for: Regular use",
            "    best: Regular use",
            'docs/labs.yml: routes: 1 ("Local NVIDIA card"): best: unknown field; '
            "the fields are route, cost, setup, best_for, watch_out",
        ),
    ],
)
def test_a_malformed_labs_file_names_file_entry_and_field(tmp_path, old, new, message):
    docs = tmp_path / "docs"
    shutil.copytree(REPO / "docs", docs, ignore=shutil.ignore_patterns("notebooks", "assets"))
    text = LABS_YML.read_text()
    assert old in text
    (docs / "labs.yml").write_text(text.replace(old, new, 1))
    with pytest.raises(content.ContentError) as error:
        content.load(docs)
    assert str(error.value) == message


def test_timing_lab_uses_measured_numbers_when_given():
    class R:
        def __init__(self, median_s):
            self.median_s, self.n, self.dtype, self.device = median_s, 4096, "fp32", "cuda"

    class Illusion:
        honest, naive, cpu = R(0.05), R(0.0001), R(2.0)

    text = labs.timing_lab_markdown(Illusion())
    assert "data-measured=" in text and "&quot;kernel_s&quot;" in text
    assert "| no | 0.0001 | 20000× |" in text


def _budget():
    budget = pytest.importorskip("gpulesson.memory.budget")
    if not hasattr(budget, "planner_data"):
        pytest.skip("gpulesson.memory.budget has no planner_data yet")
    return budget


@pytest.mark.parametrize("params", [5e8, 1.5e9, 7e9, 70e9])
def test_planner_persistent_terms_equal_budget_estimate(params):
    budget = _budget()
    data = budget.planner_data()
    for recipe in data["recipes"]:
        mine = labs.plan(data, labs.PlannerInputs(params, recipe))
        ref = budget.estimate(params, preset=recipe)
        assert mine.weights_bytes == pytest.approx(ref.weights_bytes, abs=2), recipe
        assert mine.gradients_bytes == pytest.approx(ref.gradients_bytes, abs=2), recipe
        assert mine.optimizer_bytes == pytest.approx(ref.optimizer_bytes, abs=2), recipe
        assert mine.master_bytes == pytest.approx(ref.master_bytes, abs=2), recipe


def test_planner_fit_rule_matches_budget_fits_for_inference():
    budget = _budget()
    data = budget.planner_data()
    for params in (1e9, 7e9, 13e9, 34e9):
        mine = labs.plan(data, labs.PlannerInputs(params, "infer-fp16"))
        ref = budget.estimate(params, preset="infer-fp16")
        for card, ok in mine.fits:
            assert ok == budget.fits(ref, card).fits, (params, card)


def test_planner_reproduces_the_sources_7b_bills():
    data = _budget().planner_data()
    no_acts = {"batch": 1, "sequence": 1, "hidden": 1, "layers": 1}
    totals = {
        r: labs.plan(data, labs.PlannerInputs(7e9, r, **no_acts)).total_bytes / 1e9
        for r in ("bf16", "fp16-fp32-grads", "mixed-fp32-master")
    }
    assert [round(t) for t in totals.values()] == [84, 98, 112]


def test_planner_rejects_unknown_recipe():
    with pytest.raises(ValueError, match="unknown recipe 'nope'"):
        labs.plan(_budget().planner_data(), labs.PlannerInputs(7e9, "nope"))


def test_post_build_writes_the_json(tmp_path):
    site_labs.on_post_build({"site_dir": str(tmp_path)})
    out = tmp_path / "assets" / "labs"
    assert json.loads((out / "labs.json").read_text())["timing"]["cpu_s"] == 5.0
    assert json.loads((out / "glossary.json").read_text())[0]["name"]
