"""The site's loader for ``results/``: the pages "Results across GPUs" and "Compare your machine".

The library never reads the repository's folders; this module does, for the site only.
It loads every bundle under ``results/reference/`` (made by the project's GPU runners) and
``results/community/`` (sent by readers), each validated (a bad bundle fails the strict
build, naming the file and field), and renders:

* :func:`results_markdown`: which bundles exist (reference and community apart, with the
  software that made them), the headline figures side by side, then every figure, each
  with its fraction of the device's datasheet peak; a plain notice while no GPU bundle
  exists; the headline figures charted across GPUs (predicted, published, measured); then
  every published measurement (``gpulesson/results/published.json``, loaded
  and checked here, so a bad row fails the build) beside its device's prediction;
* :func:`compare_html`: the file picker, the places the tables and charts appear, and the
  reference figures, published rows and predictions per datasheet device as JSON for
  ``docs/javascripts/compare.js``, which does the rest in the reader's browser (nothing is
  uploaded).

Fixture bundles (``tests/fixtures/bundles/``) are never read here: the tests pass their
folder explicitly.

>>> load_results(Path("/no/such/folder"))
()
"""

from __future__ import annotations

from pathlib import Path

from gpulesson.results import datasheets
from gpulesson.results.bundle import FLOPS_TOLERANCE, SCHEMA_VERSION, UNITS
from gpulesson.results.compare import Sourced, across, load_dir
from gpulesson.results.published_render import (
    across_charts_html,
    compare_published_data,
    load_rows,
    published_markdown,
)
from gpulesson.results.render import (
    across_to_markdown,
    browser_data,
    bundles_markdown,
    display_scales,
    headline_chart_template,
    throughput_chart,
)
from gpulesson.text import script_json
from gpulesson.timing.charts import to_html

REPO_ROOT = Path(__file__).resolve().parents[2]
RESULTS_DIR = REPO_ROOT / "results"


def load_results(root: Path = RESULTS_DIR) -> tuple[Sourced, ...]:
    """Reference bundles, then community bundles, each oldest first."""
    return load_dir(root / "reference", "reference") + load_dir(root / "community", "community")


def _notice(bundles: tuple[Sourced, ...]) -> str:
    gpus = [b for b in bundles if b.bundle.provenance.device_type in ("cuda", "mps")]
    if not bundles:
        return (
            '!!! note "No result bundles yet"\n'
            "    No bundle has been committed under `results/` yet, so no figure on this page "
            "was measured by the project: the charts and tables show the course's "
            "predictions and others' published measurements. Make a bundle with "
            "`gpulesson measure --out mine.json` and see [Compare your machine](../compare/) "
            "for how to send it."
        )
    if not gpus:
        return (
            '!!! warning "No GPU bundle yet"\n'
            "    Every bundle below was measured on a CPU: the project's GPU runners have "
            "not published a bundle yet. These are CPU figures, not GPU figures."
        )
    return ""


def results_markdown(root: Path = RESULTS_DIR, published_file: Path | None = None) -> str:
    """The results page's body: the charts across GPUs, every bundle under ``root``, then the
    published measurements (``published_file``: a copy a test writes; by default the
    package's, checked, so a malformed or unsourced row fails the build naming it)."""
    rows = load_rows(published_file)
    bundles = load_results(root)
    parts = [_notice(bundles)] if _notice(bundles) else []
    if bundles:
        reference = sum(1 for b in bundles if b.source == "reference")
        parts += [
            "### Our bundles",
            f"{len(bundles)} bundle(s): {reference} reference, {len(bundles) - reference} "
            "community. Columns [1], [2], ... in the tables below are these bundles.",
            bundles_markdown(bundles),
            "### Headline figures",
            across_to_markdown(across(bundles, headline_only=True)),
            "### Every figure",
            across_to_markdown(across(bundles, headline_only=False)),
        ]
    if any(m.name.startswith("matmul.") for b in bundles for m in b.bundle.measurements):
        parts += [
            "### Matmul throughput by size",
            to_html(
                throughput_chart(bundles),
                caption="Matmul throughput by size, per bundle and dtype: every value is in "
                "the table above (the matmul rows).",
            ),
        ]
    parts += [
        "### Across GPUs: predicted, published, measured",
        "Each chart is one headline figure per GPU: **predicted** by the course's model from "
        "the datasheet (an upper bound for these figures), **published** by others (the "
        "tables under *Published measurements*, each linked to its source) and **measured** "
        "in this page's bundles, where one exists.",
        across_charts_html(rows, bundles),
        "### Published measurements",
        published_markdown(rows),
    ]
    return "\n\n".join(parts)


def compare_data(root: Path = RESULTS_DIR, published_file: Path | None = None) -> dict:
    """Everything compare.js needs: reference bundles, datasheet peaks, checks, display units,
    and the published rows with the predictions per datasheet device and figure."""
    bundles = load_dir(root / "reference", "reference")
    data = browser_data(bundles, datasheets.all_rows())
    data.update(compare_published_data(load_rows(published_file)))
    data["schema_versions"] = list(range(1, SCHEMA_VERSION + 1))  # version 1 is still read
    data["flops_tolerance"] = FLOPS_TOLERANCE
    data["display_scales"] = display_scales()
    data["units"] = {unit: True for unit in UNITS}
    data["charts"] = {"headline": headline_chart_template()}
    return data


def compare_html(root: Path = RESULTS_DIR, published_file: Path | None = None) -> str:
    """The compare page's interactive part; works with JavaScript only, says so without it.

    The course's throughput chart shows the reference bundles from the start (hidden while
    there is none) and the reader's series once a bundle is chosen.
    """
    payload = script_json(compare_data(root, published_file))
    references = load_dir(root / "reference", "reference")
    course_chart = to_html(
        throughput_chart(references, reader=True),
        caption="Matmul throughput by size, per bundle and dtype. The reference figures are "
        "in the tables on Results across GPUs; all of yours are printed by "
        "gpulesson compare mine.json --all.",
        hidden=not references,
    )
    return "\n".join(
        [
            '<div class="gl-compare" data-gl-compare>',
            '<p><label for="gl-compare-file"><strong>Your bundle</strong> '
            "(the JSON file <code>gpulesson measure --out mine.json</code> wrote):</label> "
            '<input type="file" id="gl-compare-file" accept=".json,application/json"></p>',
            '<p class="gl-compare-status" role="status" aria-live="polite">'
            "No file chosen yet. The file is read by this page in your browser; "
            "nothing is uploaded.</p>",
            '<div class="gl-compare-table"></div>',
            '<div class="gl-compare-chart"></div>',
            '<div class="gl-compare-published"></div>',
            '<div class="gl-compare-published-chart"></div>',
            f'<div class="gl-compare-course">{course_chart}</div>',
            "<noscript><p>This comparison runs in your browser and needs JavaScript. "
            "Without it, run <code>gpulesson compare mine.json</code> in a clone of the "
            "repository: it prints the same table.</p></noscript>",
            "</div>",
            f'<script type="application/json" id="gl-compare-data">{payload}</script>',
        ]
    )


def references_markdown(root: Path = RESULTS_DIR) -> str:
    """The reference bundles the page compares against, or a notice when there are none."""
    bundles = load_dir(root / "reference", "reference")
    if not bundles:
        return (
            '!!! note "No reference bundles yet"\n'
            "    There is nothing to compare against yet: the table will show your own "
            "figures only."
        )
    lines = [bundles_markdown(bundles)]
    if not any(b.bundle.provenance.device_type in ("cuda", "mps") for b in bundles):
        lines.insert(
            0,
            '!!! warning "No GPU reference bundle yet"\n'
            "    The only reference bundles are CPU bundles: the project's GPU runners have "
            "not published one yet.",
        )
    return "\n\n".join(lines)
