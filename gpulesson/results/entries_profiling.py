"""Suite entry ``profile_step``: the profiling lesson's training step, profiled on the device.

It calls :func:`gpulesson.timing.profile.profile_gpt_step`, the function the lesson "Where
did the time go?" calls, with the lesson's step (the course's GPT, 2 blocks, about 2.1
million parameters, 512 tokens; one CPU thread on a CPU) and ``schedule(wait=1, warmup=1,
active=N)``, N = 3 with ``--quick`` and 10 without, memory profiling off. Four rows:

* ``profile_step.step`` (s): wall-clock seconds of each active step, profiler on;
* ``profile_step.top_op_share`` (ratio): the largest operator's share of the self time
  (on CUDA, of the kernel time), the operator named in ``params["top_op"]``;
* ``profile_step.matmul_share`` (ratio): the matmul operators' share (mm, addmm, bmm,
  baddbmm);
* ``profile_step.busy_share`` (ratio): the operators' self time over the steps' wall time:
  on CUDA, the share of the step the GPU spent running kernels.

The page reads them from a reference bundle on a CPU build (:data:`FACTS`).

>>> [e.name for e in ENTRIES]
['profile_step']
>>> active_steps(quick=True), active_steps(quick=False)
(3, 10)
"""

from __future__ import annotations

from gpulesson.memory.gpt2 import parameter_count
from gpulesson.results.bundle import Measurement, Scalar, Skipped
from gpulesson.results.measurements import single
from gpulesson.results.suite import Context, SuiteEntry
from gpulesson.timing.profile import (
    MATMUL_OPS,
    PROFILE_BATCH,
    PROFILE_CONFIG,
    GptStepProfile,
    profile_gpt_step,
)

ENTRY = "profile_step"
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


def active_steps(quick: bool) -> int:
    """How many steps the profiler records."""
    return 3 if quick else 10


def needed_bytes() -> int:
    """Memory the step needs: 16 bytes a parameter plus its activations.

    >>> needed_bytes() > 16 * 2_000_000
    True
    """
    return 16 * parameter_count(PROFILE_CONFIG) + ACTIVATIONS_BYTES


def profile_measurements(g: GptStepProfile) -> list[Measurement]:
    """The profile as bundle rows: step time, top-op share, matmul share, busy share."""
    p, c = g.profile, g.config
    params: dict[str, Scalar] = {
        "device": p.device,
        "threads": p.threads,
        "basis": p.basis,
        "active_steps": p.active,
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
    note = "torch.profiler over schedule(wait=1, warmup=1, active) steps, memory off."
    step = Measurement(
        name=f"{ENTRY}.step",
        entry=ENTRY,
        unit="s",
        value=p.step_s,
        samples=tuple(p.step_samples_s),
        samples_unit="s",
        label="the profiling lesson's GPT training step: seconds per step, profiler on",
        params=params,
        note=note + " Each sample is one step's wall-clock time.",
    )
    top = p.top
    return [
        step,
        single(
            p.share(top),
            name=f"{ENTRY}.top_op_share",
            entry=ENTRY,
            unit="ratio",
            label=f"share of the step's {p.basis} in its largest op ({top.name})",
            params={**params, "top_op": top.name},
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
    ]


def run_profile_step(context: Context) -> list[Measurement | Skipped]:
    """Profile the lesson's step on ``context.device``; skipped when it does not fit."""
    if not context.fits(needed_bytes()):
        return [
            Skipped(
                ENTRY,
                f"needs {needed_bytes() / 2**20:.0f} MiB free, the budget is "
                f"{context.memory_budget_bytes / 2**20:.0f} MiB",
            )
        ]
    g = profile_gpt_step(
        PROFILE_CONFIG,
        PROFILE_BATCH,
        device=context.device.type,
        active=active_steps(context.quick),
        memory=False,
    )
    return list(profile_measurements(g))


ENTRIES = (
    SuiteEntry(
        name=ENTRY,
        description="the profiling lesson's training step under torch.profiler: step time, "
        "top-op and matmul shares, busy share",
        applies=lambda device: True,
        needs="nothing",
        run=run_profile_step,
    ),
)
