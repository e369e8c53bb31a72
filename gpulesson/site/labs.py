"""The labs' content and data: the routes to a GPU, the device-dispatch script, labs.json.

The routes and the dispatch script are course content, ``docs/labs.yml``, read and checked
once per build by :mod:`gpulesson.site.content`; their tables are rendered here, as the
quizzes' are. :func:`labs_data` gathers what the lab script in ``docs/javascripts/labs.js``
reads (``assets/labs/labs.json``), so the script and the pages share one set of inputs: the
throughput race (:mod:`gpulesson.timing.race`), the timing lab's teaching figures
(:mod:`gpulesson.timing.teaching`) and the cost calculator's example rates and bounds
(:mod:`gpulesson.memory.cost`). Nothing here computes a figure or measures.

>>> sorted(labs_data())
['cost', 'dispatch', 'race', 'timing']
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from typing import Any

from gpulesson.memory.cost import CardRate, card_rates, cost_limits_data, rates_source
from gpulesson.tables import markdown_table
from gpulesson.timing.race import (
    RACE_SIZES,
    TEACHING_CPU_FLOP_PER_S,
    TEACHING_GPU_FLOP_PER_S,
    TEACHING_LAUNCH_S,
)
from gpulesson.timing.teaching import SOURCE_LAUNCH_S, TEACHING, kernel_basis


def _labs() -> Any:
    from gpulesson.site import content  # content imports this module's dataclasses

    return content.current().labs


@dataclass(frozen=True)
class Route:
    """One way to get a GPU: what it costs, needs, suits, and what to watch."""

    route: str
    cost: str
    setup: str
    best_for: str
    watch_out: str


def fill_route_cost(route: Route, rates: tuple[CardRate, ...]) -> Route:
    """The route with the rates' range put into its cost (``{spot_low_usd_per_h}`` and so on).

    >>> r = Route(route="r", cost="${spot_low_usd_per_h:.2f} and up", setup="s", best_for="b",
    ...           watch_out="w")
    >>> fill_route_cost(r, (CardRate(card_class="c", vram_gb=1, on_demand_usd_per_h=2.0,
    ...                              spot_usd_per_h=0.5),)).cost
    '$0.50 and up'
    """
    values = {
        "spot_low_usd_per_h": min(c.spot_usd_per_h for c in rates),
        "on_demand_high_usd_per_h": max(c.on_demand_usd_per_h for c in rates),
    }
    try:
        cost = route.cost.format(**values)
    except KeyError as exc:
        raise ValueError(
            f"unknown placeholder {{{exc.args[0]}}}: a cost may name {', '.join(values)}"
        ) from None
    except (ValueError, IndexError, AttributeError) as exc:
        raise ValueError(f"cannot fill in the rates ({exc}); write {{{{ for a brace") from None
    return replace(route, cost=cost)


def routes(rates: tuple[CardRate, ...] | None = None) -> tuple[Route, ...]:
    """The routes to a GPU (``docs/labs.yml``); the rented route's price range follows ``rates``.

    >>> routes()[2].cost
    '≈ $0.15–1.60/h (example rates)'
    """
    rates = card_rates() if rates is None else rates
    return tuple(fill_route_cost(r, rates) for r in _labs().routes)


def routes_markdown() -> str:
    """The routes side by side as a Markdown table.

    >>> print(routes_markdown().splitlines()[0])
    | route | cost | setup | best for | watch out for |
    """
    return markdown_table(
        ("route", "cost", "setup", "best for", "watch out for"),
        [(r.route, r.cost, r.setup, r.best_for, r.watch_out) for r in routes()],
        align="lllll",
    )


# --- Device-dispatch simulator ------------------------------------------------

MACHINE_KEYS = ("nvidia", "mac", "cpu")


@dataclass(frozen=True)
class Machine:
    """One machine the dispatch simulator runs the script on; ``key`` is in MACHINE_KEYS."""

    key: str
    label: str


@dataclass(frozen=True)
class DispatchLine:
    """One line of the script and what it prints (or raises) on each machine.

    An outcome starting with an exception name followed by a colon is an error.
    Outputs on the NVIDIA machine are example values for that card.
    """

    code: str
    nvidia: str
    mac: str
    cpu: str


def machines() -> tuple[Machine, ...]:
    """The simulator's machines (``docs/labs.yml``), in the order the lab lists them.

    >>> [m.key for m in machines()]
    ['nvidia', 'mac', 'cpu']
    """
    return _labs().machines


def dispatch_script() -> tuple[DispatchLine, ...]:
    """The script the simulator steps through (``docs/labs.yml``).

    >>> dispatch_script()[1].code
    'print(torch.cuda.is_available())'
    """
    return _labs().dispatch


def is_error(outcome: str) -> bool:
    """True when an outcome is an error rather than printed output.

    >>> is_error("AssertionError: Torch not compiled with CUDA enabled"), is_error("True")
    (True, False)
    """
    head = outcome.split(":", 1)[0]
    return head.endswith("Error") or "command not found" in outcome


def dispatch_markdown(lines: tuple[DispatchLine, ...] | None = None) -> str:
    """The whole script on the three machines as one table.

    >>> print(dispatch_markdown().splitlines()[3])
    | `print(torch.cuda.is_available())` | True | False | False |
    """
    rows = []
    for line in dispatch_script() if lines is None else lines:
        cells = [
            f"**{o}**" if is_error(o) else o.replace("|", "\\|")
            for o in (line.nvidia, line.mac, line.cpu)
        ]
        rows.append([f"`{line.code}`", *cells])
    return markdown_table(
        ("line", "NVIDIA workstation", "Apple Silicon Mac", "CPU-only laptop"), rows, align="llll"
    )


def labs_data() -> dict:
    """Everything the lab script needs, for ``assets/labs/labs.json``.

    Each dispatch line carries ``errors`` (machine key -> bool, from
    :func:`is_error`), so the script does not repeat the rule.

    >>> sorted(labs_data())
    ['cost', 'dispatch', 'race', 'timing']
    """
    return {
        "race": {
            "cpu_flop_per_s": TEACHING_CPU_FLOP_PER_S,
            "gpu_flop_per_s": TEACHING_GPU_FLOP_PER_S,
            "launch_s": TEACHING_LAUNCH_S,
            "source_launch_s": SOURCE_LAUNCH_S,
            "sizes": list(RACE_SIZES),
        },
        "timing": {
            "cpu_s": TEACHING.cpu_s,
            "kernel_s": TEACHING.kernel_s,
            "kernel_basis": kernel_basis(),
            "launch_s": TEACHING.launch_s,
            "source_launch_s": SOURCE_LAUNCH_S,
        },
        "cost": {
            "source": rates_source(),
            "rates": [asdict(c) for c in card_rates()],
            "limits": cost_limits_data(),
        },
        "dispatch": {
            "machines": [asdict(m) for m in machines()],
            "lines": [
                {**asdict(line), "errors": {k: is_error(getattr(line, k)) for k in MACHINE_KEYS}}
                for line in dispatch_script()
            ],
        },
    }


def to_json() -> str:
    """:func:`labs_data` as JSON text.

    >>> json.loads(to_json())["dispatch"]["lines"][2]["errors"]
    {'nvidia': False, 'mac': True, 'cpu': True}
    """
    return json.dumps(labs_data(), ensure_ascii=False)
