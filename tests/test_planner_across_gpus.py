"""The VRAM planner across GPUs: the shape's new fields, the presets, and the tables the
browser multiplies (ZeRO sharding, bytes sent per step) against ``estimate``, ``comm`` and
``gpulesson budget --json``.

The Node tests run ``docs/javascripts/labs.js``'s ``plan()`` on ``planner.json`` as the page
does (``tests/test_labs.py``'s pattern); the Chromium test is ``test_planner_browser.py``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpulesson.memory import comm, planner
from gpulesson.memory.budget import ZERO_SHARDED, estimate, persistent_terms
from gpulesson.memory.recipes import get_recipe
from gpulesson.memory.shape import TransformerShape

REPO = Path(__file__).resolve().parents[1]
PRESETS = {m.id: m for m in planner.model_presets()}
#: The planner's default shape (labs.js's first inputs): 7e9 parameters priced, this config.
DEFAULT_SHAPE = {"vocab": 32000, "seq": 512, "hidden": 4096, "heads": 32, "layers": 32}

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


def _node_plan(tmp_path: Path, cases: list[dict]) -> list[dict]:
    script = tmp_path / "plan.js"
    script.write_text(_NODE_PLAN)
    result = subprocess.run(
        ["node", str(script), str(REPO / "docs" / "javascripts" / "labs.js")],
        input=json.dumps({"data": planner.planner_data(), "cases": cases}),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js")


# --- the shape's new fields


def test_llama_3_8b_counts_its_cited_8_03e9_parameters_not_gpt2s_formula():
    llama = PRESETS["llama-3-8b"]
    assert llama.shape.parameters() == pytest.approx(8.03e9, rel=0.005)
    assert llama.shape.parameters() == pytest.approx(llama.cited_parameters, rel=0.005)
    gpt2_formula = TransformerShape(128256, 8192, 4096, 32, 32, kv_heads=8).parameters()
    assert gpt2_formula == pytest.approx(6.2e9, rel=0.02)  # what the issue says GPT-2's gives


def test_mistral_and_llama_70b_count_their_cited_parameters():
    assert PRESETS["mistral-7b"].shape.parameters() == pytest.approx(7.24e9, rel=0.005)
    for name in ("mistral-7b", "llama-3-70b"):
        m = PRESETS[name]
        assert m.shape.parameters() == pytest.approx(m.cited_parameters, rel=0.005), name


@pytest.mark.parametrize(
    ("name", "hidden", "heads", "layers", "count"),
    [
        ("gpt2", 768, 12, 12, 124_439_808),
        ("gpt2-medium", 1024, 16, 24, 354_823_168),
        ("gpt2-large", 1280, 20, 36, 774_030_080),
        ("gpt2-xl", 1600, 25, 48, 1_557_611_200),
    ],
)
def test_gpt2_sizes_are_unchanged(name, hidden, heads, layers, count):
    default = TransformerShape(50257, 1024, hidden, heads, layers)
    explicit = TransformerShape(
        50257, 1024, hidden, heads, layers, ffn=4 * hidden, gated=False, tied_head=True
    )
    assert default.parameters() == explicit.parameters() == count
    assert PRESETS[name].shape.parameters() == count == PRESETS[name].cited_parameters


def test_each_new_field_adds_what_it_names():
    base = TransformerShape(1000, 64, 128, 4, 3)
    c, v, f, layers = 128, 1000, 512, 3
    untied = TransformerShape(1000, 64, 128, 4, 3, tied_head=False)
    assert untied.parameters() - base.parameters() == v * c
    rotary = TransformerShape(1000, 64, 128, 4, 3, learned_positions=False)
    assert base.parameters() - rotary.parameters() == 64 * c
    gated = TransformerShape(1000, 64, 128, 4, 3, gated=True)
    # three bias-free c x f matrices instead of two with f + c biases
    assert gated.parameters() - base.parameters() == layers * (3 * c * f - 2 * c * f - f - c)
    wide = TransformerShape(1000, 64, 128, 4, 3, ffn=1024)
    assert wide.parameters() - base.parameters() == layers * (2 * c + 1) * (1024 - f)


def test_default_fields_keep_every_estimate_identical():
    for kwargs in ({}, {"preset": "qlora", "checkpointing": "full"}, {"preset": "infer-fp16"}):
        plain = estimate(7e9, shape=TransformerShape(32000, 512, 4096, 32, 32), **kwargs)
        explicit = estimate(
            7e9, shape=TransformerShape(32000, 512, 4096, 32, 32, ffn=16384), **kwargs
        )
        assert plain.total_bytes == explicit.total_bytes
        assert plain.phases == explicit.phases


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"ffn": 0}, "ffn=0 must be a positive whole number"),
        ({"ffn": 2**60}, "ffn=1152921504606846976 is too large"),
        ({"gated": "yes"}, "gated='yes' must be True or False"),
        ({"tied_head": 1}, "tied_head=1 must be True or False"),
    ],
)
def test_bad_new_fields_are_refused_by_name(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TransformerShape(64, 8, 16, 2, 1, **kwargs)


def test_cli_takes_the_new_fields_and_refuses_them_without_a_config():
    llama = PRESETS["llama-3-8b"].shape
    args = [
        "--vocab", "128256", "--seq", "512", "--hidden", "4096", "--heads", "32",
        "--kv-heads", "8", "--layers", "32", "--ffn", "14336", "--gated", "--untied-head",
        "--no-position-table", "--json",
    ]  # fmt: skip
    out = _cli(*args)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["parameters"] == llama.parameters()
    bad = _cli("--params", "7e9", "--gated")
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        "gpulesson budget: error: --gated needs a transformer config: give --vocab --seq "
        "--hidden --heads --layers too"
    ]


def test_a_malformed_preset_names_file_entry_and_field():
    good = json.loads((REPO / "gpulesson" / "memory" / "presets.json").read_text())["presets"][0]
    with pytest.raises(ValueError, match=r"presets.json: preset 'gpt2' lacks field 'ffn'"):
        planner.parse_presets({"presets": [{k: v for k, v in good.items() if k != "ffn"}]})
    with pytest.raises(ValueError, match=r"preset 'gpt2': hidden=768 is not divisible"):
        planner.parse_presets({"presets": [{**good, "heads": 7}]})
    with pytest.raises(ValueError, match=r"preset 'gpt2' field 'source' must cite"):
        planner.parse_presets({"presets": [{**good, "source": "javascript:alert(1)"}]})


# --- the tables the browser multiplies


def test_zero_sharded_table_is_what_persistent_terms_divides():
    recipe = get_recipe("amp")
    whole = persistent_terms(recipe, 8_000, 8_000)
    for zero, names in ZERO_SHARDED.items():
        t = persistent_terms(recipe, 8_000, 8_000, gpus=8, zero=zero)
        got = {
            "weights": t.weights_bytes,
            "gradients": t.gradients_bytes,
            "optimizer": t.optimizer_bytes,
            "master": t.master_bytes,
        }
        full = {
            "weights": whole.weights_bytes,
            "gradients": whole.gradients_bytes,
            "optimizer": whole.optimizer_bytes,
            "master": whole.master_bytes,
        }
        for name in got:
            assert got[name] == (full[name] / 8 if name in names else full[name]), (zero, name)


def test_comm_table_sums_to_step_comm_for_every_stage_and_gpu_count():
    table = planner.comm_table()
    g, p, u = 28e9 + 1, 14e9 + 3, 7e9 + 5
    messages = {"gradients": g, "parameters": p, "updated": u}
    for zero in comm.ZERO_STAGES:
        for n in planner.GPU_COUNTS[1:]:
            want = comm.step_comm(
                gpus=n, zero=zero, gradient_bytes=g, parameter_bytes=p, updated_parameter_bytes=u
            ).sent_bytes
            got = sum(
                round(table["share"][c["collective"]][str(n)] * messages[c["tensor"]] * c["times"])
                for c in table["stages"][str(zero)]
            )
            assert got == want, (zero, n)


def test_planner_json_offers_the_datasheet_cards_including_40_48_141_and_192_gb():
    cards = planner.planner_data()["datasheet_cards"]
    sizes = {c["memory_stated_gb"] for c in cards}
    assert {40.0, 48.0, 141.0, 192.0} <= sizes
    assert len(cards) == len([d for d in planner.datasheets.all_rows() if d.memory_bytes])


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpulesson", "budget", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _case(**changes: object) -> dict:
    x = {
        "params": 7e9, "recipe": "amp", "optimizer": None, "batch": 1, "sequence": 512,
        "vocab": 32000, "hidden": 4096, "heads": 32, "layers": 32, "attention": "sdpa",
        "checkpointing": "none", "fraction": 0.001, "gpus": 1, "zero": 0,
    }  # fmt: skip
    x.update(changes)
    return x


@needs_node
def test_script_with_8_gpus_and_zero_3_gives_what_the_cli_gives(tmp_path):
    """The issue's check, in Node: plan() at GPUs = 8, ZeRO = 3 against gpulesson budget --json."""
    (js,) = _node_plan(tmp_path, [_case(gpus=8, zero=3)])
    shape_args = [f"--{k}={v}" for k, v in DEFAULT_SHAPE.items()]
    out = _cli("--params", "7e9", *shape_args, "--gpus", "8", "--zero", "3", "--json")
    assert out.returncode == 0, out.stderr
    cli = json.loads(out.stdout)
    assert js["total"] == cli["total_bytes"]
    assert js["sent"] == cli["comm_bytes_per_step"]
    assert js["weights"] == cli["weights_bytes"] and js["optimizer"] == cli["optimizer_bytes"]
    single = _node_plan(tmp_path, [_case()])[0]
    assert js["weights"] * 8 == single["weights"]  # ZeRO-3 shards the weights too


@needs_node
def test_script_matches_estimate_and_step_comm_on_a_grid_of_gpus_stages_and_shapes(tmp_path):
    cases = []
    for recipe in ("amp", "bf16", "qlora", "infer-fp16", "fp32"):
        for gpus, zero in ((1, 0), (2, 1), (4, 2), (8, 3), (64, 0), (1024, 3), (16, 2)):
            for name in ("gpt2", "llama-3-8b", "mistral-7b"):
                m = PRESETS[name].shape
                cases.append(
                    _case(
                        recipe=recipe, gpus=gpus, zero=zero, params=float(m.parameters()),
                        vocab=m.vocab, sequence=256, hidden=m.hidden, heads=m.heads,
                        layers=m.layers, kv_heads=m.kv_heads, ffn=m.ffn, gated=m.gated,
                        tied_head=m.tied_head, learned_positions=m.learned_positions,
                    )
                )  # fmt: skip
    results = _node_plan(tmp_path, cases)
    for x, js in zip(cases, results, strict=True):
        shape = TransformerShape(
            x["vocab"], 256, x["hidden"], x["heads"], x["layers"], kv_heads=x["kv_heads"],
            ffn=x["ffn"], gated=x["gated"], tied_head=x["tied_head"],
            learned_positions=x["learned_positions"],
        )  # fmt: skip
        b = estimate(x["params"], preset=x["recipe"], shape=shape, gpus=x["gpus"], zero=x["zero"])
        step = comm.budget_comm(b)
        assert js["total"] == b.total_bytes, x
        assert js["weights"] == b.weights_bytes and js["optimizer"] == b.optimizer_bytes, x
        assert js["sent"] == (None if step is None else step.sent_bytes), x
        assert js["shape_parameters"] == shape.parameters(), x


@needs_node
def test_script_refuses_an_mlp_width_past_its_limit(tmp_path):
    script = tmp_path / "refuse.js"
    last = _NODE_PLAN.strip().splitlines()[-1]
    body = _NODE_PLAN.replace(
        last,
        "try { window.glLabs.plan(input.data, input.cases[0]); process.stdout.write('planned'); }"
        " catch (e) { process.stdout.write(String(e)); }",
    )
    assert body != _NODE_PLAN
    script.write_text(body)
    result = subprocess.run(
        ["node", str(script), str(REPO / "docs" / "javascripts" / "labs.js")],
        input=json.dumps({"data": planner.planner_data(), "cases": [_case(ffn=10**16)]}),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (
        "RangeError: ffn=10000000000000000 must be a whole number from 1 to 2^53" in result.stdout
    )


@needs_node
def test_script_spreads_tensor_and_pipeline_parallel_as_estimate_does(tmp_path):
    """plan() with tensor and pipeline parallel degrees against estimate, budget_comm and
    gpulesson.memory.parallel.tensor_parallel_step (the all-reduces of one micro-batch)."""
    from gpulesson.memory.parallel import tensor_parallel_step
    from gpulesson.memory.recipes import DTYPE_BYTES

    cases = [
        _case(recipe=recipe, gpus=gpus, zero=zero, tp=tp, pp=pp, batch=2)
        for recipe in ("amp", "bf16", "lora")
        for gpus, zero in ((1, 0), (8, 3), (4, 1))
        for tp, pp in ((1, 1), (2, 1), (8, 4), (1, 32))
    ]
    for x, js in zip(cases, _node_plan(tmp_path, cases), strict=True):
        shape = TransformerShape(32000, 512, 4096, 32, 32, 2)
        b = estimate(
            7e9,
            preset=x["recipe"],
            shape=shape,
            gpus=x["gpus"],
            zero=x["zero"],
            tensor_parallel=x["tp"],
            pipeline_parallel=x["pp"],
        )
        assert js["total"] == b.total_bytes, x
        assert js["weights"] == b.weights_bytes, x
        assert js["sent"] == comm.budget_comm(b).sent_bytes, x
        if x["tp"] == 1:
            assert js["tp_sent"] is None
        else:
            step = tensor_parallel_step(
                batch=2, seq=512, hidden=4096, layers=32 // x["pp"], tensor_parallel=x["tp"],
                bytes_per_value=int(DTYPE_BYTES[b.recipe.compute_dtype]),
            )  # fmt: skip
            assert js["tp_sent"] == step.sent_bytes, x
    one = estimate(7e9, shape=TransformerShape(32000, 512, 4096, 32, 32))
    spread = estimate(
        7e9, shape=TransformerShape(32000, 512, 4096, 32, 32), tensor_parallel=8,
        pipeline_parallel=4,
    )  # fmt: skip
    assert spread.weights_bytes * 32 == one.weights_bytes


def test_model_parallel_degrees_are_checked_against_the_shape():
    shape = TransformerShape(32000, 512, 4096, 32, 32)
    with pytest.raises(ValueError, match="tensor_parallel=3 does not divide heads=32"):
        estimate(7e9, shape=shape, tensor_parallel=3)
    with pytest.raises(ValueError, match="pipeline_parallel=5 does not divide layers=32"):
        estimate(7e9, shape=shape, pipeline_parallel=5)
    with pytest.raises(ValueError, match="tensor_parallel=0 must be a positive whole number"):
        estimate(7e9, shape=shape, tensor_parallel=0)
    out = _cli("--params", "7e9", "--tensor-parallel", "2", "--pipeline-parallel", "2", "--json")
    assert out.returncode == 0, out.stderr
    cli = json.loads(out.stdout)
    assert cli["tensor_parallel"] == 2 and cli["weights_bytes"] == 7_000_000_000
