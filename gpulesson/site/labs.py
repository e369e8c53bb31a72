"""Data and static tables for the interactive labs.

Each lab has a compute function (the numbers), a ``*_markdown`` renderer (the
table a reader sees without JavaScript) and an entry in :func:`labs_data` (the
JSON the lab script in ``docs/javascripts/labs.js`` reads, so the script and the
table share one set of inputs). The throughput race and the timing lab use the
source lesson's teaching rates (computed in ``gpulesson.timing.teaching``); the
cost calculator's example rates are package data beside the datasheets
(``gpulesson/results/example_rates.json``, which ``gpulesson budget --gpu`` prices
with too); the routes and the dispatch script are data in ``docs/labs.yml``.
Nothing here is a measurement.

>>> race(5000).gpu_s < race(5000).cpu_s
True
>>> race(16).gpu_s > race(16).cpu_s
True
"""

from __future__ import annotations

import html
import json
import math
from dataclasses import asdict, dataclass, replace
from typing import Any

from gpulesson.memory.budget import TransformerShape, estimate, fits
from gpulesson.memory.capacity import CARDS_GB
from gpulesson.memory.compute import MAX_PRICE_USD_PER_GPU_HOUR
from gpulesson.memory.recipes import get_recipe
from gpulesson.results.datasheets import example_rates
from gpulesson.tables import markdown_table
from gpulesson.timing.results import IllusionResult
from gpulesson.timing.teaching import SOURCE_LAUNCH_S, TeachingTiming
from gpulesson.units import GB

# The teaching figures live once, in gpulesson.timing.teaching: the race runs at the
# source's example CPU rate (5.0 s for a 5000 x 5000 matmul) against a T4's cited fp32
# peak (the source's 0.20 s kernel would be slower than that card) and pays a cited
# launch cost per GPU call (10 µs, the upper end of the 5-10 µs a launch costs from
# PyTorch eager), not the source's 5 ms.
TEACHING = TeachingTiming()
TEACHING_CPU_FLOP_PER_S = TEACHING.cpu_flop_per_s
TEACHING_GPU_FLOP_PER_S = TEACHING.gpu_flop_per_s
TEACHING_LAUNCH_S = TEACHING.launch_s
RACE_SIZES = (8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)


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

    @property
    def winner(self) -> str:
        """'GPU' when the GPU is faster, else 'CPU'."""
        return "GPU" if self.speedup > 1 else "CPU"


def race(
    n: int,
    cpu_flop_per_s: float = TEACHING_CPU_FLOP_PER_S,
    gpu_flop_per_s: float = TEACHING_GPU_FLOP_PER_S,
    launch_s: float = TEACHING_LAUNCH_S,
) -> RaceResult:
    """Simulate one n×n matmul (2n³ FLOPs) on the teaching CPU and GPU.

    The GPU pays ``launch_s`` once per call, so it loses at small sizes.

    >>> r = race(5000)
    >>> round(r.cpu_s, 2), round(r.gpu_s, 5), round(r.speedup)
    (5.0, 0.03087, 162)
    """
    if n < 1:
        raise ValueError(f"matrix size n={n} must be a positive integer, e.g. 1024")
    flops = 2.0 * n**3
    return RaceResult(
        n=n,
        flops=flops,
        cpu_s=flops / cpu_flop_per_s,
        gpu_s=launch_s + flops / gpu_flop_per_s,
    )


def race_crossover_n(
    cpu_flop_per_s: float = TEACHING_CPU_FLOP_PER_S,
    gpu_flop_per_s: float = TEACHING_GPU_FLOP_PER_S,
    launch_s: float = TEACHING_LAUNCH_S,
) -> float:
    """The size at which both simulated times are equal; above it the GPU wins.

    Solve 2n³/cpu = launch + 2n³/gpu: n = (launch / (2 (1/cpu - 1/gpu)))^(1/3).

    >>> round(race_crossover_n(), 1), round(race_crossover_n(launch_s=5e-3))
    (63.1, 501)
    """
    if not gpu_flop_per_s > cpu_flop_per_s:
        raise ValueError("the GPU rate must be above the CPU rate for the GPU ever to win")
    return (launch_s / (2 * (1 / cpu_flop_per_s - 1 / gpu_flop_per_s))) ** (1 / 3)


@dataclass(frozen=True)
class RaceTable:
    """The race at several sizes, with the exact crossover and the source's 5 ms crossover."""

    rows: tuple[RaceResult, ...]
    launch_s: float
    crossover_n: float
    source_crossover_n: float
    cpu_flop_per_s: float = TEACHING_CPU_FLOP_PER_S

    @property
    def first_gpu_win_n(self) -> int | None:
        """The smallest tabulated size the GPU wins (it keeps winning above it)."""
        return next((r.n for r in self.rows if r.winner == "GPU"), None)


def race_table(
    sizes: tuple[int, ...] = RACE_SIZES, cpu_flop_per_s: float = TEACHING_CPU_FLOP_PER_S
) -> RaceTable:
    """The race over ``sizes``, with where the GPU starts to win.

    ``cpu_flop_per_s`` is the CPU's rate: a lesson passes the best rate its own sweep
    measured on the machine that built the page; the GPU runs at a T4's datasheet fp32 peak.

    >>> t = race_table((32, 64, 128))
    >>> [r.winner for r in t.rows], t.first_gpu_win_n
    (['CPU', 'GPU', 'GPU'], 64)
    >>> race_table((64, 128), cpu_flop_per_s=2e11).first_gpu_win_n  # a faster CPU holds longer
    128
    """
    if not (math.isfinite(cpu_flop_per_s) and 0 < cpu_flop_per_s < TEACHING_GPU_FLOP_PER_S):
        raise ValueError(
            f"cpu_flop_per_s={cpu_flop_per_s!r}: give a positive rate below the GPU's "
            f"{TEACHING_GPU_FLOP_PER_S:.3g} FLOP/s (the CPU's measured matmul rate)"
        )
    return RaceTable(
        rows=tuple(race(n, cpu_flop_per_s=cpu_flop_per_s) for n in sizes),
        launch_s=TEACHING_LAUNCH_S,
        crossover_n=race_crossover_n(cpu_flop_per_s=cpu_flop_per_s),
        source_crossover_n=race_crossover_n(
            cpu_flop_per_s=cpu_flop_per_s, launch_s=SOURCE_LAUNCH_S
        ),
        cpu_flop_per_s=cpu_flop_per_s,
    )


def race_lab_html(table: RaceTable) -> str:
    """The race lab's container, carrying the CPU rate the table above it used.

    >>> race_lab_html(race_table((64,), cpu_flop_per_s=1.5e11))
    '<div class="gl-lab" data-lab="race" data-cpu-flop-per-s="150000000000.0"></div>'
    """
    return (
        f'<div class="gl-lab" data-lab="race" '
        f'data-cpu-flop-per-s="{float(table.cpu_flop_per_s)!r}"></div>'
    )


def race_markdown(table: RaceTable) -> str:
    """The race as a Markdown table (teaching simulation), with the computed crossover.

    >>> print(race_markdown(race_table((64,))).splitlines()[2])
    | 64 | 5.24e+05 | 10.5 | 10.1 | 1.04 | GPU |
    """

    def us(seconds: float) -> str:
        value = seconds * 1e6
        return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"

    header = (
        "n",
        "FLOPs (2n³)",
        "simulated CPU (µs)",
        "simulated GPU (µs)",
        "speedup (×)",
        "winner",
    )
    cells = [
        (str(r.n), f"{r.flops:.2e}", us(r.cpu_s), us(r.gpu_s), f"{r.speedup:.3g}", r.winner)
        for r in table.rows
    ]
    rows = [
        markdown_table(header, cells, align="rrrrrl"),
        "",
        f"With {table.launch_s * 1e6:g} µs of launch per GPU call, the simulated times are "
        f"equal at n ≈ {table.crossover_n:.0f}, and the GPU wins from n = "
        f"{table.first_gpu_win_n} on in this table. With the source lesson's "
        f"{SOURCE_LAUNCH_S * 1e3:g} ms launch the crossover would sit at n ≈ "
        f"{table.source_crossover_n:.0f}: a launch cost {SOURCE_LAUNCH_S / table.launch_s:,.0f} "
        f"times too large moves it {table.source_crossover_n / table.crossover_n:.0f} times too "
        "far, because the work grows as n³.",
    ]
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


@dataclass(frozen=True)
class TimingLabInputs:
    """The three times the timing lab animates, and where they come from.

    ``measured`` is True when they were measured on the build's GPU (the lab
    then shows them), False for the teaching figures.
    """

    cpu_s: float
    launch_s: float
    kernel_s: float
    label: str
    measured: bool

    @property
    def readings(self) -> tuple[StopwatchReading, StopwatchReading]:
        """The stopwatch without, then with, the closing barrier."""
        return (stopwatch(False, self), stopwatch(True, self))


def timing_lab_inputs(measured: IllusionResult | None = None) -> TimingLabInputs:
    """The teaching figures, or (given ``async_illusion`` on a GPU) the measured medians.

    Measured: the launch is the naive median, the kernel what the closing barrier
    waited for (honest minus naive), the CPU time the CPU's median.

    >>> t = timing_lab_inputs()
    >>> t.launch_s, round(t.kernel_s, 5), t.measured
    (1e-05, 0.03086, False)
    """
    if measured is None:
        return TimingLabInputs(
            cpu_s=TEACHING.cpu_s,
            launch_s=TEACHING.launch_s,
            kernel_s=TEACHING.kernel_s,
            label=f"teaching figures, one {TEACHING.n}×{TEACHING.n} fp32 matmul",
            measured=False,
        )
    honest = measured.honest
    return TimingLabInputs(
        cpu_s=measured.cpu.median_s,
        launch_s=measured.naive.median_s,
        kernel_s=measured.kernel_s,
        label=f"{honest.n}×{honest.n} {honest.dtype} matmul on {honest.device}, medians",
        measured=True,
    )


def stopwatch(synchronized: bool, inputs: TimingLabInputs | None = None) -> StopwatchReading:
    """The reading: launch plus kernel with the closing barrier, the launch alone without.

    >>> round(stopwatch(False).claimed_speedup), round(stopwatch(True).claimed_speedup)
    (500000, 162)
    """
    t = inputs or timing_lab_inputs()
    measured_s = t.launch_s + t.kernel_s if synchronized else t.launch_s
    return StopwatchReading(synchronized=synchronized, measured_s=measured_s, cpu_s=t.cpu_s)


def timing_markdown(readings: tuple[StopwatchReading, ...]) -> str:
    """Stopwatch readings as a table.

    >>> print(timing_markdown(timing_lab_inputs().readings).splitlines()[2])
    | no | 0.01 | 500,000× |
    """
    return markdown_table(
        ("closing `synchronize()`", "stopwatch reads (ms)", "speedup a reader would claim"),
        [
            (
                "yes" if r.synchronized else "no",
                f"{r.measured_s * 1e3:,.3g}",
                f"{r.claimed_speedup:,.0f}×",
            )
            for r in readings
        ],
    )


# --- Cloud cost calculator ----------------------------------------------------
# The example rates have one home, gpulesson/results/example_rates.json (read by
# gpulesson.results.datasheets.example_rates, and by gpulesson budget --gpu for its
# default price); the routes and the dispatch script are docs/labs.yml, read and
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
                c.card_class,
                str(c.vram_gb),
                f"{c.on_demand_usd_per_h:.2f}",
                f"{c.spot_usd_per_h:.2f}",
                f"{on:.2f}",
                f"{spot:.2f}",
            )
        )
    return markdown_table(header, rows)


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


# --- VRAM budget planner ------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class PlannerInputs:
    """What the planner widget asks for: a model, a recipe and one micro-batch on one GPU.

    ``checkpointing`` is 'none' or 'full', ``attention`` 'sdpa' or 'eager';
    ``trainable_fraction`` applies to the LoRA and QLoRA recipes only.
    """

    params: float
    recipe: str
    optimizer: str | None = None
    batch: int = 1
    sequence: int = 2048
    hidden: int = 4096
    heads: int = 32
    layers: int = 32
    vocab: int = 32000
    attention: str = "sdpa"
    checkpointing: str = "none"
    trainable_fraction: float | None = None


@dataclass(frozen=True, kw_only=True)
class CardFit:
    """Whether the run fits one card, with the headroom rule applied."""

    card_bytes: int
    fits: bool


@dataclass(frozen=True, kw_only=True)
class PlannerResult:
    """The planner's stacked bar: what is alive at the step's peak, by consumer, in bytes.

    The consumers sum to ``total_bytes`` (the peak of ``peak_phase``);
    ``needed_bytes`` adds the CUDA context and allocator slack.
    """

    inputs: PlannerInputs
    peak_phase: str
    weights_bytes: int
    master_bytes: int
    optimizer_bytes: int
    gradients_bytes: int
    activations_bytes: int
    temporaries_bytes: int
    kv_cache_bytes: int
    total_bytes: int
    needed_bytes: int
    fits: tuple[CardFit, ...]


def plan(x: PlannerInputs) -> PlannerResult:
    """The planner's numbers for ``x``: :func:`gpulesson.memory.budget.estimate`, alive at the peak.

    The widget computes the same from ``planner.json`` (the estimate's own
    coefficient tables); the browser test compares both on many inputs.

    >>> r = plan(PlannerInputs(params=7e9, recipe="bf16", batch=1, sequence=512))
    >>> r.peak_phase, r.weights_bytes, [c.fits for c in r.fits]
    ('optimizer step', 14000000000, [False, False, False, False, False])
    """
    recipe = get_recipe(x.recipe)
    shape = TransformerShape(
        vocab=x.vocab,
        seq=x.sequence,
        hidden=x.hidden,
        heads=x.heads,
        layers=x.layers,
        batch=x.batch,
    )
    budget = estimate(
        x.params,
        preset=x.recipe,
        shape=shape,
        optimizer=None if recipe.inference else x.optimizer,
        attention=x.attention,
        checkpointing=x.checkpointing,
        trainable_fraction=x.trainable_fraction if recipe.adapters else None,
    )
    alive = next(p for p in budget.phases if p.name == budget.peak_phase).alive_bytes
    return PlannerResult(
        inputs=x,
        peak_phase=budget.peak_phase,
        weights_bytes=alive.get("weights", 0),
        master_bytes=alive.get("master weights", 0),
        optimizer_bytes=alive.get("optimizer state", 0),
        gradients_bytes=alive.get("gradients", 0),
        activations_bytes=alive.get("activations", 0),
        temporaries_bytes=alive.get("temporaries", 0),
        kv_cache_bytes=alive.get("KV cache", 0),
        total_bytes=budget.total_bytes,
        needed_bytes=budget.with_headroom_bytes,
        fits=tuple(CardFit(card_bytes=c * GB, fits=fits(budget, c * GB).fits) for c in CARDS_GB),
    )


def planner_markdown(results: tuple[PlannerResult, ...]) -> str:
    """The planner's numbers for a few cases, as the table shown without JavaScript.

    Columns are in GB (10**9 bytes): what is alive at the step's peak, then the
    peak; a card fits when the peak plus the CUDA context and allocator slack is
    at most its size.
    """
    cards = [c.card_bytes for c in results[0].fits] if results else []
    header = [
        "case",
        "peak phase",
        "weights (GB)",
        "master (GB)",
        "optimizer state (GB)",
        "gradients (GB)",
        "activations (GB)",
        "temporaries (GB)",
        "KV cache (GB)",
        "peak (GB)",
        *(f"{c / 1e9:g} GB" for c in cards),
    ]
    rows = []
    for p in results:
        x = p.inputs
        label = f"{x.params / 1e9:g}B, {x.recipe}, batch {x.batch}×{x.sequence}"
        if x.checkpointing == "full":
            label += ", checkpointed"
        terms = (
            p.weights_bytes,
            p.master_bytes,
            p.optimizer_bytes,
            p.gradients_bytes,
            p.activations_bytes,
            p.temporaries_bytes,
            p.kv_cache_bytes,
            p.total_bytes,
        )
        cells = [f"{t / 1e9:.1f}" for t in terms]
        verdicts = ["fits" if c.fits else "no" for c in p.fits]
        rows.append([label, p.peak_phase, *cells, *verdicts])
    return markdown_table(header, rows, align="ll" + "r" * 8 + "l" * len(cards))


def timing_lab_markdown(inputs: TimingLabInputs) -> str:
    """The timing lab's container and its static table (measured inputs travel to the script).

    >>> print(timing_lab_markdown(timing_lab_inputs()).splitlines()[0])
    <div class="gl-lab" data-lab="timing"></div>
    """
    table = timing_markdown(inputs.readings)
    if not inputs.measured:
        return '<div class="gl-lab" data-lab="timing"></div>\n\n' + table
    data = {
        "cpu_s": inputs.cpu_s,
        "launch_s": inputs.launch_s,
        "kernel_s": inputs.kernel_s,
        "label": inputs.label,
    }
    attr = html.escape(json.dumps(data), quote=True)
    return (
        f'<div class="gl-lab" data-lab="timing" data-measured="{attr}"></div>\n\n'
        + f"Measured on this build's GPU ({inputs.label}):\n\n"
        + table
    )


def planner_cases() -> tuple[PlannerInputs, ...]:
    """The cases the planner's static table shows: the sources' three 7B recipes and levers.

    Shaped like a 7B model (vocabulary 32,000, hidden 4,096, 32 heads, 32 layers);
    the 1.5B case like GPT-2 XL (vocabulary 50,257, hidden 1,600, 25 heads, 48 layers).

    >>> [c.recipe for c in planner_cases()][:4]
    ['amp', 'bf16', 'fp16-fp32-grads', 'mixed-fp32-master']
    """
    return (
        PlannerInputs(params=7e9, recipe="amp", batch=1, sequence=512),
        PlannerInputs(params=7e9, recipe="bf16", batch=1, sequence=512),
        PlannerInputs(params=7e9, recipe="fp16-fp32-grads", batch=1, sequence=512),
        PlannerInputs(params=7e9, recipe="mixed-fp32-master", batch=1, sequence=512),
        PlannerInputs(params=7e9, recipe="bf16", batch=8, sequence=2048),
        PlannerInputs(params=7e9, recipe="bf16", batch=8, sequence=2048, checkpointing="full"),
        PlannerInputs(params=7e9, recipe="qlora", batch=1, sequence=2048),
        PlannerInputs(
            params=1.5e9,
            recipe="fp16-fp32-grads",
            batch=1,
            sequence=512,
            vocab=50257,
            hidden=1600,
            heads=25,
            layers=48,
        ),
    )
