"""Suite entry ``profile_step``: the profiling lesson's profiles, kept whole.

``profile_step`` calls :func:`gpulesson.timing.profile.profile_gpt_step`, the function the
lesson calls, with the lesson's step (the course's GPT, 2 blocks, about 2.1 million
parameters, 512 tokens; one CPU thread on a CPU). The plan, by device (:func:`plan_for`):

* on a CPU, the lesson's own: ``schedule(wait=1, warmup=1, active=1)`` with memory
  profiling, then five more profiles of the same step without it (two with ``--quick``),
  whose shares the lesson takes the median of, then a new model's very first step and a
  step after it (:func:`gpulesson.timing.profile.profile_first_and_steady`);
* on a GPU, ``schedule(wait=1, warmup=1, active=N)``, N = 3 with ``--quick`` and 10
  without, memory profiling off, no repeats; on CUDA then a memory snapshot of three steps
  (:func:`gpulesson.timing.profile.snapshot_gpt_step`).

Its rows:

* ``profile_step.step`` (s): wall-clock seconds of each active step, profiler on; its
  params hold the profile's plan and the model's shape;
* ``profile_step.top_op_share`` (ratio): the largest operator's share of the self time
  (on CUDA, of the kernel time), the operator named in ``params["top_op"]``;
* ``profile_step.matmul_share`` (ratio): the matmul operators' share (mm, addmm, bmm,
  baddbmm);
* ``profile_step.busy_share`` (ratio): the operators' self time over the steps' wall time:
  on CUDA, the share of the step the GPU spent running kernels;
* ``profile_step.op.<op>`` (s), one per row of ``key_averages()``: its self time on the
  profile's basis (CPU time; kernel time on CUDA), its exact call count, every time and
  memory column in params (:func:`gpt_profile_measurements`);
* ``profile_step.repeat.<reading>`` (ratio), on a CPU: one sample per repeated profile of
  the matmuls' share, the largest other operator's share and the backward's time over the
  forward's; the value is their median;
* ``profile_step.first.*`` and ``profile_step.steady.*``, on a CPU: the first and the
  steady step, each its step row and its labelled rows (the regions with their time and
  memory);
* ``profile_step.snapshot.*`` (bytes), on CUDA: the snapshot's replayed peak with the live
  memory over the recorded events as its series, the allocator's peak, and the peak of each
  region of the last step.

``profile_trace`` profiles the same step once more with the profiler's Chrome trace kept
(``schedule(wait=1, warmup=1, active=1)``, memory on): its step and every op row as
``profile_trace.*`` (the rows above), ``profile_trace.trace`` (bytes: the compressed
trace's size, its SHA-256 in params), and the trace itself as an
:class:`~gpulesson.results.suite.Attachment` (``profile-step.json.gz``), which a bundle does
not hold and the site build keeps for the page that offers it
(:func:`traced_profile_from_measurements`).

:func:`profile_run_from_measurements`, :func:`first_and_steady_from_measurements` and
:func:`snapshot_from_measurements` read the rows back into the frozen results the
lesson's renderers take. A GPU page reads the first four rows from a reference bundle on
a CPU build (:data:`FACTS`).

>>> [e.name for e in ENTRIES]
['profile_step', 'profile_trace']
>>> active_steps(quick=True), active_steps(quick=False)
(3, 10)
>>> op_slug("autograd::engine::evaluate_function: AddmmBackward0")
'autograd_engine_evaluate_function_addmmbackward0'
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpulesson.memory.gpt2 import GPT2Config, parameter_count
from gpulesson.results.bundle import Measurement, Scalar, Series, Skipped
from gpulesson.results.measurements import single
from gpulesson.results.suite import ATTACHMENT_PARAM, Attachment, Context, SuiteEntry
from gpulesson.timing.profile import (
    MATMUL_OPS,
    PROFILE_BATCH,
    PROFILE_CONFIG,
    REGIONS,
    FirstAndSteady,
    GptStepProfile,
    OpStat,
    SnapshotSummary,
    StepProfile,
    profile_first_and_steady,
    profile_gpt_step,
    snapshot_gpt_step,
)

ENTRY = "profile_step"
FIRST = f"{ENTRY}.first"  # the row prefixes of the first and steady steps, the snapshot
STEADY = f"{ENTRY}.steady"
SNAPSHOT = f"{ENTRY}.snapshot"
# Weights, gradients and AdamW's two moments (16 bytes a parameter), and the activations
# of the lesson's step, which stay under 64 MiB: what the entry must find free.
ACTIVATIONS_BYTES = 64 * 2**20
# Fact the page publishes -> the bundle row it comes from.
FACTS = {
    "profiling.gpu_step_s": "profile_step.step",
    "profiling.gpu_top_share": "profile_step.top_op_share",
    "profiling.gpu_matmul_share": "profile_step.matmul_share",
    "profiling.gpu_busy_share": "profile_step.busy_share",
}
# The readings taken of each repeated profile (``profile_step.repeat.<name>``).
REPEAT_READINGS = ("matmul_share", "top_other_share", "backward_over_forward")
MAX_TEXT = 1000  # an op's name kept in a bundle (GPU kernel names can run longer)
CONFIG_PARAMS = {"vocab": "vocab_size", "seq": "seq_len", "hidden": "hidden"}
CONFIG_PARAMS |= {"heads": "heads", "layers": "layers", "attention": "attention"}


@dataclass(frozen=True)
class ProfilePlan:
    """How the entry profiles on one device: active steps, memory, repeated profiles, and
    whether it profiles the first and steady steps and records a CUDA memory snapshot."""

    active: int
    memory: bool
    repeats: int
    first_step: bool = False
    snapshot: bool = False


def active_steps(quick: bool) -> int:
    """How many steps the profiler records on a GPU."""
    return 3 if quick else 10


def plan_for(context: Context) -> ProfilePlan:
    """The lesson's plan on a CPU (``--quick`` repeats less); the GPU plan elsewhere.

    >>> from gpulesson.results.suite import Device
    >>> cpu = Device("cpu", "cpu", 2**33, 2**32, 0, None)
    >>> plan_for(Context(cpu, quick=False))
    ProfilePlan(active=1, memory=True, repeats=5, first_step=True, snapshot=False)
    >>> plan_for(Context(cpu, quick=True)).repeats
    2
    """
    device = context.device.type
    if device == "cpu":
        repeats = 2 if context.quick else 5
        return ProfilePlan(active=1, memory=True, repeats=repeats, first_step=True)
    return ProfilePlan(
        active=active_steps(context.quick), memory=False, repeats=0, snapshot=device == "cuda"
    )


def needed_bytes() -> int:
    """Memory the step needs: 16 bytes a parameter plus its activations.

    >>> needed_bytes() > 16 * 2_000_000
    True
    """
    return 16 * parameter_count(PROFILE_CONFIG) + ACTIVATIONS_BYTES


def op_slug(name: str) -> str:
    """An op's name as a measurement name part: lower case, runs of other characters ``_``."""
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") or "op"


def _step_params(g: GptStepProfile) -> dict[str, Scalar]:
    p, c = g.profile, g.config
    return {
        "device": p.device,
        "threads": p.threads,
        "basis": p.basis,
        "wait": p.wait,
        "warmup": p.warmup,
        "active_steps": p.active,
        "memory": p.memory,
        "parameters": g.parameters,
        "batch": g.batch,
        "seq": c.seq_len,
        "vocab": c.vocab_size,
        "hidden": c.hidden,
        "heads": c.heads,
        "layers": c.layers,
        "attention": c.attention,
        "optimizer": "AdamW",
    }


def _note(p: StepProfile) -> str:
    return (
        f"torch.profiler over schedule(wait={p.wait}, warmup={p.warmup}, active={p.active}) "
        f"steps, memory {'on' if p.memory else 'off'}."
    )


def gpt_profile_measurements(
    g: GptStepProfile, *, prefix: str, entry: str, kinds: Sequence[str] | None = None
) -> list[Measurement]:
    """A whole profile as rows: ``<prefix>.step`` (its step times and plan), then one
    ``<prefix>.op.<op>`` row per row of ``key_averages()``, in the profile's order; only the
    rows of ``kinds`` (``op``, ``label``, ``kernel``) when given."""
    p = g.profile
    out = [
        Measurement(
            name=f"{prefix}.step",
            entry=entry,
            unit="s",
            value=p.step_s,
            samples=tuple(p.step_samples_s),
            samples_unit="s",
            label="the profiling lesson's GPT training step: seconds per step, profiler on",
            params=_step_params(g),
            note=_note(p) + " Each sample is one step's wall-clock time.",
        )
    ]
    seen: set[str] = set()
    for rank, r in enumerate(p.ops):
        if kinds is not None and r.kind not in kinds:
            continue
        slug = base = op_slug(r.name)
        n = 2
        while slug in seen:
            slug, n = f"{base}_{n}", n + 1
        seen.add(slug)
        own = max(0.0, p.self_s(r))
        out.append(
            Measurement(
                name=f"{prefix}.op.{slug}",
                entry=entry,
                unit="s",
                value=own,
                samples=(own,),
                samples_unit="s",
                label=f"{r.name[:MAX_TEXT]}: {p.basis} over {p.active} active step(s)",
                params={
                    "op": r.name[:MAX_TEXT],
                    "kind": r.kind,
                    "on_device": r.on_device,
                    "rank": rank,
                    "calls": r.calls,
                    "self_cpu_s": r.self_cpu_s,
                    "total_cpu_s": r.total_cpu_s,
                    "self_device_s": r.self_device_s,
                    "total_device_s": r.total_device_s,
                    "self_memory_bytes": r.self_memory_bytes,
                    "total_memory_bytes": r.total_memory_bytes,
                },
                note=_note(p) + " One row of key_averages(): calls exact, times summed.",
            )
        )
    return out


def gpt_profile_from_measurements(
    measurements: Sequence[Measurement], prefix: str
) -> GptStepProfile | None:
    """The :class:`GptStepProfile` the ``<prefix>.*`` rows hold; None without them."""
    by_name = {m.name: m for m in measurements}
    step = by_name.get(f"{prefix}.step")
    if step is None:
        return None
    rows = sorted(
        (m for m in measurements if m.name.startswith(f"{prefix}.op.")),
        key=lambda m: int(m.params["rank"]),
    )
    q = step.params
    ops = tuple(
        OpStat(
            name=str(m.params["op"]),
            kind=str(m.params["kind"]),
            on_device=bool(m.params["on_device"]),
            calls=int(m.params["calls"]),
            self_cpu_s=float(m.params["self_cpu_s"]),
            total_cpu_s=float(m.params["total_cpu_s"]),
            self_device_s=float(m.params["self_device_s"]),
            total_device_s=float(m.params["total_device_s"]),
            self_memory_bytes=int(m.params["self_memory_bytes"]),
            total_memory_bytes=int(m.params["total_memory_bytes"]),
        )
        for m in rows
    )
    profile = StepProfile(
        device=str(q["device"]),
        threads=int(q["threads"]),
        wait=int(q["wait"]),
        warmup=int(q["warmup"]),
        active=int(q["active_steps"]),
        memory=bool(q["memory"]),
        ops=ops,
        step_samples_s=tuple(step.samples),
    )
    shape = {field: q[key] for key, field in CONFIG_PARAMS.items()}
    config = GPT2Config(**{k: v if k == "attention" else int(v) for k, v in shape.items()})
    return GptStepProfile(
        config=config, batch=int(q["batch"]), parameters=int(q["parameters"]), profile=profile
    )


def repeat_readings(p: StepProfile) -> dict[str, float]:
    """What the lesson reads off each repeated profile (fractions, and a ratio of times)."""
    total = {r.name: p.total_s(r) for r in p.regions()}
    return {
        "matmul_share": p.family_share(MATMUL_OPS),
        "top_other_share": p.share(p.top_outside(MATMUL_OPS)),
        "backward_over_forward": total["backward"] / total["forward"],
    }


def profile_measurements(
    g: GptStepProfile, repeats: Sequence[Mapping[str, float]] = ()
) -> list[Measurement]:
    """The profile as bundle rows: step time, top-op, matmul and busy shares, every op row,
    and the readings of the repeated profiles (one sample each)."""
    p = g.profile
    params = _step_params(g)
    note = _note(p)
    step, *ops = gpt_profile_measurements(g, prefix=ENTRY, entry=ENTRY)
    top = p.top
    out = [
        step,
        single(
            p.share(top),
            name=f"{ENTRY}.top_op_share",
            entry=ENTRY,
            unit="ratio",
            label=f"share of the step's {p.basis} in its largest op ({top.name[:MAX_TEXT]})",
            params={**params, "top_op": top.name[:MAX_TEXT]},
            note=note,
        ),
        single(
            p.family_share(MATMUL_OPS),
            name=f"{ENTRY}.matmul_share",
            entry=ENTRY,
            unit="ratio",
            label=f"share of the step's {p.basis} in matmuls ({', '.join(MATMUL_OPS)})",
            params=params,
            note=note,
        ),
        single(
            p.busy_share,
            name=f"{ENTRY}.busy_share",
            entry=ENTRY,
            unit="ratio",
            label=f"ops' {p.basis} over the step's wall time (CUDA: share of the step in kernels)",
            params=params,
            note=note,
        ),
        *ops,
    ]
    for reading in REPEAT_READINGS if repeats else ():
        samples = tuple(r[reading] for r in repeats)
        out.append(
            Measurement(
                name=f"{ENTRY}.repeat.{reading}",
                entry=ENTRY,
                unit="ratio",
                value=statistics.median(samples),
                samples=samples,
                samples_unit="ratio",
                label=f"{reading.replace('_', ' ')}, one sample per repeated profile",
                params={**params, "memory": False, "repeats": len(samples)},
                note="More profiles of the same step without memory tracking; the value is "
                "their median.",
            )
        )
    return out


@dataclass(frozen=True)
class ProfileRun:
    """What ``profile_step`` measured: the profile, and the readings of the repeated ones.

    ``recorded`` is ``step.profile`` (what the profiler recorded); ``repeats`` maps each of
    :data:`REPEAT_READINGS` to one value per repeated profile (empty on a GPU).
    """

    step: GptStepProfile
    recorded: StepProfile
    repeats: Mapping[str, tuple[float, ...]]


def profile_run_from_measurements(measurements: Sequence[Measurement]) -> ProfileRun | None:
    """The :class:`ProfileRun` a bundle's ``profile_step`` rows hold; None without op rows."""
    mine = [m for m in measurements if m.entry == ENTRY]
    g = gpt_profile_from_measurements(mine, ENTRY)
    if g is None or not g.profile.ops:
        return None
    by_name = {m.name: m for m in mine}
    repeats = {
        reading: tuple(by_name[f"{ENTRY}.repeat.{reading}"].samples)
        for reading in REPEAT_READINGS
        if f"{ENTRY}.repeat.{reading}" in by_name
    }
    return ProfileRun(step=g, recorded=g.profile, repeats=repeats)


def run_profile_step(context: Context) -> list[Measurement | Skipped]:
    """Profile the lesson's step on ``context.device`` by :func:`plan_for`; skipped when it
    does not fit."""
    if not context.fits(needed_bytes()):
        return [
            Skipped(
                ENTRY,
                f"needs {needed_bytes() / 2**20:.0f} MiB free, the budget is "
                f"{context.memory_budget_bytes / 2**20:.0f} MiB",
            )
        ]
    plan = plan_for(context)
    device = context.device.type
    g = profile_gpt_step(
        PROFILE_CONFIG, PROFILE_BATCH, device=device, active=plan.active, memory=plan.memory
    )
    repeats = [
        repeat_readings(
            profile_gpt_step(PROFILE_CONFIG, PROFILE_BATCH, device=device, memory=False).profile
        )
        for _ in range(plan.repeats)
    ]
    out: list[Measurement | Skipped] = [*profile_measurements(g, repeats)]
    if plan.first_step:
        pair = profile_first_and_steady(PROFILE_CONFIG, PROFILE_BATCH, device=device)
        out += first_and_steady_measurements(pair)
    if plan.snapshot:
        out += snapshot_measurements(snapshot_gpt_step(PROFILE_CONFIG, PROFILE_BATCH))
    return out


def first_and_steady_measurements(pair: FirstAndSteady) -> list[Measurement]:
    """Both profiles' labelled rows (the regions, the profiler's and the optimizer's labels):
    ``profile_step.first.*`` and ``profile_step.steady.*``."""
    return [
        *gpt_profile_measurements(pair.first, prefix=FIRST, entry=ENTRY, kinds=("label",)),
        *gpt_profile_measurements(pair.steady, prefix=STEADY, entry=ENTRY, kinds=("label",)),
    ]


def first_and_steady_from_measurements(
    measurements: Sequence[Measurement],
) -> FirstAndSteady | None:
    """The :class:`FirstAndSteady` a bundle's ``profile_step.first.*`` and
    ``profile_step.steady.*`` rows hold, or None."""
    mine = [m for m in measurements if m.entry == ENTRY]
    first = gpt_profile_from_measurements(mine, FIRST)
    steady = gpt_profile_from_measurements(mine, STEADY)
    if first is None or steady is None:
        return None
    return FirstAndSteady(first=first, steady=steady)


def snapshot_measurements(s: SnapshotSummary) -> list[Measurement]:
    """A snapshot as rows: the replayed peak (its curve as the series), the allocator's peak,
    and each region's peak in the last step; the counts and sizes in params."""
    params: dict[str, Scalar] = {
        "events": s.events,
        "alloc_events": s.alloc_events,
        "baseline_bytes": s.baseline_bytes,
        "pickle_bytes": s.pickle_bytes,
        "steps": s.steps,
        "curve_stride": s.curve_stride,
    }
    curve = (
        Series(
            x_label="recorded event (alloc, free, segment), in order",
            x_unit="event",
            y_unit="bytes",
            points=tuple((float(x), float(y)) for x, y in s.curve),
        )
        if s.curve
        else None
    )
    out = [
        Measurement(
            name=f"{SNAPSHOT}.replayed_peak",
            entry=ENTRY,
            unit="bytes",
            value=float(s.peak_bytes),
            samples=(float(s.peak_bytes),),
            samples_unit="bytes",
            label="peak live memory, replaying the snapshot's allocs and completed frees",
            params=params,
            note="The series is the live bytes after each recorded event (after every "
            "curve_stride-th event, with the largest value in between, when there are more "
            "events than a series holds).",
            series=curve,
        ),
        single(
            s.max_allocated_bytes,
            name=f"{SNAPSHOT}.max_allocated",
            entry=ENTRY,
            unit="bytes",
            label="torch.cuda.max_memory_allocated() in the last (steady) step",
            params=params,
        ),
    ]
    for region, peak in s.phase_peaks_bytes.items():
        out.append(
            single(
                peak,
                name=f"{SNAPSHOT}.region.{op_slug(region)}",
                entry=ENTRY,
                unit="bytes",
                label=f"peak allocated in {region} of the last step",
                params={**params, "region": region},
            )
        )
    return out


def snapshot_from_measurements(measurements: Sequence[Measurement]) -> SnapshotSummary | None:
    """The :class:`SnapshotSummary` a bundle's ``profile_step.snapshot.*`` rows hold, or None."""
    by_name = {m.name: m for m in measurements if m.entry == ENTRY}
    peak = by_name.get(f"{SNAPSHOT}.replayed_peak")
    top = by_name.get(f"{SNAPSHOT}.max_allocated")
    if peak is None or top is None:
        return None
    regions = {
        str(m.params["region"]): int(m.value)
        for m in by_name.values()
        if m.name.startswith(f"{SNAPSHOT}.region.")
    }
    order = [r for r in REGIONS if r in regions] + [r for r in regions if r not in REGIONS]
    q = peak.params
    return SnapshotSummary(
        events=int(q["events"]),
        alloc_events=int(q["alloc_events"]),
        baseline_bytes=int(q["baseline_bytes"]),
        peak_bytes=int(peak.value),
        max_allocated_bytes=int(top.value),
        phase_peaks_bytes={r: regions[r] for r in order},
        pickle_bytes=int(q["pickle_bytes"]),
        steps=int(q["steps"]),
        curve=tuple((int(x), int(y)) for x, y in peak.series.points) if peak.series else (),
        curve_stride=int(q["curve_stride"]),
    )


TRACE_ENTRY = "profile_trace"
TRACE_FILE = "profile-step.json.gz"


def run_profile_trace(context: Context) -> list[Measurement | Skipped | Attachment]:
    """Profile the lesson's step once with its Chrome trace: the step and op rows, the
    trace's size and hash, and the trace as an attachment; skipped when it does not fit."""
    if not context.fits(needed_bytes()):
        return [Skipped(TRACE_ENTRY, f"needs {needed_bytes() / 2**20:.0f} MiB free")]
    g = profile_gpt_step(
        PROFILE_CONFIG, PROFILE_BATCH, device=context.device.type, memory=True, trace=True
    )
    trace = g.profile.trace_gz or b""
    rows = gpt_profile_measurements(g, prefix=TRACE_ENTRY, entry=TRACE_ENTRY)
    size = single(
        len(trace),
        name=f"{TRACE_ENTRY}.trace",
        entry=TRACE_ENTRY,
        unit="bytes",
        label="the profiled step's Chrome trace, gzip-compressed",
        params={ATTACHMENT_PARAM: TRACE_FILE, "sha256": hashlib.sha256(trace).hexdigest()},
        note="The file is kept by the site build for the page that offers it, not in a bundle.",
    )
    return [*rows, size, Attachment(TRACE_ENTRY, TRACE_FILE, trace)]


def traced_profile_from_measurements(
    measurements: Sequence[Measurement], files: Mapping[str, bytes]
) -> GptStepProfile | None:
    """The traced profile ``profile_trace`` rows hold, its trace from ``files`` (by name);
    None without the rows, or when the trace is missing or is not the file they name.

    >>> traced_profile_from_measurements([], {}) is None
    True
    """
    g = gpt_profile_from_measurements(measurements, TRACE_ENTRY)
    named = next((m for m in measurements if m.name == f"{TRACE_ENTRY}.trace"), None)
    if g is None or named is None:
        return None
    trace = files.get(str(named.params[ATTACHMENT_PARAM]))
    if trace is None or hashlib.sha256(trace).hexdigest() != named.params["sha256"]:
        return None
    return dataclasses.replace(g, profile=dataclasses.replace(g.profile, trace_gz=trace))


ENTRIES = (
    SuiteEntry(
        name=ENTRY,
        description="the profiling lesson's training step under torch.profiler: step time, "
        "top-op and matmul shares, busy share, every op row (CPU: the first step too; "
        "CUDA: a memory snapshot)",
        applies=lambda device: True,
        needs="nothing",
        run=run_profile_step,
    ),
    SuiteEntry(
        name=TRACE_ENTRY,
        description="the profiling lesson's step profiled once more with its Chrome trace: "
        "step and op rows, the trace's size (the site build keeps the file)",
        applies=lambda device: True,
        needs="nothing",
        run=run_profile_trace,
    ),
)
