"""Training compute: FLOPs from parameters and tokens, MFU, hours and cost.

The arithmetic of the lesson "How long will training take, and what will it cost?"
(``lessons/compute-budget.md``) and of ``gpulesson budget --tokens``. Torch-free, like
the rest of the budget's arithmetic, so the CLI refuses a bad argument before torch loads.

1. **FLOPs.** A linear layer with an ``in x out`` weight, applied to one token, is a
   matrix-vector product: ``in x out`` multiplies and as many adds, 2 x in x out FLOPs
   (the matmul lesson's 2n^3, with one row instead of n). The backward pass runs two
   products of the same size: the gradient for the layer's input (dY W^T) and the
   gradient for the weight (X^T dY), 4 x in x out. Summed over every weight of the
   model: 2N FLOPs forward and 4N backward per token, 6ND for D tokens (Kaplan et al.,
   arXiv:2001.08361, section 2.1). What 6ND leaves out: attention's scores and their
   use, which grow with the sequence, 12 x layers x seq x hidden per token for forward
   and backward together (PaLM, arXiv:2204.02311, appendix B); the forward pass run a
   second time under full activation checkpointing (up to +2ND, about 8ND on the hardware;
   PyTorch stops each block's recomputation once backward has what it needs);
   and a frozen weight (LoRA's base) skips its weight gradient (2ND of the 4ND).
2. **MFU**, model FLOPs utilization (PaLM's definition): the FLOPs the model needs per
   second of a real step over the device's peak. Recomputed FLOPs are not model FLOPs:
   they count towards the hardware utilization (HFU) only.
3. **Time and money.** Hours = model FLOPs / (GPUs x peak x MFU) / 3600; cost = GPU-hours
   x price per GPU-hour. The peak is a datasheet row of :mod:`gpulesson.results.datasheets`
   (dense, in the dtype the recipe computes in), the default price an example rate of that
   row's class (:func:`gpulesson.results.datasheets.example_rates`), never a quote.

>>> training_flops(7e9, 1.4e11).train_flops
5.88e+21
>>> plan = plan_training(training_flops(7e9, 1.4e11), gpu="a100-80gb", gpus=8, mfu=0.4)
>>> round(plan.hours), plan.price_usd_per_gpu_hour, round(plan.cost_usd)
(1636, 1.6, 20940)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpulesson.memory.shape import check_count
from gpulesson.results.datasheets import Datasheet, example_rates, get

FORWARD_FLOPS_PER_PARAM_TOKEN = 2  # one multiply and one add per weight per token
GRAD_INPUT_FLOPS_PER_PARAM_TOKEN = 2  # dX = dY W^T: the same product, transposed
GRAD_WEIGHT_FLOPS_PER_PARAM_TOKEN = 2  # dW = X^T dY: skipped for a frozen weight
RECOMPUTE_FLOPS_PER_PARAM_TOKEN = 2  # full checkpointing runs the forward pass again
# Attention per token per layer: QK^T and (scores)V, each 2 x seq x hidden FLOPs forward,
# so 4 x seq x hidden forward and 12 x seq x hidden with the backward pass (PaLM's 12LHQT).
ATTENTION_FORWARD_FLOPS_PER_LAYER_SEQ_HIDDEN = 4
ATTENTION_TRAIN_FLOPS_PER_LAYER_SEQ_HIDDEN = 12
# Hoffmann et al. (arXiv:2203.15556), table 3: compute-optimal training uses about 20
# tokens per parameter (1B -> 20.2B tokens, 10B -> 205.1B, 67B -> 1.5T).
CHINCHILLA_TOKENS_PER_PARAM = 20
SECONDS_PER_HOUR = 3600
SIXTEEN_BIT = ("bf16", "fp16")
# Bounds on the inputs that price time and money (input checks, not figures about runs).
# MIN_MFU: below 0.01% of the peak a run is broken, not slow (large runs report 0.38 to
# 0.46); with every count the CLI accepts, hours stay finite above it.
MIN_MFU = 1e-4
# MAX_PRICE_USD_PER_GPU_HOUR: hundreds of times the example rates (at most a few dollars
# per GPU-hour); a larger number is likelier a monthly or a whole cluster's price than a
# GPU-hour's, and with it the cost stays finite.
MAX_PRICE_USD_PER_GPU_HOUR = 1000.0


def _positive(name: str, value: float, example: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name}={value!r} is not a number: give one, e.g. {example}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name}={value!r} must be a positive, finite number, e.g. {example}")
    return float(value)


# --- FLOPs ------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class LinearFlops:
    """The three matmuls of one linear layer (no bias) over ``tokens`` tokens, in FLOPs.

    >>> f = linear_flops(in_features=4, out_features=3, tokens=2)
    >>> f.forward_flops, f.grad_input_flops, f.grad_weight_flops, f.backward_flops
    (48, 48, 48, 96)
    """

    in_features: int
    out_features: int
    tokens: int
    forward_flops: int  # Y = X W: (tokens x in) @ (in x out)
    grad_input_flops: int  # dX = dY W^T: (tokens x out) @ (out x in)
    grad_weight_flops: int  # dW = X^T dY: (in x tokens) @ (tokens x out)

    @property
    def backward_flops(self) -> int:
        """Both gradients: twice the forward pass."""
        return self.grad_input_flops + self.grad_weight_flops

    @property
    def train_flops(self) -> int:
        """Forward and backward: 6 x in x out x tokens."""
        return self.forward_flops + self.backward_flops


def linear_flops(*, in_features: int, out_features: int, tokens: int) -> LinearFlops:
    """FLOPs of a linear layer's forward pass and both gradients: 2, 2 and 2 x in x out x tokens.

    Each is one matmul of an (m x k) by a (k x n) matrix, 2mnk FLOPs (the matmul
    lesson's 2n^3 with m, n, k unequal).
    """
    for name, value in (("in_features", in_features), ("out_features", out_features)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name}={value!r} must be a positive whole number, e.g. 4096")
    if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 1:
        raise ValueError(f"tokens={tokens!r} must be a positive whole number, e.g. 512")
    product = 2 * in_features * out_features * tokens
    return LinearFlops(
        in_features=in_features,
        out_features=out_features,
        tokens=tokens,
        forward_flops=product,
        grad_input_flops=product,
        grad_weight_flops=product,
    )


@dataclass(frozen=True, kw_only=True)
class AttentionShape:
    """What attention's FLOPs depend on: layers, the sequence each token attends over, width."""

    layers: int
    seq: int
    hidden: int


@dataclass(frozen=True, kw_only=True)
class TrainingFlops:
    """The FLOPs of training on ``tokens`` tokens, term by term.

    ``train_flops`` is the model FLOPs (what MFU divides by time): forward, both gradients
    and attention. ``recompute_flops`` is the forward pass run again under full
    checkpointing: the hardware does it, the model does not need it, so it is in
    ``hardware_flops`` only.
    """

    parameters: float
    trainable_parameters: float
    tokens: float
    forward_flops: float
    grad_input_flops: float
    grad_weight_flops: float
    attention_flops: float
    recompute_flops: float

    @property
    def six_nd_flops(self) -> float:
        """The rule of thumb, 6 x parameters x tokens, for comparison."""
        return 6 * self.parameters * self.tokens

    @property
    def backward_flops(self) -> float:
        """Both gradients of every weight (the attention term holds its own backward)."""
        return self.grad_input_flops + self.grad_weight_flops

    @property
    def train_flops(self) -> float:
        """Model FLOPs: forward, backward and attention (no recomputation)."""
        return self.forward_flops + self.backward_flops + self.attention_flops

    @property
    def hardware_flops(self) -> float:
        """What the hardware runs: the model FLOPs plus any recomputation."""
        return self.train_flops + self.recompute_flops


def attention_flops(shape: AttentionShape, tokens: float) -> float:
    """Attention's training FLOPs for ``tokens`` tokens: 12 x layers x seq x hidden each.

    Each token's query meets ``seq`` keys (QK^T: 2 x seq x hidden FLOPs per layer) and
    weighs ``seq`` values (2 x seq x hidden more); backward is twice that. Counted over
    the whole sequence, as PaLM's 12LHQT and FlopCounterMode do, not halved for a causal mask.

    >>> attention_flops(AttentionShape(layers=2, seq=128, hidden=64), tokens=10)
    1966080.0
    """
    _positive("tokens", tokens, "1.4e11")
    for name in ("layers", "seq", "hidden"):
        value = getattr(shape, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"attention {name}={value!r} must be a positive whole number")
        check_count(name, value)  # the shape's own limits (layers at most MAX_LAYERS)
    per_token = ATTENTION_TRAIN_FLOPS_PER_LAYER_SEQ_HIDDEN * shape.layers * shape.seq
    return float(per_token * shape.hidden * tokens)


def training_flops(
    params: float,
    tokens: float,
    *,
    trainable_params: float | None = None,
    checkpointing: bool = False,
    attention: AttentionShape | None = None,
) -> TrainingFlops:
    """Training FLOPs: 2ND forward, 2ND for input gradients, 2N_trainable D for weight gradients.

    With every weight trained that is 6ND. ``attention`` adds 12 x layers x seq x hidden
    per token; ``checkpointing`` (full) adds the forward pass again as recompute FLOPs
    (2ND, plus attention's forward share), which are hardware FLOPs, not model FLOPs.

    >>> f = training_flops(7e9, 1.4e11, trainable_params=7e6)
    >>> round(f.train_flops / f.six_nd_flops, 3)  # LoRA: the frozen base skips its dW
    0.667
    >>> training_flops(7e9, 1.4e11, checkpointing=True).hardware_flops / 5.88e21
    1.3333333333333333
    >>> training_flops(7e9, float("inf"))
    Traceback (most recent call last):
    ...
    ValueError: tokens=inf must be a positive, finite number, e.g. 1.4e11
    """
    params = _positive("params", params, "7e9")
    tokens = _positive("tokens", tokens, "1.4e11")
    trainable = (
        params
        if trainable_params is None
        else _positive("trainable_params", trainable_params, "7e6")
    )
    if trainable > params:
        raise ValueError(
            f"trainable_params={trainable:g} is more than params={params:g}: "
            "at most every parameter trains"
        )
    attn = 0.0 if attention is None else attention_flops(attention, tokens)
    recompute = 0.0
    if checkpointing:
        attn_forward = attn * (
            ATTENTION_FORWARD_FLOPS_PER_LAYER_SEQ_HIDDEN
            / ATTENTION_TRAIN_FLOPS_PER_LAYER_SEQ_HIDDEN
        )
        recompute = RECOMPUTE_FLOPS_PER_PARAM_TOKEN * params * tokens + attn_forward
    flops = TrainingFlops(
        parameters=params,
        trainable_parameters=trainable,
        tokens=tokens,
        forward_flops=FORWARD_FLOPS_PER_PARAM_TOKEN * params * tokens,
        grad_input_flops=GRAD_INPUT_FLOPS_PER_PARAM_TOKEN * params * tokens,
        grad_weight_flops=GRAD_WEIGHT_FLOPS_PER_PARAM_TOKEN * trainable * tokens,
        attention_flops=attn,
        recompute_flops=recompute,
    )
    if not math.isfinite(flops.hardware_flops):
        raise ValueError(
            f"params={params:g} x tokens={tokens:g} overflows a float: give realistic sizes"
        )
    return flops


def chinchilla_tokens(params: float) -> float:
    """Compute-optimal tokens for ``params`` parameters: about 20 per parameter (Hoffmann et al.).

    A rule of thumb read off the paper's table 3, not a law: it minimises loss for a
    fixed training budget, and models meant to be served cheaply train far longer.

    >>> chinchilla_tokens(7e9)
    140000000000.0
    """
    return CHINCHILLA_TOKENS_PER_PARAM * _positive("params", params, "7e9")


# --- MFU --------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class MfuReading:
    """A step's achieved model FLOP/s over one peak, with what the peak is and where from.

    ``peak_kind`` is ``"datasheet"`` (the vendor's dense peak: the share is the MFU),
    ``"matmul"`` (the best matmul measured on the device: the share of what is achievable)
    or ``"model"`` (the CPU peak model of :mod:`gpulesson.timing.peak`).

    >>> r = MfuReading(device="cpu", dtype="fp32", achieved_flop_per_s=40e9,
    ...                peak_flop_per_s=100e9, peak_kind="matmul", peak_label="best matmul",
    ...                peak_source="measured")
    >>> r.mfu
    0.4
    """

    device: str
    dtype: str
    achieved_flop_per_s: float
    peak_flop_per_s: float
    peak_kind: str
    peak_label: str
    peak_source: str

    @property
    def mfu(self) -> float:
        """Achieved over peak: the share of the peak the step turned into model FLOPs."""
        return mfu(self.achieved_flop_per_s, self.peak_flop_per_s)


def mfu(achieved_flop_per_s: float, peak_flop_per_s: float) -> float:
    """Model FLOPs utilization: model FLOPs per second achieved over the peak FLOP/s.

    >>> mfu(1.2e14, 3.12e14)
    0.38461538461538464
    """
    achieved = _positive("achieved_flop_per_s", achieved_flop_per_s, "1.2e14")
    return achieved / _positive("peak_flop_per_s", peak_flop_per_s, "3.12e14")


# --- time and money ---------------------------------------------------------------------


def check_mfu(value: float, label: str | None = None) -> float:
    """``value`` if it is a share from ``MIN_MFU`` to 1; ``ValueError`` with the fix otherwise.

    ``label`` names the value in the message (default ``mfu=<value>``).

    >>> check_mfu(0.4)
    0.4
    >>> check_mfu(40)
    Traceback (most recent call last):
    ...
    ValueError: mfu=40 must be a share above 0 and at most 1: no run beats its peak; \
for 40% write 0.4
    >>> check_mfu(1e-300)
    Traceback (most recent call last):
    ...
    ValueError: mfu=1e-300 is below 0.0001, the least MFU priced: a run at under 0.01% of \
its peak is broken, not slow; give the share it reaches, e.g. 0.4
    """
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if number and math.isfinite(value) and MIN_MFU <= value <= 1:
        return float(value)
    if number and 0 < value < MIN_MFU:
        raise ValueError(
            f"{label or f'mfu={value!r}'} is below {MIN_MFU:g}, the least MFU priced: a run "
            f"at under {MIN_MFU:.2%} of its peak is broken, not slow; give the share it "
            "reaches, e.g. 0.4"
        )
    if number and 1 < value <= 100:
        hint = f"no run beats its peak; for {value:g}% write {value / 100:g}"
    else:
        hint = "e.g. 0.4 (large runs report 0.38 to 0.46)"
    raise ValueError(f"{label or f'mfu={value!r}'} must be a share above 0 and at most 1: {hint}")


def peak_for(sheet: Datasheet, compute_dtype: str) -> tuple[str, float]:
    """The dtype and dense FLOP/s a run computing in ``compute_dtype`` gets on ``sheet``'s GPU.

    16-bit recipes use the bf16 peak, or the fp16 one where the GPU has no bf16 (a T4 runs
    autocast in fp16); fp32 recipes the fp32 peak (PyTorch leaves TF32 off for matmuls).

    >>> peak_for(get("t4"), "bf16")
    ('fp16', 65000000000000.0)
    >>> peak_for(get("apple-m1-max"), "bf16")
    Traceback (most recent call last):
    ...
    ValueError: Apple M1 Max (apple-m1-max): its datasheet row gives no bf16 or fp16 peak \
FLOP/s, so no time can be priced on it: pick an NVIDIA id such as a100-80gb
    """
    wanted = (compute_dtype, *(d for d in SIXTEEN_BIT if d != compute_dtype))
    if compute_dtype not in SIXTEEN_BIT:
        wanted = (compute_dtype,)
    for dtype in wanted:
        peak = sheet.dense_flop_per_s(dtype)
        if peak:
            return dtype, peak
    raise ValueError(
        f"{sheet.name} ({sheet.id}): its datasheet row gives no {' or '.join(wanted)} peak "
        "FLOP/s, so no time can be priced on it: pick an NVIDIA id such as a100-80gb"
    )


@dataclass(frozen=True, kw_only=True)
class TrainingPlan:
    """How long ``flops`` takes on ``gpus`` GPUs of one datasheet row at an MFU, and the bill.

    ``price_source`` says where the price comes from (given, or an example rate, which is
    never a quote); without a price ``price_usd_per_gpu_hour`` and ``cost_usd`` are None.
    """

    flops: TrainingFlops
    gpu: str
    gpu_name: str
    gpus: int
    peak_dtype: str
    peak_flop_per_s: float
    peak_source: str
    mfu: float
    price_usd_per_gpu_hour: float | None
    price_source: str | None

    @property
    def seconds(self) -> float:
        """Wall-clock seconds: model FLOPs over (GPUs x peak x MFU)."""
        return self.flops.train_flops / (self.gpus * self.peak_flop_per_s * self.mfu)

    @property
    def hours(self) -> float:
        """Wall-clock hours."""
        return self.seconds / SECONDS_PER_HOUR

    @property
    def days(self) -> float:
        """Wall-clock days."""
        return self.hours / 24

    @property
    def gpu_hours(self) -> float:
        """What a provider bills: every GPU for every hour."""
        return self.hours * self.gpus

    @property
    def cost_usd(self) -> float | None:
        """GPU-hours x price, or None without a price."""
        if self.price_usd_per_gpu_hour is None:
            return None
        return self.gpu_hours * self.price_usd_per_gpu_hour


def example_price(gpu: str) -> tuple[float, str] | None:
    """The example on-demand rate for ``gpu``'s class and the label that says it is one.

    >>> price, label = example_price("l4")
    >>> price, label.startswith("example on-demand rate of the A10 / L4-class")
    (0.6, True)
    >>> example_price("h100-sxm") is None
    True
    """
    rates = example_rates()
    rate = rates.for_gpu(gpu)
    if rate is None:
        return None
    label = (
        f"example on-demand rate of the {rate.card_class} from the where-to-run lesson, "
        f"not a quote: {rates.source}"
    )
    return rate.on_demand_usd_per_h, label


def check_price(value: float, label: str | None = None) -> float:
    """``value`` if it is a price per GPU-hour from 0 to ``MAX_PRICE_USD_PER_GPU_HOUR``.

    ``label`` names the value in the message (default ``price_usd_per_gpu_hour=<value>``).

    >>> check_price(2.5)
    2.5
    >>> check_price(1e308)
    Traceback (most recent call last):
    ...
    ValueError: price_usd_per_gpu_hour=1e+308 is more than 1,000 US dollars per GPU-hour, \
the most priced (hundreds of times the example rates): give the price of one GPU for one hour, \
e.g. 2.5
    """
    name = label or f"price_usd_per_gpu_hour={value!r}"
    if isinstance(value, bool) or not (
        isinstance(value, int | float) and math.isfinite(value) and value >= 0
    ):
        raise ValueError(f"{name} must be a finite price of at least 0 US dollars, e.g. 2.5")
    if value > MAX_PRICE_USD_PER_GPU_HOUR:
        raise ValueError(
            f"{name} is more than {MAX_PRICE_USD_PER_GPU_HOUR:,.0f} US dollars per GPU-hour, "
            "the most priced (hundreds of times the example rates): give the price of one GPU "
            "for one hour, e.g. 2.5"
        )
    return float(value)


def plan_training(
    flops: TrainingFlops,
    *,
    gpu: str,
    gpus: int,
    mfu: float,
    compute_dtype: str = "bf16",
    price_usd_per_gpu_hour: float | None = None,
) -> TrainingPlan:
    """Time and cost of ``flops`` on ``gpus`` GPUs with datasheet id ``gpu`` at ``mfu``.

    Without ``price_usd_per_gpu_hour`` the price is the example rate of the GPU's class,
    labelled as such, or none at all when no example covers the GPU.

    >>> p = plan_training(training_flops(7e9, 1.4e11), gpu="h100-sxm", gpus=8, mfu=0.4)
    >>> p.peak_dtype, p.peak_flop_per_s / 1e12, round(p.hours), p.cost_usd
    ('bf16', 989.5, 516, None)
    >>> plan_training(training_flops(7e9, 1.4e11), gpu="h100-sxm", gpus=0, mfu=0.4)
    Traceback (most recent call last):
    ...
    ValueError: gpus=0 must be a positive whole number, e.g. 8
    """
    sheet = get(gpu)
    if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 1:
        raise ValueError(f"gpus={gpus!r} must be a positive whole number, e.g. 8")
    check_count("gpus", gpus)  # at most 2^53, so GPUs x peak is a finite float
    share = check_mfu(mfu)
    dtype, peak = peak_for(sheet, compute_dtype)
    price_source: str | None
    if price_usd_per_gpu_hour is not None:
        price: float | None = check_price(price_usd_per_gpu_hour)
        price_source = "given"
    else:
        example = example_price(gpu)
        price, price_source = example if example else (None, None)
    sources = "; ".join(f"{s.title} <{s.url}>" for s in sheet.sources)
    return TrainingPlan(
        flops=flops,
        gpu=sheet.id,
        gpu_name=sheet.name,
        gpus=gpus,
        peak_dtype=dtype,
        peak_flop_per_s=peak,
        peak_source=f"dense {dtype} peak, {sheet.peaks[dtype].stated!r}: {sources}",
        mfu=share,
        price_usd_per_gpu_hour=price,
        price_source=price_source,
    )
