"""The memory budget of a training or inference step, as a ledger of named terms.

A step's bill has four consumers (weights, gradients, optimizer state,
activations), plus fp32 master weights where a recipe keeps them, short-lived
temporaries, and for inference the KV cache. Precision multiplies all of them.
The sources disagree on the training bill of a 7B model (84, 98 or 112 GB)
because each assumes a different precision recipe; here each recipe is a named
preset of one calculator, so the three numbers come out side by side.

The algorithm, for one GPU:

1. Bytes per parameter for each persistent term come from the recipe
   (``Recipe``); gradients, optimizer state and master weights count only
   trainable parameters (LoRA and QLoRA shrink them, not the frozen base).
2. With a transformer shape, activations are what the forward pass keeps for
   the backward pass (``activation_terms``), and temporaries are the largest
   short-lived tensors (the LM-head logits and their gradients dominate small
   models).
3. The peak is the largest of three phases, each with what is alive in it:
   forward (weights, state, saved activations, the logits), backward (the same
   plus gradients as they appear, checked at its start, after each layer and at
   its end), and the optimizer step (weights, gradients, state, its
   temporaries). It is not the plain sum of the terms.
4. ZeRO stage 1, 2, 3 (FSDP full sharding is stage 3) divide optimizer state
   and master weights, then gradients, then weights by the number of GPUs.
5. The CUDA context and allocator slack are headroom lines (``HEADROOM``),
   never part of ``total_bytes``.

The trade-off: the activation and temporary terms are fitted to the GPT-2
architecture of ``gpulesson.memory.gpt2`` as PyTorch runs it; another architecture or
kernel saves different tensors. ``tests/benchmarks/bench_budget_accuracy.py``
checks the estimate against measured steps.

Used by the lessons ``lessons/memory.md``, ``lessons/budget.md`` and
``lessons/capacity.md``, and by ``gpulesson budget``.
The tables and reports that show a budget live in :mod:`gpulesson.memory.render`.

>>> round(estimate(7e9, preset="bf16").total_bytes / GB)
84
>>> round(estimate(7e9, preset="fp16-fp32-grads").total_bytes / GB)
98
>>> round(estimate(7e9, preset="mixed-fp32-master").total_bytes / GB)
112
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from gpulesson.units import GB, GIB

# Bytes per stored number. 4-bit is the sources' flat half byte; the NF4 rows
# add the quantization constants of QLoRA's scheme: one fp32 absmax per block
# of 64 weights (4/64 B), or with double quantization an 8-bit absmax per block
# (1/64 B) plus one fp32 scale per 256 blocks (4/16384 B).
DTYPE_BYTES: dict[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "int8": 1.0,
    "4bit": 0.5,
    "nf4": 0.5 + 4 / 64,
    "nf4-dq": 0.5 + 1 / 64 + 4 / (64 * 256),
}

# Optimizer states per trainable parameter, and bytes per state when the
# optimizer fixes them (8-bit Adam: one byte per value plus one fp32 scale per
# block of 256 values, as bitsandbytes' block-wise optimizers store them).
OPTIMIZER_STATES: dict[str, int] = {"sgd": 0, "sgd-momentum": 1, "adamw": 2, "adam8bit": 2}
ADAM8BIT_STATE_BYTES = 1 + 4 / 256

# Headroom: a teaching estimate, not a measurement. The CUDA context plus
# library workspaces commonly take a few hundred MB to about 1 GB before the
# first tensor; the caching allocator's fragmentation costs about 10% of the
# rest (source 001: "the usable budget ~10% less than the total").
CUDA_CONTEXT_BYTES = 1 * GB
ALLOCATOR_SLACK_FRACTION = 0.10
HEADROOM = (
    f"reserve {CUDA_CONTEXT_BYTES / GB:g} GB for the CUDA context and workspaces, then "
    f"{ALLOCATOR_SLACK_FRACTION:.0%} of the card for allocator slack: a step fits when "
    f"total <= {1 - ALLOCATOR_SLACK_FRACTION:g} x card - {CUDA_CONTEXT_BYTES / GB:g} GB"
)

# The cards of the sources' capacity table, in decimal GB as the sources write them.
CARDS_GB: tuple[int, ...] = (8, 12, 16, 24, 80)

PHASES = ("forward", "backward", "optimizer step")


@dataclass(frozen=True)
class Recipe:
    """A precision recipe: the dtype of each persistent term and the optimizer.

    ``master_dtype`` is ``None`` when the recipe keeps no separate master copy.
    ``compute_dtype`` sets the activations' precision. ``inference`` recipes
    keep weights only (plus the KV cache with a shape); ``adapters`` recipes
    freeze the base and train LoRA adapters held in ``compute_dtype``.
    """

    name: str
    weight_dtype: str
    grad_dtype: str | None
    state_dtype: str | None
    master_dtype: str | None
    optimizer: str | None
    compute_dtype: str
    source: str
    inference: bool = False
    adapters: bool = False

    def bytes_per_param(self) -> dict[str, float]:
        """Bytes per trainable parameter for weights, gradients, optimizer and master.

        >>> PRESETS["fp16-fp32-grads"].bytes_per_param()
        {'weights': 2.0, 'gradients': 4.0, 'optimizer': 8.0, 'master': 0.0}
        """
        return {
            "weights": DTYPE_BYTES[self.weight_dtype],
            "gradients": DTYPE_BYTES[self.grad_dtype] if self.grad_dtype else 0.0,
            "optimizer": _state_bytes(self.optimizer, self.state_dtype),
            "master": DTYPE_BYTES[self.master_dtype] if self.master_dtype else 0.0,
        }


def _state_bytes(optimizer: str | None, state_dtype: str | None) -> float:
    if optimizer is None:
        return 0.0
    states = OPTIMIZER_STATES[optimizer]
    if optimizer == "adam8bit":
        return states * ADAM8BIT_STATE_BYTES
    return states * DTYPE_BYTES[state_dtype or "fp32"]


PRESETS: dict[str, Recipe] = {
    r.name: r
    for r in (
        Recipe(
            "fp16-fp32-grads",
            "fp16",
            "fp32",
            "fp32",
            None,
            "adamw",
            "fp16",
            "source 004: fp16 weights, fp32 gradients, fp32 Adam moments (98 GB for 7B)",
        ),
        Recipe(
            "bf16",
            "bf16",
            "bf16",
            "fp32",
            None,
            "adamw",
            "bf16",
            "source 000: bf16 weights and gradients, fp32 Adam moments (84 GB for 7B)",
        ),
        Recipe(
            "mixed-fp32-master",
            "bf16",
            "bf16",
            "fp32",
            "fp32",
            "adamw",
            "bf16",
            "source 001: mixed precision with fp32 master weights (112 GB for 7B)",
        ),
        Recipe(
            "fp32",
            "fp32",
            "fp32",
            "fp32",
            None,
            "adamw",
            "fp32",
            "everything in fp32, as a model built without a dtype trains",
        ),
        Recipe(
            "bf16-pure",
            "bf16",
            "bf16",
            "bf16",
            None,
            "adamw",
            "bf16",
            "a model built in bf16: torch's AdamW keeps its moments in bf16 too",
        ),
        Recipe(
            "sgd",
            "fp16",
            "fp32",
            None,
            None,
            "sgd",
            "fp16",
            "source 004's SGD column: fp16 weights, fp32 gradients, no state",
        ),
        Recipe(
            "infer-fp16",
            "fp16",
            None,
            None,
            None,
            None,
            "fp16",
            "inference: weights only (source 004: 2 bytes per parameter)",
            inference=True,
        ),
        Recipe(
            "infer-int8",
            "int8",
            None,
            None,
            None,
            None,
            "fp16",
            "inference with int8 weights (per-row scales not counted)",
            inference=True,
        ),
        Recipe(
            "infer-4bit",
            "4bit",
            None,
            None,
            None,
            None,
            "fp16",
            "inference with 4-bit weights, constants not counted",
            inference=True,
        ),
        Recipe(
            "lora",
            "bf16",
            "bf16",
            "fp32",
            None,
            "adamw",
            "bf16",
            "LoRA: frozen bf16 base, adapters trained with fp32 Adam moments",
            adapters=True,
        ),
        Recipe(
            "qlora",
            "4bit",
            "bf16",
            "fp32",
            None,
            "adamw",
            "bf16",
            "source 000: frozen 4-bit base, adapters with fp32 Adam moments (3.6 GB for 7B)",
            adapters=True,
        ),
        Recipe(
            "qlora-nf4",
            "nf4-dq",
            "bf16",
            "fp32",
            None,
            "adamw",
            "bf16",
            "QLoRA with NF4 constants and double quantization (0.516 B per base weight)",
            adapters=True,
        ),
    )
}

DEFAULT_TRAINABLE_FRACTION = 0.001  # the sources' LoRA example: 0.1% of the model
LORA_TARGETS = ("attn", "mlp", "all")


@dataclass(frozen=True)
class TransformerShape:
    """A GPT-2-style transformer and the micro-batch one GPU runs.

    ``seq`` is the sequence length of the batch (and of the position table).
    """

    vocab: int
    seq: int
    hidden: int
    heads: int
    layers: int
    batch: int = 1

    def __post_init__(self) -> None:
        for name in ("vocab", "seq", "hidden", "heads", "layers", "batch"):
            _check_count(name, getattr(self, name))
        if self.hidden % self.heads:
            raise ValueError(
                f"hidden={self.hidden} is not divisible by heads={self.heads}: "
                "pick a head count that divides the hidden size"
            )

    def parameters(self) -> int:
        """GPT-2's parameter count: embeddings, 12C^2 + 13C per block, a final LayerNorm.

        >>> TransformerShape(50257, 1024, 768, 12, 12).parameters()
        124439808
        """
        c = self.hidden
        return self.vocab * c + self.seq * c + self.layers * (12 * c * c + 13 * c) + 2 * c


@dataclass(frozen=True)
class Phase:
    """What is alive at the peak of one phase of the step, in bytes per term."""

    name: str
    alive_bytes: dict[str, int]

    @property
    def total_bytes(self) -> int:
        """The phase's peak: the sum of what is alive in it."""
        return sum(self.alive_bytes.values())


@dataclass(frozen=True)
class Budget:
    """The ledger of one step on one GPU, with its phases and headroom lines.

    The ``*_bytes`` terms are each consumer at its largest; ``total_bytes`` is
    the peak phase, which is at most their sum. Headroom lines are separate.
    """

    preset: str
    recipe: Recipe
    parameters: int
    trainable_parameters: int
    weights_bytes: int
    gradients_bytes: int
    optimizer_bytes: int
    master_bytes: int
    activations_bytes: int
    temporaries_bytes: int
    kv_cache_bytes: int
    phases: tuple[Phase, ...]
    peak_phase: str
    total_bytes: int
    cuda_context_bytes: int
    allocator_slack_bytes: int
    shape: TransformerShape | None
    attention: str
    checkpointing: str
    gpus: int
    zero_stage: int
    accumulation_steps: int
    effective_batch: int | None
    notes: tuple[str, ...]

    @property
    def with_headroom_bytes(self) -> int:
        """What a card must hold: the peak plus the CUDA context and allocator slack."""
        return self.total_bytes + self.cuda_context_bytes + self.allocator_slack_bytes


@dataclass(frozen=True)
class CardVerdict:
    """Whether a budget fits one card, with the headroom rule applied."""

    card_bytes: int
    needed_bytes: int
    fits: bool
    spare_bytes: int  # negative when it does not fit


@dataclass(frozen=True)
class CapacityRow:
    """The largest model a card holds for inference, SGD training and Adam training."""

    card_bytes: int
    inference_params: float
    sgd_params: float
    adam_params: float
    inference_params_headroom: float
    sgd_params_headroom: float
    adam_params_headroom: float


def _check_count(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name}={value!r} must be a positive whole number")


def _check_positive(name: str, value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}={value!r} is not a number: write e.g. 7e9") from None
    if not math.isfinite(number) or number <= 0:
        raise ValueError(f"{name}={value!r} must be a positive, finite number, e.g. 7e9")
    return number


def get_recipe(preset: str) -> Recipe:
    """The named recipe, or a ValueError listing the presets.

    >>> get_recipe("bf16").state_dtype
    'fp32'
    """
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}: use one of {', '.join(PRESETS)}")
    return PRESETS[preset]


def activation_terms(
    shape: TransformerShape, compute_dtype: str, attention: str, checkpointing: str
) -> dict[str, int]:
    """Bytes the forward pass keeps for the backward pass, and the step's big transients.

    Per block without checkpointing: 16 (batch x seq x hidden) values (the two
    LayerNorm inputs and outputs, Q, K, V, the attention output, the MLP's two
    4x-wide tensors), 4 (batch x seq) LayerNorm statistics, and for eager
    attention the softmax of the (batch x heads x seq x seq) scores plus the
    seq x seq mask; SDPA keeps an fp32 log-sum-exp of (batch x heads x seq)
    instead. Full checkpointing keeps only each block's input (1 x b x s x h)
    and recomputes one block at a time. The head keeps the final LayerNorm's
    input and output and the log-softmax of the logits (batch x seq x vocab).

    >>> t = activation_terms(TransformerShape(64, 8, 16, 2, 1, 1), "fp32", "sdpa", "none")
    >>> t["block_saved"], t["head_saved"]
    (8384, 3264)
    """
    if attention not in ("eager", "sdpa"):
        raise ValueError(f"attention={attention!r} must be 'eager' or 'sdpa'")
    if checkpointing not in ("none", "full"):
        raise ValueError(f"checkpointing={checkpointing!r} must be 'none' or 'full'")
    es = DTYPE_BYTES[compute_dtype]
    b, t, c, h, v = shape.batch, shape.seq, shape.hidden, shape.heads, shape.vocab
    btc = b * t * c
    block_full = es * (16 * btc + 4 * b * t)
    if attention == "eager":
        block_full += es * b * h * t * t + t * t  # softmax output, bool mask
        scores = 2 * es * b * h * t * t  # the scores and their gradient, in backward
    else:
        block_full += 4 * b * h * t  # fp32 log-sum-exp
        scores = 0.0
    block_saved = es * btc if checkpointing == "full" else block_full
    head_saved = es * (2 * btc + 2 * b * t + b * t * v) + 2 * 8 * b * t  # + int64 ids, targets
    mlp_saved = es * (10 * btc + 2 * b * t)  # ln_2 input and output, the MLP's 4h tensors
    return {
        "block_saved": int(block_saved),
        "block_full": int(block_full),
        "block_mlp": int(mlp_saved),
        "head_saved": int(head_saved),
        "logits": int(es * b * t * v),
        # A checkpointed block's forward keeps nothing but briefly holds its
        # MLP tensors, or for eager attention the scores and their scaled copy.
        "block_forward": int(max(es * 10 * btc, es * 4 * btc + scores)),
        # Backward through the MLP: the gradients of its two 4h-wide tensors.
        "mlp_backward": int(es * 8 * btc),
        # Backward through attention: the scores' gradients (eager) or those of Q, K, V, y.
        "attn_backward": int(scores if attention == "eager" else es * 4 * btc),
    }


def _lora_trainable(shape: TransformerShape | None, rank: int, targets: str) -> int:
    if shape is None:
        raise ValueError(
            "a LoRA rank needs the model's shape (--hidden and --layers): "
            "give a config or use a trainable fraction instead"
        )
    _check_count("lora_rank", rank)
    c = shape.hidden
    # rank r adapter on a (d_in x d_out) matrix: r * (d_in + d_out) parameters.
    per_layer = {"attn": 4 * rank * 2 * c, "mlp": 2 * rank * 5 * c}
    per_layer["all"] = per_layer["attn"] + per_layer["mlp"]
    if targets not in per_layer:
        raise ValueError(f"lora targets {targets!r} must be one of {', '.join(LORA_TARGETS)}")
    return shape.layers * per_layer[targets]


def estimate(
    params: float | None = None,
    *,
    preset: str = "bf16",
    shape: TransformerShape | None = None,
    optimizer: str | None = None,
    state_dtype: str | None = None,
    attention: str = "sdpa",
    checkpointing: str = "none",
    gpus: int = 1,
    zero: int = 0,
    accumulation_steps: int = 1,
    trainable_fraction: float | None = None,
    lora_rank: int | None = None,
    lora_targets: str = "attn",
    foreach: bool = False,
) -> Budget:
    """Estimate one step's memory on one GPU from a parameter count or a transformer shape.

    ``optimizer`` and ``state_dtype`` override the preset's. ``foreach=True``
    prices the multi-tensor optimizer CUDA uses by default (one extra copy of
    the trainable parameters in the state dtype); the default prices the
    per-tensor loop (two copies of the largest parameter).

    >>> from gpulesson.units import format_gb
    >>> b = estimate(7e9, preset="qlora")
    >>> format_gb(b.total_bytes), b.trainable_parameters
    ('3.6 GB', 7000000)
    >>> estimate(-1)
    Traceback (most recent call last):
    ...
    ValueError: params=-1 must be a positive, finite number, e.g. 7e9
    """
    recipe = get_recipe(preset)
    if optimizer is not None or state_dtype is not None:
        if recipe.inference:
            raise ValueError(f"preset {preset!r} is inference-only: it has no optimizer")
        if optimizer is not None and optimizer not in OPTIMIZER_STATES:
            raise ValueError(
                f"unknown optimizer {optimizer!r}: use one of {', '.join(OPTIMIZER_STATES)}"
            )
        if state_dtype is not None and state_dtype not in DTYPE_BYTES:
            raise ValueError(
                f"unknown state dtype {state_dtype!r}: use one of {', '.join(DTYPE_BYTES)}"
            )
        recipe = replace(
            recipe,
            optimizer=optimizer or recipe.optimizer,
            state_dtype=state_dtype or recipe.state_dtype,
        )
    _check_count("gpus", gpus)
    _check_count("accumulation_steps", accumulation_steps)
    if zero not in (0, 1, 2, 3):
        raise ValueError(f"zero={zero!r} must be 0 (no sharding), 1, 2 or 3")
    if zero and gpus == 1:
        raise ValueError(f"ZeRO stage {zero} shards across GPUs: give gpus of 2 or more")
    if params is None and shape is None:
        raise ValueError("give a parameter count (e.g. 7e9) or a transformer shape")
    if params is not None:
        n_params = int(round(_check_positive("params", params)))
    else:
        assert shape is not None
        n_params = shape.parameters()

    notes: list[str] = [recipe.source]
    if recipe.adapters:
        if lora_rank is not None and trainable_fraction is not None:
            raise ValueError("give a LoRA rank or a trainable fraction, not both")
        if lora_rank is not None:
            trainable = _lora_trainable(shape, lora_rank, lora_targets)
            notes.append(f"adapters: rank {lora_rank} on {lora_targets} layers")
        else:
            fraction = (
                DEFAULT_TRAINABLE_FRACTION
                if trainable_fraction is None
                else (_check_positive("trainable_fraction", trainable_fraction))
            )
            if fraction > 1:
                raise ValueError(
                    f"trainable_fraction={fraction!r} must be at most 1 (it is a share)"
                )
            trainable = int(round(n_params * fraction))
            notes.append(f"adapters: {fraction:.2%} of the parameters are trainable")
    elif trainable_fraction is not None or lora_rank is not None:
        raise ValueError(f"preset {preset!r} trains every parameter: use --preset lora or qlora")
    else:
        trainable = 0 if recipe.inference else n_params

    bpp = recipe.bytes_per_param()
    adapter_bytes = DTYPE_BYTES[recipe.compute_dtype] if recipe.adapters else 0.0
    weights = n_params * bpp["weights"] + trainable * adapter_bytes
    grads = trainable * bpp["gradients"]
    states = trainable * bpp["optimizer"]
    master = trainable * bpp["master"]
    # ZeRO: stage 1 shards optimizer state (and master), 2 adds gradients, 3 weights.
    if zero >= 1:
        states, master = states / gpus, master / gpus
    if zero >= 2:
        grads = grads / gpus
    if zero >= 3:
        weights = weights / gpus
        notes.append("ZeRO-3/FSDP: one layer's full weights are gathered at a time (not counted)")

    persistent = {
        "weights": int(weights),
        "master weights": int(master),
        "optimizer state": int(states),
    }
    kv_cache = 0
    acts = temps = 0
    effective_batch = None
    phases: list[Phase]
    if shape is None:
        grad_alive = int(grads)
        if recipe.inference:
            phases = [Phase("forward", dict(persistent))]
        else:
            phases = [
                Phase(
                    "forward",
                    {**persistent, "gradients": int(grads) if accumulation_steps > 1 else 0},
                ),
                Phase("backward", {**persistent, "gradients": grad_alive}),
                Phase("optimizer step", {**persistent, "gradients": grad_alive}),
            ]
        notes.append("no shape given: activations and temporaries are not counted")
    else:
        effective_batch = shape.batch * accumulation_steps * gpus
        terms = activation_terms(shape, recipe.compute_dtype, attention, checkpointing)
        if recipe.inference:
            kv_bytes = DTYPE_BYTES[recipe.compute_dtype]
            kv_cache = int(2 * shape.layers * shape.batch * shape.seq * shape.hidden * kv_bytes)
            # Prefill of the whole sequence: one block's widest tensor and the logits.
            temps = int(kv_bytes * shape.batch * shape.seq * (4 * shape.hidden) + terms["logits"])
            phases = [Phase("forward", {**persistent, "KV cache": kv_cache, "temporaries": temps})]
            notes.append("inference: KV cache for the full sequence, prefill transients")
        else:
            phases, acts, temps = _training_phases(
                shape,
                terms,
                persistent,
                recipe,
                n_params,
                trainable,
                grads,
                accumulation_steps,
                checkpointing,
                foreach,
            )
    peak = max(reversed(phases), key=lambda p: p.total_bytes)  # ties go to the later phase
    total = peak.total_bytes
    slack = (
        int((total + CUDA_CONTEXT_BYTES) / (1 - ALLOCATOR_SLACK_FRACTION))
        - total
        - CUDA_CONTEXT_BYTES
    )
    return Budget(
        preset=preset,
        recipe=recipe,
        parameters=n_params,
        trainable_parameters=trainable,
        weights_bytes=int(weights),
        gradients_bytes=int(grads),
        optimizer_bytes=int(states),
        master_bytes=int(master),
        activations_bytes=int(acts),
        temporaries_bytes=int(temps),
        kv_cache_bytes=kv_cache,
        phases=tuple(phases),
        peak_phase=peak.name,
        total_bytes=total,
        cuda_context_bytes=CUDA_CONTEXT_BYTES,
        allocator_slack_bytes=slack,
        shape=shape,
        attention=attention,
        checkpointing=checkpointing,
        gpus=gpus,
        zero_stage=zero,
        accumulation_steps=accumulation_steps,
        effective_batch=effective_batch,
        notes=tuple(notes),
    )


def _training_phases(
    shape: TransformerShape,
    terms: dict[str, int],
    persistent: dict[str, int],
    recipe: Recipe,
    n_params: int,
    trainable: int,
    grads: float,
    accumulation_steps: int,
    checkpointing: str,
    foreach: bool,
) -> tuple[list[Phase], int, int]:
    """The forward, backward and optimizer phases of a training step."""
    layers = shape.layers
    acts = layers * terms["block_saved"] + terms["head_saved"]
    share = grads / n_params if n_params else 0.0  # gradient bytes per parameter (after LoRA/ZeRO)
    c = shape.hidden
    g_layer = share * (12 * c * c + 13 * c)
    g_head = share * (shape.vocab * c + 2 * c)
    g_all = int(grads)
    g_before = g_all if accumulation_steps > 1 else 0  # earlier micro-batches' gradients
    ids = 2 * 8 * shape.batch * shape.seq
    # Forward: the logits exist beside their log-softmax; with checkpointing a
    # block's full forward runs (nothing saved) on top of the block inputs.
    forward_points = [{"gradients": g_before, "activations": acts, "temporaries": terms["logits"]}]
    if checkpointing == "full":
        forward_points.append(
            {
                "gradients": g_before,
                "activations": layers * terms["block_saved"] + ids,
                "temporaries": terms["block_forward"],
            }
        )
    forward = {**persistent, **max(forward_points, key=lambda p: sum(p.values()))}
    # Backward, start: the gradients of the log-probabilities and of the logits.
    points = [{"gradients": g_before, "activations": acts, "temporaries": 2 * terms["logits"]}]
    # Backward through block l (top first): blocks below still hold their
    # activations, a checkpointed block is recomputed in full; first its MLP,
    # then (MLP tensors freed) its attention.
    for done in range(layers):
        below = (layers - done - 1) * terms["block_saved"] + ids
        # Gradients so far: the head, the blocks above, and this block's MLP
        # output projection (4h^2) before its GELU backward, then the whole MLP
        # and attention output projection (9h^2) before its attention backward.
        grads_above = g_head + done * g_layer
        grads_mlp = g_all if accumulation_steps > 1 else int(grads_above + share * 4 * c * c)
        grads_attn = g_all if accumulation_steps > 1 else int(grads_above + share * 9 * c * c)
        points.append(
            {
                "gradients": grads_mlp,
                "activations": below + terms["block_full"],
                "temporaries": terms["mlp_backward"],
            }
        )
        points.append(
            {
                "gradients": grads_attn,
                "activations": below + terms["block_full"] - terms["block_mlp"],
                "temporaries": terms["attn_backward"],
            }
        )
    # Backward, end: every gradient, plus the dense gradient of the embedding table.
    points.append(
        {
            "gradients": g_all,
            "activations": 0,
            "temporaries": int(share * shape.vocab * c) if trainable == n_params else 0,
        }
    )
    backward_alive = max(points, key=lambda p: sum(p.values()))
    backward = {**persistent, **backward_alive}
    state_bytes = recipe.bytes_per_param()["optimizer"] / max(
        OPTIMIZER_STATES.get(recipe.optimizer or "sgd", 0), 1
    )
    if OPTIMIZER_STATES.get(recipe.optimizer or "sgd", 0) == 0:
        opt_temp = 0
    elif foreach:
        opt_temp = int(trainable * state_bytes)
    else:
        largest = shape.vocab * c if trainable == n_params else 0
        opt_temp = int(2 * largest * state_bytes)
    optimizer = {**persistent, "gradients": g_all, "temporaries": opt_temp}
    temps = max(forward["temporaries"], backward_alive["temporaries"], opt_temp)
    phases = [
        Phase("forward", forward),
        Phase("backward", backward),
        Phase("optimizer step", optimizer),
    ]
    return phases, acts, temps


def fits(budget: Budget, card_bytes: int) -> CardVerdict:
    """Whether ``budget`` fits a card of ``card_bytes`` once the headroom rule is applied.

    >>> fits(estimate(7e9, preset="infer-fp16"), 24 * GIB).fits
    True
    """
    card = int(_check_positive("card_bytes", card_bytes))
    needed = budget.with_headroom_bytes
    return CardVerdict(card, needed, needed <= card, card - needed)


def max_params(card_bytes: float, preset: str, headroom: bool = False) -> float:
    """The largest parameter count whose weights, gradients and state fit a card.

    Without headroom this is the sources' division (card / bytes per parameter);
    with it, the card first loses the CUDA context and the allocator slack.

    >>> round(max_params(24 * GB, "fp16-fp32-grads") / 1e9, 1)
    1.7
    """
    card = _check_positive("card_bytes", card_bytes)
    per_param = sum(get_recipe(preset).bytes_per_param().values())
    if headroom:
        card = card * (1 - ALLOCATOR_SLACK_FRACTION) - CUDA_CONTEXT_BYTES
    return max(card, 0.0) / per_param


def capacity(
    cards_bytes: tuple[int, ...] = tuple(c * GB for c in CARDS_GB),
) -> tuple[CapacityRow, ...]:
    """The sources' capacity table: inference (fp16), SGD and Adam training per card.

    >>> [round(r.sgd_params / 1e9, 1) for r in capacity()]
    [1.3, 2.0, 2.7, 4.0, 13.3]
    """
    rows = []
    for card in cards_bytes:
        values = [
            max_params(card, preset, headroom)
            for headroom in (False, True)
            for preset in ("infer-fp16", "sgd", "fp16-fp32-grads")
        ]
        rows.append(CapacityRow(card, *values))
    return tuple(rows)


def planner_data() -> dict[str, Any]:
    """Everything a JavaScript VRAM planner needs to compute what this module computes.

    The simple planner's formula, per GPU, for ``P`` parameters and recipe ``r``
    (coefficients under ``recipes[r]``, bytes per parameter):

    * trainable ``N = P`` for full training, ``N = P * trainable_fraction`` for
      LoRA/QLoRA (``adapters: true``; default fraction ``default_trainable_fraction``);
    * weights ``= P * weights + N * adapter_weights`` (adapter_weights is 0 unless
      adapters); gradients ``= N * gradients``; optimizer ``= N * optimizer[opt]``
      (``optimizer`` is keyed by optimizer name); master ``= N * master``;
    * activations (training, needs batch ``b``, sequence ``s``, hidden ``h``,
      layers ``L``, activation bytes ``e = act_bytes``): per layer
      ``e * b * s * h * activation.per_layer_bsh[checkpointing]`` (16 with none,
      1 with full checkpointing; the attention and vocabulary terms of the full
      calculator need heads and vocabulary and are left out here);
    * total ``= weights + gradients + optimizer + master + activations``, the
      arithmetic of the sources (the full calculator's phase peak needs the
      vocabulary and is at most this sum plus the logits);
    * a card fits when ``(total + headroom.cuda_context_bytes) /
      (1 - headroom.allocator_slack_fraction) <= card_bytes``.

    >>> d = planner_data()
    >>> d["recipes"]["bf16"]["gradients"], d["cards_bytes"][0]
    (2.0, 8000000000)
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
                opt: (0.0 if r.inference else _state_bytes(opt, r.state_dtype))
                for opt in OPTIMIZER_STATES
            },
            "act_bytes": DTYPE_BYTES[r.compute_dtype],
            "adapter_weights": DTYPE_BYTES[r.compute_dtype] if r.adapters else 0.0,
            "adapters": r.adapters,
            "inference": r.inference,
            "source": r.source,
        }
    return {
        "units": {"GB": GB, "GiB": GIB},
        "recipes": recipes,
        "cards_bytes": [c * GB for c in CARDS_GB],
        "default_trainable_fraction": DEFAULT_TRAINABLE_FRACTION,
        "headroom": {
            "cuda_context_bytes": CUDA_CONTEXT_BYTES,
            "allocator_slack_fraction": ALLOCATOR_SLACK_FRACTION,
            "rule": HEADROOM,
        },
        "activation": {
            "per_layer_bsh": {"none": 16, "full": 1},
            "inputs": ["batch", "sequence", "hidden", "layers", "checkpointing"],
        },
    }
