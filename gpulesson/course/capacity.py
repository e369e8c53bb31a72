"""The lesson ``capacity.md``: its renderers and texts.

Its pictures and tables: the capacity table, the card units and the verdicts per card.

Renderers take the frozen results of the topic packages and return Markdown, HTML or chart
markup; nothing here measures. See :mod:`gpulesson.course`.
"""

from __future__ import annotations

from gpulesson.memory.budget import CardVerdict
from gpulesson.memory.capacity import CapacityRow, CardUnits
from gpulesson.tables import markdown_table
from gpulesson.units import GB, GIB, format_gb, format_gib


def capacity_markdown(rows: tuple[CapacityRow, ...], headroom: bool = False) -> str:
    """The capacity table in billions of parameters; cards in GB (10^9 bytes) and GiB.

    The column headers come from the rows' entries: their label and bytes per parameter.

    >>> from gpulesson.memory.capacity import capacity
    >>> print(capacity_markdown(capacity((24 * GB,))).splitlines()[-1])
    | 24 | 22.35 | 12.0 | 4.0 | 1.5 |
    """
    suffix = " with headroom" if headroom else ""
    header = ["card (GB)", "card (GiB)"] + [
        f"{e.label}, {e.bytes_per_param:g} B/param{suffix} (billion params)"
        for e in (rows[0].entries if rows else ())
    ]
    cells = []
    for r in rows:
        values = [e.params_with_headroom if headroom else e.params for e in r.entries]
        cells.append(
            [f"{r.card_bytes / GB:.3g}", f"{r.card_bytes / GIB:.2f}"]
            + [f"{v / 1e9:.1f}" for v in values]
        )
    return markdown_table(header, cells, align="r" * len(header))


def verdicts_markdown(verdicts: tuple[CardVerdict, ...]) -> str:
    """Fits / does not fit for each card, with the headroom rule applied.

    >>> from gpulesson.memory.budget import estimate, fits
    >>> print(verdicts_markdown((fits(estimate(7e9, preset="infer-fp16"), 24 * GIB),))[-18:])
    | fits | +9.1 GB |
    """
    rows = [
        (
            f"{format_gb(v.card_bytes)} ({format_gib(v.card_bytes)})",
            format_gb(v.needed_bytes),
            "fits" if v.fits else "does not fit",
            f"{v.spare_bytes / GB:+,.1f} GB",
        )
        for v in verdicts
    ]
    header = ("card", "needs (peak + headroom)", "verdict", "spare")
    return markdown_table(header, rows, align="lrlr")


def card_units_markdown(rows: tuple[CardUnits, ...]) -> str:
    """What the same number means as GiB and as GB: card bytes and the model that fits.

    >>> from gpulesson.memory.capacity import card_units
    >>> print(card_units_markdown(card_units((24,), "fp16-fp32-grads")).splitlines()[-1])
    | 24 | 25.8 GB | 1.84 | 24.0 GB | 1.71 |
    """
    preset = rows[0].preset if rows else ""
    header = (
        "card size N",
        "N GiB in GB",
        f"largest model, {preset} (billions)",
        "N GB in GB",
        f"largest model, {preset} (billions)",
    )
    cells = [
        (
            f"{r.size}",
            format_gb(r.gib_card_bytes),
            f"{r.gib_card_params / 1e9:.2f}",
            format_gb(r.gb_card_bytes),
            f"{r.gb_card_params / 1e9:.2f}",
        )
        for r in rows
    ]
    return markdown_table(header, cells, align="rrrrr")
