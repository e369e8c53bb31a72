"""Precision recipes: the dtype of each persistent term of a step, and what each gives up.

A recipe names the dtype of the weights, the gradients, the optimizer state and
an optional fp32 master copy, plus the dtype activations are computed in. The
bytes per parameter follow from those dtypes and from how many state values the
optimizer keeps per parameter. Every recipe is built with keyword fields, so a
reader never counts arguments to know which ``"fp32"`` is the gradients'.

Sources for the norms (not computed here, cited):

* In PyTorch a parameter's gradient has the parameter's dtype, and
  ``torch.optim.Adam``/``AdamW`` create their moments with
  ``torch.zeros_like(param)``, so the moments take the parameter's dtype too
  (``torch/optim/adam.py``, ``Adam._init_group``;
  https://pytorch.org/docs/stable/generated/torch.optim.AdamW.html).
* Automatic mixed precision keeps the parameters (and so the gradients and the
  AdamW moments) in fp32 and runs eligible ops in a 16-bit dtype under
  ``torch.autocast`` (https://pytorch.org/docs/stable/amp.html): 4 + 4 + 8 =
  16 bytes per parameter, the ``amp`` preset.
* ZeRO (Rajbhandari et al., arXiv:1910.02054, section 3.1) counts mixed-precision
  Adam as 2 + 2 + 12 = 16 bytes per parameter: 16-bit weights and gradients,
  and an fp32 copy of the weights plus two fp32 moments (``mixed-fp32-master``).
* Hugging Face's "Model training anatomy" counts 18 bytes per parameter for
  mixed-precision AdamW: 6 for the weights (fp32 plus a 16-bit copy), 4 for
  the gradients, 8 for the moments
  (https://huggingface.co/docs/transformers/model_memory_anatomy).
* ``bf16`` (12 bytes), ``fp16-fp32-grads`` (14) and ``sgd`` reproduce the
  source lessons' arithmetic; each recipe says what it gives up.

>>> PRESETS["amp"].bytes_per_param()
{'weights': 4.0, 'gradients': 4.0, 'optimizer': 8.0, 'master': 0.0}
>>> [sum(PRESETS[p].bytes_per_param().values()) for p in ("bf16", "fp16-fp32-grads", "amp")]
[12.0, 14.0, 16.0]
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from gpulesson import schema_check

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

DEFAULT_TRAINING_PRESET = "amp"


@dataclass(frozen=True, kw_only=True)
class Recipe:
    """A precision recipe: the dtype of each persistent term and the optimizer.

    ``master_dtype`` is ``None`` when the recipe keeps no separate master copy.
    ``compute_dtype`` sets the activations' precision. ``inference`` recipes
    keep weights only (plus the KV cache with a shape); ``adapters`` recipes
    freeze the base and train LoRA adapters held in ``compute_dtype``.
    ``source`` says where the recipe comes from; ``gives_up`` what it trades
    for its memory, in a sentence a lesson can show.
    """

    name: str
    weight_dtype: str
    grad_dtype: str | None
    state_dtype: str | None
    master_dtype: str | None
    optimizer: str | None
    compute_dtype: str
    source: str
    gives_up: str
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
            "optimizer": state_bytes(self.optimizer, self.state_dtype),
            "master": DTYPE_BYTES[self.master_dtype] if self.master_dtype else 0.0,
        }

    @property
    def total_bytes_per_param(self) -> float:
        """Weights, gradients, optimizer state and master copy per parameter, together.

        >>> PRESETS["amp"].total_bytes_per_param, PRESETS["bf16"].total_bytes_per_param
        (16.0, 12.0)
        """
        return sum(self.bytes_per_param().values())

    @property
    def optimizer_states(self) -> int:
        """How many state values the optimizer keeps per trainable parameter.

        >>> PRESETS["bf16"].optimizer_states, PRESETS["infer-fp16"].optimizer_states
        (2, 0)
        """
        return OPTIMIZER_STATES[self.optimizer] if self.optimizer else 0


def state_bytes(optimizer: str | None, state_dtype: str | None) -> float:
    """Optimizer-state bytes per trainable parameter (all of its state values).

    >>> state_bytes("adamw", "fp32"), state_bytes("sgd", None), state_bytes(None, None)
    (8.0, 0.0, 0.0)
    """
    if optimizer is None:
        return 0.0
    states = OPTIMIZER_STATES[optimizer]
    if optimizer == "adam8bit":
        return states * ADAM8BIT_STATE_BYTES
    return states * DTYPE_BYTES[state_dtype or "fp32"]


TABLE = Path(__file__).with_name("recipes.json")
SCHEMA = Path(__file__).with_name("recipes.schema.json")
_DTYPE_FIELDS = ("weight_dtype", "grad_dtype", "state_dtype", "master_dtype", "compute_dtype")


def load_presets(path: Path = TABLE) -> dict[str, Recipe]:
    """The recipes of a table like ``recipes.json``, checked, by name in the table's order.

    The schema checks each row's fields; the dtypes and the optimizer must be keys of
    :data:`DTYPE_BYTES` and :data:`OPTIMIZER_STATES`, and no name may come twice.
    Anything else raises ``ValueError`` naming the file, the recipe and the field.

    >>> list(load_presets())[:3]
    ['amp', 'fp16-fp32-grads', 'bf16']
    """
    data = schema_check.load_json(path, SCHEMA)
    presets: dict[str, Recipe] = {}
    for i, row in enumerate(data["recipes"]):
        where = schema_check.where(path.name, ("recipes", i), None)
        for field in _DTYPE_FIELDS:
            if row.get(field) is not None and row[field] not in DTYPE_BYTES:
                raise ValueError(
                    f"{where}: {field}: {row[field]!r} is not a dtype: "
                    f"use one of {', '.join(DTYPE_BYTES)}"
                )
        if row["optimizer"] is not None and row["optimizer"] not in OPTIMIZER_STATES:
            raise ValueError(
                f"{where}: optimizer: {row['optimizer']!r} is not an optimizer: "
                f"use one of {', '.join(OPTIMIZER_STATES)}"
            )
        if row["name"] in presets:
            raise ValueError(
                f"{where}: name: {row['name']!r} is already a recipe: give each its own name"
            )
        presets[row["name"]] = Recipe(**row)
    return presets


# The table: gpulesson/memory/recipes.json, read once.
PRESETS: dict[str, Recipe] = load_presets()


def get_recipe(preset: str) -> Recipe:
    """The named recipe, or a ValueError listing the presets.

    >>> get_recipe("bf16").state_dtype
    'fp32'
    """
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}: use one of {', '.join(PRESETS)}")
    return PRESETS[preset]


def with_optimizer(recipe: Recipe, optimizer: str | None, state_dtype: str | None) -> Recipe:
    """The recipe with its optimizer or state dtype overridden (``None`` keeps the recipe's).

    >>> with_optimizer(PRESETS["bf16"], "adam8bit", None).optimizer
    'adam8bit'
    """
    if optimizer is None and state_dtype is None:
        return recipe
    if recipe.inference:
        raise ValueError(f"preset {recipe.name!r} is inference-only: it has no optimizer")
    if optimizer is not None and optimizer not in OPTIMIZER_STATES:
        raise ValueError(
            f"unknown optimizer {optimizer!r}: use one of {', '.join(OPTIMIZER_STATES)}"
        )
    if state_dtype is not None and state_dtype not in DTYPE_BYTES:
        raise ValueError(
            f"unknown state dtype {state_dtype!r}: use one of {', '.join(DTYPE_BYTES)}"
        )
    return replace(
        recipe,
        optimizer=optimizer or recipe.optimizer,
        state_dtype=state_dtype or recipe.state_dtype,
    )
