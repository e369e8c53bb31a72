"""What runs cost at the example hourly rates, with every input checked against its bounds.

The cost calculator's figures: the example rates (one home, the package's
``gpulesson/results/example_rates.json``, read by
:func:`gpulesson.results.datasheets.example_rates`, which ``gpulesson budget --gpu`` prices
with too) and rate x hours x runs. The lesson "Where to run GPU work" renders them
(:func:`gpulesson.course.where_to_run.cost_markdown`); the calculator in the browser reads
the same rates and bounds from ``assets/labs/labs.json``.

>>> run_cost_usd(1.60, 4, 20)
128.0
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from gpulesson.memory.compute import MAX_PRICE_USD_PER_GPU_HOUR
from gpulesson.results.datasheets import example_rates


@dataclass(frozen=True)
class CardRate:
    """An example hourly rate for one card class, in US dollars."""

    card_class: str
    vram_gb: int
    on_demand_usd_per_h: float
    spot_usd_per_h: float


def card_rates() -> tuple[CardRate, ...]:
    """The cost calculator's example rates (the package's ``example_rates.json``).

    >>> [r.card_class for r in card_rates()][0]
    'T4-class'
    """
    return tuple(
        CardRate(
            card_class=r.card_class,
            vram_gb=r.vram_gb,
            on_demand_usd_per_h=r.on_demand_usd_per_h,
            spot_usd_per_h=r.spot_usd_per_h,
        )
        for r in example_rates().rates
    )


def rates_source() -> str:
    """Where the example rates come from, as the calculator states it.

    >>> "example" in rates_source()
    True
    """
    return example_rates().source


@dataclass(frozen=True, kw_only=True)
class CostLimit:
    """The range of one of the cost calculator's inputs, and why it ends where it does.

    ``above`` says the minimum itself is refused (hours must be above 0); ``whole``
    that the value is a count.
    """

    minimum: float
    maximum: float
    stated: str
    why: str
    above: bool = False
    whole: bool = False


# Bounds on input, not figures about runs: they keep every cost the calculator shows
# finite and readable (at most 1,000 x 10,000 x 10,000 = 10^11 US dollars). The rate's
# bound is the one gpulesson budget --price-per-gpu-hour enforces.
MAX_HOURS_PER_RUN = 10_000.0
MAX_RUNS = 10_000
COST_LIMITS: dict[str, CostLimit] = {
    "rate": CostLimit(
        minimum=0.0,
        maximum=MAX_PRICE_USD_PER_GPU_HOUR,
        stated=f"{MAX_PRICE_USD_PER_GPU_HOUR:,.0f}",
        why="it is hundreds of times the example rates; a larger number is likelier a monthly or "
        "a whole cluster's price than one card's hour (gpulesson budget refuses it too)",
    ),
    "hours": CostLimit(
        minimum=0.0,
        maximum=MAX_HOURS_PER_RUN,
        stated=f"{MAX_HOURS_PER_RUN:,.0f}",
        why="it is more than a year of one run",
        above=True,
    ),
    "runs": CostLimit(
        minimum=1,
        maximum=MAX_RUNS,
        stated=f"{MAX_RUNS:,}",
        why="a larger count is likelier a typo than a sweep",
        whole=True,
    ),
}


def _check_cost_input(name: str, label: str, value: Any) -> float:
    limit = COST_LIMITS[name]
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or not math.isfinite(value):
        raise ValueError(f"{label}={value!r} is not a finite number: enter one, e.g. 3")
    if limit.whole and value != int(value):
        raise ValueError(f"{label}={value!r} must be a whole number")
    if value < limit.minimum or (limit.above and value == limit.minimum):
        side = "above" if limit.above else "at least"
        raise ValueError(f"{label}={value!r} must be {side} {limit.minimum:g}, e.g. 3")
    if value > limit.maximum:
        raise ValueError(
            f"{label}={value!r} is too large: at most {limit.stated}, because {limit.why}"
        )
    return float(value)


def run_cost_usd(rate_usd_per_h: float, hours_per_run: float, runs: int) -> float:
    """Rate × hours × runs, each input checked against :data:`COST_LIMITS`.

    >>> run_cost_usd(0.60, 3, 10)
    18.0
    >>> run_cost_usd(0.60, -1, 10)
    Traceback (most recent call last):
    ...
    ValueError: hours_per_run=-1 must be above 0, e.g. 3
    >>> run_cost_usd(1e308, 3, 10)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: rate_usd_per_h=1e+308 is too large: at most 1,000, because it is hundreds of ...
    """
    rate = _check_cost_input("rate", "rate_usd_per_h", rate_usd_per_h)
    hours = _check_cost_input("hours", "hours_per_run", hours_per_run)
    count = _check_cost_input("runs", "runs", runs)
    return round(rate * hours * count, 6)


def cost_limits_data() -> dict[str, dict[str, Any]]:
    """:data:`COST_LIMITS` as JSON-ready data, for the cost calculator's script.

    >>> cost_limits_data()["rate"]["maximum"], cost_limits_data()["hours"]["above"]
    (1000.0, True)
    """
    return {name: asdict(limit) for name, limit in COST_LIMITS.items()}
