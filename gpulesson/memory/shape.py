"""The shape of a GPT-2-style transformer and the micro-batch one GPU runs.

Counts are checked once, here: each is a positive whole number no larger than
its maximum in :data:`COUNT_LIMITS` (``MAX_COUNT``, 2^53, the largest range in
which a float still holds every whole number, so products of counts stay exact
enough to price; the layers at most ``MAX_LAYERS``, because the estimate walks
the backward pass one block at a time). The CLI (``gpulesson budget``) and the
browser's VRAM planner (through ``planner.json``) refuse the same values.

Used by :mod:`gpulesson.memory.budget` and :mod:`gpulesson.memory.terms`.

>>> TransformerShape(50257, 1024, 768, 12, 12).parameters()
124439808
>>> TransformerShape(32000, 8192, 4096, 32, 32, kv_heads=8).kv_hidden
1024
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

MAX_COUNT = 2**53
#: The most layers a shape may have. The estimate evaluates two points of the backward
#: pass per block (``gpulesson.memory.terms.evaluate_points``), so its time grows with
#: the layers; 10,000 is ten times the 1,000 layers DeepNet trained (Wang et al.,
#: arXiv:2203.00555). ``tests/benchmarks/bench_budget_bounds.py`` times the largest.
MAX_LAYERS = 10_000


@dataclass(frozen=True, kw_only=True)
class CountLimit:
    """The largest value a count may take, written as the refusal says it, and why."""

    maximum: int
    stated: str
    why: str


_FLOAT_LIMIT = CountLimit(
    maximum=MAX_COUNT,
    stated="2^53 (9.0e+15)",
    why="above it a float no longer holds every whole number, so the arithmetic stops being exact",
)

#: Each count's maximum, by its API name (a CLI option is the same name with dashes).
#: Counts not named here (vocab, seq, hidden, heads, batch, kv_heads, gpus, ...) take
#: the float limit.
COUNT_LIMITS: dict[str, CountLimit] = {
    "layers": CountLimit(
        maximum=MAX_LAYERS,
        stated=f"{MAX_LAYERS:,}",
        why="the estimate walks the backward pass one block at a time (ten times the "
        "1,000 layers of DeepNet, arXiv:2203.00555)",
    ),
}

#: The shape's counts, in the order the CLI and the planner ask for them.
SHAPE_COUNTS = ("vocab", "seq", "hidden", "heads", "layers", "batch", "kv_heads", "ffn")


def count_limit(name: str) -> CountLimit:
    """The limit of the count ``name`` (an API name such as ``layers`` or ``kv_heads``).

    >>> count_limit("layers").maximum, count_limit("hidden").maximum == MAX_COUNT
    (10000, True)
    """
    return COUNT_LIMITS.get(name, _FLOAT_LIMIT)


def too_large(label: str, value: int | float | str, name: str) -> str:
    """The refusal of a count above its maximum: ``label`` as the caller names the count
    (``layers=`` for the API, ``--layers `` for the CLI), the value, the maximum and why.

    >>> too_large("--layers ", 3000000, "layers")  # doctest: +NORMALIZE_WHITESPACE
    '--layers 3000000 is too large: at most 10,000, because the estimate walks the backward
    pass one block at a time (ten times the 1,000 layers of DeepNet, arXiv:2203.00555)'
    """
    limit = count_limit(name)
    shown = value if isinstance(value, str) else short_number(value)
    return f"{label}{shown} is too large: at most {limit.stated}, because {limit.why}"


def check_count(name: str, value: Any) -> int:
    """``value`` if it is a positive whole number up to its maximum, else a ValueError.

    >>> check_count("layers", 12)
    12
    >>> check_count("layers", 0)
    Traceback (most recent call last):
    ...
    ValueError: layers=0 must be a positive whole number
    >>> check_count("layers", 3_000_000)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: layers=3000000 is too large: at most 10,000, because the estimate walks ...
    """
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name}={value!r} must be a positive whole number")
    if value > count_limit(name).maximum:
        raise ValueError(too_large(f"{name}=", value, name))
    return value


def limits_data() -> dict[str, dict[str, Any]]:
    """The shape's limits as JSON-ready data, for the VRAM planner (``planner.json``).

    >>> d = limits_data()
    >>> d["layers"]["maximum"], d["layers"]["stated"], d["hidden"]["maximum"] == MAX_COUNT
    (10000, '10,000', True)
    """
    return {
        name: {
            "minimum": 1,
            "maximum": count_limit(name).maximum,
            "stated": count_limit(name).stated,
            "why": count_limit(name).why,
        }
        for name in SHAPE_COUNTS
    }


def check_positive(name: str, value: Any, example: str) -> float:
    """``value`` as a float if it is a positive, finite number, else a ValueError.

    >>> check_positive("params", "nan", "7e9")
    Traceback (most recent call last):
    ...
    ValueError: params='nan' must be a positive, finite number, e.g. 7e9
    """
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name}={value!r} is not a number: write e.g. {example}") from None
    if not math.isfinite(number) or number <= 0:
        raise ValueError(f"{name}={value!r} must be a positive, finite number, e.g. {example}")
    return number


def short_number(value: int | float) -> str:
    """A long number shortened for an error message: its first digits and its length.

    >>> short_number(10**400)
    '100000000000...(401 digits)'
    >>> short_number(12)
    '12'
    """
    text = str(value)
    return text if len(text) <= 20 else f"{text[:12]}...({len(text)} digits)"


@dataclass(frozen=True)
class TransformerShape:
    """A GPT-2-style transformer and the micro-batch one GPU runs.

    ``seq`` is the sequence length of the batch (and of the position table).
    ``kv_heads`` is the number of key/value heads: ``None`` (the default) means
    one per attention head (multi-head attention), fewer is grouped-query
    attention (GQA), 1 is multi-query attention (MQA). It must divide ``heads``.

    The MLP and the ends of the model, for shapes other than GPT-2's (the defaults
    are GPT-2's, so every GPT-2 count is unchanged): ``ffn`` is the MLP's inner width
    (``None``: 4 x hidden); ``gated`` a gated MLP (SwiGLU, as Llama and Mistral: three
    hidden x ffn matrices, no biases) instead of two matrices with biases;
    ``tied_head=False`` an output head of its own (vocab x hidden more);
    ``learned_positions=False`` no position table (rotary positions, as Llama).
    """

    vocab: int
    seq: int
    hidden: int
    heads: int
    layers: int
    batch: int = 1
    kv_heads: int | None = field(default=None, kw_only=True)
    ffn: int | None = field(default=None, kw_only=True)
    gated: bool = field(default=False, kw_only=True)
    tied_head: bool = field(default=True, kw_only=True)
    learned_positions: bool = field(default=True, kw_only=True)

    def __post_init__(self) -> None:
        for name in ("vocab", "seq", "hidden", "heads", "layers", "batch"):
            check_count(name, getattr(self, name))
        if self.hidden % self.heads:
            raise ValueError(
                f"hidden={self.hidden} is not divisible by heads={self.heads}: "
                "pick a head count that divides the hidden size"
            )
        if self.kv_heads is not None:
            check_count("kv_heads", self.kv_heads)
            if self.heads % self.kv_heads:
                raise ValueError(
                    f"kv_heads={self.kv_heads} does not divide heads={self.heads}: "
                    "each key/value head serves a whole group of attention heads"
                )
        if self.ffn is not None:
            check_count("ffn", self.ffn)
        for name in ("gated", "tied_head", "learned_positions"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name}={getattr(self, name)!r} must be True or False")

    @property
    def ffn_size(self) -> int:
        """The MLP's inner width: ``ffn``, or 4 x hidden (GPT-2's) when it is not given."""
        return 4 * self.hidden if self.ffn is None else self.ffn

    def conditions(self) -> set[str]:
        """The conditions :data:`gpulesson.memory.terms.MODEL_PARAMETERS` tests for this shape.

        >>> sorted(TransformerShape(64, 8, 16, 2, 1).conditions())
        ['learned_positions', 'plain_mlp', 'tied_head']
        """
        return {
            "gated_mlp" if self.gated else "plain_mlp",
            "tied_head" if self.tied_head else "untied_head",
            *(("learned_positions",) if self.learned_positions else ()),
        }

    @property
    def kv_head_count(self) -> int:
        """Key/value heads: ``kv_heads``, or ``heads`` when it is not given."""
        return self.heads if self.kv_heads is None else self.kv_heads

    @property
    def head_dim(self) -> int:
        """Values per head: hidden / heads."""
        return self.hidden // self.heads

    @property
    def kv_hidden(self) -> int:
        """Width of the keys (and of the values): kv_heads x head_dim."""
        return self.kv_head_count * self.head_dim

    def parameters(self) -> int:
        """The parameter count (:data:`gpulesson.memory.terms.MODEL_PARAMETERS`).

        GPT-2's by default: embeddings, per block 12C^2 + 13C with one key/value
        head per head (fewer with grouped-query attention), a final LayerNorm; the
        head is tied to the token embedding. ``ffn``, ``gated``, ``tied_head`` and
        ``learned_positions`` change the MLP and the ends (class docstring).

        >>> TransformerShape(50257, 1024, 768, 12, 12).parameters()
        124439808
        >>> llama3_8b = TransformerShape(128256, 8192, 4096, 32, 32, kv_heads=8, ffn=14336,
        ...                              gated=True, tied_head=False, learned_positions=False)
        >>> round(llama3_8b.parameters() / 1e9, 2)
        8.03
        """
        from gpulesson.memory.terms import count_parameters

        sizes = {
            "vocab": self.vocab,
            "seq": self.seq,
            "hidden": self.hidden,
            "kv_hidden": self.kv_hidden,
            "ffn": self.ffn_size,
            "layers": self.layers,
        }
        return count_parameters(sizes, self.conditions())
