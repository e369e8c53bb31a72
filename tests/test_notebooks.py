"""The companion notebooks: up to date, verbatim snippets, torch only, and they run."""

from __future__ import annotations

import ast
import asyncio
import hashlib
import json
import os
import platform
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpulesson.site import exec_cache
from gpulesson.site import notebooks as nbgen
from gpulesson.site import notebooks_hook as site_notebooks
from tests.conftest import REPO

NOTEBOOKS = sorted((REPO / nbgen.NOTEBOOK_DIR).glob("*.ipynb"))
LESSONS = nbgen.read_lessons(REPO)
_MAGIC = re.compile(r"^(\s*)%.*$", re.MULTILINE)


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def _source(cell: dict) -> str:
    return "".join(cell["source"])


def test_every_lesson_has_a_notebook_and_none_is_stale():
    stale = nbgen.stale_notebooks(REPO)
    assert not stale, f"stale or missing notebooks {stale}: run `{nbgen.REGENERATE}`"
    assert {p.stem for p in NOTEBOOKS} == {lesson.slug for lesson in LESSONS}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_valid_nbformat_without_outputs(path: Path):
    import nbformat

    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.slug)
def test_snippet_cells_are_the_files_verbatim(lesson: nbgen.Lesson):
    written = {}
    for cell in _cells(REPO / lesson.notebook_path):
        first, _, body = _source(cell).partition("\n")
        if first.startswith("%%writefile "):
            written[first.split(" ", 1)[1]] = body
    assert list(written) == list(lesson.snippets)
    for name, body in written.items():
        assert body == (REPO / "snippets" / name).read_text().rstrip("\n"), name


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_code_needs_only_torch_and_the_standard_library(path: Path):
    allowed = set(sys.stdlib_module_names) | {"torch"}
    for cell in _cells(path):
        if cell["cell_type"] != "code":
            continue
        code = _source(cell)
        if code.startswith("%%writefile"):
            code = code.partition("\n")[2]
        tree = ast.parse(_MAGIC.sub(r"\1pass", code))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                assert name.split(".")[0] in allowed, f"{path.name} imports {name}"


def test_first_code_cell_checks_the_runtime_and_says_how_to_attach_a_gpu():
    for path in NOTEBOOKS:
        code = [_source(c) for c in _cells(path) if c["cell_type"] == "code"]
        assert code[0] == nbgen.RUNTIME_CHECK.rstrip("\n")
        assert "Change runtime type" in code[0]


def _client(path: Path, workdir: Path):
    import nbclient
    import nbformat

    return nbclient.NotebookClient(
        nbformat.read(path, as_version=4),
        timeout=600,
        kernel_name="python3",
        allow_errors=False,
        resources={"metadata": {"path": str(workdir)}},
    )


#: Notebooks executed at once, each in its own kernel: most of a run is a kernel starting
#: and importing torch, which overlaps well.
RUNS_AT_ONCE = max(2, min(4, os.cpu_count() or 1))


@dataclass(frozen=True)
class _Run:
    """One notebook executed headless: the notebook with its outputs, or what stopped it."""

    notebook: object | None
    error: BaseException | None
    workdir: Path
    cached: bool = False


#: CPU runs that passed their test, reused while nothing a run depends on has changed
#: (see _run_key). Read only when the execution cache may be (not with GPULESSON_FRESH=1,
#: not in CI): the same rule as for the site's executed blocks.
RUN_CACHE = REPO / ".cache" / "notebook-runs"


def _run_key(path: Path) -> str:
    """What a CPU run depends on: the notebook (its snippets are in it) and the machine."""
    from importlib.metadata import version

    import torch

    parts = (
        path.read_text(),
        sys.version,
        torch.__version__,
        version("ipykernel"),
        version("nbclient"),
        platform.platform(),
        str(os.cpu_count()),
        str(shutil.which("nvidia-smi")),
    )
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]


def _written(notebook) -> list[str]:
    """The files the notebook's ``%%writefile`` cells write."""
    return [
        cell.source.split("\n", 1)[0].split(" ", 1)[1]
        for cell in notebook.cells
        if cell.cell_type == "code" and cell.source.startswith("%%writefile ")
    ]


def _cached_run(path: Path, workdir: Path) -> _Run | None:
    import nbformat

    entry = RUN_CACHE / f"{path.stem}-{_run_key(path)}.json"
    if not exec_cache.cache_policy(os.environ).read or not entry.is_file():
        return None
    try:
        stored = json.loads(entry.read_text())
        notebook = nbformat.reads(stored["notebook"], as_version=4)
        for name, text in stored["files"].items():
            (workdir / name).write_text(text)
    except (OSError, ValueError, KeyError):  # a damaged entry: run the notebook again
        return None
    return _Run(notebook, None, workdir, cached=True)


def _keep(path: Path, run: _Run) -> None:
    """Store a run that passed its test."""
    import nbformat

    RUN_CACHE.mkdir(parents=True, exist_ok=True)
    for old in RUN_CACHE.glob(f"{path.stem}-*.json"):
        old.unlink()
    files = {name: (run.workdir / name).read_text() for name in _written(run.notebook)}
    entry = RUN_CACHE / f"{path.stem}-{_run_key(path)}.json"
    partial = entry.with_suffix(".tmp")
    partial.write_text(json.dumps({"notebook": nbformat.writes(run.notebook), "files": files}))
    partial.replace(entry)


async def _execute_all(paths: list[Path], root: Path, env: dict[str, str]) -> dict[str, _Run]:
    limit = asyncio.Semaphore(RUNS_AT_ONCE)

    async def one(path: Path) -> _Run:
        workdir = root / path.stem
        workdir.mkdir()
        cached = _cached_run(path, workdir)
        if cached is not None:
            return cached
        async with limit:
            client = _client(path, workdir)
            try:
                await client.async_execute(env=env)  # the kernel's environment
            except Exception as exc:  # reported by that notebook's test
                return _Run(None, exc, workdir)
        return _Run(client.nb, None, workdir)

    runs = await asyncio.gather(*(one(path) for path in paths))
    return {path.stem: run for path, run in zip(paths, runs, strict=True)}


@pytest.fixture(scope="module")
def cpu_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, _Run]:
    """Every notebook executed headless with CUDA hidden (or its unchanged earlier run)."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    return asyncio.run(_execute_all(NOTEBOOKS, tmp_path_factory.mktemp("notebooks"), env))


def _text(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_headless_on_cpu(path: Path, cpu_runs: dict[str, _Run]):
    run = cpu_runs[path.stem]
    if run.error is not None:
        raise run.error
    code = [c for c in run.notebook.cells if c.cell_type == "code"]
    for cell in code:
        errors = [o for o in cell.outputs if o.output_type == "error"]
        assert not errors, f"{path.name}: {cell.source[:80]!r} raised {errors[0]['ename']}"
    assert "No GPU attached" in _text(code[0]) or "MPS" in _text(code[0])
    assert "Skipped: no NVIDIA GPU" in _text(code[1])
    for cell in code:
        if cell.source.startswith("%%writefile "):
            name = cell.source.split("\n", 1)[0].split(" ", 1)[1]
            assert (run.workdir / name).read_text() == (REPO / "snippets" / name).read_text()
        elif "%run " in cell.source:
            assert _text(cell).strip(), f"{path.name}: {cell.source!r} printed nothing"
    if not run.cached:
        _keep(path, run)


@pytest.mark.gpu
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_on_cuda(path: Path, tmp_path: Path):
    client = _client(path, tmp_path)
    client.execute()
    code = [c for c in client.nb.cells if c.cell_type == "code"]
    assert "CUDA GPU attached" in _text(code[0])
    assert "Skipped" not in _text(code[1])


# --- the generator, on small inputs --------------------------------------------------------

LINKS = nbgen.RepoLinks("owner", "repo", "main")


def test_lesson_parts_are_read_from_the_page():
    page = (
        "---\ngpu_figures: true\n---\n\n# Timing\n\n```{.python notest}\n"
        '--8<-- "b.py"\n```\n\n=== "CUDA"\n\n    ```{.python notest}\n    --8<-- "a.py"\n'
        '    ```\n\n```{.python notest}\n--8<-- "b.py"\n```\n\n## Exercises\n\n1. Do it.\n'
    )
    lesson = nbgen.parse_lesson("timing", page)
    assert lesson.title == "Timing"
    assert lesson.snippets == ("b.py", "a.py")
    assert lesson.exercises == "1. Do it."
    assert lesson.notebook_path == "docs/notebooks/timing.ipynb"


def test_mkdocs_markdown_becomes_notebook_markdown():
    text = (
        '!!! warning "Careful"\n    Do not.\n\n=== "CPU"\n\n    On CPU.\n\n'
        '```{.python notest}\nx = 1\n```\n\n```{.python notest}\n--8<-- "b.py"\n```\n\n'
        "See [memory](../lessons/memory.md) and [x](https://e.org/a.md)."
    )
    out = nbgen.notebook_markdown(text, LINKS)
    assert "> **Careful**\n>\n> Do not." in out
    assert "**CPU**\n\nOn CPU." in out
    assert "```python\nx = 1\n```" in out
    assert "(The program `b.py`: see its cells above.)" in out
    assert "(https://github.com/owner/repo/blob/main/docs/lessons/memory.md)" in out
    assert "(https://e.org/a.md)" in out
    assert "!!!" not in out and "===" not in out and "--8<--" not in out


def test_cuda_only_snippet_skips_with_a_message_on_cpu():
    cell = nbgen.run_cell("oom.py", nbgen.SnippetRun(("--gib", "2"), None))
    assert "%run oom.py --gib 2" in cell
    assert "Skipped: oom.py needs a CUDA GPU" in cell and "Change runtime type" in cell


def test_colab_url_points_at_the_notebook_in_the_repository():
    config = nbgen.read_mkdocs_config(REPO)
    links = nbgen.repo_links(config["repo_url"], config.get("edit_uri"))
    for lesson in LESSONS:
        url = links.colab_url(lesson.notebook_path)
        prefix = f"https://colab.research.google.com/github/{links.owner}/{links.name}/blob/"
        assert url.startswith(prefix)
        branch, _, path = url[len(prefix) :].partition("/")
        assert branch == links.branch
        assert (REPO / path).is_file()
        assert f"github.com/{links.owner}/{links.name}" in config["repo_url"]


def test_stale_notebooks_are_found_and_rewritten(tmp_path: Path):
    (tmp_path / "docs" / "lessons").mkdir(parents=True)
    (tmp_path / "snippets").mkdir()
    shutil.copy(REPO / "mkdocs.yml", tmp_path / "mkdocs.yml")
    (tmp_path / "snippets" / "hello.py").write_text('"""Say hello."""\n\nprint("hello")\n')
    lesson = tmp_path / "docs" / "lessons" / "hello.md"
    lesson.write_text('# Hello\n\n```{.python notest}\n--8<-- "hello.py"\n```\n')
    assert nbgen.stale_notebooks(tmp_path) == ["docs/notebooks/hello.ipynb"]
    assert nbgen.write_notebooks(tmp_path) == ["docs/notebooks/hello.ipynb"]
    assert nbgen.stale_notebooks(tmp_path) == []
    (tmp_path / "snippets" / "hello.py").write_text('"""Say hello."""\n\nprint("hi")\n')
    assert nbgen.stale_notebooks(tmp_path) == ["docs/notebooks/hello.ipynb"]
    nbgen.write_notebooks(tmp_path)
    lesson.unlink()
    assert nbgen.stale_notebooks(tmp_path) == ["docs/notebooks/hello.ipynb"]
    nbgen.write_notebooks(tmp_path)
    assert not (tmp_path / "docs" / "notebooks" / "hello.ipynb").exists()


def test_badge_goes_after_the_title_and_the_stamp():
    page = '# T\n\n<div class="gl-stamp" markdown="0">s</div>\n\nLead.'
    out = site_notebooks.insert_after_title(page, "BADGE")
    assert out.index("gl-stamp") < out.index("BADGE") < out.index("Lead.")
    assert site_notebooks.insert_after_title("# T\nLead.", "B") == "# T\n\nB\n\nLead."


# --- the built site -----------------------------------------------------------------------


def test_lessons_link_to_colab_and_to_their_rendered_downloadable_notebook(built_site: Path):
    config = nbgen.read_mkdocs_config(REPO)
    links = nbgen.repo_links(config["repo_url"], config.get("edit_uri"))
    index = (built_site / "notebooks" / "index.html").read_text()
    assert (built_site / "assets" / "colab-badge.svg").is_file()
    for lesson in LESSONS:
        colab = links.colab_url(lesson.notebook_path)
        page = (built_site / "lessons" / lesson.slug / "index.html").read_text()
        assert colab in page and 'src="../../assets/colab-badge.svg"' in page
        assert f'href="../../notebooks/{lesson.slug}/{lesson.slug}.ipynb" download' in page
        rendered = built_site / "notebooks" / lesson.slug / "index.html"
        assert f"{lesson.title}: companion notebook" in rendered.read_text()
        assert colab in rendered.read_text()
        downloaded = built_site / "notebooks" / lesson.slug / f"{lesson.slug}.ipynb"
        assert downloaded.read_text() == (REPO / lesson.notebook_path).read_text()
        assert colab in index


def test_notebook_pages_load_nothing_from_outside(built_site: Path):
    for page in (built_site / "notebooks").rglob("*.html"):
        text = page.read_text()
        assert "cdnjs.cloudflare.com" not in text, page
        assert '<script src="">' not in text, page
        for src in re.findall(r'<img[^>]+src="([^"]+)"', text):
            assert not src.startswith(("http:", "https:", "//")), (page, src)
