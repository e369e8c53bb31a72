"""``gpulesson probe``: the probe report as a table or JSON.

Registering the subcommand imports nothing heavy; the probe (which imports
torch when it runs) is imported only when the command runs.
"""

from __future__ import annotations

import argparse


def register(commands: argparse._SubParsersAction) -> None:
    """Add the ``probe`` subcommand."""
    parser = commands.add_parser(
        "probe",
        help="report this machine's GPU stack and why CUDA is or is not usable",
        description="Report Python, torch, CUDA, MPS, CPU, RAM and the NVIDIA driver, "
        "and name the case when CUDA is not usable.",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Probe this machine and print the report."""
    from gpulesson import probe

    report = probe.probe()
    print(probe.to_json(report) if args.json else probe.to_text(report))
    return 0
