"""The dtype of every op in a real forward pass under torch.autocast, beside PyTorch's op lists.

``torch.autocast`` does not convert a model: it intercepts each eligible op and runs it
in a chosen dtype. Matmuls and linear layers run in 16 bits; ops PyTorch lists as needing
range (losses, and on CUDA softmax and norms) run in fp32; the rest run in whatever their
inputs are. The quickest way to see it is to record each op's input and output dtypes
while a model runs, which :func:`trace_forward` does:

1. a ``TorchFunctionMode`` sees every torch function the forward pass calls, at the
   level the reader wrote it (``F.linear``, ``F.softmax``, ``Tensor.add``), before
   autocast casts the inputs and after it produced the output (calls nested inside an
   op are not seen, so each row is one op of the model's code);
2. forward hooks on every module keep the name of the module each op ran in;
3. ops that only reshape or read metadata (``view``, ``transpose``, ``size``) and ops
   with no floating-point tensor are left out.

:data:`POLICIES` is PyTorch's autocast op reference for the ops a GPT-2 forward pass
calls, CUDA and CPU (https://pytorch.org/docs/stable/amp.html#autocast-op-reference):
cited data, not computed. ``tests/test_precision.py`` checks the CPU column against a
trace on the machine that runs the tests, and a CUDA test checks the CUDA column.

Used by the lesson ``lessons/mixed-precision.md``.

>>> from gpulesson.memory.gpt2 import GPT2, GPT2Config
>>> torch.manual_seed(0)  # doctest: +ELLIPSIS
<torch._C.Generator object at ...>
>>> model = GPT2(GPT2Config(vocab_size=64, seq_len=8, hidden=16, heads=2, layers=1,
...                         attention="eager"))
>>> idx = torch.randint(0, 64, (2, 8))
>>> rows = trace_forward(model, (idx, idx), "cpu", torch.bfloat16)
>>> [(r.op, r.output_dtype) for r in rows if r.op in ("linear", "cross_entropy")][-2:]
[('linear', 'bfloat16'), ('cross_entropy', 'float32')]
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

# Autocast's three behaviours, as PyTorch's op reference names its lists.
LOWER = "16-bit"  # "Ops that can autocast to float16" (CUDA) / "to bfloat16" (CPU)
FP32 = "fp32"  # "Ops that can autocast to float32"
UNLISTED = "inputs' dtype"  # not listed: runs in the type its inputs have

# Ops that only reshape or read metadata: left out of the trace.
SHAPE_OPS = frozenset(
    {
        "view",
        "reshape",
        "transpose",
        "permute",
        "split",
        "chunk",
        "contiguous",
        "size",
        "dim",
        "__get__",
        "__getitem__",
        "__invert__",
        "arange",
        "expand",
        "unsqueeze",
        "squeeze",
        "t",
    }
)


@dataclass(frozen=True, kw_only=True)
class OpPolicy:
    """What autocast does with one op on CUDA and on CPU, per PyTorch's op reference."""

    op: str
    cuda: str
    cpu: str


# From the op reference's lists (linked in the module docstring). On CPU the loss is listed
# as cross_entropy_loss; scaled_dot_product_attention is on the CPU list only.
POLICIES: dict[str, OpPolicy] = {
    p.op: p
    for p in (
        OpPolicy(op="linear", cuda=LOWER, cpu=LOWER),
        OpPolicy(op="matmul", cuda=LOWER, cpu=LOWER),
        OpPolicy(op="scaled_dot_product_attention", cuda=UNLISTED, cpu=LOWER),
        OpPolicy(op="softmax", cuda=FP32, cpu=UNLISTED),
        OpPolicy(op="log_softmax", cuda=FP32, cpu=UNLISTED),
        OpPolicy(op="layer_norm", cuda=FP32, cpu=UNLISTED),
        OpPolicy(op="cross_entropy", cuda=FP32, cpu=FP32),
        OpPolicy(op="mse_loss", cuda=FP32, cpu=FP32),
        OpPolicy(op="sum", cuda=FP32, cpu=UNLISTED),
        OpPolicy(op="gelu", cuda=UNLISTED, cpu=UNLISTED),
        OpPolicy(op="embedding", cuda=UNLISTED, cpu=UNLISTED),
        OpPolicy(op="add", cuda=UNLISTED, cpu=UNLISTED),
        OpPolicy(op="mul", cuda=UNLISTED, cpu=UNLISTED),
        OpPolicy(op="masked_fill", cuda=UNLISTED, cpu=UNLISTED),
    )
}


@dataclass(frozen=True, kw_only=True)
class TraceRow:
    """One op of a forward pass: where it ran and the dtypes it took and gave.

    Dtypes are torch's names without ``torch.`` (``bfloat16``); ``input_dtypes`` lists
    the tensor arguments in order.
    """

    index: int
    op: str
    module: str
    input_dtypes: tuple[str, ...]
    output_dtype: str

    @property
    def policy(self) -> OpPolicy | None:
        """PyTorch's autocast policy for this op, when :data:`POLICIES` lists it."""
        return POLICIES.get(self.op)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _op_name(func: Any) -> str:
    name = getattr(func, "__name__", None) or type(func).__name__
    return str(name)


class _Recorder(TorchFunctionMode):
    """Records each top-level torch function call's op, module and dtypes."""

    def __init__(self, where: Callable[[], str]) -> None:
        super().__init__()
        self.where = where
        self.rows: list[TraceRow] = []

    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        out = func(*args, **(kwargs or {}))
        name = _op_name(func)
        if name in SHAPE_OPS:
            return out
        inputs = [a for a in args if isinstance(a, torch.Tensor)]
        inputs += [v for v in (kwargs or {}).values() if isinstance(v, torch.Tensor)]
        outputs = [o for o in (out if isinstance(out, tuple | list) else (out,))]
        outputs = [o for o in outputs if isinstance(o, torch.Tensor)]
        floating = [t for t in inputs + outputs if t.is_floating_point()]
        if outputs and floating:
            self.rows.append(
                TraceRow(
                    index=len(self.rows) + 1,
                    op=name,
                    module=self.where(),
                    input_dtypes=tuple(_dtype_name(t.dtype) for t in inputs),
                    output_dtype=_dtype_name(outputs[0].dtype),
                )
            )
        return out


@contextmanager
def _module_names(model: nn.Module) -> Iterator[Callable[[], str]]:
    """Forward hooks that keep a stack of the modules running; yields 'innermost name'."""
    stack: list[str] = []
    handles = []

    def enter(label: str) -> Callable[..., None]:
        def hook(module: nn.Module, args: Any) -> None:
            stack.append(label)

        return hook

    def leave(module: nn.Module, args: Any, output: Any) -> None:
        stack.pop()  # a forward hook that returned a value would replace the output

    for name, module in model.named_modules():
        handles.append(module.register_forward_pre_hook(enter(name or type(module).__name__)))
        handles.append(module.register_forward_hook(leave))
    try:
        yield lambda: stack[-1] if stack else "(top level)"
    finally:
        for handle in handles:
            handle.remove()


def autocast_available(device: str) -> bool:
    """Whether ``torch.autocast`` supports ``device`` (False for a name torch does not know).

    >>> autocast_available("cpu"), autocast_available("nope")
    (True, False)
    """
    try:
        return bool(torch.amp.autocast_mode.is_autocast_available(device))
    except RuntimeError:  # torch raises for a string that names no device type at all
        return False


def trace_forward(
    model: nn.Module, inputs: tuple[Any, ...], device: str, dtype: torch.dtype | None
) -> tuple[TraceRow, ...]:
    """Run ``model(*inputs)`` under ``torch.autocast(device, dtype)``; record each op's dtypes.

    ``dtype=None`` runs without autocast (the fp32 baseline). Runs under ``no_grad``:
    autocast picks the same dtypes with or without autograd.
    """
    if dtype is not None and not autocast_available(device):
        raise ValueError(f"torch.autocast is not available for device {device!r}: use cpu or cuda")
    with _module_names(model) as where, torch.no_grad():
        recorder = _Recorder(where)
        autocast = torch.autocast(device, dtype=dtype or torch.float32, enabled=dtype is not None)
        with autocast, recorder:
            model(*inputs)
    return tuple(recorder.rows)


def build_device() -> tuple[str, torch.dtype]:
    """The device and autocast dtype a build traces: CUDA with fp16, else CPU with bf16.

    >>> build_device() if not torch.cuda.is_available() else ("cpu", torch.bfloat16)
    ('cpu', torch.bfloat16)
    """
    if torch.cuda.is_available():
        return "cuda", torch.float16
    return "cpu", torch.bfloat16


def trace_gpt2(device: str, dtype: torch.dtype | None, seed: int = 0) -> tuple[TraceRow, ...]:
    """Trace one forward pass (with the loss) of a one-block GPT-2 with eager attention.

    Eager attention calls ``softmax`` itself, so the trace shows it (the fused
    ``scaled_dot_product_attention`` would hide it inside one op).
    """
    from gpulesson.memory.gpt2 import GPT2, GPT2Config

    torch.manual_seed(seed)
    config = GPT2Config(vocab_size=256, seq_len=32, hidden=64, heads=4, layers=1, attention="eager")
    model = GPT2(config).to(device)
    idx = torch.randint(0, config.vocab_size, (2, config.seq_len), device=device)
    return trace_forward(model, (idx, idx), device, dtype)


@dataclass(frozen=True, kw_only=True)
class TraceSummary:
    """What a trace shows, as counts, and how many rows PyTorch's op reference predicts.

    ``checked`` rows have an op in :data:`POLICIES`; ``disagreements`` of them produced
    another dtype than the reference predicts for ``device``.
    """

    device: str
    autocast_dtype: str
    ops: int
    lower_precision_ops: int
    fp32_ops: int
    checked: int
    disagreements: int


def summarize(rows: tuple[TraceRow, ...], device: str, autocast_dtype: str) -> TraceSummary:
    """Count the trace's outputs by precision and check each against the op reference.

    >>> r = (TraceRow(index=1, op="linear", module="m", input_dtypes=("float32",),
    ...               output_dtype="bfloat16"),)
    >>> s = summarize(r, "cpu", "bfloat16")
    >>> s.lower_precision_ops, s.checked, s.disagreements
    (1, 1, 0)
    """
    expected = [expected_output(row, device, autocast_dtype) for row in rows]
    checked = [(row, e) for row, e in zip(rows, expected, strict=True) if e is not None]
    return TraceSummary(
        device=device,
        autocast_dtype=autocast_dtype,
        ops=len(rows),
        lower_precision_ops=sum(r.output_dtype in ("bfloat16", "float16") for r in rows),
        fp32_ops=sum(r.output_dtype == "float32" for r in rows),
        checked=len(checked),
        disagreements=sum(row.output_dtype != e for row, e in checked),
    )


def expected_output(row: TraceRow, device: str, autocast_dtype: str) -> str | None:
    """The output dtype PyTorch's op reference predicts for this row on ``device``.

    ``LOWER`` ops give ``autocast_dtype``, ``FP32`` ops float32, unlisted ops their
    inputs' promoted dtype. None when the op is not in :data:`POLICIES`.

    >>> row = TraceRow(index=1, op="add", module="m", input_dtypes=("float32", "bfloat16"),
    ...                output_dtype="float32")
    >>> expected_output(row, "cpu", "bfloat16")
    'float32'
    """
    policy = row.policy
    if policy is None:
        return None
    rule = policy.cuda if device == "cuda" else policy.cpu
    if rule == LOWER:
        return autocast_dtype
    if rule == FP32:
        return "float32"
    floating = [getattr(torch, d) for d in row.input_dtypes if getattr(torch, d).is_floating_point]
    if not floating:
        return None
    promoted = floating[0]
    for dtype in floating[1:]:
        promoted = torch.promote_types(promoted, dtype)
    return _dtype_name(promoted)
