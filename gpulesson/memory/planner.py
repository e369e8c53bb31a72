"""The VRAM planner's data: the estimate's coefficient tables as JSON for the browser.

The planner widget (``docs/javascripts/labs.js``) evaluates what
:func:`planner_data` exports, the recipes' bytes per parameter and the term and
point tables of :mod:`gpulesson.memory.terms`, exactly as
:func:`gpulesson.memory.budget.estimate` does; the site writes it to
``assets/labs/planner.json`` at build (``gpulesson.site.labs_hook.planner_json``)
and the browser test compares the two on many inputs.
"""

from __future__ import annotations

from typing import Any

from gpulesson.memory.budget import (
    ALLOCATOR_SLACK_FRACTION,
    CUDA_CONTEXT_BYTES,
    DEFAULT_LOSS_CHUNKS,
    DEFAULT_TRAINABLE_FRACTION,
    HEADROOM,
)
from gpulesson.memory.capacity import CARDS_GB
from gpulesson.memory.recipes import (
    DEFAULT_TRAINING_PRESET,
    DTYPE_BYTES,
    OPTIMIZER_STATES,
    PRESETS,
    state_bytes,
)
from gpulesson.memory.shape import limits_data
from gpulesson.memory.terms import tables_data
from gpulesson.units import GB, GIB


def planner_data() -> dict[str, Any]:
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
        **tables_data(),
    }
