"""The memory budget of a training or inference step, as a ledger of named terms.

A step's bill has four consumers (weights, gradients, optimizer state,
activations), plus fp32 master weights where a recipe keeps them, short-lived
temporaries, and for inference the KV cache. Precision multiplies all of them.
The sources disagree on the training bill of a 7B model (84, 98 or 112 GB)
because each assumes a different precision recipe; here each recipe is a named
preset of one calculator (:mod:`gpulesson.memory.recipes`), so the numbers come
out side by side. The norm for training is ``amp``, 16 bytes per parameter.

The algorithm of :func:`estimate`, for one GPU:

1. Bytes per parameter for each persistent term come from the recipe
   (:func:`persistent_terms`); gradients, optimizer state and master weights
   count only trainable parameters (:func:`trainable_parameters`: LoRA and
   QLoRA shrink them, not the frozen base).
2. ZeRO stage 1, 2, 3 (FSDP full sharding is stage 3) divide optimizer state
   and master weights, then gradients, then weights by the number of GPUs.
3. With a transformer shape, the activation and temporary terms are the
   coefficient tables of :mod:`gpulesson.memory.terms`, evaluated for the shape
   (:func:`step_sizes`, :func:`step_conditions`, :func:`activation_terms`).
4. The peak is the largest of three phases (:func:`training_phases`): forward,
   backward (checked at its start, in each block's MLP and attention backward,
   and at its end) and the optimizer step, each with what is alive in it. It is
   not the plain sum of the terms. Inference has one phase, the prefill
   (:func:`inference_phases`); without a shape only the persistent terms count
   (:func:`phases_without_shape`).
5. The CUDA context and allocator slack are headroom lines (``HEADROOM``),
   never part of ``total_bytes``.

The trade-off: the activation and temporary terms are fitted to the GPT-2
architecture of ``gpulesson.memory.gpt2`` as PyTorch runs it, or with
``impl="transformers"`` to Hugging Face transformers' ``GPT2LMHeadModel``
(the same architecture, more saved tensors); another architecture or kernel
saves different tensors. ``tests/benchmarks/bench_budget_accuracy.py`` checks
both against measured steps.

Used by the lessons ``lessons/memory.md``, ``lessons/budget.md`` and
``lessons/capacity.md``, and by ``gpulesson budget``.
The tables and reports that show a budget live in :mod:`gpulesson.memory.render`.

>>> round(estimate(7e9, preset="bf16").total_bytes / GB)
84
>>> round(estimate(7e9, preset="fp16-fp32-grads").total_bytes / GB)
98
>>> round(estimate(7e9).total_bytes / GB)  # the default, amp
112
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from gpulesson.memory.recipes import (
    DEFAULT_TRAINING_PRESET,
    DTYPE_BYTES,
    Recipe,
    get_recipe,
    with_optimizer,
)
from gpulesson.memory.shape import MAX_COUNT, TransformerShape, check_count, check_positive
from gpulesson.memory.terms import (
    IMPL_FEATURES,
    INFERENCE_POINTS,
    SAVED_ACTIVATIONS,
    TRAINING_POINTS,
    PointBytes,
    evaluate_terms,
    peak_points,
    slice_tokens,
    use_bytes,
)
from gpulesson.units import GB

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

DEFAULT_TRAINABLE_FRACTION = 0.001  # the sources' LoRA example: 0.1% of the model
LORA_TARGETS = ("attn", "mlp", "all")
ATTENTIONS = ("eager", "sdpa")
CHECKPOINTING = ("none", "full")
# The loss: "standard" materialises the full logits, their log-softmax and their
# gradient; "chunked" computes the cross-entropy a slice of tokens at a time and
# recomputes each slice in the backward pass (gpulesson.memory.gpt2's
# chunked_cross_entropy; fused linear-cross-entropy kernels hold even less).
LOSSES = ("standard", "chunked")
DEFAULT_LOSS_CHUNKS = 8
# Whose GPT-2 the activation and temporary terms follow: the course's own
# (gpulesson.memory.gpt2) or Hugging Face transformers' GPT2LMHeadModel, whose
# tanh-approximated GELU (gelu_new) keeps three more 4x-wide tensors per block and
# whose loss upcasts 16-bit logits to fp32 (gpulesson.memory.terms names each term).
IMPLS = ("gpulesson", "transformers")
TRANSFORMERS_NOTE = (
    "impl transformers: activations and temporaries follow Hugging Face transformers' "
    "GPT2LMHeadModel (checked against transformers 5.24) with dropout 0 and only the loss "
    "kept from its output; dropout above 0 (GPT2Config's default is 0.1) keeps masks that are "
    "not priced"
)


@dataclass(frozen=True, kw_only=True)
class Phase:
    """What is alive at the peak of one phase of the step, in bytes per term.

    ``point`` names the moment inside the phase where that peak falls.
    """

    name: str
    alive_bytes: dict[str, int]
    point: str = ""

    @property
    def total_bytes(self) -> int:
        """The phase's peak: the sum of what is alive in it."""
        return sum(self.alive_bytes.values())


@dataclass(frozen=True, kw_only=True)
class ImplTerm:
    """What one feature of an implementation adds to the step's peak, in bytes.

    ``peak_bytes`` is how much lower the peak phase would be without the feature
    (zero when the feature does not reach the peak: an fp32 model does not upcast).
    """

    name: str
    meaning: str
    peak_bytes: int


@dataclass(frozen=True, kw_only=True)
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
    loss: str = "standard"
    loss_chunks: int | None = None
    impl: str = "gpulesson"
    impl_terms: tuple[ImplTerm, ...] = ()
    tensor_parallel: int = 1
    pipeline_parallel: int = 1

    @property
    def with_headroom_bytes(self) -> int:
        """What a card must hold: the peak plus the CUDA context and allocator slack."""
        return self.total_bytes + self.cuda_context_bytes + self.allocator_slack_bytes


@dataclass(frozen=True, kw_only=True)
class PersistentTerms:
    """Weights, gradients, optimizer state and master copy of one GPU, in bytes.

    Kept as floats until the ledger: the partial gradients of the backward pass
    are priced from ``gradients_bytes`` per parameter.
    """

    weights_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    master_bytes: float

    def alive(self) -> dict[str, int]:
        """The lines alive in every phase: weights, master weights, optimizer state."""
        return {
            "weights": int(self.weights_bytes),
            "master weights": int(self.master_bytes),
            "optimizer state": int(self.optimizer_bytes),
        }


@dataclass(frozen=True, kw_only=True)
class CardVerdict:
    """Whether a budget fits one card, with the headroom rule applied."""

    card_bytes: int
    needed_bytes: int
    fits: bool
    spare_bytes: int  # negative when it does not fit


def _check_share(name: str, value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name}={value!r} is not a number: write a share, e.g. 0.001") from None
    if not math.isfinite(number) or number <= 0:
        raise ValueError(f"{name}={value!r} must be a share above 0 and at most 1, e.g. 0.001")
    if number > 1:
        raise ValueError(f"{name}={value!r} must be at most 1 (it is a share), e.g. 0.001")
    return number


def parameter_count(params: float | None, shape: TransformerShape | None) -> int:
    """The parameter count: ``params`` rounded to a whole number, else the shape's.

    >>> parameter_count(7e9, None), parameter_count(None, TransformerShape(64, 8, 16, 2, 1))
    (7000000000, 4464)
    >>> parameter_count(1e-300, None)
    Traceback (most recent call last):
    ...
    ValueError: params=1e-300 rounds to 0 parameters: give at least 1, e.g. 7e9
    """
    if params is None:
        if shape is None:
            raise ValueError("give a parameter count (e.g. 7e9) or a transformer shape")
        return shape.parameters()
    number = check_positive("params", params, "7e9")
    if number > MAX_COUNT:
        raise ValueError(
            f"params={params!r} is too large: at most 2^53 ({MAX_COUNT:.1e}) parameters"
        )
    n_params = int(round(number))
    if n_params < 1:
        raise ValueError(f"params={params!r} rounds to 0 parameters: give at least 1, e.g. 7e9")
    return n_params


def _lora_trainable(shape: TransformerShape | None, rank: int, targets: str) -> int:
    if shape is None:
        raise ValueError(
            "a LoRA rank needs the model's shape (--hidden and --layers): "
            "give a config or use a trainable fraction instead"
        )
    check_count("lora_rank", rank)
    c = shape.hidden
    if rank > c:
        # The adapted matrices are hidden x hidden (attention) and hidden x 4 hidden (MLP):
        # a rank above their smallest dimension is no low-rank update.
        raise ValueError(
            f"lora_rank={rank} is larger than hidden={c}, the smallest dimension of the "
            f"adapted matrices ({c} x {c} attention projections, {c} x {4 * c} MLP): "
            f"give a rank of at most {c}, e.g. 8 or 16"
        )
    # rank r adapter on a (d_in x d_out) matrix: r * (d_in + d_out) parameters.
    per_layer = {"attn": 4 * rank * 2 * c, "mlp": 2 * rank * 5 * c}
    per_layer["all"] = per_layer["attn"] + per_layer["mlp"]
    if targets not in per_layer:
        raise ValueError(f"lora targets {targets!r} must be one of {', '.join(LORA_TARGETS)}")
    return shape.layers * per_layer[targets]


def trainable_parameters(
    recipe: Recipe,
    n_params: int,
    *,
    shape: TransformerShape | None = None,
    trainable_fraction: float | None = None,
    lora_rank: int | None = None,
    lora_targets: str = "attn",
) -> tuple[int, tuple[str, ...]]:
    """How many parameters train under ``recipe``, and a note on the adapters if any.

    >>> trainable_parameters(get_recipe("qlora"), 7_000_000_000)
    (7000000, ('adapters: 0.10% of the parameters are trainable',))
    >>> trainable_parameters(get_recipe("infer-fp16"), 100)
    (0, ())
    """
    if not recipe.adapters:
        if trainable_fraction is not None or lora_rank is not None:
            raise ValueError(
                f"preset {recipe.name!r} trains every parameter: use --preset lora or qlora"
            )
        return (0 if recipe.inference else n_params), ()
    if lora_rank is not None and trainable_fraction is not None:
        raise ValueError("give a LoRA rank or a trainable fraction, not both")
    if lora_rank is not None:
        trainable = _lora_trainable(shape, lora_rank, lora_targets)
        if trainable > n_params:
            raise ValueError(
                f"lora_rank={lora_rank} on {lora_targets} layers trains {trainable:,} adapter "
                f"parameters, more than the model's {n_params:,}: give a smaller rank, e.g. 8"
            )
        return trainable, (f"adapters: rank {lora_rank} on {lora_targets} layers",)
    fraction = (
        DEFAULT_TRAINABLE_FRACTION
        if trainable_fraction is None
        else _check_share("trainable_fraction", trainable_fraction)
    )
    trainable = int(round(n_params * fraction))
    return trainable, (f"adapters: {fraction:.2%} of the parameters are trainable",)


#: What each ZeRO stage divides by the GPU count (Rajbhandari et al., arXiv:1910.02054):
#: stage 1 the optimizer state and the master copy, 2 also the gradients, 3 also the
#: weights. :func:`persistent_terms` and the VRAM planner (``planner.json``) read it.
ZERO_SHARDED: dict[int, tuple[str, ...]] = {
    0: (),
    1: ("optimizer", "master"),
    2: ("optimizer", "master", "gradients"),
    3: ("optimizer", "master", "gradients", "weights"),
}


#: What tensor and pipeline parallelism spread over the ``tensor_parallel x pipeline_parallel``
#: GPUs of one model replica: every parameter-sized term. A model, not measured: Megatron-LM
#: splits each layer's matrices over the tensor-parallel GPUs (Shoeybi et al.,
#: arXiv:1909.08053) and each pipeline stage holds its share of the layers (Huang et al.,
#: arXiv:1811.06965); the LayerNorms kept whole and the embedding and head on the end stages
#: are left out. :func:`persistent_terms` and the VRAM planner read it.
MODEL_PARALLEL_SHARDED: tuple[str, ...] = ("weights", "gradients", "optimizer", "master")


def persistent_terms(
    recipe: Recipe,
    n_params: int,
    trainable: int,
    *,
    gpus: int = 1,
    zero: int = 0,
    model_parallel: int = 1,
) -> PersistentTerms:
    """Weights, gradients, optimizer state and master copy on one GPU, after sharding.

    ``model_parallel`` (tensor x pipeline parallel degree) divides what
    :data:`MODEL_PARALLEL_SHARDED` names first; then ZeRO over the ``gpus`` of data
    parallelism: stage 1 shards optimizer state (and the master copy), 2 adds gradients,
    3 weights.

    >>> t = persistent_terms(get_recipe("amp"), 7_000_000_000, 7_000_000_000)
    >>> [round(x / GB) for x in (t.weights_bytes, t.gradients_bytes, t.optimizer_bytes)]
    [28, 28, 56]
    """
    bpp = recipe.bytes_per_param()
    adapter_bytes = DTYPE_BYTES[recipe.compute_dtype] if recipe.adapters else 0.0
    weights = n_params * bpp["weights"] + trainable * adapter_bytes
    grads = trainable * bpp["gradients"]
    states = trainable * bpp["optimizer"]
    master = trainable * bpp["master"]
    terms = {"weights": weights, "gradients": grads, "optimizer": states, "master": master}
    for name in MODEL_PARALLEL_SHARDED:
        terms[name] = terms[name] / model_parallel
    weights, grads, states = terms["weights"], terms["gradients"], terms["optimizer"]
    master = terms["master"]
    sharded = ZERO_SHARDED[zero]
    if "optimizer" in sharded:
        states = states / gpus
    if "master" in sharded:
        master = master / gpus
    if "gradients" in sharded:
        grads = grads / gpus
    if "weights" in sharded:
        weights = weights / gpus
    return PersistentTerms(
        weights_bytes=weights, gradients_bytes=grads, optimizer_bytes=states, master_bytes=master
    )


def step_sizes(
    shape: TransformerShape,
    *,
    compute_dtype: str,
    trainable: int = 0,
    gradients_bytes: float = 0.0,
    state_value_bytes: float = 0.0,
    loss_chunks: int | None = None,
) -> dict[str, float]:
    """The sizes the term tables name, for one micro-batch of ``shape``.

    ``grad_per_param`` spreads the gradients term over the shape's parameters,
    so the gradients present during the backward pass grow to exactly the
    gradients term by its end, whatever parameter count priced it.

    >>> shape = TransformerShape(64, 8, 16, 2, 1, 2)  # 4,464 parameters
    >>> s = step_sizes(shape, compute_dtype="fp32", trainable=4464, gradients_bytes=4 * 4464.0,
    ...                loss_chunks=3)
    >>> s["dtype"], s["slice_tokens"], s["grad_per_param"]
    (4.0, 6, 4.0)
    """
    tokens = shape.batch * shape.seq
    return {
        "batch": shape.batch,
        "seq": shape.seq,
        "hidden": shape.hidden,
        "heads": shape.heads,
        "kv_hidden": shape.kv_hidden,
        "ffn": shape.ffn_size,
        "vocab": shape.vocab,
        "layers": shape.layers,
        "dtype": DTYPE_BYTES[compute_dtype],
        "slice_tokens": slice_tokens(tokens, loss_chunks) if loss_chunks else tokens,
        "gradient_bytes": gradients_bytes,
        "trainable": trainable,
        # gradient bytes per parameter of the shape, after LoRA and ZeRO
        "grad_per_param": gradients_bytes / shape.parameters(),
        "state_value_bytes": state_value_bytes,
    }


def step_conditions(
    *,
    attention: str = "sdpa",
    checkpointing: str = "none",
    loss: str = "standard",
    loss_chunks: int | None = None,
    accumulation_steps: int = 1,
    foreach: bool = False,
    has_state: bool = True,
    full_training: bool = True,
    inference: bool = False,
    impl: str = "gpulesson",
    compute_dtype: str = "fp32",
) -> set[str]:
    """The conditions the term tables test, for one step's settings.

    ``impl="transformers"`` adds ``transformers`` and the conditions of its
    features (:data:`gpulesson.memory.terms.IMPL_FEATURES`); ``upcast_loss``
    only when the compute dtype is not fp32 (an fp32 model's logits are fp32).

    >>> sorted(step_conditions(attention="eager", has_state=False))
    ... # doctest: +NORMALIZE_WHITESPACE
    ['eager', 'full_training', 'no_checkpointing', 'no_state', 'per_tensor',
     'single_micro_batch', 'standard_loss', 'training']
    >>> sorted(step_conditions(impl="transformers") - step_conditions())
    ['block_output', 'eager_mask', 'gelu_tanh', 'shifted_labels', 'transformers']
    """
    if attention not in ATTENTIONS:
        raise ValueError(f"attention={attention!r} must be 'eager' or 'sdpa'")
    if checkpointing not in CHECKPOINTING:
        raise ValueError(f"checkpointing={checkpointing!r} must be 'none' or 'full'")
    if loss not in LOSSES:
        raise ValueError(f"loss={loss!r} must be 'standard' or 'chunked'")
    if impl not in IMPL_FEATURES:
        raise ValueError(f"impl={impl!r} must be 'gpulesson' or 'transformers'")
    impl_conditions = [name for name, _ in IMPL_FEATURES[impl]]
    if impl != "gpulesson":
        impl_conditions.append(impl)
    if compute_dtype == "fp32" and "upcast_loss" in impl_conditions:
        impl_conditions.remove("upcast_loss")
    return {
        *impl_conditions,
        attention,
        "checkpointing" if checkpointing == "full" else "no_checkpointing",
        f"{loss}_loss",
        *(("several_slices",) if loss == "chunked" and (loss_chunks or 1) > 1 else ()),
        "accumulating" if accumulation_steps > 1 else "single_micro_batch",
        "foreach" if foreach else "per_tensor",
        "has_state" if has_state else "no_state",
        "full_training" if full_training else "partial_training",
        "inference" if inference else "training",
    }


def activation_terms(
    shape: TransformerShape,
    compute_dtype: str = "bf16",
    attention: str = "sdpa",
    checkpointing: str = "none",
    *,
    loss: str = "standard",
    loss_chunks: int | None = None,
    impl: str = "gpulesson",
) -> dict[str, int]:
    """Bytes of the activation and loss terms of one micro-batch (no gradients).

    ``block_saved`` is what one block keeps for the backward pass,
    ``head_saved`` what the head keeps, ``saved`` the whole forward pass's
    (layers x block_saved + head_saved); ``loss_forward`` and ``loss_backward``
    the loss's transients. The meaning of every term is in
    :data:`gpulesson.memory.terms.TERMS`.

    >>> t = activation_terms(TransformerShape(64, 8, 16, 2, 1, 1), "fp32", "sdpa", "none")
    >>> t["block_saved"], t["head_saved"], t["saved"]
    (8384, 3264, 11648)
    >>> hf = activation_terms(TransformerShape(64, 8, 16, 2, 1, 1), "fp32", impl="transformers")
    >>> hf["block_saved"] - t["block_saved"]  # gelu_new's three 4x-wide tensors: 12 x 8 x 16 x 4 B
    6144
    """
    sizes = step_sizes(shape, compute_dtype=compute_dtype, loss_chunks=loss_chunks)
    conditions = step_conditions(
        attention=attention,
        checkpointing=checkpointing,
        loss=loss,
        loss_chunks=loss_chunks,
        impl=impl,
        compute_dtype=compute_dtype,
    )
    terms = evaluate_terms(sizes, conditions)
    names = (
        "block_full",
        "block_saved",
        "block_mlp",
        "head_saved",
        "logits",
        "logits_slice",
        "loss_forward",
        "loss_backward",
        "block_forward",
        "mlp_backward",
        "attn_backward",
    )
    out = {name: int(terms[name]) for name in names}
    out["saved"] = use_bytes(SAVED_ACTIVATIONS, terms, shape.layers)
    return out


def impl_terms(
    impl: str, sizes: dict[str, float], conditions: set[str], persistent: dict[str, int]
) -> tuple[ImplTerm, ...]:
    """Each feature of ``impl``, with what it adds to the peak of a training step.

    A feature's share is the peak phase's total minus the same phase's total
    with that one feature's condition removed.

    >>> shape = TransformerShape(64, 8, 16, 2, 1, 1)
    >>> sizes = step_sizes(shape, compute_dtype="fp32", trainable=4464,
    ...                    gradients_bytes=4 * 4464.0, state_value_bytes=4.0)
    >>> terms = impl_terms("transformers", sizes, step_conditions(impl="transformers"), {})
    >>> [(t.name, t.peak_bytes) for t in terms][:2]
    [('gelu_tanh', 7168), ('upcast_loss', 0)]
    """
    phases = training_phases(sizes, conditions, persistent)
    peak = max(reversed(phases), key=lambda p: p.total_bytes)
    out = []
    for name, meaning in IMPL_FEATURES[impl]:
        without = training_phases(sizes, conditions - {name}, persistent)
        same = next(p for p in without if p.name == peak.name)
        out.append(
            ImplTerm(name=name, meaning=meaning, peak_bytes=peak.total_bytes - same.total_bytes)
        )
    return tuple(out)


def _phases(
    peaks: dict[str, PointBytes], persistent: dict[str, int], order: tuple[str, ...]
) -> tuple[Phase, ...]:
    return tuple(
        Phase(
            name=name,
            alive_bytes={**persistent, **peaks[name].alive_bytes},
            point=peaks[name].label,
        )
        for name in order
    )


def training_phases(
    sizes: dict[str, float], conditions: set[str], persistent: dict[str, int]
) -> tuple[Phase, ...]:
    """Forward, backward and optimizer step of a training step: each phase at its largest point.

    >>> shape = TransformerShape(64, 8, 16, 2, 1, 1)
    >>> sizes = step_sizes(shape, compute_dtype="fp32", trainable=4464,
    ...                    gradients_bytes=4 * 4464.0, state_value_bytes=4.0)
    >>> phases = training_phases(sizes, step_conditions(), {"weights": 17856})
    >>> [p.name for p in phases]
    ['forward', 'backward', 'optimizer step']
    """
    terms = evaluate_terms(sizes, conditions)
    peaks = peak_points(TRAINING_POINTS, terms, conditions, int(sizes["layers"]))
    return _phases(peaks, persistent, ("forward", "backward", "optimizer step"))


def inference_phases(
    sizes: dict[str, float], conditions: set[str], persistent: dict[str, int]
) -> tuple[Phase, ...]:
    """The prefill of an inference step: weights, the KV cache and the prefill's transients.

    >>> shape = TransformerShape(64, 8, 16, 2, 1, 1)
    >>> sizes = step_sizes(shape, compute_dtype="fp16")
    >>> inference_phases(sizes, step_conditions(inference=True), {"weights": 8928})[0].alive_bytes
    {'weights': 8928, 'KV cache': 512, 'temporaries': 2048}
    """
    terms = evaluate_terms(sizes, conditions)
    peaks = peak_points(INFERENCE_POINTS, terms, conditions, int(sizes["layers"]))
    return _phases(peaks, persistent, ("forward",))


def phases_without_shape(
    recipe: Recipe, persistent: PersistentTerms, accumulation_steps: int = 1
) -> tuple[Phase, ...]:
    """The phases when only a parameter count is known: the persistent terms alone.

    >>> t = persistent_terms(get_recipe("bf16"), 10, 10)
    >>> [p.total_bytes for p in phases_without_shape(get_recipe("bf16"), t)]
    [100, 120, 120]
    """
    alive = persistent.alive()
    grads = int(persistent.gradients_bytes)
    if recipe.inference:
        return (Phase(name="forward", alive_bytes=dict(alive), point="weights only"),)
    return (
        Phase(
            name="forward",
            alive_bytes={**alive, "gradients": grads if accumulation_steps > 1 else 0},
            point="persistent terms",
        ),
        Phase(name="backward", alive_bytes={**alive, "gradients": grads}, point="persistent terms"),
        Phase(
            name="optimizer step",
            alive_bytes={**alive, "gradients": grads},
            point="persistent terms",
        ),
    )


def _check_impl(
    impl: str, recipe: Recipe, shape: TransformerShape | None, checkpointing: str, loss: str
) -> None:
    """Refuse what ``impl="transformers"`` has not been measured for (each with the fix)."""
    if impl not in IMPLS:
        raise ValueError(f"impl={impl!r} must be 'gpulesson' or 'transformers'")
    if impl == "gpulesson":
        return
    if recipe.inference:
        raise ValueError(
            f"impl 'transformers' prices a training step; preset {recipe.name!r} is "
            "inference: use impl 'gpulesson'"
        )
    if checkpointing != "none":
        raise ValueError(
            f"impl 'transformers' is priced without checkpointing (checkpointing {checkpointing!r} "
            "given): use checkpointing 'none', or impl 'gpulesson'"
        )
    if loss != "standard":
        raise ValueError(
            f"impl 'transformers' (GPT2LMHeadModel) computes the standard loss (loss {loss!r} "
            "given): use loss 'standard', or impl 'gpulesson' for a chunked loss"
        )
    if shape is not None and shape.kv_head_count != shape.heads:
        raise ValueError(
            f"transformers' GPT-2 has one key/value head per head (kv_heads {shape.kv_head_count} "
            f"given, heads {shape.heads}): drop kv_heads, or use impl 'gpulesson'"
        )


def _check_step(
    gpus: int, zero: int, accumulation_steps: int, loss: str, loss_chunks: int | None
) -> int | None:
    check_count("gpus", gpus)
    check_count("accumulation_steps", accumulation_steps)
    if zero not in (0, 1, 2, 3):
        raise ValueError(f"zero={zero!r} must be 0 (no sharding), 1, 2 or 3")
    if zero and gpus == 1:
        raise ValueError(f"ZeRO stage {zero} shards across GPUs: give gpus of 2 or more")
    if loss not in LOSSES:
        raise ValueError(f"loss={loss!r} must be 'standard' or 'chunked'")
    if loss == "standard":
        if loss_chunks is not None:
            raise ValueError(
                f"loss_chunks={loss_chunks!r} applies to loss='chunked': give both, or neither"
            )
        return None
    return check_count("loss_chunks", DEFAULT_LOSS_CHUNKS if loss_chunks is None else loss_chunks)


def _check_model_parallel(
    tensor_parallel: int, pipeline_parallel: int, shape: TransformerShape | None
) -> int:
    """The model-parallel degree, tensor x pipeline, after checking each against the shape.

    >>> _check_model_parallel(2, 4, TransformerShape(64, 8, 16, 2, 4))
    8
    >>> _check_model_parallel(4, 1, TransformerShape(64, 8, 16, 2, 4))
    Traceback (most recent call last):
    ...
    ValueError: tensor_parallel=4 does not divide heads=2: each GPU takes whole attention heads
    """
    check_count("tensor_parallel", tensor_parallel)
    check_count("pipeline_parallel", pipeline_parallel)
    if shape is not None and shape.heads % tensor_parallel:
        raise ValueError(
            f"tensor_parallel={tensor_parallel} does not divide heads={shape.heads}: "
            "each GPU takes whole attention heads"
        )
    if shape is not None and shape.layers % pipeline_parallel:
        raise ValueError(
            f"pipeline_parallel={pipeline_parallel} does not divide layers={shape.layers}: "
            "each stage takes the same number of whole layers"
        )
    return tensor_parallel * pipeline_parallel


def _shape_notes(
    shape: TransformerShape, recipe: Recipe, params: float | None, n_params: int
) -> list[str]:
    notes = []
    if params is not None and n_params != shape.parameters():
        notes.append(
            f"the parameter count given ({n_params:,}) prices the weights, gradients and "
            f"optimizer state; the model shape, which has {shape.parameters():,} parameters, "
            "prices the activations and the KV cache"
        )
    if not recipe.inference and shape.kv_head_count < shape.heads:
        notes.append(
            f"kv_heads={shape.kv_head_count} shrinks the KV cache and the parameter count; "
            "training activations count K and V at full width (GPT-2's multi-head "
            "attention), an upper bound"
        )
    if shape.gated or shape.ffn_size != 4 * shape.hidden:
        notes.append(
            f"MLP: {'gated, ' if shape.gated else ''}{shape.ffn_size:,} wide prices the "
            "parameters; activations and temporaries follow GPT-2's block (two 4 x hidden "
            "MLP tensors), a model for this shape, not measured"
        )
    return notes


def estimate(
    params: float | None = None,
    *,
    preset: str = DEFAULT_TRAINING_PRESET,
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
    loss: str = "standard",
    loss_chunks: int | None = None,
    impl: str = "gpulesson",
    tensor_parallel: int = 1,
    pipeline_parallel: int = 1,
) -> Budget:
    """Estimate one step's memory on one GPU from a parameter count or a transformer shape.

    ``params``, when given, prices the weights, gradients and optimizer state;
    the shape prices activations and the KV cache (a note says when the two
    disagree). ``optimizer`` and ``state_dtype`` override the preset's.
    ``foreach=True`` prices the multi-tensor optimizer CUDA uses by default (one
    extra copy of the trainable parameters in the state dtype); the default
    prices the per-tensor loop (two copies of the largest parameter).
    ``loss="chunked"`` prices a cross-entropy computed ``loss_chunks`` slices of
    tokens at a time (default 8), which never holds the full logits.
    ``impl`` names whose GPT-2 the activation and temporary terms follow:
    ``"gpulesson"`` (the course's :mod:`gpulesson.memory.gpt2`) or
    ``"transformers"`` (Hugging Face's ``GPT2LMHeadModel``: its ``gelu_new``
    keeps more tensors, its loss upcasts 16-bit logits to fp32); it prices
    training steps with the standard loss and no checkpointing.
    ``tensor_parallel`` and ``pipeline_parallel`` spread the parameter-sized terms over
    their product (:data:`MODEL_PARALLEL_SHARDED`, a model); ``gpus`` counts the data
    parallel GPUs, so a run uses ``gpus x tensor_parallel x pipeline_parallel``.

    >>> from gpulesson.units import format_gb
    >>> b = estimate(7e9, preset="qlora")
    >>> format_gb(b.total_bytes), b.trainable_parameters
    ('3.6 GB', 7000000)
    >>> estimate(-1)
    Traceback (most recent call last):
    ...
    ValueError: params=-1 must be a positive, finite number, e.g. 7e9
    """
    recipe = with_optimizer(get_recipe(preset), optimizer, state_dtype)
    _check_impl(impl, recipe, shape, checkpointing, loss)
    chunks = _check_step(gpus, zero, accumulation_steps, loss, loss_chunks)
    n_params = parameter_count(params, shape)
    trainable, adapter_notes = trainable_parameters(
        recipe,
        n_params,
        shape=shape,
        trainable_fraction=trainable_fraction,
        lora_rank=lora_rank,
        lora_targets=lora_targets,
    )
    model_parallel = _check_model_parallel(tensor_parallel, pipeline_parallel, shape)
    ledger = persistent_terms(
        recipe, n_params, trainable, gpus=gpus, zero=zero, model_parallel=model_parallel
    )
    notes = [recipe.source, *adapter_notes]
    if model_parallel > 1:
        notes.append(
            f"tensor parallel {tensor_parallel} x pipeline parallel {pipeline_parallel}: the "
            f"parameter-sized terms are spread over {model_parallel} GPUs (a model); "
            "activations are counted as on one GPU, an upper bound (the first pipeline stage "
            "of a 1F1B schedule holds every layer's worth of micro-batches)"
        )
    if impl == "transformers":
        notes.append(TRANSFORMERS_NOTE)
    if zero >= 3:
        notes.append("ZeRO-3/FSDP: one layer's full weights are gathered at a time (not counted)")
    acts = temps = kv_cache = 0
    effective_batch = None
    extra: tuple[ImplTerm, ...] = ()
    if shape is None:
        if loss != "standard":
            raise ValueError("a chunked loss changes the activations: give a transformer shape")
        phases = phases_without_shape(recipe, ledger, accumulation_steps)
        notes.append("no shape given: activations and temporaries are not counted")
    else:
        notes += _shape_notes(shape, recipe, params, n_params)
        effective_batch = shape.batch * accumulation_steps * gpus
        sizes = step_sizes(
            shape,
            compute_dtype=recipe.compute_dtype,
            trainable=trainable,
            gradients_bytes=ledger.gradients_bytes,
            state_value_bytes=recipe.bytes_per_param()["optimizer"]
            / max(recipe.optimizer_states, 1),
            loss_chunks=chunks,
        )
        conditions = step_conditions(
            attention=attention,
            checkpointing=checkpointing,
            loss=loss,
            loss_chunks=chunks,
            accumulation_steps=accumulation_steps,
            foreach=foreach,
            has_state=recipe.optimizer_states > 0,
            full_training=trainable == n_params,
            inference=recipe.inference,
            impl=impl,
            compute_dtype=recipe.compute_dtype,
        )
        if recipe.inference:
            if loss != "standard":
                raise ValueError(f"preset {preset!r} is inference-only: it computes no loss")
            phases = inference_phases(sizes, conditions, ledger.alive())
            kv_cache = phases[0].alive_bytes["KV cache"]
            temps = phases[0].alive_bytes["temporaries"]
            notes.append("inference: KV cache for the full sequence, prefill transients")
        else:
            phases = training_phases(sizes, conditions, ledger.alive())
            acts = use_bytes(
                SAVED_ACTIVATIONS,
                evaluate_terms(sizes, conditions, only=("block_saved", "head_saved")),
                shape.layers,
            )
            temps = max(p.alive_bytes["temporaries"] for p in phases)
            extra = impl_terms(impl, sizes, conditions, ledger.alive())
            if chunks is not None:
                notes.append(
                    f"loss: cross-entropy in {chunks} slices of up to "
                    f"{int(sizes['slice_tokens']):,} tokens, each recomputed in the backward "
                    "pass; the full logits are never held"
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
        weights_bytes=int(ledger.weights_bytes),
        gradients_bytes=int(ledger.gradients_bytes),
        optimizer_bytes=int(ledger.optimizer_bytes),
        master_bytes=int(ledger.master_bytes),
        activations_bytes=int(acts),
        temporaries_bytes=int(temps),
        kv_cache_bytes=kv_cache,
        phases=phases,
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
        loss=loss,
        loss_chunks=chunks,
        impl=impl,
        impl_terms=extra,
        tensor_parallel=tensor_parallel,
        pipeline_parallel=pipeline_parallel,
    )


@dataclass(frozen=True, kw_only=True)
class LogitsTensor:
    """One of the loss's vocabulary-wide tensors: its shape, dtype size and bytes.

    ``dims`` names each dimension with its size; ``at_loss_backward`` says
    whether the tensor is alive while the loss's backward pass runs (the peak
    of a standard loss on a small model).
    """

    name: str
    role: str
    dims: tuple[tuple[str, int], ...]
    bytes_per_value: float
    total_bytes: int
    at_loss_backward: bool


def logits_terms(budget: Budget) -> tuple[LogitsTensor, ...]:
    """The logits-related tensors of a training budget, each with its shape and bytes.

    With the standard loss: the logits (a forward transient), their log-softmax
    (saved for backward), and in the backward pass the gradients of the
    log-probabilities and of the logits, each batch x seq x vocab values. With
    a chunked loss the same tensors exist one slice at a time.

    >>> shape = TransformerShape(vocab=50257, seq=1024, hidden=768, heads=12, layers=12, batch=16)
    >>> t = logits_terms(estimate(shape=shape, preset="fp32"))
    >>> [(x.name, x.total_bytes) for x in t if x.at_loss_backward]  # doctest: +NORMALIZE_WHITESPACE
    [('log-softmax of the logits', 3293642752), ('gradient of the log-probabilities', 3293642752),
     ('gradient of the logits', 3293642752)]
    >>> " x ".join(str(n) for _, n in t[0].dims), t[0].bytes_per_value
    ('16 x 1024 x 50257', 4.0)
    """
    if budget.shape is None or budget.recipe.inference:
        raise ValueError("logits terms need a training budget with a transformer shape")
    s = budget.shape
    es = DTYPE_BYTES[budget.recipe.compute_dtype]
    if budget.loss_chunks is None:
        dims: tuple[tuple[str, int], ...] = (("batch", s.batch), ("seq", s.seq), ("vocab", s.vocab))
        saved_role = "saved for the backward pass"
        where = ""
    else:
        tokens = slice_tokens(s.batch * s.seq, budget.loss_chunks)
        dims = (("slice tokens", tokens), ("vocab", s.vocab))
        saved_role = "one slice at a time, recomputed in the backward pass"
        where = ", one slice at a time"
    values = math.prod(n for _, n in dims)
    rows = (
        ("logits", "forward transient" + where, False),
        ("log-softmax of the logits", saved_role, True),
        ("gradient of the log-probabilities", "backward transient" + where, True),
        ("gradient of the logits", "backward transient" + where, True),
    )
    return tuple(
        LogitsTensor(
            name=name,
            role=role,
            dims=dims,
            bytes_per_value=es,
            total_bytes=int(es * values),
            at_loss_backward=alive,
        )
        for name, role, alive in rows
    )


def fits(budget: Budget, card_bytes: float) -> CardVerdict:
    """Whether ``budget`` fits a card of ``card_bytes`` once the headroom rule is applied.

    >>> fits(estimate(7e9, preset="infer-fp16"), 24 * 2**30).fits
    True
    """
    card = _check_card(card_bytes)
    needed = budget.with_headroom_bytes
    return CardVerdict(
        card_bytes=card, needed_bytes=needed, fits=needed <= card, spare_bytes=card - needed
    )


def _check_card(card_bytes: float) -> int:
    card = check_positive("card_bytes", card_bytes, "24 * 2**30")
    if card < 1:
        raise ValueError(f"card_bytes={card_bytes!r} is less than one byte: give the card's size")
    return int(card)


@dataclass(frozen=True, kw_only=True)
class LeverEffect:
    """One lever applied to a base run: the change, its budget, and the peak's change."""

    label: str
    change: dict[str, Any]
    budget: Budget
    peak_change: float  # relative to the base run's peak: -0.43 is 43% less


@dataclass(frozen=True, kw_only=True)
class LeverTable:
    """A base run and each lever applied to it alone."""

    base: Budget
    effects: tuple[LeverEffect, ...]


def lever_effects(base: dict[str, Any], levers: dict[str, dict[str, Any]]) -> LeverTable:
    """Each lever as a change to one run: ``estimate(**base, **change)`` vs ``estimate(**base)``.

    >>> t = lever_effects({"params": 7e9, "preset": "bf16"}, {"8-bit": {"optimizer": "adam8bit"}})
    >>> round(t.effects[0].peak_change, 2)
    -0.5
    """
    start = estimate(**base)
    effects = []
    for label, change in levers.items():
        b = estimate(**{**base, **change})
        effects.append(
            LeverEffect(
                label=label,
                change=dict(change),
                budget=b,
                peak_change=b.total_bytes / start.total_bytes - 1,
            )
        )
    return LeverTable(base=start, effects=tuple(effects))
