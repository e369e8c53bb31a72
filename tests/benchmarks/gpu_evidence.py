"""The first GPU's evidence, in one command: measure, build, test, and a summary table.

On a machine with one CUDA GPU and torch installed, from the repository root:

    python -m tests.benchmarks.gpu_evidence            # the whole run, under 8 minutes
    python -m tests.benchmarks.gpu_evidence --dry-run  # the plan and the missing packages only

It does, in order, each step with a time bound (a subprocess timeout) and going on after a
step that fails:

1. says which Python packages of ``pyproject.toml`` (the dependencies and the ``dev``
   extra) are missing, so they can be brought as wheels;
2. ``gpulesson probe --json``: the device, whose datasheet id (or name) names the bundle;
3. ``gpulesson measure --out results/reference/<device>-<date>.json``: the bundle is saved
   before anything else runs;
4. ``GPULESSON_REQUIRE_DEVICE=cuda mkdocs build --strict`` into a temporary folder, with
   ``GPULESSON_MEASURED_BUNDLE`` naming the bundle step 3 wrote: the lessons take their GPU
   rows from it (:mod:`gpulesson.site.build_bundle`) instead of measuring them a second
   time (a ``--quick`` bundle is not reused: the build then measures full size itself);
   the site, with its ``build-bundle.json`` and ``build-record.json``, stays in the run's
   folder beside the log;
5. ``pytest tests -m gpu``;

then writes one log file (every step's command, output, exit status and time) and prints
a summary from the bundle: the best bf16 matmul TFLOP/s and its share of the datasheet,
copy bandwidth, launch overhead, pinned vs pageable copies, the CUDA context, estimated vs
measured peak memory per GPT config, and measured / predicted for every figure
:mod:`gpulesson.results.predict` has a model for. A figure the bundle lacks reads
"not in bundle". ``--dry-run`` prints the plan with each step's bound and the package check,
and runs nothing else.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TOTAL_BOUND_S = 480  # the whole run ends within 8 minutes
NOT_IN_BUNDLE = "not in bundle"


@dataclass(frozen=True, kw_only=True)
class Step:
    """One step of the run: a command, its environment additions and its time bound."""

    name: str
    command: tuple[str, ...]
    timeout_s: int
    why: str
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class StepResult:
    """What a step did: exit status (None when it ran out of time), seconds, output."""

    name: str
    returncode: int | None
    seconds: float
    timed_out: bool
    output: str

    @property
    def ok(self) -> bool:
        """Whether the step finished in time with status 0."""
        return self.returncode == 0 and not self.timed_out


# --- the packages -------------------------------------------------------------------------


def _quoted_list(text: str, key: str) -> tuple[str, ...]:
    r"""The strings of ``key = [...]`` in TOML text (Python 3.10 has no tomllib).

    >>> _quoted_list('dev = [\n  "a>=1",  # why\n  "b",\n]\n', "dev")
    ('a>=1', 'b')
    """
    match = re.search(rf"^{re.escape(key)}\s*=\s*\[(.*?)^\]", text, re.M | re.S)
    if not match:
        raise ValueError(f"pyproject.toml has no list {key!r}")
    body = re.sub(r"#[^\n]*", "", match[1])
    return tuple(re.findall(r'"([^"]+)"', body))


def requirements(pyproject: Path = REPO / "pyproject.toml") -> tuple[str, ...]:
    """The project's dependencies and its ``dev`` extra, as written in ``pyproject.toml``."""
    text = pyproject.read_text(encoding="utf-8")
    try:
        import tomllib
    except ImportError:  # Python 3.10
        return (*_quoted_list(text, "dependencies"), *_quoted_list(text, "dev"))
    project = tomllib.loads(text)["project"]
    return (*project.get("dependencies", ()), *project.get("optional-dependencies", {})["dev"])


def distribution_name(requirement: str) -> str:
    """The distribution a requirement names: ``'mkdocs>=1.6,<2'`` -> ``'mkdocs'``.

    >>> distribution_name("markdown-exec>=1.12.6,<1.13"), distribution_name("torch")
    ('markdown-exec', 'torch')
    """
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    if not match:
        raise ValueError(f"requirement {requirement!r} names no distribution")
    return match[1]


def missing_packages(reqs: tuple[str, ...]) -> tuple[str, ...]:
    """The requirements whose distribution is not installed (``importlib.metadata``).

    >>> missing_packages(("pytest>=8", "no-such-distribution-h7>=1"))
    ('no-such-distribution-h7>=1',)
    """
    missing = []
    for req in reqs:
        try:
            importlib.metadata.version(distribution_name(req))
        except importlib.metadata.PackageNotFoundError:
            missing.append(req)
    return tuple(missing)


# --- the plan -----------------------------------------------------------------------------


def device_slug(device_name: str | None) -> str:
    """The bundle's file-name stem: the datasheet id, else the name in lower-case words.

    >>> device_slug("NVIDIA H200"), device_slug("NVIDIA A10G"), device_slug(None)
    ('h200', 'a10g', 'unknown-gpu')
    """
    from gpulesson.results import datasheets

    sheet = datasheets.lookup(device_name)
    if sheet is not None:
        return sheet.id
    name = datasheets.normalize_name(device_name or "")
    return re.sub(r"[^a-z0-9]+", "-", name).strip("-") or "unknown-gpu"


def bundle_path(slug: str, day: datetime.date, folder: Path | None = None) -> Path:
    """``results/reference/<slug>-<date>.json``, with ``-2``, ``-3``... if that one exists."""
    folder = folder or REPO / "results" / "reference"
    path = folder / f"{slug}-{day.isoformat()}.json"
    n = 2
    while path.exists():
        path = folder / f"{slug}-{day.isoformat()}-{n}.json"
        n += 1
    return path


def plan(bundle: Path, site_dir: Path, quick: bool = False) -> tuple[Step, ...]:
    """The steps after the package check, each with its bound; the bounds sum under 8 min.

    >>> steps = plan(Path("b.json"), Path("/tmp/site"))
    >>> [(s.name, s.timeout_s) for s in steps], sum(s.timeout_s for s in steps) < TOTAL_BOUND_S
    ([('probe', 15), ('measure', 240), ('build', 150), ('pytest-gpu', 60)], True)
    """
    python = sys.executable
    measure = [python, "-m", "gpulesson", "measure", "--device", "cuda", "--out", str(bundle)]
    if quick:
        measure.append("--quick")
    return (
        Step(
            name="probe",
            command=(python, "-m", "gpulesson", "probe", "--json"),
            timeout_s=15,
            why="what the machine has; the device names the bundle",
        ),
        Step(
            name="measure",
            command=tuple(measure),
            timeout_s=240,
            why=f"the suite on the GPU; the bundle is saved to {bundle} before anything else",
        ),
        Step(
            name="build",
            command=(python, "-m", "mkdocs", "build", "--strict", "-d", str(site_dir)),
            timeout_s=150,
            env={"GPULESSON_REQUIRE_DEVICE": "cuda", "GPULESSON_MEASURED_BUNDLE": str(bundle)},
            why="the strict site build on the GPU; its lessons read the GPU rows of the "
            "bundle the measure step wrote (results/reference/) instead of measuring again",
        ),
        Step(
            name="pytest-gpu",
            command=(
                python,
                "-m",
                "pytest",
                "tests",
                "-m",
                "gpu",
                "-n",
                "0",
                "-q",
                "-p",
                "no:cacheprovider",
            ),
            timeout_s=60,
            why="the tests that need a CUDA device, in one process (they time the one GPU)",
        ),
    )


def plan_text(steps: tuple[Step, ...], missing: tuple[str, ...]) -> str:
    """The plan as printed by ``--dry-run``: the package check, then each step and its bound."""
    lines = ["Python packages of pyproject.toml (dependencies and the dev extra):"]
    if missing:
        lines.append(f"  missing ({len(missing)}), bring them as wheels: " + ", ".join(missing))
    else:
        lines.append("  none missing")
    lines.append(
        "Steps (each bounded by a subprocess timeout; a failed step does not stop the rest):"
    )
    for i, step in enumerate(steps, 1):
        env = " ".join(f"{k}={v}" for k, v in step.env.items())
        shown = " ".join([*([env] if env else []), *step.command])
        lines.append(f"  {i}. {step.name:<11} {step.timeout_s:>4} s  {shown}")
        lines.append(f"     {step.why}")
    total = sum(s.timeout_s for s in steps)
    lines.append(f"Bound on the whole run: {total} s (under {TOTAL_BOUND_S} s).")
    return "\n".join(lines)


# --- running --------------------------------------------------------------------------------


def run_step(step: Step, cwd: Path = REPO) -> StepResult:
    """Run one step under its timeout; on timeout its whole process group is killed."""
    start = time.monotonic()
    proc = subprocess.Popen(
        step.command,
        cwd=cwd,
        env={**os.environ, **step.env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=step.timeout_s)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        timed_out = True
    return StepResult(
        name=step.name,
        returncode=None if timed_out else proc.returncode,
        seconds=time.monotonic() - start,
        timed_out=timed_out,
        output=output or "",
    )


# --- the summary ------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class SummaryRow:
    """One line of the summary: what, and the figure as text ("not in bundle" when absent)."""

    what: str
    value: str


def _find(bundle, name: str):
    return bundle.measurement(name)


def summary(bundle) -> tuple[SummaryRow, ...]:
    """The summary table's rows from a :class:`~gpulesson.results.bundle.Bundle`."""
    from gpulesson.results import predict

    sheet = bundle.datasheet
    rows: list[SummaryRow] = []

    bf16 = [m for m in bundle.measurements if m.unit == "FLOP/s" and m.dtype == "bf16"]
    bf16 = [m for m in bf16 if m.name.startswith(("matmul.", "matmul_peak."))]
    if bf16:
        best = max(bf16, key=lambda m: m.value)
        text = f"{best.value / 1e12:.1f} TFLOP/s ({best.name})"
        peak = sheet.dense_flop_per_s("bf16") if sheet else None
        if peak:
            text += f", {best.value / peak:.0%} of the datasheet's dense {peak / 1e12:g}"
        rows.append(SummaryRow(what="best bf16 matmul", value=text))
    else:
        rows.append(SummaryRow(what="best bf16 matmul", value=NOT_IN_BUNDLE))

    copy = _find(bundle, "memory_bandwidth")
    if copy is not None:
        text = f"{copy.value / 1e9:.0f} GB/s"
        if sheet:
            text += f", {copy.value / sheet.memory_bandwidth_bytes_per_s:.0%} of the datasheet's"
        rows.append(SummaryRow(what="copy bandwidth", value=text))
    else:
        rows.append(SummaryRow(what="copy bandwidth", value=NOT_IN_BUNDLE))

    for name, what in (
        ("launch_overhead.eager", "launch overhead, eager"),
        ("launch_overhead.cuda_graph", "launch overhead, CUDA graph"),
    ):
        m = _find(bundle, name)
        rows.append(SummaryRow(what=what, value=f"{m.value * 1e6:.2f} µs" if m else NOT_IN_BUNDLE))

    pinned, pageable = _find(bundle, "h2d.pinned"), _find(bundle, "h2d.pageable")
    for m, what in ((pinned, "host-to-device, pinned"), (pageable, "host-to-device, pageable")):
        rows.append(
            SummaryRow(what=what, value=f"{m.value / 1e9:.1f} GB/s" if m else NOT_IN_BUNDLE)
        )
    rows.append(
        SummaryRow(
            what="pinned / pageable",
            value=f"{pinned.value / pageable.value:.2f}x" if pinned and pageable else NOT_IN_BUNDLE,
        )
    )

    context = _find(bundle, "cuda_context")
    rows.append(
        SummaryRow(
            what="CUDA context",
            value=f"{context.value / 2**20:.0f} MiB" if context else NOT_IN_BUNDLE,
        )
    )

    gpt = [m for m in bundle.measurements if m.name.startswith("gpt_memory.")]
    for m in gpt:
        estimate = m.params.get("estimate_bytes")
        est = f"{estimate / 2**20:.1f} MiB" if isinstance(estimate, int | float) else "no estimate"
        rows.append(
            SummaryRow(
                what=f"peak memory {m.name.removeprefix('gpt_memory.')}",
                value=f"estimated {est}, measured {m.value / 2**20:.1f} MiB",
            )
        )
    if not gpt:
        rows.append(SummaryRow(what="peak memory per GPT config", value=NOT_IN_BUNDLE))

    if sheet is None:
        rows.append(
            SummaryRow(what="measured / predicted", value="no datasheet row for this device")
        )
        return tuple(rows)
    for m in bundle.measurements:
        p = predict.predict_measurement(sheet.id, m)
        if isinstance(p, predict.Prediction) and p.unit == m.unit and m.value > 0:
            ratio = predict.compare(m.value, m.unit, p).ratio
            rows.append(
                SummaryRow(
                    what=f"measured / predicted {m.name}",
                    value=f"{ratio:.2f} ({p.kind}: {p.model})",
                )
            )
    return tuple(rows)


def summary_text(rows: tuple[SummaryRow, ...]) -> str:
    """The summary as a two-column text table."""
    width = max(len(r.what) for r in rows)
    return "\n".join(f"{r.what:<{width}}  {r.value}" for r in rows)


# --- main ---------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """Run the plan (or print it with ``--dry-run``); 0 when every step passed, else 1."""
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.gpu_evidence")
    parser.add_argument("--dry-run", action="store_true", help="print the plan, run nothing")
    parser.add_argument("--quick", action="store_true", help="gpulesson measure --quick")
    parser.add_argument("--log", type=Path, help="the log file (default: in the temp folder)")
    args = parser.parse_args(argv)

    day = datetime.datetime.now(datetime.UTC).date()
    missing = missing_packages(requirements())
    work = Path(tempfile.gettempdir()) / f"gpu-evidence-{day.isoformat()}"
    if args.dry_run:
        steps = plan(bundle_path("<device>", day), work / "site", args.quick)
        print(plan_text(steps, missing))
        return 0

    work.mkdir(parents=True, exist_ok=True)
    log_path = args.log or work / "gpu-evidence.log"
    results: list[StepResult] = []
    with log_path.open("w", encoding="utf-8") as log:

        def record(step: Step, result: StepResult) -> None:
            results.append(result)
            status = "timed out" if result.timed_out else f"exit {result.returncode}"
            log.write(f"=== {step.name}: {' '.join(step.command)}\n")
            log.write(f"=== {status} after {result.seconds:.1f} s (bound {step.timeout_s} s)\n")
            log.write(result.output + "\n")
            log.flush()
            print(f"{step.name}: {status} in {result.seconds:.0f} s", flush=True)

        log.write(plan_text(plan(Path("<bundle>"), work / "site", args.quick), missing) + "\n")
        if missing:
            print("missing packages: " + ", ".join(missing), flush=True)
        probe_step = plan(Path("<bundle>"), work / "site", args.quick)[0]
        probe = run_step(probe_step)
        record(probe_step, probe)
        name = None
        try:
            devices = json.loads(probe.output).get("devices") or []
            name = devices[0]["name"] if devices else None
        except (json.JSONDecodeError, AttributeError, KeyError, IndexError, TypeError):
            pass
        bundle_file = bundle_path(device_slug(name), day)
        bundle_file.parent.mkdir(parents=True, exist_ok=True)
        site = work / "site"
        shutil.rmtree(site, ignore_errors=True)
        for step in plan(bundle_file, site, args.quick)[1:]:
            record(step, run_step(step))

        table = ""
        if bundle_file.exists():
            from gpulesson.results import bundle as bundle_module

            try:
                table = summary_text(summary(bundle_module.load(bundle_file)))
            except ValueError as exc:
                table = f"the bundle {bundle_file} did not load: {exc}"
        else:
            table = f"no bundle at {bundle_file}: the measure step did not write one"
        log.write("=== summary\n" + table + "\n")
    print(f"\nbundle: {bundle_file}\nlog: {log_path}\n")
    print(table)
    print()
    for r in results:
        print(f"{r.name:<11} {'ok' if r.ok else 'FAILED'}")
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
