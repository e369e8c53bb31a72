"""The lesson ``where-to-run.md``: its renderers and texts.

Its tables: the example rates and what a sweep costs on each card (the routes to a GPU and
the example machines come from the site's content and from ``software-stack.md``).

Renderers take the frozen results of the topic packages and return Markdown, HTML or chart
markup; nothing here measures. See :mod:`gpulesson.course`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpulesson.memory.cost import CardRate, card_rates, run_cost_usd
from gpulesson.tables import markdown_table
from gpulesson.text import inert


def cost_markdown(
    hours_per_run: float = 3, runs: int = 10, rates: tuple[CardRate, ...] | None = None
) -> str:
    """The example rates and a sweep's cost on each card, on demand and on spot.

    >>> print(cost_markdown().splitlines()[2])
    | T4-class | 16 | 0.30 | 0.15 | 9.00 | 4.50 |
    """
    header = (
        "card class (example)",
        "memory (GB)",
        "on-demand ($/h)",
        "spot ($/h)",
        f"{runs} runs × {hours_per_run:g} h on demand ($)",
        "same on spot ($)",
    )
    rows = []
    for c in card_rates() if rates is None else rates:
        on = run_cost_usd(c.on_demand_usd_per_h, hours_per_run, runs)
        spot = run_cost_usd(c.spot_usd_per_h, hours_per_run, runs)
        rows.append(
            (
                inert(c.card_class),  # package data a contributor edits: escaped
                str(c.vram_gb),
                f"{c.on_demand_usd_per_h:.2f}",
                f"{c.spot_usd_per_h:.2f}",
                f"{on:.2f}",
                f"{spot:.2f}",
            )
        )
    return markdown_table(header, rows)


SWEEP_BILL_FACTS = (
    "where.spot_usd_per_h",
    "where.on_demand_usd_per_h",
    "where.hours_per_run",
    "where.runs",
)


def sweep_bill(facts: Mapping[str, Any]) -> dict[str, str]:
    """A sweep's spot bill, and the three sums a hurried reader gets instead.

    Reads the spot and on-demand rates ($/h), the hours per run and the number of runs
    (``SWEEP_BILL_FACTS``). ``spot`` is rate x hours x runs on spot (right);
    ``on_demand`` the same at the on-demand rate; ``one_run`` forgets the number of runs;
    ``no_hours`` forgets the hours. Dollars with two decimals; the rates, hours and runs
    are returned too, for the prompt.

    >>> bill = sweep_bill({"where.spot_usd_per_h": 0.3, "where.on_demand_usd_per_h": 0.6,
    ...                    "where.hours_per_run": 3, "where.runs": 10})
    >>> bill["spot"], bill["on_demand"], bill["one_run"], bill["no_hours"]
    ('9.00', '18.00', '0.90', '3.00')
    >>> sweep_bill({"where.spot_usd_per_h": 0.3, "where.on_demand_usd_per_h": 0.6,
    ...             "where.hours_per_run": 10, "where.runs": 10})
    Traceback (most recent call last):
    ...
    ValueError: sweep_bill: hours_per_run and runs are both 10, so two wrong sums read alike
    """
    missing = [name for name in SWEEP_BILL_FACTS if name not in facts]
    if missing:
        raise ValueError(f"sweep_bill needs the facts {', '.join(missing)}: list them under facts")
    spot, on_demand, hours, runs = (float(facts[name]) for name in SWEEP_BILL_FACTS)
    if hours == runs:
        raise ValueError(
            f"sweep_bill: hours_per_run and runs are both {hours:g}, so two wrong sums read alike"
        )
    if spot == on_demand:
        raise ValueError(
            f"sweep_bill: spot and on-demand rates are both {spot:g} $/h, so two options read "
            "the same: use rates that differ"
        )
    return {
        "spot": f"{spot * hours * runs:,.2f}",
        "on_demand": f"{on_demand * hours * runs:,.2f}",
        "one_run": f"{spot * hours:,.2f}",
        "no_hours": f"{spot * runs:,.2f}",
        "spot_rate": f"{spot:.2f}",
        "hours": f"{hours:g}",
        "runs": f"{runs:g}",
    }
