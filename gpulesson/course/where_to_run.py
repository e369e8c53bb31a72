"""The lesson ``where-to-run.md``: its renderers and texts.

Its tables: the example rates and what a sweep costs on each card (the routes to a GPU and
the example machines come from the site's content and from ``software-stack.md``).

Renderers take the frozen results of the topic packages and return Markdown, HTML or chart
markup; nothing here measures. See :mod:`gpulesson.course`.
"""

from __future__ import annotations

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
