"""How large each timed measurement is on each kind of device: one table, for every timer.

One job: the sizes. The table is data, ``gpulesson/timing/plans.json`` (checked against
``plans.schema.json`` beside it): per device kind (``cpu``, ``mps``, ``cuda``), the sizes
of the matmul benchmarks (``bench``: :class:`gpulesson.timing.bench.DevicePlan`), of the
shape-alignment timings (``alignment``: :class:`gpulesson.timing.alignment.AlignmentPlan`),
of the decode sweep (``decode``: :class:`gpulesson.timing.decode.DecodePlan`, its
``config`` the fields of :class:`gpulesson.memory.gpt2.GPT2Config`), and of the
measurement suite's entries (``matmul``: :class:`gpulesson.results.entries_matmul.MatmulPlan`;
``device``: :class:`gpulesson.results.entries_device.DevicePlan`; ``step``:
:class:`gpulesson.precision.step.StepPlan`; ``matmul_sweep_quick`` and ``roofline_quick``,
whose full runs take ``bench``; ``train_step``, the timed GPT-2 step of
:mod:`gpulesson.results.entries_compute` and the matmul it is set against; ``tf32``, only
where the ``tf32_accuracy`` entry runs; ``cache_sweep``, ``strided`` and ``attention``, the
sweeps of :mod:`gpulesson.inside` the lesson "Inside the GPU" shows). A measurement ``X`` that
``gpulesson measure --quick`` runs smaller has a row ``X_quick`` too. Each of those
modules builds its own frozen plans from its rows here, so a new device kind, or a
resized measurement, is one edit in one place. A size in bytes (a field ending
``_bytes``) is written like ``64MiB``.

Why the sizes are what they are:

- ``bench``: the CPU plan keeps the three lessons' benchmarks within a few seconds on a
  2-core machine; the GPU plans are sized so launch overhead is negligible.
- ``alignment``: a CPU build times small shapes in fp32 on one thread (two threads
  spin-wait on a shared 2-core machine and the neighbours' readings swing apart); a GPU
  the sizes the lesson names, in the dtypes tensor cores serve. The vocabulary projection
  is a GPT-2-small output layer: 768 wide on a GPU, narrower on a CPU to stay fast.
- ``decode``: the CPU plan keeps the lesson's sweep to a few seconds on 2 cores (the
  prefills of the large batches cost most, hence the short prompt), on one thread: when
  the other core is busy, two threads spin-wait on each other and readings swing tenfold.
  The CPU model's fp32 weights (about 110 MB) are over three times this machine class's
  last-level cache, so every step streams them from memory; the CUDA model's fp16 weights
  (about 5.4 GB) take about a millisecond to read on an H100, long against the ~160
  kernel launches of an eager step.
- ``matmul``: the best-shape search gets ``search_budget_s`` per 16-bit dtype and
  ``fp32_search_budget_s`` for fp32: the same on a CPU or an Apple GPU, half on CUDA.
- ``step``: the full CUDA plan is GPT-2 small at batch 8; its quick plan, GPT-2 small's
  width with half the layers on half the sequence, is what a CUDA build's page times.
- ``train_step``: on a CPU the small GPT the lesson "How long will training take" counts
  and times (about 3.7 million parameters, 256 tokens a step, a fraction of a second per
  step on one core); on CUDA GPT-2 small with SDPA attention, whose flash and
  memory-efficient kernels the FLOP counter counts, at a batch of at most 8 (the entry
  halves it until the step fits its memory budget).
- ``cache_sweep``: working sets from 8 KiB to 128 MiB on a CPU, to 1 GiB on a GPU (past an
  L2 of tens of MiB); one sample reads 64 MiB on a CPU and 4 GiB on a GPU, so it outlasts a
  kernel launch many times over. ``strided``: 64 MiB on a CPU (past a core's share of the
  caches), 1 GiB on a GPU (past its L2).

>>> DEVICE_KINDS
('cpu', 'mps', 'cuda')
>>> sizes("cpu", "bench")["illusion_n"], sizes("cuda", "alignment")["square_n"]
(1024, 4096)
>>> sizes("tpu", "bench")
Traceback (most recent call last):
...
ValueError: device='tpu' must be cpu, mps or cuda
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpulesson import schema_check
from gpulesson.units import parse_size

TABLE = Path(__file__).with_name("plans.json")
SCHEMA = Path(__file__).with_name("plans.schema.json")
DEVICE_KINDS = ("cpu", "mps", "cuda")
MEASUREMENTS = (
    "bench",
    "alignment",
    "decode",
    "decode_quick",
    "matmul",
    "matmul_quick",
    "matmul_sweep_quick",
    "device",
    "device_quick",
    "step",
    "step_quick",
    "roofline_quick",
    "train_step",
    "train_step_quick",
    "tf32",
    "tf32_quick",
    "cache_sweep",
    "cache_sweep_quick",
    "strided",
    "strided_quick",
    "attention",
    "attention_quick",
)


def _fields(label: str, row: dict[str, Any]) -> dict[str, Any]:
    """One row's fields as a plan takes them: sizes in bytes, lists as tuples."""
    out: dict[str, Any] = {}
    for name, value in row.items():
        if name.endswith("_bytes") and isinstance(value, str):
            try:
                value = parse_size(value)
            except ValueError as exc:
                raise ValueError(f"{label}: {name}: {exc}") from None
        out[name] = tuple(value) if isinstance(value, list) else value
    return out


def load(path: Path = TABLE) -> dict[str, dict[str, dict[str, Any]]]:
    """The plan table of a file like ``plans.json``, checked: ``{device: {measurement: sizes}}``.

    Raises ``ValueError`` naming the file, the device, the measurement and the field.

    >>> load()["cuda"]["device"]["bandwidth_bytes"] == 2**30
    True
    """
    data = schema_check.load_json(path, SCHEMA)
    return {
        device: {
            m: _fields(schema_check.where(path.name, ("plans", device, m), None), row)
            for m, row in rows.items()
        }
        for device, rows in data["plans"].items()
    }


# The table: gpulesson/timing/plans.json, read once.
PLANS: dict[str, dict[str, dict[str, Any]]] = load()


def sizes(device: str, measurement: str) -> dict[str, Any]:
    """The sizes of one measurement on one device kind, as keyword fields of its plan."""
    if device not in PLANS:
        raise ValueError(f"device={device!r} must be {', '.join(DEVICE_KINDS[:-1])} or cuda")
    if measurement not in MEASUREMENTS:
        raise ValueError(f"measurement={measurement!r} must be one of {', '.join(MEASUREMENTS)}")
    if measurement not in PLANS[device]:
        raise ValueError(f"{TABLE.name} has no {measurement} plan for {device}: add one there")
    return dict(PLANS[device][measurement])


def for_run(device: str, measurement: str, quick: bool) -> dict[str, Any]:
    """The sizes of ``measurement`` on ``device`` for one run: its row ``<measurement>_quick``
    with ``--quick``, else its row.

    >>> for_run("cpu", "strided", quick=True)["rounds"], for_run("cpu", "strided", False)["rounds"]
    (3, 5)
    """
    return sizes(device, f"{measurement}_quick" if quick else measurement)


def by_run(measurement: str) -> dict[tuple[str, bool], dict[str, Any]]:
    """``{(device, quick): sizes}`` of a measurement that has a row ``<measurement>_quick``,
    on each device kind whose table has the measurement.

    >>> by_run("step")[("cpu", True)]["batch"], sorted(by_run("decode"))[:2]
    (2, [('cpu', False), ('cpu', True)])
    """
    return {
        (device, quick): for_run(device, measurement, quick)
        for device in DEVICE_KINDS
        if measurement in PLANS[device]
        for quick in (False, True)
    }
