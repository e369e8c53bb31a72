"""The step's memory terms and phase points as coefficient tables: one source, two evaluators.

Every activation, temporary and partial-gradient term of
:func:`gpulesson.memory.budget.estimate` is a :class:`Term`: a sum of
:class:`Monomial` rows (a coefficient times named sizes, such as
``16 x dtype x batch x seq x hidden``), each row kept only when its conditions
hold (``"eager"``, ``"checkpointing"``, ...). A phase of the step is a list of
:class:`Point` rows: moments inside the phase, each listing which terms are
alive in it (``Use``, with a multiplier that may count layers). A phase's peak
is its largest point; the step's peak is its largest phase.

The estimate evaluates these tables in Python (:func:`evaluate_terms`,
:func:`phase_peaks`); the VRAM planner in the browser evaluates the same tables
from ``planner.json`` (:func:`tables_data`), so the formula lives here only.

The sizes a table may name (all built by ``gpulesson.memory.budget``; the
parameter count of the shape itself is the table :data:`MODEL_PARAMETERS`):
``batch``, ``seq``, ``hidden``, ``heads``, ``kv_hidden`` (key/value width),
``vocab``, ``layers``, ``dtype`` (bytes per activation value), ``slice_tokens``
(tokens per slice of a chunked loss), ``gradient_bytes`` (the gradients term),
``trainable`` (trainable parameters), and two scales: ``grad_per_param``
(the gradients term spread over the shape's parameters: ``gradient_bytes /
model_parameters``) and ``state_value_bytes`` (bytes per optimizer-state value).

Why these terms (fitted to ``gpulesson.memory.gpt2`` run by PyTorch, checked by
``tests/benchmarks/bench_budget_accuracy.py``): per block without checkpointing
the forward pass keeps 16 (batch x seq x hidden) values (the two LayerNorm
inputs and outputs, Q, K, V, the attention output, the MLP's two 4x-wide
tensors), 4 (batch x seq) LayerNorm statistics, and for eager attention the
softmax of the (batch x heads x seq x seq) scores plus the seq x seq mask; SDPA
keeps an fp32 log-sum-exp of (batch x heads x seq) instead. Full checkpointing
keeps only each block's input and recomputes one block at a time. The head
keeps the final LayerNorm's input and output, and with the standard loss the
log-softmax of the logits (batch x seq x vocab).

>>> sizes = {"batch": 1, "seq": 8, "hidden": 16, "heads": 2, "vocab": 64, "dtype": 4}
>>> t = evaluate_terms(sizes, {"sdpa", "no_checkpointing", "standard_loss"},
...                    only=("block_saved", "head_saved"))
>>> t["block_saved"], t["head_saved"]
(8384.0, 3264.0)
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True, kw_only=True)
class Monomial:
    """``coefficient`` times the product of the named ``sizes``, kept when ``when`` all hold."""

    coefficient: float
    sizes: tuple[str, ...]
    when: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Term:
    """A named memory term in bytes: the largest of its ``options``, each a sum of monomials.

    ``scale`` names a size that multiplies the whole sum (a float such as the
    gradient bytes per parameter), or is ``None``.
    """

    name: str
    meaning: str
    options: tuple[tuple[Monomial, ...], ...]
    scale: str | None = None


@dataclass(frozen=True, kw_only=True)
class Use:
    """A term alive at a point, ``times + per_layer x layers + per_done x done`` times over.

    ``times`` defaults to 1, so a use counted per layer sets ``times=0``.
    ``done`` counts the blocks whose backward pass has finished, from the top;
    it is only defined for points evaluated once per block.
    """

    term: str
    times: float = 1.0
    per_layer: float = 0.0
    per_done: float = 0.0


@dataclass(frozen=True, kw_only=True)
class Point:
    """A moment of one phase and what is alive in it, by ledger line.

    ``alive`` maps a ledger line (``"gradients"``, ``"activations"``,
    ``"temporaries"``, ``"KV cache"``) to the terms it holds; each line's bytes
    are the whole-byte sum of its uses. ``each_block`` points are evaluated once
    per block (``done`` = 0 .. layers - 1, the top block first).
    """

    phase: str
    label: str
    alive: tuple[tuple[str, tuple[Use, ...]], ...]
    when: tuple[str, ...] = ()
    each_block: bool = False


def _m(coefficient: float, *sizes: str, when: tuple[str, ...] = ()) -> Monomial:
    return Monomial(coefficient=coefficient, sizes=sizes, when=when)


def _term(name: str, meaning: str, *monomials: Monomial, scale: str | None = None) -> Term:
    return Term(name=name, meaning=meaning, options=(monomials,), scale=scale)


def _only(monomials: tuple[Monomial, ...], condition: str) -> tuple[Monomial, ...]:
    return tuple(
        Monomial(coefficient=m.coefficient, sizes=m.sizes, when=(*m.when, condition))
        for m in monomials
    )


BTC = ("dtype", "batch", "seq", "hidden")  # one (batch x seq x hidden) activation

BTV = ("batch", "seq", "vocab")  # one (batch x seq x vocab) tensor's values

# What impl="transformers" (Hugging Face's GPT2LMHeadModel) does differently, one
# condition each, so the ledger can say what each adds (IMPL_FEATURES); the
# condition "transformers" itself adds the forward point at the last block.
IMPL_FEATURES: dict[str, tuple[tuple[str, str], ...]] = {
    "gpulesson": (),
    "transformers": (
        (
            "gelu_tanh",
            "gelu_new, the tanh GELU written as tensor ops: three more 4x-wide tensors kept "
            "per block (0.5x, tanh(.), 1 + tanh(.)) and one more in its backward pass",
        ),
        (
            "upcast_loss",
            "the loss upcasts 16-bit logits to fp32: an fp32 copy, an fp32 log-softmax and "
            "fp32 gradients",
        ),
        ("shifted_labels", "the labels padded and shifted into a new int64 tensor"),
        (
            "eager_mask",
            "eager attention's float mask, batch x seq x seq, through the forward pass "
            "(and no per-block bool mask buffer)",
        ),
        ("block_output", "the last block's MLP output beside the residual sum it makes"),
    ),
}
_GELU_TANH = _m(12, *BTC, when=("gelu_tanh",))  # gelu_new keeps 0.5x, tanh(.), 1 + tanh(.)

_BLOCK_FULL = (
    _m(16, *BTC),  # LayerNorm inputs and outputs, Q, K, V, attention output, MLP's 4x tensors
    _m(4, "dtype", "batch", "seq"),  # LayerNorm statistics
    _m(1, "dtype", "batch", "heads", "seq", "seq", when=("eager",)),  # softmax output
    _m(1, "seq", "seq", when=("eager",)),  # the causal mask, one byte per bool
    _m(-1, "seq", "seq", when=("eager", "eager_mask")),  # transformers keeps no mask buffer
    _m(4, "batch", "heads", "seq", when=("sdpa",)),  # SDPA's fp32 log-sum-exp
    _GELU_TANH,
)
_SCORES = _m(2, "dtype", "batch", "heads", "seq", "seq", when=("eager",))  # scores and gradient
_PER_TENSOR = ("has_state", "per_tensor", "full_training")
# transformers' loss upcasts 16-bit logits to fp32: its log-softmax takes 4 bytes, not dtype
_UPCAST_LOG_SOFTMAX = (
    _m(4, *BTV, when=("standard_loss", "upcast_loss")),
    _m(-1, "dtype", *BTV, when=("standard_loss", "upcast_loss")),
)

# GPT-2's parameters, counted from the shape (a count, not bytes): the token and
# position embeddings, per block two LayerNorms (4C), the Q, K, V projection
# (C^2 + 2C x kv_hidden weights, C + 2 kv_hidden biases), the output projection
# (C^2 + C) and the MLP (8C^2 + 5C), and the final LayerNorm (2C); the head is
# tied to the token embedding. With one key/value head per head: 12C^2 + 13C a block.
# Other shapes (gpulesson.memory.shape.TransformerShape): "ffn" is the MLP's inner width
# (4C for GPT-2); "gated_mlp" three bias-free hidden x ffn matrices (SwiGLU, Llama) instead
# of "plain_mlp"'s two with biases; "untied_head" a head of its own; no "learned_positions"
# drops the position table (rotary positions).
MODEL_PARAMETERS = Term(
    name="model_parameters",
    meaning="the parameters of the shape (a count)",
    options=(
        (
            _m(1, "vocab", "hidden"),
            _m(1, "seq", "hidden", when=("learned_positions",)),
            _m(2, "layers", "hidden", "hidden"),  # the Q and output projections
            _m(2, "layers", "hidden", "ffn", when=("plain_mlp",)),
            _m(3, "layers", "hidden", "ffn", when=("gated_mlp",)),  # gate, up, down
            _m(6, "layers", "hidden"),  # LayerNorms, Q and output biases
            _m(1, "layers", "hidden", when=("plain_mlp",)),  # the MLP's biases
            _m(1, "layers", "ffn", when=("plain_mlp",)),
            _m(2, "layers", "hidden", "kv_hidden"),
            _m(2, "layers", "kv_hidden"),
            _m(2, "hidden"),
            _m(1, "vocab", "hidden", when=("untied_head",)),
        ),
    ),
)

TERMS: tuple[Term, ...] = (
    # --- activations: what the forward pass keeps for the backward pass
    _term("block_full", "one block's saved tensors without checkpointing", *_BLOCK_FULL),
    _term(
        "block_saved",
        "what one block keeps for the backward pass (its input alone when checkpointed)",
        _m(1, *BTC, when=("checkpointing",)),
        *_only(_BLOCK_FULL, "no_checkpointing"),
    ),
    _term(
        "block_mlp",
        "a block's MLP tensors: ln_2 input and output, the MLP's two 4x-wide tensors "
        "(transformers: and gelu_new's three)",
        _m(10, *BTC),
        _m(2, "dtype", "batch", "seq"),
        _GELU_TANH,
    ),
    _term(
        "head_saved",
        "the head's saved tensors: final LayerNorm input and output, its statistics, the "
        "int64 token ids and targets, and with the standard loss the logits' log-softmax "
        "(transformers: in fp32, and the shifted int64 labels)",
        _m(2, *BTC),
        _m(2, "dtype", "batch", "seq"),
        _m(1, "dtype", *BTV, when=("standard_loss",)),
        _m(16, "batch", "seq"),
        *_UPCAST_LOG_SOFTMAX,
        _m(8, "batch", "seq", when=("shifted_labels",)),
    ),
    _term("ids", "the int64 token ids and targets", _m(16, "batch", "seq")),
    # --- the loss: the logits and what the loss makes of them
    _term("logits", "the logits, batch x seq x vocab", _m(1, "dtype", "batch", "seq", "vocab")),
    _term(
        "logits_slice",
        "one slice of a chunked loss's logits, slice_tokens x vocab",
        _m(1, "dtype", "slice_tokens", "vocab"),
    ),
    _term(
        "loss_forward",
        "the loss's forward transient: the logits beside their log-softmax (chunked: one "
        "slice's logits and log-softmax; transformers upcasting: and the logits' fp32 copy)",
        _m(1, "dtype", *BTV, when=("standard_loss",)),
        _m(2, "dtype", "slice_tokens", "vocab", when=("chunked_loss",)),
        _m(4, *BTV, when=("standard_loss", "upcast_loss")),
    ),
    _term(
        "loss_backward",
        "the loss's backward transients: the gradients of the log-probabilities and of the "
        "logits (chunked: one slice's recomputed log-softmax and its two gradients, plus the "
        "gradient of the hidden states; transformers upcasting: both in fp32)",
        _m(2, "dtype", *BTV, when=("standard_loss",)),
        _m(3, "dtype", "slice_tokens", "vocab", when=("chunked_loss",)),
        _m(1, *BTC, when=("chunked_loss",)),
        _m(8, *BTV, when=("standard_loss", "upcast_loss")),
        _m(-2, "dtype", *BTV, when=("standard_loss", "upcast_loss")),
    ),
    _term(
        "hidden_gradient",
        "the gradient of the final hidden states, batch x seq x hidden",
        _m(1, *BTC),
    ),
    # --- backward and recompute transients of a block
    Term(
        name="block_forward",
        meaning="a checkpointed block's forward transients: its MLP tensors, or for eager "
        "attention the scores and their scaled copy",
        options=((_m(10, *BTC),), (_m(4, *BTC), _SCORES)),
    ),
    _term(
        "mlp_backward",
        "the gradients of the MLP's two 4x-wide tensors (transformers: and one more of "
        "gelu_new's, whose backward is a chain of elementwise ops)",
        _m(8, *BTC),
        _m(4, *BTC, when=("gelu_tanh",)),
    ),
    _term(
        "block_output",
        "the last block's MLP output beside the residual sum it makes (transformers)",
        _m(2, *BTC, when=("block_output",)),
    ),
    _term(
        "causal_mask",
        "transformers' eager attention mask, batch x seq x seq in the compute dtype, "
        "alive through the forward pass",
        _m(1, "dtype", "batch", "seq", "seq", when=("eager", "eager_mask")),
    ),
    _term(
        "attn_backward",
        "attention's backward transients: the scores' gradients (eager) or those of Q, K, V "
        "and the output (SDPA)",
        _SCORES,
        _m(4, *BTC, when=("sdpa",)),
    ),
    # --- gradients as they appear in the backward pass (scaled by bytes per parameter)
    _term("gradients", "every gradient", _m(1, "gradient_bytes")),
    _term(
        "gradients_before",
        "earlier micro-batches' gradients (with gradient accumulation)",
        _m(1, "gradient_bytes", when=("accumulating",)),
    ),
    _term(
        "head_gradients",
        "the gradients of the tied embedding and the final LayerNorm",
        _m(1, "vocab", "hidden", when=("single_micro_batch",)),
        _m(2, "hidden", when=("single_micro_batch",)),
        scale="grad_per_param",
    ),
    _term(
        "block_gradients",
        "one block's gradients",
        _m(10, "hidden", "hidden", when=("single_micro_batch",)),
        _m(11, "hidden", when=("single_micro_batch",)),
        _m(2, "hidden", "kv_hidden", when=("single_micro_batch",)),
        _m(2, "kv_hidden", when=("single_micro_batch",)),
        scale="grad_per_param",
    ),
    _term(
        "mlp_out_gradients",
        "the gradient of a block's MLP output projection (4 hidden^2), before its GELU backward",
        _m(4, "hidden", "hidden", when=("single_micro_batch",)),
        scale="grad_per_param",
    ),
    _term(
        "mlp_attn_out_gradients",
        "the gradients of a block's MLP and attention output projection (9 hidden^2)",
        _m(9, "hidden", "hidden", when=("single_micro_batch",)),
        scale="grad_per_param",
    ),
    _term(
        "embedding_gradient",
        "the embedding's dense gradient, vocab x hidden, before it joins the tied weight's",
        _m(1, "vocab", "hidden", when=("full_training",)),
        scale="grad_per_param",
    ),
    _term(
        "head_weight_gradient",
        "the tied head weight's gradient while a chunked loss accumulates it",
        _m(1, "vocab", "hidden", when=("full_training", "single_micro_batch")),
        scale="grad_per_param",
    ),
    _term(
        "slice_weight_gradient",
        "one slice's gradient of the head weight, vocab x hidden",
        _m(1, "vocab", "hidden", when=("full_training",)),
        scale="grad_per_param",
    ),
    # --- the optimizer step
    Term(
        name="optimizer_temporary",
        meaning="the optimizer step's transient: one copy of the trainable parameters in the "
        "state dtype (multi-tensor, foreach) or two of the largest (per-tensor loop): the "
        "token embedding, the position table or an MLP matrix (4 hidden^2)",
        options=tuple(
            (_m(1, "trainable", when=("has_state", "foreach")), largest)
            for largest in (
                _m(2, "vocab", "hidden", when=_PER_TENSOR),
                _m(2, "seq", "hidden", when=_PER_TENSOR),
                _m(8, "hidden", "hidden", when=_PER_TENSOR),
            )
        ),
        scale="state_value_bytes",
    ),
    # --- inference
    _term(
        "kv_cache",
        "the KV cache: a key and a value vector per layer for every token, "
        "2 x layers x batch x seq x kv_heads x head_dim",
        _m(2, "layers", "batch", "seq", "kv_hidden", "dtype"),
    ),
    _term(
        "prefill",
        "prefill of the whole sequence: one block's widest tensor and the logits",
        _m(4, *BTC),
        _m(1, "dtype", "batch", "seq", "vocab"),
    ),
)

# What the forward pass keeps for the backward pass: every block, then the head.
SAVED_ACTIVATIONS: tuple[Use, ...] = (
    Use(term="block_saved", times=0, per_layer=1),
    Use(term="head_saved"),
)

# Gradients present while block ``done`` (from the top) runs its backward pass.
_GRADIENTS_SO_FAR = (
    Use(term="gradients_before"),
    Use(term="head_gradients"),
    Use(term="block_gradients", times=0, per_done=1),
)
_BLOCKS_BELOW = (Use(term="block_saved", times=-1, per_layer=1, per_done=-1), Use(term="ids"))

TRAINING_POINTS: tuple[Point, ...] = (
    Point(
        phase="forward",
        label="end of the last block: its output beside the residual sum (and eager's mask)",
        when=("transformers",),
        alive=(
            ("gradients", (Use(term="gradients_before"),)),
            ("activations", (Use(term="block_saved", times=0, per_layer=1), Use(term="ids"))),
            ("temporaries", (Use(term="block_output"), Use(term="causal_mask"))),
        ),
    ),
    Point(
        phase="forward",
        label="end of the forward pass: the loss's forward transients",
        alive=(
            ("gradients", (Use(term="gradients_before"),)),
            ("activations", SAVED_ACTIVATIONS),
            ("temporaries", (Use(term="loss_forward"),)),
        ),
    ),
    Point(
        phase="forward",
        label="a checkpointed block runs its forward pass in full",
        when=("checkpointing",),
        alive=(
            ("gradients", (Use(term="gradients_before"),)),
            ("activations", (Use(term="block_saved", times=0, per_layer=1), Use(term="ids"))),
            ("temporaries", (Use(term="block_forward"),)),
        ),
    ),
    Point(
        phase="backward",
        label="start of the backward pass: the loss's gradients",
        when=("standard_loss",),
        alive=(
            ("gradients", (Use(term="gradients_before"),)),
            ("activations", SAVED_ACTIVATIONS),
            ("temporaries", (Use(term="loss_backward"),)),
        ),
    ),
    Point(
        phase="backward",
        label="a slice of the chunked loss: its log-softmax and gradients",
        when=("chunked_loss",),
        alive=(
            ("gradients", (Use(term="gradients_before"), Use(term="head_weight_gradient"))),
            ("activations", SAVED_ACTIVATIONS),
            ("temporaries", (Use(term="loss_backward"),)),
        ),
    ),
    Point(
        phase="backward",
        label="a slice of the chunked loss: its head-weight gradient joins the running sum",
        when=("chunked_loss", "several_slices"),
        alive=(
            ("gradients", (Use(term="gradients_before"), Use(term="head_weight_gradient"))),
            ("activations", SAVED_ACTIVATIONS),
            (
                "temporaries",
                (Use(term="slice_weight_gradient", times=2), Use(term="hidden_gradient")),
            ),
        ),
    ),
    Point(
        phase="backward",
        label="block l's MLP backward (blocks below still hold their activations)",
        each_block=True,
        alive=(
            ("gradients", (*_GRADIENTS_SO_FAR, Use(term="mlp_out_gradients"))),
            ("activations", (*_BLOCKS_BELOW, Use(term="block_full"))),
            ("temporaries", (Use(term="mlp_backward"),)),
        ),
    ),
    Point(
        phase="backward",
        label="block l's attention backward (its MLP tensors freed)",
        each_block=True,
        alive=(
            ("gradients", (*_GRADIENTS_SO_FAR, Use(term="mlp_attn_out_gradients"))),
            (
                "activations",
                (*_BLOCKS_BELOW, Use(term="block_full"), Use(term="block_mlp", times=-1)),
            ),
            ("temporaries", (Use(term="attn_backward"),)),
        ),
    ),
    Point(
        phase="backward",
        label="end of the backward pass: every gradient, and the embedding's dense gradient",
        alive=(
            ("gradients", (Use(term="gradients"),)),
            ("activations", ()),
            ("temporaries", (Use(term="embedding_gradient"),)),
        ),
    ),
    Point(
        phase="optimizer step",
        label="the optimizer step",
        alive=(
            ("gradients", (Use(term="gradients"),)),
            ("temporaries", (Use(term="optimizer_temporary"),)),
        ),
    ),
)

INFERENCE_POINTS: tuple[Point, ...] = (
    Point(
        phase="forward",
        label="prefill of the whole sequence into the KV cache",
        alive=(
            ("KV cache", (Use(term="kv_cache"),)),
            ("temporaries", (Use(term="prefill"),)),
        ),
    ),
)

TERM_NAMES = tuple(t.name for t in TERMS)


def _monomial_bytes(m: Monomial, sizes: dict[str, float]) -> float:
    value = m.coefficient
    for name in m.sizes:
        value *= sizes[name]
    return value


#: The conditions of GPT-2's own shape (a plain MLP, a tied head, a position table).
GPT2_SHAPE_CONDITIONS = frozenset({"plain_mlp", "tied_head", "learned_positions"})


def count_parameters(
    sizes: dict[str, float], conditions: set[str] | frozenset[str] = GPT2_SHAPE_CONDITIONS
) -> int:
    """The shape's parameter count, :data:`MODEL_PARAMETERS` evaluated for ``sizes``.

    >>> sizes = {"vocab": 64, "seq": 8, "hidden": 16, "kv_hidden": 16, "ffn": 64, "layers": 1}
    >>> count_parameters(sizes)
    4464
    """
    return int(_option_bytes(MODEL_PARAMETERS.options[0], sizes, set(conditions)))


def _option_bytes(
    option: tuple[Monomial, ...], sizes: dict[str, float], conditions: set[str]
) -> float:
    total = 0.0
    for m in option:
        if conditions.issuperset(m.when):
            total += _monomial_bytes(m, sizes)
    return total


def evaluate_terms(
    sizes: dict[str, float], conditions: set[str], only: tuple[str, ...] | None = None
) -> dict[str, float]:
    """Each term's bytes for these sizes and conditions (``TERMS`` in order, or ``only`` these).

    >>> sizes = {"batch": 2, "seq": 4, "vocab": 10, "dtype": 2}
    >>> evaluate_terms(sizes, set(), only=("logits",))
    {'logits': 160.0}
    """
    values: dict[str, float] = {}
    for term in TERMS:
        if only is not None and term.name not in only:
            continue
        best = 0.0
        for option in term.options:
            best = max(best, _option_bytes(option, sizes, conditions))
        if term.scale is not None and best:
            best = sizes[term.scale] * best
        values[term.name] = best
    return values


def use_bytes(uses: tuple[Use, ...], terms: dict[str, float], layers: int, done: int = 0) -> int:
    """The whole bytes of a ledger line: the sum of its uses, each times its multiplier.

    >>> uses = (Use(term="a", times=0, per_layer=1), Use(term="b"))
    >>> use_bytes(uses, {"a": 3.0, "b": 1.5}, layers=2)
    7
    """
    total = 0.0
    for use in uses:
        total += (use.times + use.per_layer * layers + use.per_done * done) * terms[use.term]
    return int(total)


@dataclass(frozen=True, kw_only=True)
class PointBytes:
    """One evaluated point: its phase, label, block (``None`` unless per block) and lines."""

    phase: str
    label: str
    done: int | None
    alive_bytes: dict[str, int]

    @property
    def total_bytes(self) -> int:
        """What is alive at this point, beyond the persistent terms."""
        return sum(self.alive_bytes.values())


def evaluate_points(
    points: tuple[Point, ...], terms: dict[str, float], conditions: set[str], layers: int
) -> list[PointBytes]:
    """Every point whose conditions hold, in order; a run of per-block points loops blocks outside.

    >>> pts = (Point(phase="p", label="x", alive=(("temporaries", (Use(term="a"),)),)),)
    >>> evaluate_points(pts, {"a": 5.0}, set(), layers=1)[0].alive_bytes
    {'temporaries': 5}
    """
    active = [p for p in points if conditions.issuperset(p.when)]
    out: list[PointBytes] = []
    i = 0
    while i < len(active):
        if not active[i].each_block:
            p = active[i]
            lines = {line: use_bytes(uses, terms, layers) for line, uses in p.alive}
            out.append(PointBytes(phase=p.phase, label=p.label, done=None, alive_bytes=lines))
            i += 1
            continue
        run = []
        while i < len(active) and active[i].each_block:
            run.append(active[i])
            i += 1
        for done in range(layers):
            for p in run:
                lines = {line: use_bytes(uses, terms, layers, done) for line, uses in p.alive}
                out.append(PointBytes(phase=p.phase, label=p.label, done=done, alive_bytes=lines))
    return out


def phase_peaks(points: list[PointBytes]) -> dict[str, PointBytes]:
    """Each phase's largest point (the first of equals), phases in the order they run.

    >>> a = PointBytes(phase="f", label="a", done=None, alive_bytes={"t": 2})
    >>> b = PointBytes(phase="f", label="b", done=None, alive_bytes={"t": 2})
    >>> phase_peaks([a, b])["f"].label
    'a'
    """
    peaks: dict[str, PointBytes] = {}
    for p in points:
        if p.phase not in peaks or p.total_bytes > peaks[p.phase].total_bytes:
            peaks[p.phase] = p
    return peaks


def _line_coefficients(
    uses: tuple[Use, ...], terms: dict[str, float], layers: int
) -> tuple[tuple[float, float, float], ...]:
    """Each use as (times + per_layer x layers, per_done, the term's bytes): use_bytes' order."""
    return tuple((u.times + u.per_layer * layers, u.per_done, terms[u.term]) for u in uses)


def peak_points(
    points: tuple[Point, ...], terms: dict[str, float], conditions: set[str], layers: int
) -> dict[str, PointBytes]:
    """``phase_peaks(evaluate_points(...))`` without keeping a result per block.

    The same sums in the same order (so the same whole bytes, the same first of
    equals), but only each phase's largest point so far is kept: one pass over the
    blocks, with each use's layer multiplier worked out once.

    >>> pts = (Point(phase="b", label="x", each_block=True,
    ...              alive=(("activations", (Use(term="a", times=0, per_done=-1),)),)),)
    >>> peak_points(pts, {"a": 5.0}, set(), layers=3)["b"].done
    0
    """
    active = [p for p in points if conditions.issuperset(p.when)]
    peaks: dict[str, PointBytes] = {}
    best: dict[str, int] = {}  # each phase's largest total so far

    def offer(p: Point, done: int | None, lines: dict[str, int]) -> None:
        total = sum(lines.values())
        if p.phase not in best or total > best[p.phase]:
            best[p.phase] = total
            peaks[p.phase] = PointBytes(phase=p.phase, label=p.label, done=done, alive_bytes=lines)

    i = 0
    while i < len(active):
        if not active[i].each_block:
            p = active[i]
            offer(p, None, {line: use_bytes(uses, terms, layers) for line, uses in p.alive})
            i += 1
            continue
        run = []
        while i < len(active) and active[i].each_block:
            p = active[i]
            run.append((p, [(line, _line_coefficients(u, terms, layers)) for line, u in p.alive]))
            i += 1
        for done in range(layers):
            for p, coefficients in run:
                lines = {}
                for line, uses in coefficients:
                    total = 0.0
                    for base, per_done, value in uses:
                        total += (base + per_done * done) * value
                    lines[line] = int(total)
                offer(p, done, lines)
    return peaks


def slice_tokens(tokens: int, slices: int) -> int:
    """Tokens in the largest slice when ``tokens`` are cut into ``slices`` (``Tensor.chunk``).

    >>> slice_tokens(16 * 1024, 8), slice_tokens(10, 3)
    (2048, 4)
    """
    return math.ceil(tokens / slices)


def tables_data() -> dict[str, Any]:
    """The terms and points as JSON-ready data, for the planner's script.

    >>> d = tables_data()
    >>> d["terms"][0]["name"], d["points"]["training"][0]["phase"]
    ('block_full', 'forward')
    """

    def monomial(m: Monomial) -> dict[str, Any]:
        return {"coefficient": m.coefficient, "sizes": list(m.sizes), "when": list(m.when)}

    def point(p: Point) -> dict[str, Any]:
        return {
            "phase": p.phase,
            "label": p.label,
            "when": list(p.when),
            "each_block": p.each_block,
            "alive": [[line, [asdict(u) for u in uses]] for line, uses in p.alive],
        }

    def term(t: Term) -> dict[str, Any]:
        return {
            "name": t.name,
            "meaning": t.meaning,
            "scale": t.scale,
            "options": [[monomial(m) for m in option] for option in t.options],
        }

    return {
        "model_parameters": term(MODEL_PARAMETERS),
        "terms": [term(t) for t in TERMS],
        "saved_activations": [asdict(u) for u in SAVED_ACTIVATIONS],
        "points": {
            "training": [point(p) for p in TRAINING_POINTS],
            "inference": [point(p) for p in INFERENCE_POINTS],
        },
    }
