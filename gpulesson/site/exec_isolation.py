"""What a block changes in the worker, put back after it, so the next block never sees it.

One worker runs every block of a build (torch is imported once), so a block could leave
state behind for the blocks after it. :func:`capture` takes what is known to leak and
:func:`restore` puts it back:

* the process: the working folder, ``os.environ``, ``sys.path``, ``sys.argv``;
* the random generators of Python, numpy and torch (CUDA's too, once CUDA is started);
* torch's settings: threads, default dtype and device, grad and anomaly mode, the
  float32 matmul precision, deterministic algorithms, the ``torch.backends`` flags
  (cuDNN, TF32, reduced-precision reductions, mkldnn, opt_einsum), print options;
  numpy's print options;
* the globals of the repository modules imported before the block (each module's
  namespace as it was; a module first imported by the block is forgotten, so the next
  block imports it afresh).

A fork of a warm worker per block would isolate everything but is not safe: a CUDA
context does not survive ``fork``, and torch's CPU thread pool may not either.
What is not isolated here (a list or dict mutated in place inside a module global, a
C library's own state) is left to the key: such a block reads it through a module,
and that module's file is in the key.

>>> state = capture(set())
>>> os.environ["GPULESSON_ISOLATION_DOCTEST"] = "1"
>>> restore(state, set())
>>> "GPULESSON_ISOLATION_DOCTEST" in os.environ
False
"""

from __future__ import annotations

import os
import random
import sys
from dataclasses import dataclass, field
from typing import Any

# (module, attribute path) pairs read with getattr and put back with setattr.
_TORCH_FLAGS = (
    ("torch.backends.cudnn", "enabled"),
    ("torch.backends.cudnn", "benchmark"),
    ("torch.backends.cudnn", "deterministic"),
    ("torch.backends.cudnn", "allow_tf32"),
    ("torch.backends.cuda.matmul", "allow_tf32"),
    ("torch.backends.cuda.matmul", "allow_fp16_reduced_precision_reduction"),
    ("torch.backends.cuda.matmul", "allow_bf16_reduced_precision_reduction"),
    ("torch.backends.mkldnn", "enabled"),
    ("torch.backends.opt_einsum", "enabled"),
)
_PRINT_OPTIONS = ("precision", "threshold", "edgeitems", "linewidth", "sci_mode")


@dataclass
class WorkerState:
    """What :func:`capture` took; only :func:`restore` reads it."""

    cwd: str
    environ: dict[str, str]
    sys_path: list[str]
    argv: list[str]
    python_random: Any
    modules: dict[str, dict[str, Any]]  # module name -> its namespace, shallow copy
    numpy: dict[str, Any] = field(default_factory=dict)
    torch: dict[str, Any] = field(default_factory=dict)


def _resolve(dotted: str) -> Any:
    obj: Any = sys.modules.get(dotted.split(".")[0])
    for part in dotted.split(".")[1:]:
        obj = getattr(obj, part, None)
    return obj


def _capture_torch() -> dict[str, Any]:
    torch = sys.modules.get("torch")
    if torch is None:
        return {}
    state: dict[str, Any] = {
        "threads": torch.get_num_threads(),
        "dtype": torch.get_default_dtype(),
        "grad": torch.is_grad_enabled(),
        "anomaly": torch.is_anomaly_enabled(),
        "matmul_precision": torch.get_float32_matmul_precision(),
        "deterministic": (
            torch.are_deterministic_algorithms_enabled(),
            torch.is_deterministic_algorithms_warn_only_enabled(),
        ),
        "rng": torch.get_rng_state(),
        "print": {
            name: getattr(torch._tensor_str.PRINT_OPTS, name, None) for name in _PRINT_OPTIONS
        },
        "flags": {},
    }
    if hasattr(torch, "get_default_device"):
        state["device"] = torch.get_default_device()
    if torch.cuda.is_initialized():
        state["cuda_rng"] = torch.cuda.get_rng_state_all()
    for module, name in _TORCH_FLAGS:
        owner = _resolve(module)
        if owner is not None and hasattr(owner, name):
            state["flags"][(module, name)] = getattr(owner, name)
    return state


def _restore_torch(state: dict[str, Any]) -> None:
    """Put torch's settings back, each only when it changed (some setters import a lot)."""
    torch = sys.modules.get("torch")
    if torch is None or not state:
        return
    now = _capture_torch()
    if now["threads"] != state["threads"]:
        torch.set_num_threads(state["threads"])
    if now["dtype"] != state["dtype"]:
        torch.set_default_dtype(state["dtype"])
    if "device" in state and now.get("device") != state["device"]:
        torch.set_default_device(state["device"])
    if now["grad"] != state["grad"]:
        torch.set_grad_enabled(state["grad"])
    if now["anomaly"] != state["anomaly"]:
        torch.set_anomaly_enabled(state["anomaly"])
    if now["matmul_precision"] != state["matmul_precision"]:
        torch.set_float32_matmul_precision(state["matmul_precision"])
    if now["deterministic"] != state["deterministic"]:
        deterministic, warn_only = state["deterministic"]
        torch.use_deterministic_algorithms(deterministic, warn_only=warn_only)
    torch.set_rng_state(state["rng"])
    if "cuda_rng" in state:
        torch.cuda.set_rng_state_all(state["cuda_rng"])
    if now["print"] != state["print"]:
        torch.set_printoptions(**{k: v for k, v in state["print"].items() if v is not None})
    for (module, name), value in state["flags"].items():
        owner = _resolve(module)
        if owner is not None and now["flags"].get((module, name)) != value:
            setattr(owner, name, value)


def capture(module_names: set[str]) -> WorkerState:
    """Take the state a block could change; ``module_names``: the repository modules now."""
    numpy = sys.modules.get("numpy")
    numpy_state: dict[str, Any] = {}
    if numpy is not None:
        numpy_state = {"rng": numpy.random.get_state(), "print": numpy.get_printoptions()}
    return WorkerState(
        cwd=os.getcwd(),
        environ=dict(os.environ._data),  # type: ignore[attr-defined] (not a recorded read)
        sys_path=list(sys.path),
        argv=list(sys.argv),
        python_random=random.getstate(),
        modules={name: dict(vars(sys.modules[name])) for name in module_names},
        numpy=numpy_state,
        torch=_capture_torch(),
    )


def _restore_environ(saved: dict[bytes, bytes] | dict[str, str]) -> None:
    data = os.environ._data  # type: ignore[attr-defined]
    if data == saved:
        return
    for key in [k for k in data if k not in saved]:
        os.unsetenv(key)
        del data[key]
    for key, value in saved.items():
        if data.get(key) != value:
            os.putenv(key, value)
            data[key] = value


def restore(state: WorkerState, module_names: set[str]) -> None:
    """Put ``state`` back; forget the repository modules not in it (``module_names``: now)."""
    try:
        os.chdir(state.cwd)
    except OSError:
        pass
    _restore_environ(state.environ)
    sys.path[:] = state.sys_path
    sys.argv[:] = state.argv
    random.setstate(state.python_random)
    numpy = sys.modules.get("numpy")
    if numpy is not None and state.numpy:
        numpy.random.set_state(state.numpy["rng"])
        numpy.set_printoptions(**state.numpy["print"])
    _restore_torch(state.torch)
    for name in module_names - set(state.modules):
        sys.modules.pop(name, None)
    for name, saved in state.modules.items():
        module = sys.modules.get(name)
        if module is None:
            continue
        namespace = vars(module)
        for key in [k for k in namespace if k not in saved]:
            del namespace[key]
        for key, value in saved.items():
            if namespace.get(key, saved) is not value:
                namespace[key] = value
