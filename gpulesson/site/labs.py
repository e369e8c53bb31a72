"""Data and static tables for the interactive labs.

Each lab has a compute function (the numbers), a ``*_markdown`` renderer (the
table a reader sees without JavaScript) and an entry in :func:`labs_data` (the
JSON the lab script in ``docs/javascripts/labs.js`` reads, so the script and the
table share one set of inputs). The throughput race and the timing lab use the
source lesson's teaching rates (computed in ``gpulesson.timing.teaching``); the
cost calculator's example rates, the routes and the dispatch script are data in
``docs/labs.yml``. Nothing here is a measurement.

>>> race(5000).gpu_s < race(5000).cpu_s
True
>>> race(64).gpu_s > race(64).cpu_s
True
"""

from __future__ import annotations

import html
import json
from dataclasses import asdict, dataclass, replace
from typing import Any

from gpulesson.timing.teaching import LaneEstimate, TeachingTiming

# The source lesson's teaching figures live once, in gpulesson.timing.teaching: the
# race runs at the rates its example timings imply (5.0 s and 0.20 s for a
# 5000 x 5000 matmul, 5 ms of launch per GPU call) and the lane counts of its
# width estimate.
TEACHING = TeachingTiming()
LANES = LaneEstimate()
TEACHING_CPU_FLOP_PER_S = TEACHING.cpu_flop_per_s
TEACHING_GPU_FLOP_PER_S = TEACHING.gpu_flop_per_s
TEACHING_LAUNCH_S = TEACHING.launch_s
RACE_SIZES = (64, 128, 256, 512, 1024, 2048, 4096, 8192)


@dataclass(frozen=True)
class RaceResult:
    """One matrix size in the simulated race: FLOPs and both simulated times."""

    n: int
    flops: float
    cpu_s: float
    gpu_s: float

    @property
    def speedup(self) -> float:
        """CPU time over GPU time: above 1 the GPU wins."""
        return self.cpu_s / self.gpu_s


def race(
    n: int,
    cpu_flop_per_s: float = TEACHING_CPU_FLOP_PER_S,
    gpu_flop_per_s: float = TEACHING_GPU_FLOP_PER_S,
    launch_s: float = TEACHING_LAUNCH_S,
) -> RaceResult:
    """Simulate one n×n matmul (2n³ FLOPs) on the teaching CPU and GPU.

    The GPU pays ``launch_s`` once per call, so it loses at small sizes.

    >>> r = race(5000)
    >>> round(r.cpu_s, 2), round(r.gpu_s, 3), round(r.speedup)
    (5.0, 0.205, 24)
    """
    if n < 1:
        raise ValueError(f"matrix size n={n} must be a positive integer, e.g. 1024")
    flops = 2.0 * n**3
    return RaceResult(n, flops, flops / cpu_flop_per_s, launch_s + flops / gpu_flop_per_s)


def race_markdown(sizes: tuple[int, ...] = RACE_SIZES) -> str:
    """The race over a range of sizes as a Markdown table (teaching simulation).

    >>> print(race_markdown((64,)).splitlines()[2])
    | 64 | 5.24e+05 | 0.01049 | 5.0004 | 0.0021 | CPU |
    """
    rows = [
        "| n | FLOPs (2n³) | simulated CPU (ms) | simulated GPU (ms) | speedup (×) | winner |",
        "|---:|---:|---:|---:|---:|---|",
    ]
    for n in sizes:
        r = race(n)
        winner = "GPU" if r.speedup > 1 else "CPU"
        rows.append(
            f"| {n} | {r.flops:.2e} | {r.cpu_s * 1e3:.4g} | {r.gpu_s * 1e3:.5g} | "
            f"{r.speedup:.3g} | {winner} |"
        )
    return "\n".join(rows)


# --- Timing-pitfall lab -------------------------------------------------------


@dataclass(frozen=True)
class StopwatchReading:
    """What a stopwatch around one GPU call reads, with or without the closing barrier."""

    synchronized: bool
    measured_s: float
    cpu_s: float

    @property
    def claimed_speedup(self) -> float:
        """The speedup a reader would report from this reading."""
        return self.cpu_s / self.measured_s


def stopwatch(synchronized: bool, timing: TeachingTiming = TEACHING) -> StopwatchReading:
    """The reading for the source's teaching numbers: CPU 5.0 s, kernel 0.20 s, launch 5 ms.

    Without synchronize the clock stops once the launch returns.

    >>> round(stopwatch(False).claimed_speedup), round(stopwatch(True).claimed_speedup)
    (1000, 24)
    """
    measured = timing.gpu_honest_s if synchronized else timing.gpu_naive_s
    return StopwatchReading(synchronized, measured, timing.cpu_s)


def timing_markdown() -> str:
    """Both stopwatch readings as a table (teaching numbers).

    >>> print(timing_markdown().splitlines()[2])
    | no | 0.005 | 1000× |
    """
    rows = [
        "| closing `synchronize()` | stopwatch reads (s) | speedup a reader would claim |",
        "|---|---:|---:|",
    ]
    for sync in (False, True):
        r = stopwatch(sync)
        rows.append(
            f"| {'yes' if sync else 'no'} | {r.measured_s:.3g} | {r.claimed_speedup:.0f}× |"
        )
    return "\n".join(rows)


# --- Cloud cost calculator ----------------------------------------------------
# The rates, the routes and the dispatch script are data: docs/labs.yml, read and
# checked once per build by gpulesson.site.content.


@dataclass(frozen=True)
class CardRate:
    """An example hourly rate for one card class, in US dollars."""

    card_class: str
    vram_gb: int
    on_demand_usd_per_h: float
    spot_usd_per_h: float


def _labs() -> Any:
    from gpulesson.site import content  # content imports this module's dataclasses

    return content.current().labs


def card_rates() -> tuple[CardRate, ...]:
    """The cost calculator's example rates (``docs/labs.yml``).

    >>> [r.card_class for r in card_rates()][0]
    'T4-class'
    """
    return _labs().rates


def rates_source() -> str:
    """Where the example rates come from, as the calculator states it.

    >>> "example" in rates_source()
    True
    """
    return _labs().rates_source


def run_cost_usd(rate_usd_per_h: float, hours_per_run: float, runs: int) -> float:
    """Rate × hours × runs, with checks on the inputs.

    >>> run_cost_usd(0.60, 3, 10)
    18.0
    >>> run_cost_usd(0.60, -1, 10)
    Traceback (most recent call last):
    ...
    ValueError: hours_per_run=-1 must be positive: enter the length of one run, e.g. 3
    """
    if rate_usd_per_h < 0:
        raise ValueError(f"rate {rate_usd_per_h} $/h must not be negative")
    if hours_per_run <= 0:
        raise ValueError(
            f"hours_per_run={hours_per_run} must be positive: enter the length of one run, e.g. 3"
        )
    if runs < 1:
        raise ValueError(f"runs={runs} must be at least 1")
    return round(rate_usd_per_h * hours_per_run * runs, 6)


def cost_markdown(
    hours_per_run: float = 3, runs: int = 10, rates: tuple[CardRate, ...] | None = None
) -> str:
    """The example rates and a sweep's cost on each card, on demand and on spot.

    >>> print(cost_markdown().splitlines()[2])
    | T4-class | 16 | 0.30 | 0.15 | 9.00 | 4.50 |
    """
    rows = [
        f"| card class (example) | memory (GB) | on-demand ($/h) | spot ($/h) "
        f"| {runs} runs × {hours_per_run:g} h on demand ($) | same on spot ($) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for c in card_rates() if rates is None else rates:
        on = run_cost_usd(c.on_demand_usd_per_h, hours_per_run, runs)
        spot = run_cost_usd(c.spot_usd_per_h, hours_per_run, runs)
        rows.append(
            f"| {c.card_class} | {c.vram_gb} | {c.on_demand_usd_per_h:.2f} | "
            f"{c.spot_usd_per_h:.2f} | {on:.2f} | {spot:.2f} |"
        )
    return "\n".join(rows)


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
    rows = ["| route | cost | setup | best for | watch out for |", "|---|---|---|---|---|"]
    for r in routes():
        rows.append(f"| {r.route} | {r.cost} | {r.setup} | {r.best_for} | {r.watch_out} |")
    return "\n".join(rows)


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
    rows = [
        "| line | NVIDIA workstation | Apple Silicon Mac | CPU-only laptop |",
        "|---|---|---|---|",
    ]
    for line in dispatch_script() if lines is None else lines:
        cells = [
            f"**{o}**" if is_error(o) else o.replace("|", "\\|")
            for o in (line.nvidia, line.mac, line.cpu)
        ]
        rows.append(f"| `{line.code}` | " + " | ".join(cells) + " |")
    return "\n".join(rows)


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
            "cpu_cores": LANES.cpu_cores,
            "gpu_lanes": LANES.gpu_lanes,
            "sizes": list(RACE_SIZES),
        },
        "timing": {
            "cpu_s": TEACHING.cpu_s,
            "kernel_s": TEACHING.kernel_s,
            "launch_s": TEACHING.launch_s,
        },
        "cost": {"source": rates_source(), "rates": [asdict(c) for c in card_rates()]},
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


# --- VRAM budget planner ------------------------------------------------------


@dataclass(frozen=True)
class PlannerInputs:
    """What the planner widget asks for. ``checkpointing`` is 'none' or 'full'."""

    params: float
    recipe: str
    optimizer: str | None = None
    batch: int = 1
    sequence: int = 2048
    hidden: int = 4096
    layers: int = 32
    checkpointing: str = "none"
    trainable_fraction: float | None = None


@dataclass(frozen=True)
class PlannerResult:
    """The planner's stacked bar (bytes per consumer) and which cards hold the run."""

    weights_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    master_bytes: float
    activations_bytes: float
    total_bytes: float
    needed_bytes: float
    fits: tuple[tuple[int, bool], ...]


def plan(data: dict, x: PlannerInputs) -> PlannerResult:
    """Apply the formula of ``gpulesson.memory.budget.planner_data`` (its docstring) to ``x``.

    ``data`` is ``planner_data()``; the planner script runs the same steps on
    the same JSON, and the tests check both against ``budget.estimate``.

    >>> d = {"recipes": {"r": {"weights": 2.0, "gradients": 4.0, "master": 0.0,
    ...   "optimizer": {"adamw": 8.0}, "optimizer_default": "adamw", "act_bytes": 2,
    ...   "adapter_weights": 0.0, "adapters": False, "inference": False}},
    ...   "cards_bytes": [80 * 10**9], "default_trainable_fraction": 0.001,
    ...   "headroom": {"cuda_context_bytes": 10**9, "allocator_slack_fraction": 0.1},
    ...   "activation": {"per_layer_bsh": {"none": 16, "full": 1}}}
    >>> r = plan(d, PlannerInputs(7e9, "r", batch=1, sequence=1, hidden=1, layers=1))
    >>> r.total_bytes / 1e9, r.fits
    (98.000000032, ((80000000000, False),))
    """
    if x.recipe not in data["recipes"]:
        raise ValueError(f"unknown recipe {x.recipe!r}: use one of {', '.join(data['recipes'])}")
    if x.checkpointing not in data["activation"]["per_layer_bsh"]:
        raise ValueError(f"checkpointing={x.checkpointing!r} must be 'none' or 'full'")
    if not x.params > 0:
        raise ValueError(f"params={x.params} must be positive, e.g. 7e9")
    r = data["recipes"][x.recipe]
    if r["adapters"]:
        fraction = (
            data["default_trainable_fraction"]
            if x.trainable_fraction is None
            else x.trainable_fraction
        )
        trainable = x.params * fraction
    else:
        trainable = 0.0 if r["inference"] else x.params
    optimizer = x.optimizer or r["optimizer_default"]
    weights = x.params * r["weights"] + trainable * r["adapter_weights"]
    gradients = trainable * r["gradients"]
    state = trainable * r["optimizer"][optimizer] if optimizer else 0.0
    master = trainable * r["master"]
    per_layer = data["activation"]["per_layer_bsh"][x.checkpointing]
    acts = (
        0.0
        if r["inference"]
        else x.layers * r["act_bytes"] * x.batch * x.sequence * x.hidden * per_layer
    )
    total = weights + gradients + state + master + acts
    head = data["headroom"]
    needed = (total + head["cuda_context_bytes"]) / (1 - head["allocator_slack_fraction"])
    fits = tuple((int(c), needed <= c) for c in data["cards_bytes"])
    return PlannerResult(weights, gradients, state, master, acts, total, needed, fits)


def planner_markdown(data: dict, cases: tuple[PlannerInputs, ...]) -> str:
    """The planner's numbers for a few cases, as the table shown without JavaScript.

    Columns are in GB (10**9 bytes); a card fits when the total plus the CUDA
    context and allocator slack is at most its size.
    """
    cards = [int(c) for c in data["cards_bytes"]]
    head = " | ".join(f"{c / 1e9:g} GB" for c in cards)
    rows = [
        "| case | weights (GB) | gradients (GB) | optimizer state (GB) | master (GB) "
        f"| activations (GB) | total (GB) | {head} |",
        "|---|---:|---:|---:|---:|---:|---:|" + "---|" * len(cards),
    ]
    for x in cases:
        p = plan(data, x)
        label = f"{x.params / 1e9:g}B, {x.recipe}, batch {x.batch}×{x.sequence}"
        if x.checkpointing == "full":
            label += ", checkpointed"
        terms = (p.weights_bytes, p.gradients_bytes, p.optimizer_bytes, p.master_bytes)
        cells = " | ".join(f"{t / 1e9:.1f}" for t in (*terms, p.activations_bytes, p.total_bytes))
        verdicts = " | ".join("fits" if ok else "no" for _, ok in p.fits)
        rows.append(f"| {label} | {cells} | {verdicts} |")
    return "\n".join(rows)


def timing_lab_markdown(measured: object | None = None) -> str:
    """The timing lab's container and its static table.

    ``measured`` is an ``IllusionResult`` from ``gpulesson.timing.bench.async_illusion``
    on a CUDA device; with it the lab shows the build GPU's numbers (kernel =
    honest minus naive time), without it the source's teaching numbers.

    >>> print(timing_lab_markdown().splitlines()[0])
    <div class="gl-lab" data-lab="timing"></div>
    """
    if measured is None:
        return '<div class="gl-lab" data-lab="timing"></div>\n\n' + timing_markdown()
    honest = measured.honest  # type: ignore[attr-defined]
    naive = measured.naive  # type: ignore[attr-defined]
    cpu = measured.cpu  # type: ignore[attr-defined]
    data = {
        "cpu_s": cpu.median_s,
        "launch_s": naive.median_s,
        "kernel_s": max(honest.median_s - naive.median_s, 0.0),
        "label": f"{honest.n}×{honest.n} {honest.dtype} matmul on {honest.device}, medians",
    }
    rows = [
        "| closing `synchronize()` | stopwatch reads (s) | speedup a reader would claim |",
        "|---|---:|---:|",
        f"| no | {naive.median_s:.3g} | {cpu.median_s / naive.median_s:.0f}× |",
        f"| yes | {honest.median_s:.3g} | {cpu.median_s / honest.median_s:.0f}× |",
    ]
    attr = html.escape(json.dumps(data), quote=True)
    return (
        f'<div class="gl-lab" data-lab="timing" data-measured="{attr}"></div>\n\n'
        + "Measured on this build's GPU:\n\n"
        + "\n".join(rows)
    )


def timing_lab_for_this_build() -> str:
    """The timing lab with measured numbers on a CUDA build, teaching numbers elsewhere."""
    import torch

    if not torch.cuda.is_available():
        return timing_lab_markdown()
    from gpulesson.timing.bench import async_illusion, plan_for

    return timing_lab_markdown(async_illusion(plan_for("cuda").illusion_n, "cuda"))


def planner_cases() -> tuple[PlannerInputs, ...]:
    """The cases the planner's static table shows: the sources' three 7B recipes and levers.

    >>> [c.recipe for c in planner_cases()][:3]
    ['bf16', 'fp16-fp32-grads', 'mixed-fp32-master']
    """
    return (
        PlannerInputs(7e9, "bf16", batch=1, sequence=512),
        PlannerInputs(7e9, "fp16-fp32-grads", batch=1, sequence=512),
        PlannerInputs(7e9, "mixed-fp32-master", batch=1, sequence=512),
        PlannerInputs(7e9, "bf16", batch=8, sequence=2048),
        PlannerInputs(7e9, "bf16", batch=8, sequence=2048, checkpointing="full"),
        PlannerInputs(7e9, "qlora", batch=1, sequence=2048),
        PlannerInputs(1.5e9, "fp16-fp32-grads", batch=1, sequence=512),
    )
