"""Bytes each GPU sends per optimizer step under data parallelism and ZeRO sharding.

A collective over N GPUs, as NCCL's ring (and nccl-tests' bus bandwidth) counts it,
makes each GPU send:

* an **all-reduce** of S bytes: 2(N-1)/N x S (a reduce-scatter, then an all-gather);
* a **reduce-scatter** or an **all-gather** of S bytes (S is the whole tensor, every
  shard together): (N-1)/N x S.

:func:`step_comm` adds up the collectives of one optimizer step, for each ZeRO stage
(Rajbhandari et al., arXiv:1910.02054, section 7; FSDP is stage 3, Zhao et al.,
arXiv:2304.11277), with G the gradient bytes and P the parameter bytes of the whole
model, and A micro-batches of gradient accumulation per step:

* stage 0 (plain data parallel, DDP): one all-reduce of the gradients per step
  (DDP's ``no_sync`` skips it in the other micro-batches);
* stages 1 and 2: a reduce-scatter of the gradients (once per step for stage 1, which
  keeps the whole gradient; once per micro-batch for stage 2, which keeps only its shard
  of it), then an all-gather of the updated parameters after the step. With gradients
  and parameters in one dtype that is the same volume as stage 0 (the paper's section
  7.2.1);
* stage 3: in every micro-batch, an all-gather of the parameters in the forward pass,
  another in the backward pass, and a reduce-scatter of the gradients: 1.5 x stage 0
  with one dtype (section 7.2.2).

The algorithm is arithmetic on byte counts; the trade-off is that it prices volume, not
time: latency per call, overlap with compute and the links' topology are left to the
lesson that measures them. :func:`link_times` sets a byte count against the NVLink and
PCIe figures of the datasheet table (one direction, half the stated figure), and
:func:`zero_tradeoffs` puts each stage's memory per GPU beside its bytes. Used by the lesson
``lessons/multi-gpu.md`` and by ``gpulesson budget --gpus N --zero S``
(``comm_bytes_per_step``).

>>> c = step_comm(gpus=8, zero=3, gradient_bytes=14e9, parameter_bytes=14e9)
>>> c.sent_bytes / 1e9, c.ratio_to_data_parallel
(36.75, 1.5)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from gpulesson.memory.budget import Budget, estimate, persistent_terms
from gpulesson.memory.recipes import DTYPE_BYTES
from gpulesson.results import datasheets

COLLECTIVES = ("all-reduce", "reduce-scatter", "all-gather")
ZERO_STAGES = (0, 1, 2, 3)


def _check_gpus(gpus: int) -> int:
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise ValueError(f"gpus={gpus!r} must be a whole number of GPUs, at least 1, e.g. 8")
    return gpus


def _check_bytes(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name}={value!r} must be a number of bytes, e.g. 14e9")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name}={value!r} must be a finite number of bytes, at least 0")
    return float(value)


def sent_fraction(collective: str, gpus: int) -> float:
    """The share of the whole tensor each GPU sends in one ring ``collective``.

    2(N-1)/N for an all-reduce; (N-1)/N for a reduce-scatter or an all-gather; nccl-tests
    multiplies the algorithm bandwidth by the same factor to get the bus bandwidth.

    >>> sent_fraction("all-reduce", 8), sent_fraction("all-gather", 8)
    (1.75, 0.875)
    >>> sent_fraction("broadcast", 8)
    Traceback (most recent call last):
    ...
    ValueError: collective 'broadcast' must be one of all-reduce, reduce-scatter, all-gather
    """
    if collective not in COLLECTIVES:
        raise ValueError(f"collective {collective!r} must be one of {', '.join(COLLECTIVES)}")
    n = _check_gpus(gpus)
    share = (n - 1) / n
    return 2 * share if collective == "all-reduce" else share


def ring_all_reduce_bytes(message_bytes: float, gpus: int) -> float:
    """Bytes each GPU sends in a ring all-reduce of ``message_bytes``: 2(N-1)/N x S.

    >>> ring_all_reduce_bytes(1000, 2), ring_all_reduce_bytes(1000, 4)
    (1000.0, 1500.0)
    """
    return sent_fraction("all-reduce", gpus) * _check_bytes("message_bytes", message_bytes)


@dataclass(frozen=True, kw_only=True)
class RingRow:
    """One GPU count: the share of the message each GPU sends in an all-reduce, and bytes."""

    gpus: int
    share: float
    message_bytes: float
    sent_bytes: float


def ring_rows(message_bytes: float, gpus: tuple[int, ...]) -> tuple[RingRow, ...]:
    """What each GPU sends in a ring all-reduce of ``message_bytes``, for several GPU counts.

    >>> [(r.gpus, r.share) for r in ring_rows(1e9, (2, 4, 8))]
    [(2, 1.0), (4, 1.5), (8, 1.75)]
    """
    message = _check_bytes("message_bytes", message_bytes)
    return tuple(
        RingRow(
            gpus=n,
            share=sent_fraction("all-reduce", n),
            message_bytes=message,
            sent_bytes=ring_all_reduce_bytes(message, n),
        )
        for n in gpus
    )


@dataclass(frozen=True, kw_only=True)
class Collective:
    """One collective of a step: what it moves, when, how often, and what each GPU sends.

    ``message_bytes`` is the whole tensor (every shard together); ``sent_bytes`` is what
    one GPU sends for all ``times`` calls of a step.
    """

    collective: str
    tensor: str
    phase: str
    times: int
    message_bytes: int
    sent_bytes: int


@dataclass(frozen=True, kw_only=True)
class StepComm:
    """The collectives of one optimizer step on N GPUs, and the bytes each GPU sends."""

    gpus: int
    zero_stage: int
    accumulation_steps: int
    gradient_bytes: int
    parameter_bytes: int
    collectives: tuple[Collective, ...]

    @property
    def sent_bytes(self) -> int:
        """Every collective of the step together: the bytes one GPU sends per step."""
        return sum(c.sent_bytes for c in self.collectives)

    @property
    def data_parallel_bytes(self) -> int:
        """What plain data parallel (stage 0) sends for the same gradients: 2(N-1)/N x G."""
        return round(ring_all_reduce_bytes(self.gradient_bytes, self.gpus))

    @property
    def ratio_to_data_parallel(self) -> float:
        """This step's bytes over plain data parallel's (1.0 with one GPU: both are 0).

        >>> step_comm(gpus=4, zero=2, gradient_bytes=8, parameter_bytes=8).ratio_to_data_parallel
        1.0
        """
        if self.data_parallel_bytes == 0:
            return 1.0
        return self.sent_bytes / self.data_parallel_bytes


def _collective(
    collective: str, tensor: str, phase: str, times: int, message_bytes: float, gpus: int
) -> Collective:
    sent = sent_fraction(collective, gpus) * message_bytes * times
    return Collective(
        collective=collective,
        tensor=tensor,
        phase=phase,
        times=times,
        message_bytes=round(message_bytes),
        sent_bytes=round(sent),
    )


def step_comm(
    *,
    gpus: int,
    zero: int,
    gradient_bytes: float,
    parameter_bytes: float,
    updated_parameter_bytes: float | None = None,
    accumulation_steps: int = 1,
) -> StepComm:
    """The collectives of one optimizer step and the bytes each GPU sends (module docstring).

    ``gradient_bytes`` and ``parameter_bytes`` are the whole model's, unsharded.
    ``updated_parameter_bytes`` is what stages 1 and 2 gather after the step: the trainable
    parameters (default: all of them). One GPU sends nothing.

    >>> [step_comm(gpus=8, zero=z, gradient_bytes=8e9, parameter_bytes=8e9).sent_bytes / 1e9
    ...  for z in (0, 1, 2, 3)]
    [14.0, 14.0, 14.0, 21.0]
    >>> c = step_comm(gpus=8, zero=2, gradient_bytes=8e9, parameter_bytes=8e9,
    ...               accumulation_steps=4)
    >>> [(x.collective, x.times) for x in c.collectives]
    [('reduce-scatter', 4), ('all-gather', 1)]
    >>> step_comm(gpus=8, zero=4, gradient_bytes=1, parameter_bytes=1)
    Traceback (most recent call last):
    ...
    ValueError: zero=4 must be a ZeRO stage: 0 (no sharding), 1, 2 or 3
    """
    n = _check_gpus(gpus)
    if isinstance(zero, bool) or zero not in ZERO_STAGES:
        raise ValueError(f"zero={zero!r} must be a ZeRO stage: 0 (no sharding), 1, 2 or 3")
    if isinstance(accumulation_steps, bool) or not isinstance(accumulation_steps, int):
        raise ValueError(f"accumulation_steps={accumulation_steps!r} must be a whole number")
    if accumulation_steps < 1:
        raise ValueError(f"accumulation_steps={accumulation_steps!r} must be at least 1")
    grads = _check_bytes("gradient_bytes", gradient_bytes)
    params = _check_bytes("parameter_bytes", parameter_bytes)
    updated = params if updated_parameter_bytes is None else updated_parameter_bytes
    updated = _check_bytes("updated_parameter_bytes", updated)
    a = accumulation_steps
    steps: list[Collective] = []
    if n > 1 and zero == 0:
        steps.append(_collective("all-reduce", "gradients", "backward", 1, grads, n))
    elif n > 1 and zero in (1, 2):
        times = 1 if zero == 1 else a
        steps.append(_collective("reduce-scatter", "gradients", "backward", times, grads, n))
        steps.append(_collective("all-gather", "parameters", "after the step", 1, updated, n))
    elif n > 1:
        steps.append(_collective("all-gather", "parameters", "forward", a, params, n))
        steps.append(_collective("all-gather", "parameters", "backward", a, params, n))
        steps.append(_collective("reduce-scatter", "gradients", "backward", a, grads, n))
    return StepComm(
        gpus=n,
        zero_stage=zero,
        accumulation_steps=a,
        gradient_bytes=round(grads),
        parameter_bytes=round(params),
        collectives=tuple(steps),
    )


def formula(zero: int) -> str:
    """The stage's bytes per GPU per step as a formula in N, G, P (and A micro-batches).

    >>> formula(3)
    'A x (N-1)/N x (2P + G)'
    """
    formulas = {
        0: "2(N-1)/N x G",
        1: "(N-1)/N x (G + P)",
        2: "(N-1)/N x (A x G + P)",
        3: "A x (N-1)/N x (2P + G)",
    }
    if zero not in formulas:
        raise ValueError(f"zero={zero!r} must be a ZeRO stage: 0 (no sharding), 1, 2 or 3")
    return formulas[zero]


def budget_comm(budget: Budget) -> StepComm | None:
    """The communication of a training budget's optimizer step; None for inference.

    Gradients and parameters take the recipe's dtypes, unsharded; adapters (LoRA,
    QLoRA) train and gather only their own parameters after the step, while stage 3
    still gathers every weight.

    >>> from gpulesson.memory.budget import estimate
    >>> budget_comm(estimate(7e9, gpus=8, zero=3)).sent_bytes / 1e9  # amp: fp32, 4 B each
    73.5
    >>> budget_comm(estimate(7e9, preset="infer-fp16")) is None
    True
    """
    recipe = budget.recipe
    if recipe.inference:
        return None
    model_parallel = budget.tensor_parallel * budget.pipeline_parallel  # a replica's share
    whole = persistent_terms(
        recipe, budget.parameters, budget.trainable_parameters, model_parallel=model_parallel
    )
    if recipe.adapters:
        updated_each = DTYPE_BYTES[recipe.compute_dtype]
    else:
        updated_each = recipe.bytes_per_param()["weights"]
    updated = budget.trainable_parameters * updated_each / model_parallel
    return step_comm(
        gpus=budget.gpus,
        zero=budget.zero_stage,
        gradient_bytes=whole.gradients_bytes,
        parameter_bytes=whole.weights_bytes,
        updated_parameter_bytes=updated,
        accumulation_steps=budget.accumulation_steps,
    )


def transfer_s(sent_bytes: float, bus_bytes_per_s: float) -> float:
    """Seconds to send ``sent_bytes`` at a bus bandwidth: the bandwidth term only.

    >>> transfer_s(24.5e9, 450e9)
    0.05444444444444444
    >>> transfer_s(1, 0)
    Traceback (most recent call last):
    ...
    ValueError: bus_bytes_per_s=0 must be a positive bandwidth in bytes per second
    """
    sent = _check_bytes("sent_bytes", sent_bytes)
    if isinstance(bus_bytes_per_s, bool) or not isinstance(bus_bytes_per_s, int | float):
        raise ValueError(f"bus_bytes_per_s={bus_bytes_per_s!r} must be a number")
    if not math.isfinite(bus_bytes_per_s) or bus_bytes_per_s <= 0:
        raise ValueError(
            f"bus_bytes_per_s={bus_bytes_per_s!r} must be a positive bandwidth in bytes per second"
        )
    return sent / bus_bytes_per_s


@dataclass(frozen=True, kw_only=True)
class LinkTime:
    """How long one GPU takes to send some bytes over one of its links, at the stated peak.

    ``stated_gb_per_s`` is the datasheet's figure (both directions added); the time uses
    one direction, half of it.
    """

    gpu_id: str
    gpu_name: str
    link: str
    stated_gb_per_s: float
    one_way_bytes_per_s: float
    sent_bytes: float
    seconds: float


# A PCIe card's NVLink runs through an NVLink Bridge, which joins two cards (the datasheets'
# "NVLink Bridge for 2 GPUs"): a ring of more GPUs runs over PCIe.
BRIDGE_GPUS = 2


def nvlink_bridged(row: datasheets.Datasheet) -> bool:
    """Whether the row is a PCIe card, whose NVLink (a bridge) joins pairs of cards only.

    A row that names both forms (the A100 40GB's "SXM4 or PCIe") is taken as the SXM board.

    >>> nvlink_bridged(datasheets.get("h100-pcie")), nvlink_bridged(datasheets.get("h100-sxm"))
    (True, False)
    """
    return "PCIe" in row.name and "SXM" not in row.name


def link_times(
    sent_bytes: float, gpu_ids: tuple[str, ...], gpus: int = BRIDGE_GPUS
) -> tuple[LinkTime, ...]:
    """Seconds to send ``sent_bytes`` over each GPU's NVLink and PCIe x16, one direction.

    A teaching bound: the links' stated peak, which a collective never quite reaches.
    ``gpus`` is the ring's size: on a PCIe card (:func:`nvlink_bridged`) NVLink joins only
    pairs, so a ring of more than two has no NVLink row; its bytes go over PCIe.

    >>> [(t.link, round(t.seconds * 1e3, 1)) for t in link_times(24.5e9, ("h100-sxm",))]
    [('NVLink', 54.4), ('PCIe Gen5 x16', 382.8)]
    >>> [t.link for t in link_times(49e9, ("h100-pcie",), gpus=8)]
    ['PCIe Gen5 x16']
    >>> link_times(1, ("apple-m4",))
    Traceback (most recent call last):
    ...
    ValueError: datasheet row 'apple-m4' states no interconnect: use one of a100-40gb, \
a100-80gb, a100-80gb-pcie, h100-sxm, h100-pcie, h200
    """
    sent = _check_bytes("sent_bytes", sent_bytes)
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise ValueError(f"gpus={gpus!r} must be a whole number of GPUs, at least 1")
    with_links = tuple(row.id for row in datasheets.all_rows() if row.interconnect is not None)
    out = []
    for gpu_id in gpu_ids:
        row = datasheets.get(gpu_id)
        link = row.interconnect
        if link is None:
            raise ValueError(
                f"datasheet row {gpu_id!r} states no interconnect: use one of "
                f"{', '.join(with_links)}"
            )
        pairs = [(f"PCIe Gen{link.pcie_generation} x16", link.pcie_stated_gb_per_s)]
        bridge_too_small = nvlink_bridged(row) and gpus > BRIDGE_GPUS
        if link.nvlink_stated_gb_per_s is not None and not bridge_too_small:
            pairs.insert(0, ("NVLink", link.nvlink_stated_gb_per_s))
        for name, stated in pairs:
            one_way = stated * 1e9 / 2
            out.append(
                LinkTime(
                    gpu_id=row.id,
                    gpu_name=row.name,
                    link=name,
                    stated_gb_per_s=stated,
                    one_way_bytes_per_s=one_way,
                    sent_bytes=sent,
                    seconds=transfer_s(sent, one_way),
                )
            )
    return tuple(out)


@dataclass(frozen=True, kw_only=True)
class ZeroRow:
    """One ZeRO stage of a run: its memory per GPU (the budget) and its communication."""

    stage: int
    budget: Budget
    comm: StepComm
    link_time: LinkTime | None = None  # the step's bytes on a GPU's fastest stated link


def zero_tradeoffs(
    base: dict[str, Any], gpus: int, link_gpu: str | None = None
) -> tuple[ZeroRow, ...]:
    """Stages 0 to 3 of one run on ``gpus`` GPUs: memory per GPU and bytes sent per step.

    ``base`` holds :func:`gpulesson.memory.budget.estimate`'s keyword arguments (a
    training run); each stage is ``estimate(**base, gpus=gpus, zero=stage)``. With
    ``link_gpu`` (a datasheet id), each row also times its bytes on that GPU's fastest
    stated link, one direction (:func:`link_times`).

    >>> rows = zero_tradeoffs({"params": 7e9, "preset": "mixed-fp32-master"}, 8)
    >>> [(r.stage, round(r.budget.total_bytes / 1e9, 2), r.comm.sent_bytes / 1e9) for r in rows]
    [(0, 112.0, 24.5), (1, 38.5, 24.5), (2, 26.25, 24.5), (3, 14.0, 36.75)]
    """
    rows = []
    for stage in ZERO_STAGES:
        b = estimate(**{**base, "gpus": gpus, "zero": stage})
        c = budget_comm(b)
        if c is None:
            raise ValueError(f"preset {b.preset!r} does not train: pick a training preset")
        link = link_times(c.sent_bytes, (link_gpu,))[0] if link_gpu else None
        rows.append(ZeroRow(stage=stage, budget=b, comm=c, link_time=link))
    return tuple(rows)
