"""The labs' numbers: the simulations, the cost arithmetic, the dispatch data, the planner."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess

import pytest
import torch

from gpulesson.course import budget as budget_course
from gpulesson.course import timing as timing_course
from gpulesson.course import where_to_run, why_gpus
from gpulesson.memory import budget, cost, planner
from gpulesson.memory.planner import planner_data
from gpulesson.site import content, labs
from gpulesson.site import labs_hook as site_labs
from gpulesson.tables import markdown_table
from gpulesson.timing import race as race_sim
from gpulesson.timing import teaching
from tests.conftest import REPO


def test_race_has_a_crossover_where_the_gpu_starts_to_win():
    results = [race_sim.race(n) for n in race_sim.RACE_SIZES]
    winners = [r.speedup > 1 for r in results]
    assert winners[0] is False and winners[-1] is True
    assert winners == sorted(winners)  # once the GPU wins it keeps winning
    assert race_sim.race(2 * 1024).flops == 8 * race_sim.race(1024).flops


def test_race_pays_a_microsecond_launch_not_the_sources_5_ms():
    assert 1e-6 <= race_sim.TEACHING_LAUNCH_S <= 1e-5
    assert race_sim.race(8).gpu_s == pytest.approx(race_sim.TEACHING_LAUNCH_S, rel=0.01)
    # With 5 ms the GPU lost up to n=256; with a microsecond launch it wins long before.
    assert race_sim.race(256).winner == "GPU"
    assert race_sim.race(256, launch_s=5e-3).winner == "CPU"


def test_race_crossover_is_where_both_times_are_equal():
    n = race_sim.race_crossover_n()
    flops = 2 * n**3
    cpu_s = flops / race_sim.TEACHING_CPU_FLOP_PER_S
    gpu_s = race_sim.TEACHING_LAUNCH_S + flops / race_sim.TEACHING_GPU_FLOP_PER_S
    assert cpu_s == pytest.approx(gpu_s)
    assert race_sim.race(int(n)).winner == "CPU" and race_sim.race(int(n) + 1).winner == "GPU"
    table = race_sim.race_table()
    assert table.first_gpu_win_n == min(r.n for r in table.rows if r.n > n)
    text = why_gpus.race_markdown(table)
    assert f"GPU wins from n = {table.first_gpu_win_n} on" in text
    assert f"n ≈ {table.crossover_n:.0f}," in text


def test_race_rejects_a_bad_size():
    with pytest.raises(ValueError, match="n=0"):
        race_sim.race(0)


def test_stopwatch_teaching_ratios_follow_the_cited_launch():
    naive, honest = teaching.stopwatch(False), teaching.stopwatch(True)
    assert naive.measured_s == pytest.approx(teaching.TEACHING.launch_s)
    assert honest.measured_s == pytest.approx(
        teaching.TEACHING.kernel_s + teaching.TEACHING.launch_s
    )
    assert naive.claimed_speedup == pytest.approx(
        teaching.TEACHING.cpu_s / teaching.TEACHING.launch_s
    )
    assert naive.claimed_speedup / honest.claimed_speedup == pytest.approx(
        teaching.TEACHING.illusion
    )
    assert "| no | 0.01 | 500,000× |" in timing_course.timing_markdown(
        teaching.timing_lab_inputs().readings
    )


def test_cost_is_rate_times_hours_times_runs():
    assert cost.run_cost_usd(1.60, 4, 20) == pytest.approx(128.0)
    with pytest.raises(ValueError, match="runs=0"):
        cost.run_cost_usd(1.0, 1, 0)
    table = where_to_run.cost_markdown(hours_per_run=4, runs=20)
    assert "| A100 80 GB-class | 80 | 1.60 | 0.80 | 128.00 | 64.00 |" in table


def test_routes_price_range_follows_the_rates():
    rented = labs.routes()[2]
    assert "0.15" in rented.cost and "1.60" in rented.cost
    cheap = cost.CardRate(card_class="x", vram_gb=8, on_demand_usd_per_h=0.9, spot_usd_per_h=0.05)
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
    assert data["race"]["launch_s"] == race_sim.TEACHING_LAUNCH_S
    assert (
        data["timing"]["launch_s"] == teaching.TEACHING.launch_s < data["timing"]["source_launch_s"]
    )
    assert len(data["dispatch"]["lines"]) == len(labs.dispatch_script())
    assert {"nvidia", "mac", "cpu"} == {m["key"] for m in data["dispatch"]["machines"]}
    assert "example" in data["cost"]["source"]
    assert [r["card_class"] for r in data["cost"]["rates"]] == [
        r.card_class for r in cost.card_rates()
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
        (
            "    setup: SSH in, install, check",
            "    setup: SSH in | install | check",
            "docs/labs.yml: routes: 3 (\"Rented cloud instance\"): setup: holds a '|', which "
            "would end its cell of the routes table: write it as '\\|'",
        ),
        (
            "    - code: print(torch.cuda.is_available())",
            "    - code: print(torch.cuda.is_available() | True)",
            'docs/labs.yml: dispatch: lines: 2 ("print(torch.cuda.is_available() | True)"): '
            "code: holds a '|', which would end its cell of the dispatch table (escaped, the lab "
            "would show the backslash): write the line without one",
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


def test_an_escaped_pipe_in_a_route_stays_in_its_cell(tmp_path):
    docs = tmp_path / "docs"
    shutil.copytree(REPO / "docs", docs, ignore=shutil.ignore_patterns("notebooks", "assets"))
    text = LABS_YML.read_text().replace("SSH in, install, check", "SSH in \\| install", 1)
    (docs / "labs.yml").write_text(text)
    route = content.load(docs).labs.routes[2]
    assert route.setup == "SSH in \\| install"
    table = markdown_table(("a", "b"), [(route.route, route.setup)])
    assert table.splitlines()[2] == "| Rented cloud instance | SSH in \\| install |"


def test_timing_lab_uses_measured_numbers_when_given():
    from gpulesson.timing.results import IllusionResult, MatmulResult

    def result(median_s: float, device: str = "cuda") -> MatmulResult:
        return MatmulResult(device=device, dtype="fp32", n=4096, threads=2, samples_s=(median_s,))

    illusion = IllusionResult(honest=result(0.05), naive=result(0.0001), cpu=result(2.0, "cpu"))
    inputs = teaching.timing_lab_inputs(illusion)
    assert inputs.measured and inputs.kernel_s == pytest.approx(0.0499)
    text = timing_course.timing_lab_markdown(inputs)
    assert "data-measured=" in text and "&quot;kernel_s&quot;" in text
    assert "| no | 0.1 | 20,000× |" in text and "| yes | 50 | 40× |" in text


PLANNER_CASES = [
    planner.PlannerInputs(params=7e9, recipe=recipe, batch=2, sequence=1024)
    for recipe in ("amp", "bf16", "fp16-fp32-grads", "mixed-fp32-master", "bf16-pure", "sgd")
] + [
    planner.PlannerInputs(params=7e9, recipe="qlora", sequence=2048, checkpointing="full"),
    planner.PlannerInputs(params=7e9, recipe="lora", trainable_fraction=0.01, attention="eager"),
    planner.PlannerInputs(params=13e9, recipe="infer-fp16", batch=4, sequence=4096),
    planner.PlannerInputs(
        params=124e6, recipe="fp32", vocab=50257, hidden=768, heads=12, layers=12, batch=16
    ),
]


@pytest.mark.parametrize("x", PLANNER_CASES, ids=lambda x: x.recipe)
def test_planner_bar_is_what_budget_estimate_holds_at_the_peak(x):
    p = planner.plan(x)
    shape = budget.TransformerShape(
        vocab=x.vocab,
        seq=x.sequence,
        hidden=x.hidden,
        heads=x.heads,
        layers=x.layers,
        batch=x.batch,
    )
    ref = budget.estimate(
        x.params,
        preset=x.recipe,
        shape=shape,
        attention=x.attention,
        checkpointing=x.checkpointing,
        trainable_fraction=x.trainable_fraction,
    )
    alive = next(ph for ph in ref.phases if ph.name == ref.peak_phase).alive_bytes
    bar = (
        p.weights_bytes,
        p.master_bytes,
        p.optimizer_bytes,
        p.gradients_bytes,
        p.activations_bytes,
        p.temporaries_bytes,
        p.kv_cache_bytes,
    )
    assert sum(bar) == p.total_bytes == ref.total_bytes == sum(alive.values())
    assert p.peak_phase == ref.peak_phase
    assert p.needed_bytes == ref.with_headroom_bytes
    assert [c.fits for c in p.fits] == [budget.fits(ref, c.card_bytes).fits for c in p.fits]


def test_planner_reproduces_the_7b_bills_at_the_optimizer_step():
    one_token = {"batch": 1, "sequence": 1}  # activations negligible: the optimizer step peaks
    plans = [
        planner.plan(planner.PlannerInputs(params=7e9, recipe=r, **one_token))
        for r in ("bf16", "fp16-fp32-grads", "mixed-fp32-master", "amp")
    ]
    assert {p.peak_phase for p in plans} == {"optimizer step"}
    persistent = [
        p.weights_bytes + p.master_bytes + p.optimizer_bytes + p.gradients_bytes for p in plans
    ]
    assert persistent == [84e9, 98e9, 112e9, 112e9]
    assert all(p.temporaries_bytes < 2e9 for p in plans)  # the optimizer's per-tensor transient


def test_planner_rejects_unknown_recipe():
    with pytest.raises(ValueError, match="unknown preset 'nope'"):
        planner.plan(planner.PlannerInputs(params=7e9, recipe="nope"))


def test_planner_table_shows_every_case_with_its_peak_phase():
    results = tuple(planner.plan(x) for x in planner.planner_cases())
    table = budget_course.planner_markdown(results)
    assert table.count("\n") == len(results) + 1
    assert "| 7B, amp, batch 1×512 | optimizer step | 28.0 |" in table
    assert "| 80 GB |" in table.splitlines()[0]


_NODE_PLAN = """
const fs = require("fs");
global.window = {};
global.document = {
  readyState: "loading", addEventListener() {}, getElementById() { return null; }
};
eval(fs.readFileSync(process.argv[2], "utf8"));
const input = JSON.parse(fs.readFileSync(0, "utf8"));
process.stdout.write(JSON.stringify(input.cases.map((x) => window.glLabs.plan(input.data, x))));
"""


def _grid() -> list[planner.PlannerInputs]:
    """Every recipe on a spread of models and micro-batches (a fixed pseudo-random grid)."""
    import random

    rng = random.Random(12)
    cases = []
    for recipe in planner_data()["recipes"]:
        for _ in range(10):
            hidden, heads = rng.choice([(768, 12), (2048, 16), (4096, 32), (64, 1)])
            cases.append(
                planner.PlannerInputs(
                    params=rng.choice([0.1, 0.5, 1.5, 7, 13, 70]) * 1e9,
                    recipe=recipe,
                    batch=rng.choice([1, 2, 8, 16]),
                    sequence=rng.choice([128, 512, 2048, 4096]),
                    vocab=rng.choice([8, 32000, 50257]),
                    hidden=hidden,
                    heads=heads,
                    layers=rng.choice([1, 12, 32]),
                    attention=rng.choice(["sdpa", "eager"]),
                    checkpointing=rng.choice(["none", "full"]),
                    trainable_fraction=rng.choice([0.001, 0.01, 1.0]),
                )
            )
    return cases


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js to run labs.js")
def test_planner_script_evaluates_the_tables_exactly_as_estimate(tmp_path):
    """labs.js's plan(), run by Node on planner.json, against plan() (estimate) on 130 inputs."""
    script = tmp_path / "plan.js"
    script.write_text(_NODE_PLAN)
    cases = _grid()
    data = planner_data()
    payload = {
        "data": data,
        "cases": [
            {
                "params": x.params,
                "recipe": x.recipe,
                "optimizer": None,
                "batch": x.batch,
                "sequence": x.sequence,
                "vocab": x.vocab,
                "hidden": x.hidden,
                "heads": x.heads,
                "layers": x.layers,
                "attention": x.attention,
                "checkpointing": x.checkpointing,
                "fraction": x.trainable_fraction,
            }
            for x in cases
        ],
    }
    result = subprocess.run(
        ["node", str(script), str(REPO / "docs" / "javascripts" / "labs.js")],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    for x, js in zip(cases, json.loads(result.stdout), strict=True):
        adapters = data["recipes"][x.recipe]["adapters"]
        p = planner.plan(x if adapters else dataclasses.replace(x, trainable_fraction=None))
        python = {
            "phase": p.peak_phase,
            "weights": p.weights_bytes,
            "master": p.master_bytes,
            "optimizer": p.optimizer_bytes,
            "gradients": p.gradients_bytes,
            "activations": p.activations_bytes,
            "temporaries": p.temporaries_bytes,
            "kv_cache": p.kv_cache_bytes,
            "total": p.total_bytes,
            "needed": p.needed_bytes,
            "fits": [c.fits for c in p.fits],
        }
        assert {k: js[k] for k in python} == python, x


def test_post_build_writes_the_planners_tables(tmp_path):
    site_labs.on_post_build({"site_dir": str(tmp_path)})
    planner = json.loads((tmp_path / "assets" / "labs" / "planner.json").read_text())
    assert planner == json.loads(json.dumps(planner_data()))
    assert planner["points"]["training"][0]["phase"] == "forward"


def test_post_build_writes_the_json(tmp_path):
    site_labs.on_post_build({"site_dir": str(tmp_path)})
    out = tmp_path / "assets" / "labs"
    assert json.loads((out / "labs.json").read_text())["timing"]["cpu_s"] == 5.0
    assert json.loads((out / "glossary.json").read_text())[0]["name"]


# --- the labs' ranges: one place (the package), written into the labs' JSON ----------------


def test_planner_json_carries_the_estimates_count_limits():
    from gpulesson.memory import shape

    limits = planner_data()["limits"]
    assert limits == shape.limits_data()
    assert limits["layers"]["maximum"] == shape.MAX_LAYERS
    assert {"batch", "seq", "vocab", "hidden", "heads", "layers"} <= set(limits)
    for name, limit in limits.items():  # the same bound the API refuses past
        assert limit["maximum"] == shape.count_limit(name).maximum
        assert limit["why"] and limit["stated"]


def test_labs_json_carries_the_cost_limits_run_cost_checks():
    from gpulesson.memory import compute

    limits = json.loads(labs.to_json())["cost"]["limits"]
    assert limits == cost.cost_limits_data()
    assert limits["rate"]["maximum"] == compute.MAX_PRICE_USD_PER_GPU_HOUR  # budget's bound
    assert limits["hours"]["above"] and limits["runs"]["whole"]
    with pytest.raises(ValueError, match="too large"):
        cost.run_cost_usd(1.0, limits["hours"]["maximum"] * 2, 1)


_NODE_REFUSE = """
const fs = require("fs");
global.window = {};
global.document = {
  readyState: "loading", addEventListener() {}, getElementById() { return null; }
};
eval(fs.readFileSync(process.argv[2], "utf8"));
const input = JSON.parse(fs.readFileSync(0, "utf8"));
const out = input.cases.map((x) => {
  try { window.glLabs.plan(input.data, x); return "planned"; }
  catch (e) { return e.name + ": " + e.message; }
});
process.stdout.write(JSON.stringify(out));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js to run labs.js")
def test_planner_script_refuses_a_count_past_its_limit_at_once(tmp_path):
    """plan() with layers 1e300 looped for ever; now it throws before evaluating anything."""
    script = tmp_path / "refuse.js"
    script.write_text(_NODE_REFUSE)
    base = {
        "params": 7e9,
        "recipe": "amp",
        "optimizer": None,
        "batch": 1,
        "sequence": 512,
        "vocab": 32000,
        "hidden": 4096,
        "heads": 32,
        "layers": 32,
        "attention": "sdpa",
        "checkpointing": "none",
        "fraction": 0.001,
    }
    cases = [
        {**base, "layers": 1e300},
        {**base, "layers": 10001},
        {**base, "hidden": 2.0**54},
        {**base, "batch": 0},
        {**base, "layers": 10000},
    ]
    result = subprocess.run(
        ["node", str(script), str(REPO / "docs" / "javascripts" / "labs.js")],
        input=json.dumps({"data": planner_data(), "cases": cases}),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout)
    assert outcome[0] == "RangeError: layers=1e+300 must be a whole number from 1 to 10,000"
    assert outcome[1].startswith("RangeError: layers=10001")
    assert outcome[2].startswith("RangeError: hidden=")
    assert outcome[3].startswith("RangeError: batch=0")
    assert outcome[4] == "planned"  # the largest depth allowed is evaluated


def test_the_race_runs_its_cpu_at_the_rate_the_page_measured():
    slow, fast = race_sim.race_table(cpu_flop_per_s=5e10), race_sim.race_table(cpu_flop_per_s=4e11)
    assert fast.crossover_n > slow.crossover_n  # a faster CPU holds out to larger matrices
    assert fast.rows[-1].cpu_s == pytest.approx(2 * 8192**3 / 4e11)
    html = why_gpus.race_lab_html(fast)
    assert 'data-lab="race"' in html and 'data-cpu-flop-per-s="400000000000.0"' in html
    for bad in (0.0, -1.0, float("inf"), float("nan"), 1e15):
        with pytest.raises(ValueError, match="cpu_flop_per_s"):
            race_sim.race_table(cpu_flop_per_s=bad)


def test_a_card_class_and_a_measured_label_reach_the_page_escaped():
    from gpulesson.timing.results import IllusionResult, MatmulResult

    hostile = "<img src=x onerror=alert(1)> | [x](javascript:y)"
    rate = cost.CardRate(card_class=hostile, vram_gb=8, on_demand_usd_per_h=1.0, spot_usd_per_h=0.5)
    row = where_to_run.cost_markdown(rates=(rate,)).splitlines()[2]
    assert "<img" not in row and "&lt;img" in row and r"\|" in row and r"\[x\]" in row

    def result(median_s: float, device: str) -> MatmulResult:
        return MatmulResult(device=device, dtype="fp32", n=64, threads=1, samples_s=(median_s,))

    illusion = IllusionResult(
        honest=result(0.05, hostile), naive=result(1e-4, hostile), cpu=result(2.0, "cpu")
    )
    text = timing_course.timing_lab_markdown(teaching.timing_lab_inputs(illusion))
    shown = next(line for line in text.splitlines() if line.startswith("Measured"))
    assert "<img" not in shown and "&lt;img" in shown and r"\[x\]" in shown
