"""The VRAM planner: its numbers for one input, and the estimate's tables as JSON for the browser.

:func:`plan` is what the planner shows for one :class:`PlannerInputs` (the estimate, alive
at the step's peak, and which cards it fits); the lesson "Budgeting a training run" renders
a few cases (:func:`gpulesson.course.budget.planner_markdown`).

The planner widget (``docs/javascripts/labs.js``) evaluates what
:func:`planner_data` exports, the recipes' bytes per parameter and the term and
point tables of :mod:`gpulesson.memory.terms`, exactly as
:func:`gpulesson.memory.budget.estimate` does; the site writes it to
``assets/labs/planner.json`` at build (``gpulesson.site.labs_hook.planner_json``)
and the browser test compares the two on many inputs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

from gpulesson.memory import comm
from gpulesson.memory.budget import (
    ALLOCATOR_SLACK_FRACTION,
    CUDA_CONTEXT_BYTES,
    DEFAULT_LOSS_CHUNKS,
    DEFAULT_TRAINABLE_FRACTION,
    HEADROOM,
    MODEL_PARALLEL_SHARDED,
    ZERO_SHARDED,
    estimate,
    fits,
)
from gpulesson.memory.capacity import CARDS_GB
from gpulesson.memory.parallel import ALL_REDUCES_PER_LAYER
from gpulesson.memory.recipes import (
    DEFAULT_TRAINING_PRESET,
    DTYPE_BYTES,
    OPTIMIZER_STATES,
    PRESETS,
    get_recipe,
    state_bytes,
)
from gpulesson.memory.shape import TransformerShape, limits_data
from gpulesson.memory.terms import tables_data
from gpulesson.results import datasheets
from gpulesson.units import GB, GIB

PRESETS_FILE = "presets.json"
#: The GPU counts the planner offers (its "GPUs" control).
GPU_COUNTS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
#: The tensor- and pipeline-parallel degrees it offers (each one of :data:`GPU_COUNTS`).
PARALLEL_DEGREES = (1, 2, 4, 8, 16, 32, 64)
_PRESET_FIELDS = (
    "id", "label", "source", "vocab", "seq", "hidden", "heads", "kv_heads", "layers", "ffn",
    "gated", "tied_head", "learned_positions", "cited_parameters",
)  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class ModelPreset:
    """A model's shape from its cited config, and the parameter count its checkpoint has."""

    id: str
    label: str
    source: str
    shape: TransformerShape
    cited_parameters: int


def parse_presets(
    data: Any, label: str = f"gpulesson/memory/{PRESETS_FILE}"
) -> tuple[ModelPreset, ...]:
    """The presets of ``data`` (the file's JSON), each checked; a ValueError names entry and field.

    >>> parse_presets({"presets": [{"id": "x"}]})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: gpulesson/memory/presets.json: preset 'x' lacks field 'label': ...
    """
    out = []
    for entry in data.get("presets", []) if isinstance(data, dict) else []:
        name = entry.get("id", "?") if isinstance(entry, dict) else "?"
        for f in _PRESET_FIELDS:
            if not isinstance(entry, dict) or f not in entry:
                raise ValueError(
                    f"{label}: preset {name!r} lacks field {f!r}: give every field of "
                    f"{', '.join(_PRESET_FIELDS)}"
                )
        if not str(entry["source"]).startswith("https://huggingface.co/"):
            raise ValueError(
                f"{label}: preset {name!r} field 'source' must cite a Hugging Face URL"
            )
        try:
            shape = TransformerShape(
                entry["vocab"], entry["seq"], entry["hidden"], entry["heads"], entry["layers"],
                kv_heads=entry["kv_heads"], ffn=entry["ffn"], gated=entry["gated"],
                tied_head=entry["tied_head"], learned_positions=entry["learned_positions"],
            )  # fmt: skip
        except ValueError as exc:
            raise ValueError(f"{label}: preset {name!r}: {exc}") from None
        out.append(
            ModelPreset(
                id=str(entry["id"]),
                label=str(entry["label"]),
                source=str(entry["source"]),
                shape=shape,
                cited_parameters=int(entry["cited_parameters"]),
            )
        )
    return tuple(out)


def model_presets() -> tuple[ModelPreset, ...]:
    """The planner's model presets (``presets.json``), checked.

    >>> p = {m.id: m for m in model_presets()}
    >>> p["gpt2"].shape.parameters(), round(p["llama-3-8b"].shape.parameters() / 1e9, 2)
    (124439808, 8.03)
    """
    text = resources.files("gpulesson.memory").joinpath(PRESETS_FILE).read_text("utf-8")
    return parse_presets(json.loads(text))


def comm_table() -> dict[str, Any]:
    """Bytes sent per step as tables read off :func:`gpulesson.memory.comm.step_comm`.

    ``stages`` lists each ZeRO stage's collectives (one micro-batch per step) with the
    tensor each moves (``gradients``, ``parameters`` or ``updated``: the trainable
    parameters gathered after the step) and how many times; ``share`` is each
    collective's share of the tensor one GPU sends, by GPU count
    (:func:`gpulesson.memory.comm.sent_fraction`). One GPU's bytes per step are the sum
    over the stage's collectives of ``round(share x message x times)``.

    >>> t = comm_table()
    >>> [(c["collective"], c["tensor"]) for c in t["stages"]["3"]]
    [('all-gather', 'parameters'), ('all-gather', 'parameters'), ('reduce-scatter', 'gradients')]
    >>> t["share"]["all-reduce"]["8"]
    1.75
    """
    probe = {1.0: "gradients", 2.0: "parameters", 3.0: "updated"}
    stages = {}
    for zero in comm.ZERO_STAGES:
        c = comm.step_comm(
            gpus=2, zero=zero, gradient_bytes=1, parameter_bytes=2, updated_parameter_bytes=3
        )
        stages[str(zero)] = [
            {"collective": x.collective, "tensor": probe[float(x.message_bytes)], "times": x.times}
            for x in c.collectives
        ]
    share = {
        name: {str(n): (comm.sent_fraction(name, n) if n > 1 else 0.0) for n in GPU_COUNTS}
        for name in comm.COLLECTIVES
    }
    return {"stages": stages, "share": share}


def card_rows() -> list[dict[str, Any]]:
    """Every datasheet row with a memory size: id, name and bytes (the stated GB as GiB).

    >>> rows = {r["id"]: r for r in card_rows()}
    >>> rows["h200"]["memory_stated_gb"], rows["a100-80gb"]["memory_bytes"] == 80 * 2**30
    (141.0, True)
    """
    return [
        {
            "id": d.id,
            "name": d.name,
            "memory_stated_gb": d.memory_stated_gb,
            "memory_bytes": d.memory_bytes,
            "source": d.sources[0].url if d.sources else None,
        }
        for d in datasheets.all_rows()
        if d.memory_bytes is not None
    ]


def planner_data(accuracy: dict[str, Any] | None = None) -> dict[str, Any]:
    """Everything the VRAM planner's script needs to compute what :func:`estimate` computes.

    ``recipes`` holds each preset's bytes per parameter (``weights``,
    ``gradients``, ``master``; ``optimizer`` and ``states`` keyed by optimizer;
    ``compute_bytes`` for activations; ``adapter_weights`` for LoRA adapters);
    ``terms`` and ``points`` are :mod:`gpulesson.memory.terms`' tables, which
    the script evaluates exactly as :func:`estimate` does (one GPU, no
    sharding, no accumulation, the per-tensor optimizer); ``headroom`` the fit
    rule: a card fits when ``(total + cuda_context_bytes) / (1 -
    allocator_slack_fraction) <= card``; ``limits`` the largest value of each
    count of the shape and why (:func:`gpulesson.memory.shape.limits_data`, the
    limits the estimate and ``gpulesson budget`` enforce), which the script checks
    before it evaluates anything.

    Across GPUs: ``zero_sharded`` names what each ZeRO stage divides by the GPU count
    (:data:`gpulesson.memory.budget.ZERO_SHARDED`), ``model_parallel_sharded`` what tensor x
    pipeline parallelism divides (:data:`gpulesson.memory.budget.MODEL_PARALLEL_SHARDED`),
    ``tensor_parallel_all_reduces_per_layer`` Megatron's activation all-reduces
    (:mod:`gpulesson.memory.parallel`), ``comm`` the bytes sent per step
    (:func:`comm_table`), ``gpu_counts`` the counts offered; ``datasheet_cards`` every
    datasheet row with its memory (:func:`card_rows`); ``presets`` the model presets
    (:func:`model_presets`); ``accuracy`` the estimator's measured error, when the build
    measured it (the memory lesson's accuracy table), else None.

    >>> d = planner_data()
    >>> d["recipes"]["bf16"]["gradients"], d["cards_bytes"][0], d["default_preset"]
    (2.0, 8000000000, 'amp')
    >>> d["limits"]["layers"]["maximum"]
    10000
    >>> import json
    >>> json.loads(json.dumps(d)) == d
    True
    """
    recipes = {}
    for name, r in PRESETS.items():
        bpp = r.bytes_per_param()
        recipes[name] = {
            "weights": bpp["weights"],
            "gradients": bpp["gradients"],
            "master": bpp["master"],
            "optimizer_default": r.optimizer,
            "optimizer": {
                opt: (0.0 if r.inference else state_bytes(opt, r.state_dtype))
                for opt in OPTIMIZER_STATES
            },
            "states": dict(OPTIMIZER_STATES),
            "compute_bytes": DTYPE_BYTES[r.compute_dtype],
            "adapter_weights": DTYPE_BYTES[r.compute_dtype] if r.adapters else 0.0,
            "adapters": r.adapters,
            "inference": r.inference,
            "source": r.source,
            "gives_up": r.gives_up,
        }
    return {
        "units": {"GB": GB, "GiB": GIB},
        "recipes": recipes,
        "default_preset": DEFAULT_TRAINING_PRESET,
        "cards_bytes": [c * GB for c in CARDS_GB],
        "default_trainable_fraction": DEFAULT_TRAINABLE_FRACTION,
        "default_loss_chunks": DEFAULT_LOSS_CHUNKS,
        "limits": limits_data(),
        "headroom": {
            "cuda_context_bytes": CUDA_CONTEXT_BYTES,
            "allocator_slack_fraction": ALLOCATOR_SLACK_FRACTION,
            "rule": HEADROOM,
        },
        "zero_sharded": {str(z): list(v) for z, v in ZERO_SHARDED.items()},
        "model_parallel_sharded": list(MODEL_PARALLEL_SHARDED),
        "parallel_degrees": list(PARALLEL_DEGREES),
        "tensor_parallel_all_reduces_per_layer": ALL_REDUCES_PER_LAYER,
        "comm": comm_table(),
        "gpu_counts": list(GPU_COUNTS),
        "datasheet_cards": card_rows(),
        "presets": [
            {
                "id": m.id,
                "label": m.label,
                "source": m.source,
                "vocab": m.shape.vocab,
                "seq": m.shape.seq,
                "hidden": m.shape.hidden,
                "heads": m.shape.heads,
                "kv_heads": m.shape.kv_head_count,
                "layers": m.shape.layers,
                "ffn": m.shape.ffn_size,
                "gated": m.shape.gated,
                "tied_head": m.shape.tied_head,
                "learned_positions": m.shape.learned_positions,
                "parameters": m.shape.parameters(),
                "cited_parameters": m.cited_parameters,
            }
            for m in model_presets()
        ],
        "accuracy": accuracy,
        **tables_data(),
    }


# --- the planner's numbers for one input, as the widget computes them --------------------


@dataclass(frozen=True, kw_only=True)
class PlannerInputs:
    """What the planner widget asks for: a model, a recipe and one micro-batch on one GPU.

    ``checkpointing`` is 'none' or 'full', ``attention`` 'sdpa' or 'eager';
    ``trainable_fraction`` applies to the LoRA and QLoRA recipes only.
    """

    params: float
    recipe: str
    optimizer: str | None = None
    batch: int = 1
    sequence: int = 2048
    hidden: int = 4096
    heads: int = 32
    layers: int = 32
    vocab: int = 32000
    attention: str = "sdpa"
    checkpointing: str = "none"
    trainable_fraction: float | None = None


@dataclass(frozen=True, kw_only=True)
class CardFit:
    """Whether the run fits one card, with the headroom rule applied."""

    card_bytes: int
    fits: bool


@dataclass(frozen=True, kw_only=True)
class PlannerResult:
    """The planner's stacked bar: what is alive at the step's peak, by consumer, in bytes.

    The consumers sum to ``total_bytes`` (the peak of ``peak_phase``);
    ``needed_bytes`` adds the CUDA context and allocator slack.
    """

    inputs: PlannerInputs
    peak_phase: str
    weights_bytes: int
    master_bytes: int
    optimizer_bytes: int
    gradients_bytes: int
    activations_bytes: int
    temporaries_bytes: int
    kv_cache_bytes: int
    total_bytes: int
    needed_bytes: int
    fits: tuple[CardFit, ...]


def plan(x: PlannerInputs) -> PlannerResult:
    """The planner's numbers for ``x``: :func:`gpulesson.memory.budget.estimate`, alive at the peak.

    The widget computes the same from ``planner.json`` (the estimate's own
    coefficient tables); the browser test compares both on many inputs.

    >>> r = plan(PlannerInputs(params=7e9, recipe="bf16", batch=1, sequence=512))
    >>> r.peak_phase, r.weights_bytes, [c.fits for c in r.fits]
    ('optimizer step', 14000000000, [False, False, False, False, False])
    """
    recipe = get_recipe(x.recipe)
    shape = TransformerShape(
        vocab=x.vocab,
        seq=x.sequence,
        hidden=x.hidden,
        heads=x.heads,
        layers=x.layers,
        batch=x.batch,
    )
    budget = estimate(
        x.params,
        preset=x.recipe,
        shape=shape,
        optimizer=None if recipe.inference else x.optimizer,
        attention=x.attention,
        checkpointing=x.checkpointing,
        trainable_fraction=x.trainable_fraction if recipe.adapters else None,
    )
    alive = next(p for p in budget.phases if p.name == budget.peak_phase).alive_bytes
    return PlannerResult(
        inputs=x,
        peak_phase=budget.peak_phase,
        weights_bytes=alive.get("weights", 0),
        master_bytes=alive.get("master weights", 0),
        optimizer_bytes=alive.get("optimizer state", 0),
        gradients_bytes=alive.get("gradients", 0),
        activations_bytes=alive.get("activations", 0),
        temporaries_bytes=alive.get("temporaries", 0),
        kv_cache_bytes=alive.get("KV cache", 0),
        total_bytes=budget.total_bytes,
        needed_bytes=budget.with_headroom_bytes,
        fits=tuple(CardFit(card_bytes=c * GB, fits=fits(budget, c * GB).fits) for c in CARDS_GB),
    )


def planner_cases() -> tuple[PlannerInputs, ...]:
    """The cases the planner's static table shows: the sources' three 7B recipes and levers.

    Shaped like a 7B model (vocabulary 32,000, hidden 4,096, 32 heads, 32 layers);
    the 1.5B case like GPT-2 XL (vocabulary 50,257, hidden 1,600, 25 heads, 48 layers).

    >>> [c.recipe for c in planner_cases()][:4]
    ['amp', 'bf16', 'fp16-fp32-grads', 'mixed-fp32-master']
    """
    return (
        PlannerInputs(params=7e9, recipe="amp", batch=1, sequence=512),
        PlannerInputs(params=7e9, recipe="bf16", batch=1, sequence=512),
        PlannerInputs(params=7e9, recipe="fp16-fp32-grads", batch=1, sequence=512),
        PlannerInputs(params=7e9, recipe="mixed-fp32-master", batch=1, sequence=512),
        PlannerInputs(params=7e9, recipe="bf16", batch=8, sequence=2048),
        PlannerInputs(params=7e9, recipe="bf16", batch=8, sequence=2048, checkpointing="full"),
        PlannerInputs(params=7e9, recipe="qlora", batch=1, sequence=2048),
        PlannerInputs(
            params=1.5e9,
            recipe="fp16-fp32-grads",
            batch=1,
            sequence=512,
            vocab=50257,
            hidden=1600,
            heads=25,
            layers=48,
        ),
    )
