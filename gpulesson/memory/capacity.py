"""How large a model fits a card: the capacity table and GB-versus-GiB card sizes.

The sources' division (card / bytes per parameter), for each use a column of
the table names (inference, SGD training, Adam training), with and without the
headroom rule of :mod:`gpulesson.memory.budget`. Weights, gradients and
optimizer state only: no activations.

Used by the lesson ``lessons/capacity.md``; rendered by
:func:`gpulesson.course.capacity.capacity_markdown` and
:func:`gpulesson.course.capacity.card_units_markdown`.

>>> row = capacity()[3]
>>> row.card_bytes, round(row.entry("infer-fp16").params / 1e9)
(24000000000, 12)
"""

from __future__ import annotations

from dataclasses import dataclass

from gpulesson.memory.budget import ALLOCATOR_SLACK_FRACTION, CUDA_CONTEXT_BYTES
from gpulesson.memory.recipes import get_recipe
from gpulesson.memory.shape import check_positive
from gpulesson.units import GB, GIB

# The cards of the sources' capacity table, in decimal GB as the sources write them.
CARDS_GB: tuple[int, ...] = (8, 12, 16, 24, 80)


def max_params(card_bytes: float, preset: str, headroom: bool = False) -> float:
    """The largest parameter count whose weights, gradients and state fit a card.

    Without headroom this is the sources' division (card / bytes per parameter);
    with it, the card first loses the CUDA context and the allocator slack.

    >>> round(max_params(24 * GB, "fp16-fp32-grads") / 1e9, 1)
    1.7
    """
    card = check_positive("card_bytes", card_bytes, "24 * 2**30")
    per_param = get_recipe(preset).total_bytes_per_param
    if headroom:
        card = card * (1 - ALLOCATOR_SLACK_FRACTION) - CUDA_CONTEXT_BYTES
    return max(card, 0.0) / per_param


@dataclass(frozen=True, kw_only=True)
class CapacityUse:
    """A column of the capacity table: a label and the preset that prices it."""

    label: str
    preset: str


# The sources' capacity columns, with Adam training priced as the norm (AMP, 16 bytes per
# parameter) rather than the source's 14 (fp16-fp32-grads, which gives up precision).
CAPACITY_USES: tuple[CapacityUse, ...] = (
    CapacityUse(label="inference fp16", preset="infer-fp16"),
    CapacityUse(label="SGD training", preset="sgd"),
    CapacityUse(label="Adam training (AMP)", preset="amp"),
)


@dataclass(frozen=True, kw_only=True)
class CapacityEntry:
    """The largest model one card holds for one use, without and with headroom."""

    label: str
    preset: str
    bytes_per_param: float
    params: float
    params_with_headroom: float


@dataclass(frozen=True, kw_only=True)
class CapacityRow:
    """One card of the capacity table and its entries, one per use."""

    card_bytes: int
    entries: tuple[CapacityEntry, ...]

    def entry(self, preset: str) -> CapacityEntry:
        """The entry priced by ``preset``."""
        for e in self.entries:
            if e.preset == preset:
                return e
        raise ValueError(f"no capacity entry for preset {preset!r}")


def capacity(
    cards_bytes: tuple[int, ...] = tuple(c * GB for c in CARDS_GB),
    uses: tuple[CapacityUse, ...] = CAPACITY_USES,
) -> tuple[CapacityRow, ...]:
    """The capacity table: for each card, the largest model each use fits.

    >>> [round(r.entry("sgd").params / 1e9, 1) for r in capacity()]
    [1.3, 2.0, 2.7, 4.0, 13.3]
    """
    return tuple(
        CapacityRow(
            card_bytes=card,
            entries=tuple(
                CapacityEntry(
                    label=use.label,
                    preset=use.preset,
                    bytes_per_param=get_recipe(use.preset).total_bytes_per_param,
                    params=max_params(card, use.preset),
                    params_with_headroom=max_params(card, use.preset, headroom=True),
                )
                for use in uses
            ),
        )
        for card in cards_bytes
    )


@dataclass(frozen=True, kw_only=True)
class CardUnits:
    """One card size read as GiB and as GB, and the largest model each holds."""

    size: int
    preset: str
    gib_card_bytes: int
    gib_card_params: float
    gb_card_bytes: int
    gb_card_params: float


def card_units(sizes: tuple[int, ...], preset: str) -> tuple[CardUnits, ...]:
    """For each size N: N GiB and N GB in bytes, and the largest model under ``preset``.

    >>> round(card_units((24,), "fp16-fp32-grads")[0].gib_card_params / 1e9, 2)
    1.84
    """
    return tuple(
        CardUnits(
            size=n,
            preset=preset,
            gib_card_bytes=n * GIB,
            gib_card_params=max_params(n * GIB, preset),
            gb_card_bytes=n * GB,
            gb_card_params=max_params(n * GB, preset),
        )
        for n in sizes
    )
