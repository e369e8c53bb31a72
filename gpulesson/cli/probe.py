"""``gpulesson probe``: the probe report as a table or JSON."""

from __future__ import annotations

import argparse

from gpulesson import probe


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
    report = probe.probe()
    print(probe.to_json(report) if args.json else probe.to_text(report))
    return 0
