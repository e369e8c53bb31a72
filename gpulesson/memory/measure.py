"""Measure the memory of real training steps: on CUDA, or with fake tensors on any CPU.

``measure`` builds a model, runs two training steps (forward, backward,
optimizer step, ``zero_grad``) and reports the second, when the optimizer state
already exists: the peak of each phase and what was alive at the overall peak,
by category.

* On CUDA the peak comes from ``torch.cuda.max_memory_allocated()`` (reset
  before each phase), with ``memory_reserved()`` and ``mem_get_info()``.
* Anywhere else it runs under ``FakeTensorMode`` with torch's ``MemTracker``:
  tensors have shapes and dtypes but no storage, so a GPT-sized AdamW step
  runs on a laptop CPU in seconds without allocating its memory. This is what
  PyTorch's CPU kernels would allocate (their choice of saved tensors and
  temporaries), tracked tensor by tensor: not a CUDA measurement.
* ``mode="cpu"`` runs the same tracker on real CPU tensors (small models only:
  it allocates and computes), to check that fake tensors change nothing.

The course's GPT-2 is :func:`measure_gpt2`; Hugging Face transformers' GPT-2 is
:func:`measure_transformers_gpt2` (:mod:`gpulesson.memory.transformers_gpt2`).

The private torch APIs behind the fake-tensor path (``FakeTensorMode``,
``MemTracker``) are reached only through :mod:`gpulesson.memory.torch_tools`,
which fails loudly, naming the torch version, when one of them moves.

Pitfalls this module handles for you: it fakes CPU tensors, not the meta
device (meta picks different attention kernels); it calls
``reset_mod_stats()`` after the first step (the tracker refuses a second
iteration otherwise); it builds the model in its target dtype (calling
``.to(dtype)`` under fake mode gives wrong sizes); and it never fakes a CUDA
device on a CPU-only torch, which can abort the process.

Used by ``tests/benchmarks/bench_budget_accuracy.py`` and ``lessons/memory.md``.

>>> from gpulesson.memory.gpt2 import GPT2Config
>>> m = measure_gpt2(GPT2Config(vocab_size=256, seq_len=32, hidden=64, heads=4, layers=2),
...                  batch=2, mode="fake")
>>> m.method, m.peak_phase
('FakeTensorMode + MemTracker (CPU, nothing allocated)', 'backward')
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from gpulesson.memory import torch_tools
from gpulesson.memory.budget import TransformerShape, estimate
from gpulesson.memory.gpt2 import GPT2, GPT2Config

OPTIMIZERS = ("sgd", "sgd-momentum", "adamw")
PHASES = ("forward", "backward", "optimizer step")  # a step's phases, in order
# The step the memory lesson measures and draws op by op (memory.md, memory-measure-one
# and memory-step-timeline; fix-ladder.md draws it again with checkpointing): small, so the
# page builds in seconds.
LESSON_CONFIG = GPT2Config(
    vocab_size=512, seq_len=64, hidden=64, heads=4, layers=2, attention="eager"
)
LESSON_BATCH = 4
FAKE_METHOD = "FakeTensorMode + MemTracker (CPU, nothing allocated)"
DTYPES: dict[str, torch.dtype] = {
    "fp32": torch.float32,
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
}


@dataclass(frozen=True, kw_only=True)
class MeasuredStep:
    """The measured memory of one steady-state training step.

    ``phase_peaks_bytes`` is the peak within each phase; ``at_peak_bytes`` is
    what was alive at the overall peak, by category (on CUDA, also from the
    tracker running on the real tensors). ``reserved_bytes``, ``free_bytes``
    and ``device_total_bytes`` are ``None`` without CUDA.
    """

    method: str
    device: str
    peak_bytes: int
    peak_phase: str
    phase_peaks_bytes: dict[str, int]
    at_peak_bytes: dict[str, int]
    reserved_bytes: int | None
    free_bytes: int | None
    device_total_bytes: int | None


def make_optimizer(name: str, params: Any, foreach: bool | None = None) -> torch.optim.Optimizer:
    """The optimizer the budget calls ``name`` (``sgd``, ``sgd-momentum`` or ``adamw``)."""
    if name == "sgd":
        return torch.optim.SGD(params, lr=1e-3, foreach=foreach)
    if name == "sgd-momentum":
        return torch.optim.SGD(params, lr=1e-3, momentum=0.9, foreach=foreach)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=1e-3, foreach=foreach)
    raise ValueError(f"unknown optimizer {name!r}: measure supports {', '.join(OPTIMIZERS)}")


@contextlib.contextmanager
def _default_dtype(dtype: torch.dtype) -> Iterator[None]:
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


def _steps(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    inputs: tuple[torch.Tensor, ...],
    start_phase: Callable[[], None],
    end_phase: Callable[[str], None],
    after_first: Callable[[], None],
) -> None:
    for step in range(2):
        start_phase()
        loss = model(*inputs)
        if step:
            end_phase("forward")
        start_phase()
        loss.backward()
        del loss
        if step:
            end_phase("backward")
        start_phase()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step:
            end_phase("optimizer step")
        else:
            after_first()


def measure(
    build_model: Callable[[], nn.Module],
    make_inputs: Callable[[torch.device], tuple[torch.Tensor, ...]],
    *,
    optimizer: str = "adamw",
    dtype: str = "fp32",
    mode: str = "auto",
    foreach: bool | None = None,
) -> MeasuredStep:
    """Run two training steps of ``build_model()`` and measure the second.

    ``build_model()`` must return a module whose ``forward(*make_inputs(device))``
    returns a scalar loss. ``mode`` is ``"cuda"``, ``"fake"`` (FakeTensorMode on
    CPU), ``"cpu"`` (real CPU tensors under the tracker) or ``"auto"`` (CUDA when
    available, else fake). The model is built in ``dtype``
    (``fp32``, ``bf16``, ``fp16``), so gradients and optimizer state share it.
    """
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}: use one of {', '.join(DTYPES)}")
    if optimizer not in OPTIMIZERS:
        raise ValueError(
            f"unknown optimizer {optimizer!r}: measure supports {', '.join(OPTIMIZERS)}"
        )
    if mode == "auto":
        mode = "cuda" if torch.cuda.is_available() else "fake"
    if mode == "cuda":
        if not torch.cuda.is_available():
            raise ValueError("mode='cuda' but torch sees no CUDA device: use mode='fake'")
        return _measure_cuda(build_model, make_inputs, optimizer, DTYPES[dtype], foreach)
    if mode in ("fake", "cpu"):
        return _measure_tracked(
            build_model, make_inputs, optimizer, DTYPES[dtype], foreach, fake=mode == "fake"
        )
    raise ValueError(f"mode={mode!r} must be 'auto', 'cuda', 'fake' or 'cpu'")


def _measure_tracked(
    build_model: Callable[[], nn.Module],
    make_inputs: Callable[[torch.device], tuple[torch.Tensor, ...]],
    optimizer_name: str,
    dtype: torch.dtype,
    foreach: bool | None,
    *,
    fake: bool,
) -> MeasuredStep:
    phase_peaks: dict[str, int] = {}
    at_phase: dict[str, dict[str, int]] = {}
    with torch_tools.fake_tensor_mode() if fake else contextlib.nullcontext():
        with _default_dtype(dtype):
            model = build_model()  # built in its dtype: .to(dtype) under fake mode misleads
        model.train()
        optimizer = make_optimizer(optimizer_name, model.parameters(), foreach)
        inputs = make_inputs(torch.device("cpu"))
        tracker = torch_tools.mem_tracker()
        tracker.track_external(model, optimizer, *inputs)

        def end_phase(name: str) -> None:
            phase_peaks[name], at_phase[name] = torch_tools.peak_by_category(tracker)

        with tracker:
            _steps(
                model,
                optimizer,
                inputs,
                lambda: torch_tools.reset_peak(tracker),
                end_phase,
                tracker.reset_mod_stats,
            )
    peak_phase = max(reversed(list(phase_peaks)), key=lambda p: phase_peaks[p])
    return MeasuredStep(
        method=FAKE_METHOD if fake else "MemTracker on real CPU tensors",
        device="cpu (fake tensors)" if fake else "cpu",
        peak_bytes=phase_peaks[peak_phase],
        peak_phase=peak_phase,
        phase_peaks_bytes=phase_peaks,
        at_peak_bytes=at_phase[peak_phase],
        reserved_bytes=None,
        free_bytes=None,
        device_total_bytes=None,
    )


def _measure_cuda(
    build_model: Callable[[], nn.Module],
    make_inputs: Callable[[torch.device], tuple[torch.Tensor, ...]],
    optimizer_name: str,
    dtype: torch.dtype,
    foreach: bool | None,
) -> MeasuredStep:  # pragma: no cover - needs a CUDA device
    device = torch.device("cuda")
    torch.cuda.empty_cache()
    with _default_dtype(dtype), device:
        model = build_model()
    model.train()
    optimizer = make_optimizer(optimizer_name, model.parameters(), foreach)
    inputs = make_inputs(device)
    phase_peaks: dict[str, int] = {}

    def start_phase() -> None:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()

    def end_phase(name: str) -> None:
        torch.cuda.synchronize()
        phase_peaks[name] = torch.cuda.max_memory_allocated()

    _steps(model, optimizer, inputs, start_phase, end_phase, lambda: None)
    peak_phase = max(reversed(list(phase_peaks)), key=lambda p: phase_peaks[p])
    reserved = torch.cuda.memory_reserved()
    free, total = torch.cuda.mem_get_info()
    # Categories: the same two steps again under the tracker, on the real tensors.
    tracker = torch_tools.mem_tracker()
    tracker.track_external(model, optimizer, *inputs)
    at_phase: dict[str, dict[str, int]] = {}

    def end_tracked(name: str) -> None:
        at_phase[name] = torch_tools.peak_by_category(tracker)[1]

    with tracker:
        _steps(
            model,
            optimizer,
            inputs,
            lambda: torch_tools.reset_peak(tracker),
            end_tracked,
            tracker.reset_mod_stats,
        )
    return MeasuredStep(
        method="torch.cuda.max_memory_allocated()",
        device=torch.cuda.get_device_name(0),
        peak_bytes=phase_peaks[peak_phase],
        peak_phase=peak_phase,
        phase_peaks_bytes=phase_peaks,
        at_peak_bytes=at_phase[peak_phase],
        reserved_bytes=reserved,
        free_bytes=free,
        device_total_bytes=total,
    )


def measure_gpt2(
    config: GPT2Config,
    *,
    batch: int,
    dtype: str = "fp32",
    optimizer: str = "adamw",
    mode: str = "auto",
    foreach: bool | None = None,
) -> MeasuredStep:
    """Measure a training step of ``GPT2(config)`` on random tokens, ``batch`` x ``seq_len``."""
    make_inputs = _token_inputs(config, batch)
    return measure(
        lambda: GPT2(config),
        make_inputs,
        optimizer=optimizer,
        dtype=dtype,
        mode=mode,
        foreach=foreach,
    )


def _token_inputs(
    config: GPT2Config, batch: int
) -> Callable[[torch.device], tuple[torch.Tensor, ...]]:
    if isinstance(batch, bool) or not isinstance(batch, int) or batch <= 0:
        raise ValueError(f"batch={batch!r} must be a positive whole number")

    def make_inputs(device: torch.device) -> tuple[torch.Tensor, ...]:
        shape = (batch, config.seq_len)
        idx = torch.randint(0, config.vocab_size, shape, device=device)
        return idx, torch.randint(0, config.vocab_size, shape, device=device)

    return make_inputs


def measure_transformers_gpt2(
    config: GPT2Config,
    *,
    batch: int,
    dtype: str = "fp32",
    optimizer: str = "adamw",
    mode: str = "auto",
    foreach: bool | None = None,
) -> MeasuredStep:
    """Measure a training step of transformers' ``GPT2LMHeadModel`` of ``config``'s shape.

    Built from a config with random weights (nothing downloaded), no dropout,
    the head tied; ``config.attention`` picks transformers' ``sdpa`` or
    ``eager`` attention. See :mod:`gpulesson.memory.transformers_gpt2`.
    """
    from gpulesson.memory import transformers_gpt2

    make_inputs = _token_inputs(config, batch)
    transformers_gpt2.hf_config(config)  # refuses what is not measured, before building
    with transformers_gpt2.real_run_masks():
        return measure(
            lambda: transformers_gpt2.build_model(config),
            make_inputs,
            optimizer=optimizer,
            dtype=dtype,
            mode=mode,
            foreach=foreach,
        )


@dataclass(frozen=True, kw_only=True)
class AccuracyCase:
    """One GPT-2 training step to estimate and measure.

    ``tuned`` says whether the estimator's terms were fitted on shapes like it.
    ``impl`` is whose GPT-2 runs: ``"gpulesson"`` (:mod:`gpulesson.memory.gpt2`)
    or ``"transformers"`` (Hugging Face's ``GPT2LMHeadModel``); the estimate
    is asked for the same ``impl``.
    """

    config: GPT2Config
    batch: int
    dtype: str
    optimizer: str
    tuned: bool = True
    impl: str = "gpulesson"

    def label(self) -> str:
        """A short name: shape, heads, batch, attention, checkpointing, dtype, optimizer."""
        c = self.config
        ckpt = "ckpt" if c.checkpointing else "no-ckpt"
        loss = f" chunked-loss/{c.loss_chunks}" if c.loss == "chunked" else ""
        return (
            f"V{c.vocab_size} s{c.seq_len} h{c.hidden} H{c.heads} L{c.layers} b{self.batch} "
            f"{c.attention} {ckpt} {self.dtype} {self.optimizer}{loss}"
        )


@dataclass(frozen=True, kw_only=True)
class AccuracyRow:
    """The estimate and the measurement of one case; ``error`` is relative to the measurement."""

    case: AccuracyCase
    estimate_bytes: int
    estimate_phase: str
    measured: MeasuredStep

    @property
    def error(self) -> float:
        """Signed relative error of the estimate."""
        return (self.estimate_bytes - self.measured.peak_bytes) / self.measured.peak_bytes


# The recipe each measured dtype is: a model built in bf16 keeps bf16 AdamW moments.
MEASURED_PRESET = {"fp32": "fp32", "bf16": "bf16-pure"}
TARGET_MAX_ERROR = 0.10
TARGET_MEDIAN_ERROR = 0.05


def estimate_case(case: AccuracyCase, foreach: bool = False) -> Any:
    """The budget ``gpulesson.memory.budget.estimate`` gives for a case."""
    c = case.config
    shape = TransformerShape(
        vocab=c.vocab_size,
        seq=c.seq_len,
        hidden=c.hidden,
        heads=c.heads,
        layers=c.layers,
        batch=case.batch,
    )
    return estimate(
        shape=shape,
        preset=MEASURED_PRESET[case.dtype],
        optimizer=case.optimizer,
        attention=c.attention,
        checkpointing="full" if c.checkpointing else "none",
        foreach=foreach,
        loss=c.loss,
        loss_chunks=c.loss_chunks if c.loss == "chunked" else None,
        impl=case.impl,
    )


def measure_case(case: AccuracyCase, mode: str = "auto") -> MeasuredStep:
    """Measure a case's step with its ``impl``'s model."""
    measure_model = measure_transformers_gpt2 if case.impl == "transformers" else measure_gpt2
    return measure_model(
        case.config, batch=case.batch, dtype=case.dtype, optimizer=case.optimizer, mode=mode
    )


def run_accuracy(cases: list[AccuracyCase], mode: str = "auto") -> tuple[AccuracyRow, ...]:
    """Estimate and measure every case (fake tensors on CPU, or CUDA)."""
    rows = []
    for case in cases:
        measured = measure_case(case, mode)
        # CUDA's optimizers default to the multi-tensor (foreach) path.
        budget = estimate_case(case, foreach=measured.reserved_bytes is not None)
        rows.append(
            AccuracyRow(
                case=case,
                estimate_bytes=budget.total_bytes,
                estimate_phase=budget.peak_phase,
                measured=measured,
            )
        )
    return tuple(rows)


def _config(shape: TransformerShape, **options: Any) -> GPT2Config:
    return GPT2Config(
        vocab_size=shape.vocab,
        seq_len=shape.seq,
        hidden=shape.hidden,
        heads=shape.heads,
        layers=shape.layers,
        **options,
    )


def grid(
    shapes: list[TransformerShape],
    dtypes: tuple[str, ...] = ("fp32", "bf16"),
    optimizers: tuple[str, ...] = ("sgd", "adamw"),
    tuned: bool = True,
    impl: str = "gpulesson",
) -> list[AccuracyCase]:
    """Cases for each shape (its micro-batch included).

    Each shape runs with eager and SDPA attention, with and without
    checkpointing (``impl="transformers"``: without), in each dtype, with each
    optimizer.
    """
    checkpointing = (False,) if impl == "transformers" else (False, True)
    cases = []
    for shape in shapes:
        for attention in ("eager", "sdpa"):
            for ckpt in checkpointing:
                config = _config(shape, attention=attention, checkpointing=ckpt)
                for dtype in dtypes:
                    for optimizer in optimizers:
                        cases.append(
                            AccuracyCase(
                                config=config,
                                batch=shape.batch,
                                dtype=dtype,
                                optimizer=optimizer,
                                tuned=tuned,
                                impl=impl,
                            )
                        )
    return cases


def build_cases() -> list[AccuracyCase]:
    """The small grid the lesson measures at build time (about a second a case on a CPU).

    Two shapes; between them both attentions, with and without checkpointing,
    both dtypes and both optimizers. The full grid is the accuracy benchmark's.
    """
    cases = []
    for shape, attention, ckpt, dtype, optimizer in (
        (TUNED_SHAPES[0], "eager", False, "fp32", "adamw"),
        (TUNED_SHAPES[0], "sdpa", True, "bf16", "sgd"),
        (TUNED_SHAPES[1], "sdpa", False, "bf16", "sgd"),
    ):
        config = _config(shape, attention=attention, checkpointing=ckpt)
        cases.append(
            AccuracyCase(config=config, batch=shape.batch, dtype=dtype, optimizer=optimizer)
        )
    return cases


def _chunked_case(
    shape: TransformerShape,
    *,
    attention: str,
    checkpointing: bool,
    dtype: str,
    optimizer: str,
    chunks: int,
) -> AccuracyCase:
    config = _config(
        shape, attention=attention, checkpointing=checkpointing, loss="chunked", loss_chunks=chunks
    )
    return AccuracyCase(config=config, batch=shape.batch, dtype=dtype, optimizer=optimizer)


def chunked_loss_cases() -> list[AccuracyCase]:
    """Cases with a chunked cross-entropy loss, to check the ``loss="chunked"`` terms.

    Small and large vocabularies (where the loss, or the tied head's gradient,
    sets the peak), both attentions, with and without checkpointing.
    """
    small_vocab = TransformerShape(vocab=8192, seq=256, hidden=128, heads=4, layers=2, batch=4)
    gpt2_vocab = TransformerShape(vocab=50257, seq=128, hidden=128, heads=4, layers=2, batch=2)
    deeper = TransformerShape(vocab=2048, seq=128, hidden=192, heads=6, layers=3, batch=3)
    return [
        _chunked_case(
            small_vocab,
            attention="sdpa",
            checkpointing=False,
            dtype="fp32",
            optimizer="adamw",
            chunks=8,
        ),
        _chunked_case(
            small_vocab,
            attention="eager",
            checkpointing=True,
            dtype="fp32",
            optimizer="sgd",
            chunks=4,
        ),
        _chunked_case(
            gpt2_vocab,
            attention="sdpa",
            checkpointing=False,
            dtype="fp32",
            optimizer="adamw",
            chunks=8,
        ),
        _chunked_case(
            gpt2_vocab,
            attention="sdpa",
            checkpointing=True,
            dtype="bf16",
            optimizer="adamw",
            chunks=16,
        ),
        _chunked_case(
            deeper,
            attention="eager",
            checkpointing=False,
            dtype="bf16",
            optimizer="adamw",
            chunks=3,
        ),
    ]


# Shapes (with their micro-batch) the terms were fitted on, and shapes they
# were not: other widths, depths, sequence lengths and batches.
TUNED_SHAPES = [
    TransformerShape(vocab=512, seq=64, hidden=64, heads=4, layers=2, batch=4),
    TransformerShape(vocab=256, seq=256, hidden=64, heads=4, layers=2, batch=2),
    TransformerShape(vocab=50257, seq=128, hidden=128, heads=4, layers=2, batch=2),
    TransformerShape(vocab=1024, seq=512, hidden=128, heads=4, layers=2, batch=2),
]
UNTUNED_SHAPES = [
    TransformerShape(vocab=8192, seq=256, hidden=256, heads=8, layers=4, batch=4),
    TransformerShape(vocab=4096, seq=64, hidden=512, heads=8, layers=4, batch=8),
    TransformerShape(vocab=2048, seq=128, hidden=192, heads=6, layers=6, batch=3),
    TransformerShape(vocab=32000, seq=384, hidden=256, heads=4, layers=3, batch=1),
]


def accuracy_summary(rows: tuple[AccuracyRow, ...]) -> dict[str, float]:
    """Median and largest absolute error, and whether the targets (10% each, 5% median) hold."""
    errors = sorted(abs(r.error) for r in rows)
    n = len(errors)
    median = (errors[(n - 1) // 2] + errors[n // 2]) / 2
    return {
        "cases": n,
        "median_abs_error": median,
        "max_abs_error": errors[-1],
        "meets_target": float(errors[-1] <= TARGET_MAX_ERROR and median <= TARGET_MEDIAN_ERROR),
    }
