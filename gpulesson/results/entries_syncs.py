"""Suite entry for the lesson "Feeding the GPU": which lines the sync debug mode reports.

* ``syncs``: every probe of :data:`gpulesson.timing.syncs.PROBES` run once under
  ``torch.cuda.set_sync_debug_mode("warn")`` (:func:`gpulesson.timing.syncs.find_syncs`,
  CUDA only): one row per probe, ``syncs.<line>``.

What the debug mode reports is a count of warnings, not a time or a rate. A row's value is
the share of the probe's runs that warned (unit ``ratio``; one run, so 0 or 1), its one
sample that run's reading; ``params`` keep the line of code, whether PyTorch's tuning
guide lists it as a synchronization, and the number of warnings, so
:func:`checks_from_measurements` gives the page back the checks it renders.

>>> [e.name for e in ENTRIES]
['syncs']
>>> ROW_NAMES[:5]
('syncs.loss_item', 'syncs.print_loss', 'syncs.x_cpu', 'syncs.x_nonzero', 'syncs.x_mask')
>>> len(set(ROW_NAMES)) == len(PROBES)
True
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from gpulesson.results.bundle import Measurement
from gpulesson.results.suite import Context, SuiteEntry
from gpulesson.timing.syncs import PROBES, SyncCheck, find_syncs

N_ELEMENTS = 1024  # the probes' tensor: the lesson's size, full run or quick


def row_name(line: str) -> str:
    """The bundle name of a probe's row: its code in lower-case words joined by ``_``."""
    return "syncs." + re.sub(r"[^a-z0-9]+", "_", line.lower()).strip("_")


ROW_NAMES = tuple(row_name(p.name) for p in PROBES)  # one per probe, in the probes' order


def sync_measurements(checks: Sequence[SyncCheck], n: int = N_ELEMENTS) -> list[Measurement]:
    """One row per probe: the share of its runs that warned, with the count in ``params``.

    >>> rows = sync_measurements([SyncCheck(name="x.cpu()", hidden_sync=True, warnings=2)])
    >>> rows[0].name, rows[0].value, rows[0].params["warnings"]
    ('syncs.x_cpu', 1.0, 2)
    """
    return [
        Measurement(
            name=row_name(c.name),
            entry="syncs",
            unit="ratio",
            value=float(c.warned),
            samples=(float(c.warned),),
            samples_unit="ratio",
            label=f"{c.name}: share of runs the sync debug mode warned on",
            params={"line": c.name, "hidden_sync": c.hidden_sync, "warnings": c.warnings, "n": n},
            note="One run under torch.cuda.set_sync_debug_mode('warn'); params.warnings "
            "counts its warnings.",
        )
        for c in checks
    ]


def checks_from_measurements(measurements: Sequence[Measurement]) -> tuple[SyncCheck, ...]:
    """The checks the ``syncs`` rows came from, in their order; empty without them.

    >>> checks = (SyncCheck(name="x.sum()", hidden_sync=False, warnings=0),)
    >>> checks_from_measurements(sync_measurements(checks)) == checks
    True
    """
    return tuple(
        SyncCheck(
            name=str(m.params["line"]),
            hidden_sync=bool(m.params["hidden_sync"]),
            warnings=int(m.params["warnings"]),
        )
        for m in measurements
        if m.entry == "syncs"
    )


def run_syncs(context: Context) -> list[Measurement]:
    """Every probe once under the sync debug mode, on the suite's CUDA device."""
    return sync_measurements(find_syncs("cuda", N_ELEMENTS))


ENTRIES = (
    SuiteEntry(
        name="syncs",
        description="which lines of a loop torch.cuda.set_sync_debug_mode reports",
        applies=lambda device: device.type == "cuda",
        needs="a CUDA device",
        run=run_syncs,
    ),
)
