"""``gpulesson measure``: run the course's measurement suite here and write one result bundle.

The bundle (format: ``gpulesson/results/bundle.schema.json``) goes to ``--out FILE``,
and stdout gets a short summary of the headline figures; with ``--json`` the bundle itself
is printed on stdout instead (``gpulesson measure --json > mine.json``). With neither, the
command refuses to start: a run of minutes whose bundle goes nowhere is a mistake.
Progress goes to stderr, through rich, only when stderr is a terminal (``NO_COLOR`` is
honoured by rich). ``--quick`` sizes every entry down (the design target: a minute on a 2-core CPU).
``--list`` shows the entries and whether each runs on this machine.

Exit status: 0 when every entry that applies ran; 1 when one failed or the bundle did not
pass its own validation (the bundle is still written, and stderr says what went wrong);
2 for bad arguments, before anything is measured. Registering the subcommand imports
nothing heavy: torch and the suite load when it runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, TextIO

from gpulesson.timing.inputs import DEVICES


def entry_names(text: str) -> tuple[str, ...]:
    """Read ``--only matmul,oom`` (checked against the registry when the command runs).

    >>> entry_names("matmul, oom")
    ('matmul', 'oom')
    """
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    if not names:
        raise argparse.ArgumentTypeError(
            f"no entry names in {text!r}: give names separated by commas, like matmul,oom"
        )
    return names


def register(commands: argparse._SubParsersAction) -> None:
    """Add the ``measure`` subcommand."""
    parser = commands.add_parser(
        "measure",
        help="run the course's whole measurement suite here and write one result bundle (JSON)",
        description="Run every measurement the course's lessons make, with the functions "
        "the lessons use (the suite's entries, and which of them run on this machine: "
        "--list), and write one result bundle to --out FILE (a summary goes to stdout), or "
        "with --json to stdout.",
    )
    parser.add_argument(
        "--out",
        metavar="FILE",
        type=Path,
        default=None,
        help="write the bundle to FILE and print a summary of its headline figures",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smaller sizes and time budgets, for a slow machine or a first look",
    )
    parser.add_argument(
        "--device",
        choices=("auto", *DEVICES),
        default="auto",
        help="where to measure: auto picks cuda, then mps, then cpu (default: auto)",
    )
    parser.add_argument(
        "--only",
        metavar="ENTRIES",
        type=entry_names,
        default=None,
        help="run only these suite entries, comma-separated (see --list)",
    )
    parser.add_argument(
        "--list",
        action="store_true",
        help="list the suite's entries and whether each runs here, then stop",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the bundle as JSON on stdout instead of the summary; "
        "with --list, the list as JSON",
    )
    parser.set_defaults(func=run)


def check_out(path: Path | None, as_json: bool) -> None:
    """Refuse an --out that cannot be written, or no destination, before measuring for minutes.

    >>> check_out(None, as_json=False)
    Traceback (most recent call last):
    ...
    ValueError: nowhere to put the bundle: add --out FILE (or --json to print it on stdout)
    >>> check_out(Path("/no/such/folder/b.json"), as_json=False)
    Traceback (most recent call last):
    ...
    ValueError: --out /no/such/folder/b.json: folder /no/such/folder does not exist: \
create it or write elsewhere
    """
    if path is None:
        if not as_json:
            raise ValueError(
                "nowhere to put the bundle: add --out FILE (or --json to print it on stdout)"
            )
        return
    if path.is_dir():
        raise ValueError(f"--out {path} is a folder: give a file name, like {path}/mine.json")
    if not path.parent.is_dir():
        raise ValueError(
            f"--out {path}: folder {path.parent} does not exist: create it or write elsewhere"
        )


class SuiteProgress:
    """A progress bar over the suite's entries on stderr; silent unless stderr is a terminal."""

    def __init__(self, total: int, stream: TextIO | None = None) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self.console = Console(file=stream if stream is not None else sys.stderr)
        self.enabled = self.console.is_terminal
        self.progress: Any = None
        if self.enabled:
            self.progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=self.console,
                transient=True,
            )
            self.task = self.progress.add_task("measuring", total=total)
            self.progress.start()

    def start(self, entry: Any) -> None:
        """Show which entry runs now."""
        if self.progress is not None:
            self.progress.update(self.task, description=f"measuring {entry.name}")

    def done(self, entry: Any, seconds: float) -> None:
        """Advance the bar by one entry."""
        if self.progress is not None:
            self.progress.advance(self.task)

    def close(self) -> None:
        """Remove the bar, so what follows starts on a clean line."""
        if self.progress is not None:
            self.progress.stop()


def list_entries(device: str, as_json: bool) -> str:
    """The registry as a table (or JSON): name, whether it runs on ``device``, description."""
    import json

    from gpulesson.results.suite import Device, entries

    here = Device.this(device)
    rows = [
        {
            "name": e.name,
            "runs_here": e.applies(here),
            "needs": e.needs,
            "description": e.description,
        }
        for e in entries()
    ]
    if as_json:
        return json.dumps({"device": device, "entries": rows}, indent=2)
    width = max(len(r["name"]) for r in rows)
    lines = [f"suite entries on {device} (in run order):"]
    for r in rows:
        mark = "runs here" if r["runs_here"] else f"skipped: needs {r['needs']}"
        lines.append(f"  {r['name'].ljust(width)}  {r['description']} [{mark}]")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Resolve the device, run the suite, validate and write the bundle."""
    from gpulesson.timing.bench import resolve_device  # torch: only once arguments are good

    device = resolve_device(args.device)
    if args.list:
        print(list_entries(device, args.json))
        return 0
    check_out(args.out, args.json)

    from gpulesson.results import bundle as bundle_module
    from gpulesson.results import provenance
    from gpulesson.results.compare import Sourced, compare
    from gpulesson.results.render import summary_text
    from gpulesson.results.suite import Context, Device, run_suite, select

    chosen = select(args.only)
    progress = SuiteProgress(len(chosen))
    try:
        result = run_suite(
            Context(device=Device.this(device), quick=args.quick),
            chosen,
            on_start=progress.start,
            on_done=progress.done,
        )
    finally:
        progress.close()
    if not result.measurements:
        raise ValueError(
            f"no suite entry measured anything on {device}: see gpulesson measure --list"
        )
    bundle = bundle_module.Bundle(
        provenance=provenance.collect(
            device, bundle_module.SuiteRun(args.quick, result.wall_s, result.ran)
        ),
        measurements=result.measurements,
        skipped=result.skipped + result.errors,
    )
    text = bundle_module.to_json(bundle)
    status = 0
    for error in result.errors:
        print(f"gpulesson measure: entry {error.entry} failed: {error.reason}", file=sys.stderr)
        status = 1
    for part in result.skipped:
        if part.reason.startswith("failed:"):
            print(f"gpulesson measure: {part.entry} not measured: {part.reason}", file=sys.stderr)
    try:
        bundle_module.validate(bundle_module.to_dict(bundle))
    except bundle_module.BundleError as exc:
        print(f"gpulesson measure: the bundle did not pass validation: {exc}", file=sys.stderr)
        status = 1
    if args.out is None:  # --json: the bundle is the output
        sys.stdout.write(text)
        return status
    try:
        args.out.write_text(text, encoding="utf-8")
    except OSError as exc:
        from gpulesson.cli import OutputError

        raise OutputError(exc.errno, f"{exc.strerror}: {args.out}") from exc
    if args.json:
        sys.stdout.write(text)
    else:
        print(summary_text(compare(Sourced(bundle, "given", str(args.out)), ())))
    return status
