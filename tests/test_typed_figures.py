"""No typed figures in lesson prose (gpulesson/site/course_rules.py, rule 5; issue 23, item 5).

A number with a unit in a lesson's prose is filled from a fact or marked ``{q: ...}`` (a
quoted source figure or a teaching estimate); everything else is reported with its line.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpulesson.site import course_rules, typed_hook
from gpulesson.site.course_rules import TypedFigure, render_quoted, typed_figures
from tests.conftest import REPO

LESSONS = REPO / "docs" / "lessons"


def _figures(text: str) -> list[str]:
    return [f.figure for f in typed_figures(text)]


@pytest.mark.parametrize(
    "figure",
    [
        *("24.5 GB", "80 GiB", "512 MB", "256 MiB", "64 KB", "128 KiB", "2 TB", "1 TiB"),
        *("16 bytes", "2 B/param", "989 TFLOP/s", "83.2 GFLOP/s", "2 PFLOP/s", "5 FLOP/s"),
        *("6 FLOPs", "3,350 GB/s", "3.35 TB/s", "900 MB/s", "5 ms", "10 µs", "10 us"),
        *("300 ns", "0.20 s", "12x", "12 x", "95%", "700 W", "1.41 GHz", "95.7 tokens/s"),
        *("1,552 hours", "10 minutes", "24.5GB", "$931"),
    ],
)
def test_each_unit_is_a_figure(figure):
    assert _figures(f"The run takes {figure} here.") == [figure]


def test_a_figure_typed_into_a_claim_or_describe_body_is_reported():
    """Their bodies are prose: only the ``{fact}`` fields are filled by the build."""
    text = '```claim rule="a.x > 1"\nIt holds {a.x:.1f} GB of the 24 GiB card.\n```'
    assert typed_figures(text) == [
        TypedFigure(2, "24 GiB", "It holds {a.x:.1f} GB of the 24 GiB card.")
    ]
    assert _figures("```describe\nIt rose 3.2x, to {d.share:.0%}.\n```") == ["3.2x"]


def test_about_24_5_gb_multipliers_and_percentages_are_reported_with_their_lines():
    text = "# Title\n\nIt needs about 24.5 GB.\n\nThat is 12x faster, and 95% of the peak."
    assert typed_figures(text) == [
        TypedFigure(3, "24.5 GB", "It needs about 24.5 GB."),
        TypedFigure(5, "12x", "That is 12x faster, and 95% of the peak."),
        TypedFigure(5, "95%", "That is 12x faster, and 95% of the peak."),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "An A100 80GB, an A100 40GB, an H100 SXM, an H100 SXM5 80GB, an H200 141GB.",
        "Built with torch 2.4, CUDA 12.1 and Python 3.14 (also 2.4.1).",
        "In 2024, as in the 1990s.",
        "See section 3.1, §4.2 and table 4.",
        "GB means 2^30 bytes here, or 2**30 bytes; 10^9 is a billion.",
        "7 x 10^9 parameters, 4 x 4 tiles, 2.5 x\n10^12 FLOP, 1000 x major + 10 x minor.",
        "The cache is 2 x layers x heads x bytes; 4 x (N-1)/N; n > 6 x ridge.",
        "fp16, bf16, fp8, int4 and float32 weights.",
        "Run `--card 80GiB` or ``about 24.5 GB``.",
        "```python\nx = 24.5  # GB\nprint('24.5 GB')\n```",
        "~~~\n24.5 GB\n~~~",
        '```claim rule="a.x > 1"\nIt holds {a.x:.1f} GB, above {a.y:.0f}% and {q: 24.5 GB}.\n```',
        "```describe\nFrom batch 1 it rose {d.gain:.1f}x, to {d.share:.0%}.\n```",
        "    ````markdown\n    ```python\n    24 GB\n    ```\n    ````",
        "Read [the sheet](https://x.org/80GB-5ms.pdf) and <https://y.org/95%>.",
        "Read [the sheet][s].\n\n[s]: https://x.org/24.5GB",
        "<!-- about 24.5 GB,\nand 12x -->",
        "---\ngpu_figures: true\nmemory: 24 GB\n---\n\n# Title",
        "*[HBM]: high-bandwidth memory, 3.35 TB/s",
        "Sources put it at {q: 84 GB}, {q: 98 GB} or {q: 112 GB}.",
        '<div class="gl-lab" data-width="50%"></div>',
    ],
)
def test_what_is_not_a_figure(text):
    assert _figures(text) == []


def test_the_product_names_come_from_the_datasheet_table():
    names = course_rules.product_names()
    assert names.fullmatch("H200 SXM 141GB") and names.fullmatch("A100 80GB")
    assert not names.fullmatch("RTX 4090 24GB")  # the table's row is "GeForce RTX 4090"
    assert _figures("An RTX 4090 24GB.") == ["24GB"]


def test_the_marker_renders_as_a_marked_span_outside_code():
    page = "About {q: 84 <GB>} here.\n\n`{q: 1 GB}`\n\n```text\n{q: 2 GB}\n```\n"
    assert render_quoted(page) == (
        f'About <span class="gl-q" title="{course_rules.Q_TITLE}">84 &lt;GB&gt;</span> here.'
        "\n\n`{q: 1 GB}`\n\n```text\n{q: 2 GB}\n```\n"
    )
    assert course_rules.Q_TITLE == (
        "Quoted from a cited source or a teaching estimate: not computed by this build"
    )


def test_an_error_names_file_line_figure_and_fix(tmp_path):
    page = tmp_path / "demo.md"
    page.write_text("# Demo\n\nIt needs about 24.5 GB.\n")
    assert course_rules.typed_figures_errors(page, "docs/lessons/demo.md") == [
        'docs/lessons/demo.md:3: typed figure "24.5 GB" in the prose: fill it from a fact '
        "with a ```describe block, or mark a quoted source figure or teaching estimate as "
        "{q: ...}; see CONTRIBUTING.md"
    ]


def test_figures_in_a_real_lesson_sit_on_the_lines_named():
    page = LESSONS / "budget.md"
    lines = page.read_text(encoding="utf-8").split("\n")
    found = typed_figures(page.read_text(encoding="utf-8"))
    for figure in found:
        assert lines[figure.line - 1] == figure.text
        assert figure.figure.replace(" ", "") in figure.text.replace(" ", "")
    added = "\n".join(lines).rstrip("\n") + "\n\nIt needs about 24.5 GB.\n"
    last = typed_figures(added)[-1]
    assert (last.line, last.figure) == (len(added.split("\n")) - 1, "24.5 GB")


def test_the_course_has_no_typed_figures():
    assert course_rules.typed_figures_problems(REPO / "docs") == []


CLEAN = "# Clean\n\nSources put it at {q: 84 GB}; run `--card 24GB` on an A100 80GB.\n"
MKDOCS_YML = f"""\
site_name: fixture
strict: true
hooks:
  - {REPO / "gpulesson" / "site" / "typed_hook.py"}
markdown_extensions:
  - pymdownx.superfences
validation:
  nav:
    omitted_files: info
    not_found: info
  links:
    not_found: info
    anchors: info
    unrecognized_links: info
    absolute_links: info
"""


def _build(project: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(project / "mkdocs.yml")],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.site
def test_a_lesson_with_a_typed_figure_fails_the_strict_build(tmp_path):
    (tmp_path / "docs" / "lessons").mkdir(parents=True)
    (tmp_path / "mkdocs.yml").write_text(MKDOCS_YML)
    (tmp_path / "docs" / "lessons" / "clean.md").write_text(CLEAN)
    clean = _build(tmp_path)
    assert clean.returncode == 0, clean.stderr[-3000:]
    html = (tmp_path / "site" / "lessons" / "clean" / "index.html").read_text()
    assert f'<span class="gl-q" title="{course_rules.Q_TITLE}">84 GB</span>' in html

    copy = (LESSONS / "where-to-run.md").read_text(encoding="utf-8").rstrip("\n")
    copy += "\n\nA 7B model in fp32 needs about 24.5 GB.\n"
    (tmp_path / "docs" / "lessons" / "copy.md").write_text(copy)
    line = len(copy.split("\n")) - 1
    failed = _build(tmp_path)
    assert failed.returncode == 1
    assert f'docs/lessons/copy.md:{line}: typed figure "24.5 GB" in the prose: fill it' in (
        failed.stderr
    )
    assert "Aborted with" in failed.stderr + failed.stdout
    assert "docs/lessons/clean.md" not in failed.stderr


def test_the_hook_logs_each_typed_figure_as_a_warning(tmp_path, caplog):
    (tmp_path / "lessons").mkdir()
    (tmp_path / "lessons" / "x.md").write_text("About 24.5 GB.\n")
    config = {"docs_dir": str(tmp_path)}
    assert typed_hook.on_config(config) is config
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert typed_hook.check_typed_figures(tmp_path) == [
        f'{tmp_path.name}/lessons/x.md:1: typed figure "24.5 GB" in the prose: '
        + course_rules.TYPED_FIX
    ]
    assert [r.levelname for r in caplog.records][-1:] == ["WARNING"]
