"""Count and time a real training step: PyTorch's FLOP counter against 6ND, and achieved FLOP/s.

The measured side of the lesson "How long will training take, and what will it cost?"
(``lessons/compute-budget.md``) and of the suite entry ``train_step``
(:mod:`gpulesson.results.entries_compute`); the arithmetic is :mod:`gpulesson.memory.compute`.

* :func:`count_linear` and :func:`count_gpt_step` run a forward and backward pass under
  ``torch.utils.flop_counter.FlopCounterMode``, which adds up a formula per operator from
  the shapes (2mnk for a matmul) and counts zero for an operator it has no formula for.
  On the ``meta`` device nothing is computed, so counting a long sequence costs nothing.
  The counter has no formula for the CPU kernel of ``scaled_dot_product_attention``, so on
  a CPU the model runs its eager attention (plain matmuls) to be counted whole.
* :func:`measure_gpt_step` times one whole training step (forward, backward, AdamW) with
  the course's timer (warm-up, barriers, median of many samples) and counts the same step's
  FLOPs: achieved FLOP/s = counted model FLOPs / median seconds.
* :func:`cpu_readings`, :func:`gpu_readings_from_bundle` and :func:`gpu_readings_measured`
  set that rate against the peaks of the device: the best matmul measured on it, the CPU
  peak model, the datasheet's dense peak.

>>> step = count_gpt_step(GPT2Config(vocab_size=64, seq_len=16, hidden=32, heads=2,
...                                  layers=1, attention="eager"), batch=2)
>>> step.counted_flops == step.formula_flops
True
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, replace

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from gpulesson.memory.budget import TransformerShape, estimate
from gpulesson.memory.compute import (
    ATTENTION_TRAIN_FLOPS_PER_LAYER_SEQ_HIDDEN,
    LinearFlops,
    MfuReading,
    linear_flops,
)
from gpulesson.memory.gpt2 import GPT2, GPT2Config
from gpulesson.results import datasheets
from gpulesson.results.bundle import Bundle, Measurement
from gpulesson.results.compare import Sourced
from gpulesson.results.datasheets import Datasheet
from gpulesson.timing import plans
from gpulesson.timing.bench import barrier, measure_matmul, time_samples
from gpulesson.timing.peak import FMA_UNIT_BOUNDS, CpuFacts, CpuPeak, cpu_peak, read_cpu_facts
from gpulesson.timing.results import MatmulResult, OpResult

# The timed step on each device kind, and the square matmul it is set against: the
# ``train_step`` rows of gpulesson/timing/plans.json (its docstring says why). The small GPT
# the lesson counts and times on a CPU, and GPT-2 small on a CUDA GPU, whose batch the
# suite's entry shrinks to fit the memory.
STEP_SIZES = {device: plans.sizes(device, "train_step") for device in plans.DEVICE_KINDS}
PAGE_CONFIG = GPT2Config(**STEP_SIZES["cpu"]["config"])
PAGE_BATCH: int = STEP_SIZES["cpu"]["batch"]
GPU_CONFIG = GPT2Config(**STEP_SIZES["cuda"]["config"])
GPU_BATCH: int = STEP_SIZES["cuda"]["batch"]
MATMUL_N = {device: sizes["matmul_n"] for device, sizes in STEP_SIZES.items()}
AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


@contextlib.contextmanager
def _threads(threads: int | None) -> Iterator[int]:
    """Run with ``threads`` torch threads (the current setting when None), then restore it."""
    before = torch.get_num_threads()
    if threads is not None:
        if threads < 1:
            raise ValueError(f"threads={threads} must be at least 1")
        torch.set_num_threads(threads)
    try:
        yield torch.get_num_threads()
    finally:
        torch.set_num_threads(before)


# --- counting ---------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class LinearCount:
    """One linear layer's three matmuls: the formula's FLOPs beside the counter's."""

    formula: LinearFlops
    counted_forward_flops: int
    counted_backward_flops: int

    @property
    def backward_over_forward(self) -> float:
        """The counter's backward FLOPs over its forward FLOPs (the formula says 2)."""
        return self.counted_backward_flops / self.counted_forward_flops


def count_linear(*, in_features: int, out_features: int, tokens: int) -> LinearCount:
    """Count one ``nn.Linear`` (no bias) forward and backward, on the meta device.

    >>> c = count_linear(in_features=8, out_features=4, tokens=3)
    >>> c.counted_forward_flops, c.counted_backward_flops, c.backward_over_forward
    (192, 384, 2.0)
    """
    formula = linear_flops(in_features=in_features, out_features=out_features, tokens=tokens)
    with torch.device("meta"):
        layer = nn.Linear(in_features, out_features, bias=False)
        x = torch.empty(tokens, in_features, requires_grad=True)
    with FlopCounterMode(display=False) as forward:
        y = layer(x)
    with FlopCounterMode(display=False) as backward:
        y.sum().backward()
    return LinearCount(
        formula=formula,
        counted_forward_flops=forward.get_total_flops(),
        counted_backward_flops=backward.get_total_flops(),
    )


@dataclass(frozen=True, kw_only=True)
class StepCount:
    """The FLOPs FlopCounterMode counted for one forward and backward pass of a GPT-2.

    ``parameters`` is every parameter (the N of 6ND); ``matmul_parameters`` the weights
    of the linear layers, the ones that multiply every token (the tied output head among
    them; the position embedding is a lookup, and biases and LayerNorms do no matmul).
    ``seq`` is the sequence length of the batch, ``tokens`` = batch x seq (the D).
    """

    config: GPT2Config
    batch: int
    seq: int
    parameters: int
    matmul_parameters: int
    counted_flops: int
    by_operator: tuple[tuple[str, int], ...]

    @property
    def tokens(self) -> int:
        """Tokens in the step: batch x seq."""
        return self.batch * self.seq

    @property
    def six_nd_flops(self) -> int:
        """6 x parameters x tokens."""
        return 6 * self.parameters * self.tokens

    @property
    def ratio_to_six_nd(self) -> float:
        """Counted over 6ND."""
        return self.counted_flops / self.six_nd_flops

    @property
    def attention_flops(self) -> int:
        """12 x layers x seq x hidden per token: what attention's matmuls add."""
        c = self.config
        per_token = ATTENTION_TRAIN_FLOPS_PER_LAYER_SEQ_HIDDEN * c.layers * self.seq * c.hidden
        return per_token * self.tokens

    @property
    def formula_flops(self) -> int:
        """6 x matmul parameters x tokens + the attention term (no recomputation)."""
        return 6 * self.matmul_parameters * self.tokens + self.attention_flops

    @property
    def counted_over_formula(self) -> float:
        """Counted over :attr:`formula_flops`: 1 when the formula accounts for every FLOP."""
        return self.counted_flops / self.formula_flops


def matmul_parameters(model: nn.Module) -> int:
    """Weights of the model's ``nn.Linear`` layers, each shared matrix counted once.

    >>> matmul_parameters(nn.Sequential(nn.Linear(3, 2), nn.Linear(2, 2, bias=False)))
    10
    """
    seen: dict[int, int] = {}
    for module in model.modules():
        if isinstance(module, nn.Linear):
            seen[id(module.weight)] = module.weight.numel()
    return sum(seen.values())


def _by_operator(counter: FlopCounterMode) -> tuple[tuple[str, int], ...]:
    counts = counter.get_flop_counts().get("Global", {})
    return tuple(sorted((str(op), int(n)) for op, n in counts.items()))


def count_gpt_step(
    config: GPT2Config, batch: int, seq: int | None = None, device: str = "meta"
) -> StepCount:
    """Count one forward and backward pass of ``GPT2(config)`` on ``batch`` x ``seq`` tokens.

    ``seq`` defaults to ``config.seq_len``. On ``meta`` (the default) nothing is computed:
    the counter works from shapes alone.
    """
    seq = config.seq_len if seq is None else seq
    if not 1 <= seq <= config.seq_len:
        raise ValueError(f"seq={seq} must be between 1 and the model's seq_len={config.seq_len}")
    if batch < 1:
        raise ValueError(f"batch={batch} must be a positive whole number, e.g. 4")
    with torch.device(device):
        model = GPT2(config)
        idx = torch.zeros(batch, seq, dtype=torch.long)
    model.train()
    with FlopCounterMode(display=False) as counter:
        model(idx, idx).backward()
    return StepCount(
        config=config,
        batch=batch,
        seq=seq,
        parameters=model.num_parameters(),
        matmul_parameters=matmul_parameters(model),
        counted_flops=counter.get_total_flops(),
        by_operator=_by_operator(counter),
    )


@dataclass(frozen=True, kw_only=True)
class RecomputeCount:
    """One step counted without and with every block checkpointed."""

    plain: StepCount
    checkpointed: StepCount

    @property
    def ratio(self) -> float:
        """Checkpointed FLOPs over plain FLOPs: under 8/6.

        The output head is not checkpointed, and PyTorch's non-reentrant checkpoint stops
        recomputing a block once the backward pass has every tensor it needs
        (``torch.utils.checkpoint.set_checkpoint_early_stop``), which skips the block's
        last matmul.
        """
        return self.checkpointed.counted_flops / self.plain.counted_flops


def count_recompute(config: GPT2Config, batch: int) -> RecomputeCount:
    """Count ``config``'s step as it is and with ``checkpointing=True`` (on the meta device).

    >>> c = GPT2Config(vocab_size=64, seq_len=16, hidden=32, heads=2, layers=2, attention="eager")
    >>> 1.2 < count_recompute(c, 2).ratio < 4 / 3
    True
    """
    plain = count_gpt_step(replace(config, checkpointing=False), batch)
    checkpointed = count_gpt_step(replace(config, checkpointing=True), batch)
    return RecomputeCount(plain=plain, checkpointed=checkpointed)


@dataclass(frozen=True, kw_only=True)
class SdpaGap:
    """The same CPU step counted with eager attention and with ``scaled_dot_product_attention``."""

    eager: StepCount
    sdpa: StepCount

    @property
    def missing_flops(self) -> int:
        """What the counter did not see with SDPA: eager count minus SDPA count."""
        return self.eager.counted_flops - self.sdpa.counted_flops


def count_sdpa_gap(config: GPT2Config, batch: int) -> SdpaGap:
    """Count ``config``'s step on the CPU with eager attention and with SDPA (real tensors).

    torch's counter has formulas for the CUDA flash, memory-efficient and cuDNN attention
    kernels, not for the CPU one, so on a CPU the SDPA count misses attention's matmuls.
    """
    with _threads(1):  # a count needs no speed; one thread is never stalled by a busy machine
        return SdpaGap(
            eager=count_gpt_step(replace(config, attention="eager"), batch, device="cpu"),
            sdpa=count_gpt_step(replace(config, attention="sdpa"), batch, device="cpu"),
        )


# --- timing -----------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class StepTiming:
    """A whole training step timed on a device, with the model FLOPs the counter found in it.

    ``timing`` is the course's :class:`~gpulesson.timing.results.OpResult` (samples in
    seconds per step, ``flops`` the counted model FLOPs of one step).
    """

    count: StepCount
    timing: OpResult
    dtype: str

    @property
    def flop_per_s(self) -> float:
        """Achieved model FLOP/s: counted FLOPs per step over the median step time."""
        return self.timing.flop_per_s

    @property
    def tokens_per_s(self) -> float:
        """Tokens trained per second at the median step time."""
        return self.count.tokens / self.timing.median_s


@contextlib.contextmanager
def _autocast(device: str, dtype: str) -> Iterator[None]:
    if dtype in AUTOCAST_DTYPES:
        with torch.autocast(device_type=device, dtype=AUTOCAST_DTYPES[dtype]):
            yield
    else:
        yield


def measure_gpt_step(
    config: GPT2Config = PAGE_CONFIG,
    batch: int = PAGE_BATCH,
    device: str = "cpu",
    dtype: str = "fp32",
    min_run_time_s: float = 0.1,
    threads: int | None = None,
) -> StepTiming:
    """Time ``GPT2(config)``'s training step (zero_grad, forward, backward, AdamW step).

    ``dtype`` ``"bf16"`` or ``"fp16"`` runs the forward under ``torch.autocast`` with fp32
    weights (the ``amp`` recipe); ``"fp32"`` runs everything in fp32. The first step is
    counted with FlopCounterMode; it and one more are the warm-up, then the timer runs.
    ``threads`` sets torch's CPU threads for the whole measurement (the lesson uses 1: a
    step is hundreds of small parallel regions, and on a busy machine one descheduled
    thread stalls each of them).
    """
    if dtype not in ("fp32", *AUTOCAST_DTYPES):
        raise ValueError(f"dtype={dtype!r}: use fp32, bf16 or fp16")
    with _threads(threads):
        return _measure_gpt_step(config, batch, device, dtype, min_run_time_s)


def _measure_gpt_step(
    config: GPT2Config, batch: int, device: str, dtype: str, min_run_time_s: float
) -> StepTiming:
    torch.manual_seed(0)
    model = GPT2(config).to(device)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    idx = torch.randint(0, config.vocab_size, (batch, config.seq_len), device=device)
    targets = torch.randint(0, config.vocab_size, (batch, config.seq_len), device=device)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with _autocast(device, dtype):
            loss = model(idx, targets)
        loss.backward()
        optimizer.step()

    with FlopCounterMode(display=False) as counter:
        step()
    barrier(device)
    count = StepCount(
        config=config,
        batch=batch,
        seq=config.seq_len,
        parameters=model.num_parameters(),
        matmul_parameters=matmul_parameters(model),
        counted_flops=counter.get_total_flops(),
        by_operator=_by_operator(counter),
    )
    threads = torch.get_num_threads()
    samples, calls = time_samples(step, device, threads, min_run_time_s, warmup=1)
    timing = OpResult(
        name="GPT-2 training step",
        device=device,
        dtype=dtype,
        threads=threads,
        samples_s=samples,
        flops=count.counted_flops,
        bytes_moved=0,  # not a traffic measurement: the roofline's intensity does not apply
        calls_per_sample=calls,
    )
    return StepTiming(count=count, timing=timing, dtype=dtype)


# --- MFU against the device's peaks -----------------------------------------------------


def cpu_readings(
    step_flop_per_s: float, matmul: MatmulResult, peak: CpuPeak
) -> tuple[MfuReading, ...]:
    """The CPU step's rate over the best matmul measured here, and over the peak model's bounds.

    The peak model gives a rate per FMA unit; each bound of ``FMA_UNIT_BOUNDS`` is a row,
    except a bound below the matmul measured here: a roof the machine has already been timed
    above is not a roof (:func:`bounds_below_matmul` names them), so no share on the page
    can exceed what was measured. A term the machine does not reveal leaves those rows out.
    """
    rows = [
        MfuReading(
            device="cpu",
            dtype=matmul.dtype,
            achieved_flop_per_s=step_flop_per_s,
            peak_flop_per_s=matmul.flop_per_s,
            peak_kind="matmul",
            peak_label=f"{matmul.n} x {matmul.n} {matmul.dtype} matmul measured here, "
            f"{matmul.threads} thread{'s' if matmul.threads != 1 else ''}",
            peak_source="timed on this build's machine, median",
        )
    ]
    for units, rate in peak.bounds_flop_per_s:
        if rate < matmul.flop_per_s:
            continue
        rows.append(
            MfuReading(
                device="cpu",
                dtype=peak.dtype,
                achieved_flop_per_s=step_flop_per_s,
                peak_flop_per_s=rate,
                peak_kind="model",
                peak_label=f"CPU peak model, {units} FMA unit{'s' if units > 1 else ''} per core",
                peak_source=f"{peak.cores} core{'s' if peak.cores != 1 else ''} × "
                f"{peak.simd_lanes} lanes × 2 FLOPs × {(peak.clock_hz or 0) / 1e9:.2f} GHz × "
                f"{units} (the CPU peak model; cores have {' or '.join(map(str, FMA_UNIT_BOUNDS))} "
                "FMA units, and the CPU does not say which)",
            )
        )
    return tuple(rows)


def bounds_below_matmul(matmul: MatmulResult, peak: CpuPeak) -> tuple[tuple[int, float], ...]:
    """The peak model's bounds ``(FMA units, FLOP/s)`` that the measured matmul already beat.

    Such a bound is ruled out: this core has more FMA units, or runs faster than the clock
    the model read. :func:`cpu_readings` leaves them out.

    >>> from gpulesson.timing.peak import CpuFacts, cpu_peak
    >>> from gpulesson.timing.results import MatmulResult
    >>> f = CpuFacts(arch="x86_64", model=None, cores=1, cores_source="t", clock_hz=2e9,
    ...              clock_source="t", flags=frozenset({"avx2", "fma"}))
    >>> m = MatmulResult(device="cpu", dtype="fp32", n=1000, threads=1, samples_s=(0.04,))
    >>> [(u, r / 1e9) for u, r in bounds_below_matmul(m, cpu_peak(f, "fp32", 1))]
    [(1, 32.0)]
    """
    return tuple((u, r) for u, r in peak.bounds_flop_per_s if r < matmul.flop_per_s)


@dataclass(frozen=True, kw_only=True)
class CpuMfu:
    """The lesson's CPU step, the matmul it is set against, and the readings against each peak.

    ``ruled_out`` holds the peak model's bounds the matmul beat (:func:`bounds_below_matmul`).
    """

    step: StepTiming
    matmul: MatmulResult
    readings: tuple[MfuReading, ...]
    ruled_out: tuple[tuple[int, float], ...] = ()
    matmuls: tuple[MatmulResult, ...] = ()  # every matmul reading, the faster one is ``matmul``


def measure_cpu_mfu(
    threads: int = 1,
    config: GPT2Config = PAGE_CONFIG,
    batch: int = PAGE_BATCH,
    min_run_time_s: float = 0.1,
) -> CpuMfu:
    """Time the lesson's step on ``threads`` CPU threads and set it against the CPU's peaks.

    The square matmul (``MATMUL_N["cpu"]``) is timed before and after the step on the same
    threads, and the faster of the two is kept, so a burst of other work on the machine
    during one of them does not set the peak. ``matmuls`` keeps both readings, in order.
    """
    before = measure_matmul(MATMUL_N["cpu"], threads=threads, min_run_time_s=0.2)
    step = measure_gpt_step(config, batch, min_run_time_s=min_run_time_s, threads=threads)
    after = measure_matmul(MATMUL_N["cpu"], threads=threads, min_run_time_s=0.2)
    return cpu_mfu(step, (before, after))


def cpu_mfu(
    step: StepTiming, matmuls: tuple[MatmulResult, ...], facts: CpuFacts | None = None
) -> CpuMfu:
    """The step set against the fastest of ``matmuls`` and the peak model of ``facts``
    (this machine's CPU when None), on the step's threads."""
    matmul = max(matmuls, key=lambda r: r.flop_per_s)
    chip = read_cpu_facts() if facts is None else facts
    peak = cpu_peak(chip, "fp32", threads=step.timing.threads)
    return CpuMfu(
        step=step,
        matmul=matmul,
        readings=cpu_readings(step.flop_per_s, matmul, peak),
        ruled_out=bounds_below_matmul(matmul, peak),
        matmuls=matmuls,
    )


def gpu_readings_from_bundle(bundle: Bundle) -> tuple[MfuReading, ...]:
    """The bundle's ``train_step`` rate over its datasheet peak and its best matmul, same dtype.

    Empty when the bundle has no ``train_step`` row (made by a suite without the entry).
    """
    step = next((m for m in bundle.measurements if m.entry == "train_step"), None)
    if step is None or step.dtype is None:
        return ()
    best = bundle.measurement(f"matmul_peak.{step.dtype}")
    return gpu_readings_from_rows(step, best, bundle.provenance.device_name, bundle.datasheet)


def gpu_readings_from_rows(
    step: Measurement, best: Measurement | None, device: str, sheet: Datasheet | None
) -> tuple[MfuReading, ...]:
    """A ``train_step`` row's rate over ``sheet``'s dense peak and over the best matmul row
    ``best`` (``matmul_peak.<dtype>``) of the same GPU ``device``; each left out when absent."""
    dtype = step.dtype or "fp32"
    rows = []
    peak = sheet.dense_flop_per_s(dtype) if sheet else None
    if sheet is not None and peak:
        rows.append(
            MfuReading(
                device=device,
                dtype=dtype,
                achieved_flop_per_s=step.value,
                peak_flop_per_s=peak,
                peak_kind="datasheet",
                peak_label=f"datasheet dense {dtype} peak ({sheet.name})",
                peak_source=f"{sheet.peaks[dtype].stated!r}, {sheet.sources[0].url}",
            )
        )
    if best is not None:
        rows.append(
            MfuReading(
                device=device,
                dtype=dtype,
                achieved_flop_per_s=step.value,
                peak_flop_per_s=best.value,
                peak_kind="matmul",
                peak_label=f"best {dtype} matmul measured on it (shape search)",
                peak_source=f"the same bundle, matmul_peak.{dtype}",
            )
        )
    return tuple(rows)


@dataclass(frozen=True, kw_only=True)
class GpuMfu:
    """The GPU rows of the lesson: readings, and where they come from (or why there are none)."""

    readings: tuple[MfuReading, ...]
    source: str

    def reading(self, kind: str) -> MfuReading | None:
        """The reading against a ``"datasheet"`` or ``"matmul"`` peak, if there is one."""
        return next((r for r in self.readings if r.peak_kind == kind), None)


def gpu_mfu(ref: Sourced | None, has_gpu: bool) -> GpuMfu:
    """Measure on this build's CUDA GPU, else read the reference bundle ``ref``, else say why not.

    >>> gpu_mfu(None, has_gpu=False).source
    'not measured: this build has no CUDA GPU and there is no reference result bundle'
    """
    if has_gpu:
        _step, readings = gpu_readings_measured()
        return GpuMfu(readings=readings, source="measured on this build's GPU")
    if ref is None:
        return GpuMfu(
            readings=(),
            source="not measured: this build has no CUDA GPU and there is no reference "
            "result bundle",
        )
    readings = gpu_readings_from_bundle(ref.bundle)
    if not readings:
        return GpuMfu(
            readings=(),
            source=f"not measured: the reference bundle {ref.file} has no train_step row "
            "(its suite predates the entry); run gpulesson measure again",
        )
    return GpuMfu(readings=readings, source=f"reference bundle {ref.file}")


def gpu_dtype(capability: tuple[int, int]) -> str:
    """The 16-bit dtype a CUDA GPU trains in: bf16 from compute capability 8.0, else fp16.

    >>> gpu_dtype((9, 0)), gpu_dtype((7, 5))
    ('bf16', 'fp16')
    """
    return "bf16" if capability >= (8, 0) else "fp16"


def fitting_batch(config: GPT2Config, batch: int, budget_bytes: int) -> int:
    """The largest of batch, batch/2, ... whose step the budget estimate fits in ``budget_bytes``.

    Priced with the ``amp`` recipe (fp32 weights, gradients and AdamW moments, 16-bit
    activations) and the config's attention, headroom included.

    >>> fitting_batch(GPT2Config(), 8, 80 * 2**30), fitting_batch(GPT2Config(), 8, 4 * 2**30)
    (8, 2)
    """
    shape_of = {"vocab": config.vocab_size, "seq": config.seq_len, "hidden": config.hidden}
    shape_of.update(heads=config.heads, layers=config.layers)
    while batch >= 1:
        needed = estimate(
            preset="amp",
            shape=TransformerShape(batch=batch, **shape_of),
            attention=config.attention,
        ).with_headroom_bytes
        if needed <= budget_bytes:
            return batch
        batch //= 2
    raise ValueError(
        f"one sequence of GPT-2 ({config.seq_len} tokens) needs more than {budget_bytes} bytes: "
        "free memory on the device or use a smaller model"
    )


def gpu_readings_measured(min_run_time_s: float = 1.0) -> tuple[StepTiming, tuple[MfuReading, ...]]:
    """On this build's CUDA GPU: time the GPU step, and set it against the datasheet and a matmul.

    The step is GPT-2 small in the GPU's 16-bit dtype (:func:`gpu_dtype`) at the largest
    batch up to ``GPU_BATCH`` that half the free memory holds.
    """
    props = torch.cuda.get_device_properties(0)
    dtype = gpu_dtype((props.major, props.minor))
    free, _total = torch.cuda.mem_get_info()
    batch = fitting_batch(GPU_CONFIG, GPU_BATCH, free // 2)
    step = measure_gpt_step(GPU_CONFIG, batch, "cuda", dtype, min_run_time_s)
    name = torch.cuda.get_device_name(0)
    rows = []
    sheet = datasheets.lookup(name)
    peak = sheet.dense_flop_per_s(dtype) if sheet else None
    if sheet is not None and peak:
        rows.append(
            MfuReading(
                device=name,
                dtype=dtype,
                achieved_flop_per_s=step.flop_per_s,
                peak_flop_per_s=peak,
                peak_kind="datasheet",
                peak_label=f"datasheet dense {dtype} peak ({sheet.name})",
                peak_source=f"{sheet.peaks[dtype].stated!r}, {sheet.sources[0].url}",
            )
        )
    matmul = measure_matmul(MATMUL_N["cuda"], "cuda", dtype, min_run_time_s=min_run_time_s)
    rows.append(
        MfuReading(
            device=name,
            dtype=dtype,
            achieved_flop_per_s=step.flop_per_s,
            peak_flop_per_s=matmul.flop_per_s,
            peak_kind="matmul",
            peak_label=f"{matmul.n} x {matmul.n} {dtype} matmul measured here",
            peak_source="measured on this build's GPU, median",
        )
    )
    return step, tuple(rows)
