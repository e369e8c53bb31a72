"""Generating text with a KV cache, timed: decode tokens/s by batch size beside the roofline.

The course's GPT (:class:`gpulesson.memory.gpt2.GPT2`) runs here layer by layer with
cached keys and values, without touching its training path: :func:`forward_cached` reads
the model's own modules (embeddings, LayerNorms, projections, MLP, tied head) and keeps
each layer's K and V in a :class:`KVCache` allocated once for the whole run. A prompt of
``t`` tokens goes through in one pass (the **prefill**); each later call feeds one new
token per sequence (a **decode step**) and attends to everything cached before it. The
logits equal a full forward pass over the same tokens (``tests/test_decoding.py``).

:func:`measure_decode` times it the course's way (warm-up, a barrier before and after
each reading, every sample kept): the prefill as a whole, then each decode step, one
sample per step. :func:`measure_decode_sweep` does that for several batch sizes on one
device, with the device's copy bandwidth (:func:`gpulesson.timing.roofline.measure_bandwidth`,
timed before and after the sweep; the faster reading is kept) and its matmul rate in the
decode dtype, so each row can be set against its bandwidth and compute bounds. Used by
the lesson ``decoding.md`` and the suite entry ``decode``
(``gpulesson/results/entries_decode.py``); rendered by :mod:`gpulesson.course.decoding`.

>>> from gpulesson.memory.gpt2 import GPT2Config
>>> from gpulesson.units import MIB
>>> plan = DecodePlan(config=GPT2Config(vocab_size=64, seq_len=32, hidden=16, heads=2,
...                   layers=1), dtype="fp32", batches=(1, 2), prompt_tokens=4,
...                   new_tokens=3, warmup_steps=1, bandwidth_bytes=MIB, matmul_n=32)
>>> sweep = measure_decode_sweep("cpu", plan, min_run_time_s=0.01)
>>> [row.batch for row in sweep.rows], sweep.rows[1].repeats
([1, 2], 3)
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from gpulesson.memory.gpt2 import GPT2, GPT2Config, parameter_count
from gpulesson.timing import plans
from gpulesson.timing.bench import TORCH_DTYPES, barrier
from gpulesson.timing.results import OpResult, Spread, quantile
from gpulesson.timing.roofline import measure_bandwidth, measure_matmul_op
from gpulesson.timing.serving import crossover_batch


class KVCache:
    """Every layer's keys and values for up to ``capacity_tokens`` tokens of each sequence.

    Allocated once, shaped (batch, heads, capacity_tokens, head_dim) per layer, and
    filled in place; ``length`` is how many positions hold a token so far. A buffer, not
    a result: it changes as tokens are decoded.

    >>> cfg = GPT2Config(vocab_size=64, seq_len=16, hidden=8, heads=2, layers=3)
    >>> cache = KVCache.allocate(cfg, batch=2, capacity_tokens=10)
    >>> cache.capacity_bytes == 2 * 3 * 2 * 10 * 8 * 4, cache.length
    (True, 0)
    """

    def __init__(self, keys: list[torch.Tensor], values: list[torch.Tensor]) -> None:
        self.keys = keys
        self.values = values
        self.length = 0

    @classmethod
    def allocate(
        cls,
        config: GPT2Config,
        batch: int,
        capacity_tokens: int,
        device: str = "cpu",
        dtype: torch.dtype = torch.float32,
    ) -> KVCache:
        """Zeroed K and V buffers for every layer of ``config``; ValueError if too long."""
        if capacity_tokens > config.seq_len:
            raise ValueError(
                f"capacity_tokens={capacity_tokens} is more than the model's "
                f"seq_len={config.seq_len}: the position table has no row for the rest; "
                "decode fewer tokens or build the model with a longer seq_len"
            )
        shape = (batch, config.heads, capacity_tokens, config.hidden // config.heads)
        return cls(
            [torch.zeros(shape, device=device, dtype=dtype) for _ in range(config.layers)],
            [torch.zeros(shape, device=device, dtype=dtype) for _ in range(config.layers)],
        )

    @property
    def batch(self) -> int:
        """Sequences the cache holds."""
        return self.keys[0].shape[0]

    @property
    def capacity_tokens(self) -> int:
        """Positions per sequence."""
        return self.keys[0].shape[2]

    @property
    def capacity_bytes(self) -> int:
        """Bytes allocated for K and V in every layer."""
        return sum(t.numel() * t.element_size() for t in (*self.keys, *self.values))


def kv_bytes_per_token(config: GPT2Config, bytes_per_value: int) -> int:
    """Cache bytes one sequence adds per token: 2 (K and V) x layers x hidden x bytes.

    The course's GPT has one key/value head per attention head (multi-head attention),
    so kv_heads x head_dim is the hidden size.

    >>> kv_bytes_per_token(GPT2Config(), 2)  # GPT-2 small in fp16: 36 KiB a token
    36864
    """
    return 2 * config.layers * config.hidden * bytes_per_value


def decode_weight_bytes(model: GPT2) -> int:
    """Bytes of weights one decode step reads: every parameter once, the position table once a row.

    The tied token embedding is read whole by the output head; of the position table a
    step reads only the row of its position.

    >>> model = GPT2(GPT2Config(vocab_size=64, seq_len=8, hidden=16, heads=2, layers=1))
    >>> decode_weight_bytes(model) == (model.num_parameters() - 8 * 16 + 16) * 4
    True
    """
    everything = sum(p.numel() * p.element_size() for p in model.parameters())
    table = model.wpe.weight
    row = table[0].numel() * table.element_size()
    return everything - table.numel() * table.element_size() + row


def decode_flops_per_token(config: GPT2Config, context_tokens: float) -> float:
    """FLOPs to decode one token: 2 per weight of every matmul, plus attention over the context.

    Per layer the matmuls hold 12 x hidden^2 weights (QKV 3C^2, output C^2, MLP 8C^2),
    the head vocab x hidden; attention does 2 x hidden for q.k and 2 x hidden for p.v per
    cached token.

    >>> decode_flops_per_token(GPT2Config(vocab_size=10, seq_len=4, hidden=2, heads=1,
    ...                        layers=1), context_tokens=3)
    160.0
    """
    c = config.hidden
    matmul_weights = config.layers * 12 * c * c + config.vocab_size * c
    attention = config.layers * 4 * c * context_tokens
    return float(2 * matmul_weights + attention)


def _check_tokens(idx: torch.Tensor, cache: KVCache) -> None:
    if idx.dim() != 2 or idx.shape[0] != cache.batch:
        raise ValueError(
            f"tokens of shape {tuple(idx.shape)} do not match a cache of batch {cache.batch}: "
            "pass a (batch, tokens) tensor"
        )
    if cache.length + idx.shape[1] > cache.capacity_tokens:
        raise ValueError(
            f"{idx.shape[1]} more tokens after {cache.length} overflow a cache of "
            f"{cache.capacity_tokens} positions: allocate a larger cache"
        )


@torch.no_grad()
def forward_cached(model: GPT2, idx: torch.Tensor, cache: KVCache) -> torch.Tensor:
    """Logits (batch, t, vocab) of ``idx`` after everything already in ``cache``, caching K and V.

    Step by step: embed the tokens at positions ``cache.length`` onward; in each block,
    project the normed input to q, k, v, write k and v into the cache, attend from q to
    every cached position up to its own (a causal mask when t > 1), then the MLP; the
    final LayerNorm and the tied head give the logits. ``cache.length`` grows by t.

    >>> torch.manual_seed(0) is not None
    True
    >>> cfg = GPT2Config(vocab_size=32, seq_len=8, hidden=8, heads=2, layers=2)
    >>> model = GPT2(cfg).eval()
    >>> idx = torch.randint(0, 32, (2, 5))
    >>> cache = KVCache.allocate(cfg, batch=2, capacity_tokens=5)
    >>> first = forward_cached(model, idx[:, :3], cache)
    >>> rest = [forward_cached(model, idx[:, i : i + 1], cache) for i in (3, 4)]
    >>> cached = torch.cat([first, *rest], dim=1)
    >>> bool(torch.allclose(cached, model(idx), atol=1e-5)), cache.length
    (True, 5)
    """
    _check_tokens(idx, cache)
    b, t = idx.shape
    start = cache.length
    end = start + t
    config = model.config
    c = config.hidden
    heads = config.heads
    pos = torch.arange(start, end, device=idx.device)
    x = model.wte(idx) + model.wpe(pos)
    # Query i (position start + i) may see cached positions 0 .. start + i.
    mask = None
    if t > 1:
        mask = torch.ones(t, end, dtype=torch.bool, device=idx.device).tril(diagonal=start)
    for layer, block in enumerate(model.blocks):
        h = block.ln_1(x)
        q, k, v = block.attn.c_attn(h).split(c, dim=2)
        # (b, t, c) -> (b, heads, t, head_dim)
        q = q.view(b, t, heads, c // heads).transpose(1, 2)
        cache.keys[layer][:, :, start:end] = k.view(b, t, heads, c // heads).transpose(1, 2)
        cache.values[layer][:, :, start:end] = v.view(b, t, heads, c // heads).transpose(1, 2)
        y = F.scaled_dot_product_attention(
            q, cache.keys[layer][:, :, :end], cache.values[layer][:, :, :end], attn_mask=mask
        )
        y = y.transpose(1, 2).contiguous().view(b, t, c)
        x = x + block.attn.c_proj(y)
        x = x + block.mlp(block.ln_2(x))
    cache.length = end
    return model.lm_head(model.ln_f(x))


@torch.no_grad()
def generate(model: GPT2, prompt: torch.Tensor, new_tokens: int) -> torch.Tensor:
    """Greedy decoding: the prompt and ``new_tokens`` tokens after it, (batch, prompt + new).

    >>> cfg = GPT2Config(vocab_size=16, seq_len=8, hidden=8, heads=2, layers=1)
    >>> generate(GPT2(cfg).eval(), torch.zeros(3, 2, dtype=torch.long), 4).shape
    torch.Size([3, 6])
    """
    if new_tokens < 1:
        raise ValueError(f"new_tokens={new_tokens!r} must be at least 1")
    param = next(model.parameters())
    cache = KVCache.allocate(
        model.config, prompt.shape[0], prompt.shape[1] + new_tokens, param.device, param.dtype
    )
    logits = forward_cached(model, prompt, cache)
    out = [prompt]
    for _ in range(new_tokens):
        token = logits[:, -1:].argmax(dim=-1)
        out.append(token)
        if cache.length < cache.capacity_tokens:
            logits = forward_cached(model, token, cache)
    return torch.cat(out, dim=1)


# --- timing ---------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class DecodeTiming(Spread):
    """Decode steps of one batch size timed on one device; each sample is seconds per step.

    One step decodes one new token for every sequence of the batch. ``prefill_samples_s``
    are seconds per prefill of the ``prompt_tokens``-token prompt. The byte and FLOP
    counts are those of a step at ``mean_context_tokens`` (the context the timed steps
    attended to, on average).

    >>> t = DecodeTiming(device="cpu", dtype="fp32", batch=4, threads=2,
    ...                  samples_s=(0.01, 0.02, 0.03), prefill_samples_s=(0.04,),
    ...                  prompt_tokens=8, weight_bytes=10**6, kv_bytes_per_token=1000,
    ...                  mean_context_tokens=10.0, flops_per_token=5e5)
    >>> t.tokens_per_s, t.prefill_tokens_per_s, t.bytes_per_step
    (200.0, 800.0, 1040000.0)
    """

    device: str
    dtype: str
    batch: int
    threads: int
    samples_s: tuple[float, ...]
    prefill_samples_s: tuple[float, ...]
    prompt_tokens: int
    weight_bytes: int
    kv_bytes_per_token: int
    mean_context_tokens: float
    flops_per_token: float

    @property
    def tokens_per_s(self) -> float:
        """Tokens generated per second, all sequences together: batch / median step time."""
        return self.batch / self.median_s

    @property
    def sequence_tokens_per_s(self) -> float:
        """Tokens per second one sequence sees: 1 / median step time."""
        return 1.0 / self.median_s

    @property
    def prefill_tokens_per_s(self) -> float:
        """Prompt tokens processed per second in the prefill."""
        return self.batch * self.prompt_tokens / quantile(self.prefill_samples_s, 0.5)

    @property
    def kv_bytes_per_step(self) -> float:
        """Cache bytes a step reads: every sequence's K and V at the mean context."""
        return self.batch * self.kv_bytes_per_token * self.mean_context_tokens

    @property
    def bytes_per_step(self) -> float:
        """Weights plus KV cache read by one step (activations are small and not counted)."""
        return self.weight_bytes + self.kv_bytes_per_step

    @property
    def flops_per_step(self) -> float:
        """FLOPs of one step: one token for each sequence."""
        return self.batch * self.flops_per_token

    @property
    def intensity_flop_per_byte(self) -> float:
        """Arithmetic intensity of a step: its FLOPs over the bytes it reads."""
        return self.flops_per_step / self.bytes_per_step

    def bandwidth_bound_tokens_per_s(self, bandwidth_bytes_per_s: float) -> float:
        """The most tokens/s memory allows: batch x bandwidth / bytes per step."""
        return self.batch * bandwidth_bytes_per_s / self.bytes_per_step

    def compute_bound_tokens_per_s(self, peak_flop_per_s: float) -> float:
        """The most tokens/s arithmetic allows: peak / FLOPs per token."""
        return peak_flop_per_s / self.flops_per_token


def _timed(device: str, fn: Callable[[], torch.Tensor]) -> tuple[float, torch.Tensor]:
    """Run ``fn`` between two barriers; (seconds, its result)."""
    barrier(device)
    start = time.perf_counter()
    out = fn()
    barrier(device)
    return time.perf_counter() - start, out


def measure_decode(
    model: GPT2,
    batch: int,
    prompt_tokens: int = 8,
    new_tokens: int = 8,
    warmup_steps: int = 2,
    prefill_repeats: int = 3,
    seed: int = 0,
) -> DecodeTiming:
    """Time the prefill and the decode steps of one batch size with greedy decoding.

    1. Allocate one cache for prompt + warm-up + timed tokens, and one for a prompt alone
       (outside the clock).
    2. Prefill a random prompt into the first cache, untimed (it also warms the prompt's
       shape up), then run ``warmup_steps`` decode steps untimed.
    3. Time ``new_tokens`` decode steps, one sample each, a barrier before and after every
       step; the next token is the argmax of the last logits (greedy). Between them, time
       ``prefill_repeats`` prefills of the same prompt into the second cache (rewound before
       each), spread evenly: both phases are sampled over the same seconds, so a neighbour
       that slows the machine for a while slows both alike. Timed one after the other,
       a busy 2-core machine read the prefill at about the decode's rate in some runs.
    """
    for name, value in (
        ("batch", batch),
        ("prompt_tokens", prompt_tokens),
        ("new_tokens", new_tokens),
        ("prefill_repeats", prefill_repeats),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}={value!r} must be a whole number of at least 1")
    if isinstance(warmup_steps, bool) or not isinstance(warmup_steps, int) or warmup_steps < 0:
        raise ValueError(f"warmup_steps={warmup_steps!r} must be a whole number, 0 or more")
    param = next(model.parameters())
    device = param.device.type
    config = model.config
    capacity = prompt_tokens + warmup_steps + new_tokens
    cache = KVCache.allocate(config, batch, capacity, device, param.dtype)
    scratch = KVCache.allocate(config, batch, prompt_tokens, device, param.dtype)
    generator = torch.Generator().manual_seed(seed)
    prompt = torch.randint(0, config.vocab_size, (batch, prompt_tokens), generator=generator)
    prompt = prompt.to(device)
    token = forward_cached(model, prompt, cache)[:, -1:].argmax(dim=-1)
    for _ in range(warmup_steps):
        token = forward_cached(model, token, cache)[:, -1:].argmax(dim=-1)
    prefill_before = [i * new_tokens // prefill_repeats for i in range(prefill_repeats)]
    prefill: list[float] = []
    samples: list[float] = []
    contexts: list[int] = []
    for step in range(new_tokens):
        for _ in range(prefill_before.count(step)):
            scratch.length = 0
            prefill.append(_timed(device, lambda: forward_cached(model, prompt, scratch))[0])
        contexts.append(cache.length + 1)
        seconds, logits = _timed(device, lambda t=token: forward_cached(model, t, cache))
        samples.append(seconds)
        token = logits[:, -1:].argmax(dim=-1)
    mean_context = sum(contexts) / len(contexts)
    return DecodeTiming(
        device=device,
        dtype=_dtype_name(param.dtype),
        batch=batch,
        threads=torch.get_num_threads(),
        samples_s=tuple(samples),
        prefill_samples_s=tuple(prefill),
        prompt_tokens=prompt_tokens,
        weight_bytes=decode_weight_bytes(model),
        kv_bytes_per_token=kv_bytes_per_token(config, param.element_size()),
        mean_context_tokens=mean_context,
        flops_per_token=decode_flops_per_token(config, mean_context),
    )


def _dtype_name(dtype: torch.dtype) -> str:
    for name, value in TORCH_DTYPES.items():
        if value == dtype and name != "tf32":
            return name
    return str(dtype).removeprefix("torch.")


# --- the sweep ------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class DecodePlan:
    """The model, dtype, batch sizes and sizes of one decode sweep."""

    config: GPT2Config
    dtype: str
    batches: tuple[int, ...]
    prompt_tokens: int
    new_tokens: int
    warmup_steps: int
    bandwidth_bytes: int  # each buffer of the copy that measures bandwidth
    matmul_n: int  # the square matmul that measures the compute rate in ``dtype``
    prefill_repeats: int = 3  # timed prefills per batch, between its timed decode steps
    threads: int | None = None  # CPU threads for the whole sweep; None keeps torch's setting

    def parameters(self) -> int:
        """The model's parameter count (tied head counted once).

        >>> PLANS[("cpu", False)].parameters()
        27350016
        """
        return parameter_count(self.config)

    def weight_bytes(self) -> int:
        """The model's parameter bytes in ``dtype`` (to check it fits before building it).

        >>> PLANS[("cpu", False)].weight_bytes() / 2**20 > 64
        True
        """
        itemsize = torch.empty((), dtype=TORCH_DTYPES[self.dtype]).element_size()
        return self.parameters() * itemsize

    def cache_bytes(self, batch: int) -> int:
        """The KV cache one batch of the sweep allocates."""
        itemsize = torch.empty((), dtype=TORCH_DTYPES[self.dtype]).element_size()
        tokens = self.prompt_tokens + self.warmup_steps + self.new_tokens
        return kv_bytes_per_token(self.config, itemsize) * tokens * batch


def _decode_plan(sizes: dict[str, Any]) -> DecodePlan:
    """One row of the plan table as a plan (its ``config`` as a :class:`GPT2Config`)."""
    return DecodePlan(**{**sizes, "config": GPT2Config(**sizes["config"])})


# The sizes per device kind live in one table with the other timed measurements' sizes
# (gpulesson/timing/plans.py, which says why they are what they are); --quick sizes are
# for ``gpulesson measure --quick``.
PLANS: dict[tuple[str, bool], DecodePlan] = {
    key: _decode_plan(sizes) for key, sizes in plans.by_run("decode").items()
}


def plan_for(device: str, quick: bool = False) -> DecodePlan:
    """The decode plan for a device kind.

    >>> plan_for("cpu").batches
    (1, 4, 16, 64)
    """
    if device not in ("cpu", "mps", "cuda"):
        raise ValueError(f"device={device!r} must be cpu, mps or cuda")
    return PLANS[(device, quick)]


@dataclass(frozen=True, kw_only=True)
class DecodeBound:
    """One batch size set against its ceilings: measured tokens/s and the roofline's bounds."""

    batch: int
    tokens_per_s: float
    sequence_tokens_per_s: float
    prefill_tokens_per_s: float
    bytes_per_step: float
    kv_share_of_bytes: float
    intensity_flop_per_byte: float
    bandwidth_bound_tokens_per_s: float
    compute_bound_tokens_per_s: float

    @property
    def bound_tokens_per_s(self) -> float:
        """The roofline: the lower of the two ceilings."""
        return min(self.bandwidth_bound_tokens_per_s, self.compute_bound_tokens_per_s)

    @property
    def limit(self) -> str:
        """Which ceiling is the lower one: "memory" or "compute"."""
        memory = self.bandwidth_bound_tokens_per_s <= self.compute_bound_tokens_per_s
        return "memory" if memory else "compute"

    @property
    def share_of_bound(self) -> float:
        """Measured tokens/s over the roofline bound."""
        return self.tokens_per_s / self.bound_tokens_per_s


@dataclass(frozen=True, kw_only=True)
class DecodeSweep:
    """Decode timings by batch size on one device, with its bandwidth and matmul rate.

    ``bandwidths`` are copies timed before and after the sweep (the machine may be
    busier during one of them); the faster is the memory ceiling. ``peak`` is a square
    matmul in the decode dtype: the compute ceiling.
    """

    device: str
    dtype: str
    parameters: int
    config: GPT2Config
    rows: tuple[DecodeTiming, ...]
    bandwidths: tuple[OpResult, ...]
    peak: OpResult

    @property
    def bandwidth_bytes_per_s(self) -> float:
        """The memory ceiling: the fastest copy."""
        return max(b.bytes_per_s for b in self.bandwidths)

    @property
    def peak_flop_per_s(self) -> float:
        """The compute ceiling: the matmul's achieved rate."""
        return self.peak.flop_per_s

    @property
    def ridge_flop_per_byte(self) -> float:
        """Where the two ceilings meet: peak / bandwidth."""
        return self.peak_flop_per_s / self.bandwidth_bytes_per_s

    @property
    def bytes_per_weight(self) -> int:
        """Bytes of one weight in the decode dtype."""
        return torch.empty((), dtype=TORCH_DTYPES[self.dtype]).element_size()

    @property
    def crossover_batch(self) -> float:
        """The batch whose weight intensity (2 x batch / bytes per weight) reaches the ridge."""
        return crossover_batch(self.ridge_flop_per_byte, self.bytes_per_weight)

    def bounds(self) -> tuple[DecodeBound, ...]:
        """Each row against the bandwidth and compute ceilings of this sweep."""
        return tuple(
            DecodeBound(
                batch=r.batch,
                tokens_per_s=r.tokens_per_s,
                sequence_tokens_per_s=r.sequence_tokens_per_s,
                prefill_tokens_per_s=r.prefill_tokens_per_s,
                bytes_per_step=r.bytes_per_step,
                kv_share_of_bytes=r.kv_bytes_per_step / r.bytes_per_step,
                intensity_flop_per_byte=r.intensity_flop_per_byte,
                bandwidth_bound_tokens_per_s=r.bandwidth_bound_tokens_per_s(
                    self.bandwidth_bytes_per_s
                ),
                compute_bound_tokens_per_s=r.compute_bound_tokens_per_s(self.peak_flop_per_s),
            )
            for r in self.rows
        )


@contextlib.contextmanager
def _threads(count: int | None) -> Iterator[None]:
    """Run with ``count`` intra-op CPU threads (None: leave torch's setting alone)."""
    before = torch.get_num_threads()
    if count is not None:
        torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@contextlib.contextmanager
def _default_dtype(dtype: torch.dtype) -> Iterator[None]:
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


def build_model(config: GPT2Config, device: str, dtype: str, seed: int = 0) -> GPT2:
    """A randomly initialised GPT on ``device``, built directly in ``dtype`` (no fp32 copy).

    >>> build_model(GPT2Config(vocab_size=8, seq_len=4, hidden=4, heads=1, layers=1),
    ...             "cpu", "fp32").lm_head.weight.dtype
    torch.float32
    """
    torch.manual_seed(seed)
    with torch.device(device), _default_dtype(TORCH_DTYPES[dtype]):
        return GPT2(config).eval()


def measure_decode_sweep(
    device: str, plan: DecodePlan | None = None, min_run_time_s: float = 0.1
) -> DecodeSweep:
    """Measure bandwidth, the matmul rate and decode tokens/s for each batch of ``plan``.

    The copy is timed once before the batches and once after; the model is built once;
    everything runs with the plan's thread count (each timing records it).
    """
    plan = plan or plan_for(device)
    with _threads(plan.threads):
        before = measure_bandwidth(device, plan.bandwidth_bytes, min_run_time_s=min_run_time_s)
        peak = measure_matmul_op(plan.matmul_n, device, plan.dtype, min_run_time_s=min_run_time_s)
        model = build_model(plan.config, device, plan.dtype)
        rows = tuple(
            measure_decode(
                model,
                batch,
                prompt_tokens=plan.prompt_tokens,
                new_tokens=plan.new_tokens,
                warmup_steps=plan.warmup_steps,
                prefill_repeats=plan.prefill_repeats,
            )
            for batch in plan.batches
        )
        parameters = model.num_parameters()
        del model
        after = measure_bandwidth(device, plan.bandwidth_bytes, min_run_time_s=min_run_time_s)
    return DecodeSweep(
        device=device,
        dtype=plan.dtype,
        parameters=parameters,
        config=plan.config,
        rows=rows,
        bandwidths=(before, after),
        peak=peak,
    )


# A row counts as on the expected side of the crossover when its batch is this far from it;
# nearer than that, the KV cache's bytes and the attention's FLOPs may tip it either way.
CROSSOVER_MARGIN = 1.25


def headline_figures(sweep: DecodeSweep) -> dict[str, tuple[float, str]]:
    """The sweep's figures a lesson's prose and checks read: ``{name: (value, unit)}``.

    ``b1_*`` are the smallest batch's, ``max_*`` the largest's; ``gain`` is total tokens/s
    at the largest batch over the smallest, ``per_sequence_drop`` how many times slower
    each sequence got; ``misplaced_rows`` counts rows whose limit contradicts the crossover
    batch (bound by compute though well below it, or by memory though well above).

    >>> rows = [DecodeTiming(device="cpu", dtype="fp32", batch=b, threads=1, samples_s=(s,),
    ...         prefill_samples_s=(s,), prompt_tokens=1, weight_bytes=1, kv_bytes_per_token=1,
    ...         mean_context_tokens=1.0, flops_per_token=1.0) for b, s in ((1, 1.0), (8, 2.0))]
    >>> op = OpResult(name="c", device="cpu", dtype="fp32", threads=1, samples_s=(1.0,),
    ...               flops=1, bytes_moved=1)
    >>> f = headline_figures(DecodeSweep(device="cpu", dtype="fp32", parameters=1,
    ...     config=GPT2Config(), rows=tuple(rows), bandwidths=(op,), peak=op))
    >>> f["batch_ratio"], f["gain"], f["per_sequence_drop"]
    ((8.0, 'x'), (4.0, 'x'), (2.0, 'x'))
    """
    bounds = sweep.bounds()
    first, last = bounds[0], bounds[-1]
    misplaced = sum(
        1
        for b in bounds
        if (b.batch * CROSSOVER_MARGIN < sweep.crossover_batch and b.limit == "compute")
        or (b.batch > sweep.crossover_batch * CROSSOVER_MARGIN and b.limit == "memory")
    )
    return {
        "bandwidth_gbs": (sweep.bandwidth_bytes_per_s / 1e9, "GB/s"),
        "matmul_gflops": (sweep.peak_flop_per_s / 1e9, "GFLOP/s"),
        "ridge": (sweep.ridge_flop_per_byte, "FLOP/byte"),
        "crossover_batch": (sweep.crossover_batch, "sequences"),
        "weight_mb": (sweep.rows[0].weight_bytes / 1e6, "MB"),
        "b1_batch": (float(first.batch), "sequences"),
        "b1_tokens_per_s": (first.tokens_per_s, "tokens/s"),
        "b1_prefill_tokens_per_s": (first.prefill_tokens_per_s, "tokens/s"),
        "b1_bound_tokens_per_s": (first.bandwidth_bound_tokens_per_s, "tokens/s"),
        "b1_share": (first.share_of_bound, "ratio"),
        "b1_intensity": (first.intensity_flop_per_byte, "FLOP/byte"),
        "b1_kv_share": (first.kv_share_of_bytes, "ratio"),
        "max_batch": (float(last.batch), "sequences"),
        "max_tokens_per_s": (last.tokens_per_s, "tokens/s"),
        "max_kv_share": (last.kv_share_of_bytes, "ratio"),
        "max_share": (max(b.share_of_bound for b in bounds), "ratio"),
        "batch_ratio": (last.batch / first.batch, "x"),
        "gain": (last.tokens_per_s / first.tokens_per_s, "x"),
        "per_sequence_drop": (first.sequence_tokens_per_s / last.sequence_tokens_per_s, "x"),
        "misplaced_rows": (float(misplaced), "rows"),
    }
