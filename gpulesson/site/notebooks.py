"""Companion notebooks: one per lesson, generated from its snippets and exercises.

A lesson's notebook is built from two things only: the snippet files the lesson
includes (its ``--8<-- "name.py"`` lines) and its "## Exercises" section. The
snippet cells hold each file verbatim, so a notebook cannot drift from the
file the page shows and the tests run; ``tests/test_notebooks.py`` fails when a
committed notebook differs from what this module generates. Regenerate all of
them with ``python -m gpulesson.site.notebooks`` (``--check`` only reports).

Steps, per lesson: read the title, the included snippets (first appearance
order) and the exercises; emit a runtime-check cell, then for each snippet a
``%%writefile`` cell (the file, verbatim) and a ``%run`` cell with small
arguments on a CPU runtime, then each exercise with a scratch cell. The
notebooks are written without outputs: every number a reader sees comes from
their own runtime. Used by the companion notebooks and ``site_notebooks.py``.

>>> page = '# Title\\n\\n```{.python notest}\\n--8<-- "pick_device.py"\\n```\\n'
>>> lesson = parse_lesson("x", page)
>>> lesson.title, lesson.snippets, lesson.exercises
('Title', ('pick_device.py',), '')
"""

from __future__ import annotations

import argparse
import ast
import json
import posixpath
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpulesson.site.claim_fence import LANGUAGES as FACT_FENCES
from gpulesson.site.course_rules import unquoted

REPO_ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK_DIR = "docs/notebooks"
REGENERATE = "python -m gpulesson.site.notebooks"


@dataclass(frozen=True)
class SnippetRun:
    """How a notebook runs one snippet: its arguments on a CUDA runtime and on any other.

    ``cpu_args`` (used on CPU and Apple MPS runtimes) of ``None`` means the program
    only makes sense on a CUDA GPU: the cell then prints why it skipped instead.
    """

    gpu_args: tuple[str, ...] = ()
    cpu_args: tuple[str, ...] | None = ()


# Arguments per snippet; a snippet not listed runs with none, on every runtime.
# CPU arguments are small so that a CPU runtime (and the test suite) finishes in seconds.
SNIPPET_RUNS: dict[str, SnippetRun] = {
    "sync_benchmark.py": SnippetRun((), ("--size", "512")),
    "napkin_budget.py": SnippetRun(
        ("--params", "7e9", "--recipe", "bf16"), ("--params", "7e9", "--recipe", "bf16")
    ),
    # The cap keeps the search short on a big card and leaves the rest of it alone.
    "largest_batch.py": SnippetRun(("--limit-gib", "2"), ()),
    # Exhausting host or unified memory can freeze a machine: the snippet refuses without CUDA.
    "provoke_oom.py": SnippetRun(("--limit-gib", "2"), None),
    # A GPU runs the default GPT step; a CPU runtime a smaller one, so the cell takes seconds.
    "flops_and_mfu.py": SnippetRun(
        (), ("--layers", "2", "--hidden", "128", "--seq", "64", "--batch", "2", "--steps", "3")
    ),
    # On a GPU the default model (about 130M parameters, fp16); on a CPU runtime a small one.
    "decode_speed.py": SnippetRun(
        ("--batches", "1,8,32"),
        ("--batches", "1,4", "--layers", "2", "--hidden", "256", "--heads", "4", "--tokens", "4"),
    ),
    # Writes the trace (and on CUDA the memory snapshot) next to the notebook, to download.
    "profile_step.py": SnippetRun(
        ("--memory", "--trace", "trace.json", "--snapshot", "snapshot.pickle"),
        ("--memory", "--hidden", "256", "--trace", "trace.json"),
    ),
    # A CPU runtime times fewer, lighter batches, so the cell takes a couple of seconds.
    "loader_benchmark.py": SnippetRun(
        (), ("--batch-size", "8", "--batches", "6", "--words", "200")
    ),
    # Two CPU processes over loopback on every runtime (one GPU has no partner); a CPU
    # runtime times three sizes, fewer times, so the cell takes a few seconds.
    "allreduce_bench.py": SnippetRun((), ("--sizes", "64KiB,1MiB,16MiB", "--repeats", "5")),
}


@dataclass(frozen=True)
class RepoLinks:
    """Where the repository lives, for Colab and source links (from mkdocs.yml)."""

    owner: str
    name: str
    branch: str

    @property
    def web_url(self) -> str:
        """The repository's GitHub page."""
        return f"https://github.com/{self.owner}/{self.name}"

    def blob_url(self, path: str) -> str:
        """The GitHub page of one file in the repository.

        >>> RepoLinks("o", "r", "main").blob_url("snippets/a.py")
        'https://github.com/o/r/blob/main/snippets/a.py'
        """
        return f"{self.web_url}/blob/{self.branch}/{path}"

    def colab_url(self, path: str) -> str:
        """The URL that opens a notebook of the repository in Google Colab.

        >>> RepoLinks("o", "r", "main").colab_url("docs/notebooks/timing.ipynb")
        'https://colab.research.google.com/github/o/r/blob/main/docs/notebooks/timing.ipynb'
        """
        return f"https://colab.research.google.com/github/{self.owner}/{self.name}/blob/{self.branch}/{path}"


def repo_links(repo_url: str, edit_uri: str | None = None) -> RepoLinks:
    """Derive owner, name and branch from mkdocs.yml's ``repo_url`` and ``edit_uri``.

    >>> repo_links("https://github.com/gpulesson/gpulesson", "edit/main/docs/")
    RepoLinks(owner='gpulesson', name='gpulesson', branch='main')
    >>> repo_links("https://gitlab.com/a/b")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: repo_url 'https://gitlab.com/a/b' is not a GitHub repository: Colab opens ...
    """
    match = re.fullmatch(r"https://github\.com/([\w.-]+)/([\w.-]+?)(?:\.git)?/?", repo_url or "")
    if not match:
        raise ValueError(
            f"repo_url {repo_url!r} is not a GitHub repository: "
            "Colab opens notebooks from https://github.com/OWNER/NAME"
        )
    branch = re.match(r"(?:edit|blob|tree)/([^/]+)/", edit_uri or "")
    return RepoLinks(match.group(1), match.group(2), branch.group(1) if branch else "main")


@dataclass(frozen=True)
class Lesson:
    """What a companion notebook is made from: one lesson's title, snippets, exercises."""

    slug: str
    title: str
    snippets: tuple[str, ...]
    exercises: str  # the body of the "## Exercises" section, MkDocs Markdown
    code_blocks: tuple[tuple[str, str], ...] = ()  # (section heading, code) of runnable fences

    @property
    def source_path(self) -> str:
        """The lesson's path in the repository."""
        return f"docs/lessons/{self.slug}.md"

    @property
    def notebook_path(self) -> str:
        """The notebook's path in the repository."""
        return f"{NOTEBOOK_DIR}/{self.slug}.ipynb"


_FRONT_MATTER = re.compile(r"\A---\n.*?\n---\n", re.DOTALL)
_H1 = re.compile(r"^# (.+?)\s*$", re.MULTILINE)
_INCLUDE = re.compile(r'^\s*--8<--\s+"([\w./-]+?\.py)(?::[^"]*)?"\s*$', re.MULTILINE)
_H2 = re.compile(r"^## (.+?)\s*$", re.MULTILINE)


def parse_lesson(slug: str, markdown: str) -> Lesson:
    """Read the parts of a lesson that its notebook is made from.

    >>> text = "# T\\n## Exercises\\n\\n1. Run it.\\n\\n## Later\\n"
    >>> parse_lesson("t", text).exercises
    '1. Run it.'
    """
    body = _FRONT_MATTER.sub("", markdown, count=1)
    title = _H1.search(body)
    snippets: list[str] = []
    for name in _INCLUDE.findall(body):
        if name not in snippets:
            snippets.append(name)
    exercises = ""
    headings = list(_H2.finditer(body))
    for i, heading in enumerate(headings):
        if heading.group(1).strip().lower() == "exercises":
            end = headings[i + 1].start() if i + 1 < len(headings) else len(body)
            exercises = body[heading.end() : end].strip("\n").rstrip()
            break
    before_exercises = body[: body.find(exercises)] if exercises else body
    return Lesson(
        slug,
        title.group(1) if title else slug,
        tuple(snippets),
        exercises,
        tuple(runnable_code_blocks(before_exercises)),
    )


_PLAIN_PYTHON_FENCE = re.compile(r"^(\s*)(`{3,})\s*(?:python|py)\s*$")


def needs_only_torch(code: str) -> bool:
    """True when ``code`` parses and imports nothing beyond torch and the standard library.

    >>> needs_only_torch("import torch, math"), needs_only_torch("from gpulesson import units")
    (True, False)
    """
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return False
    allowed = set(sys.stdlib_module_names) | {"torch"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""] if node.level == 0 else ["."]
        else:
            continue
        if any(name.split(".")[0] not in allowed for name in names):
            return False
    return True


def runnable_code_blocks(markdown: str) -> list[tuple[str, str]]:
    """The lesson's plain ```python fences that need only torch, with their section heading.

    These are the fences pytest-markdown-docs runs (no ``notest``, no ``exec``), so
    each one already runs on its own.

    >>> runnable_code_blocks("## Check\\n\\n```python\\nimport torch\\n```\\n")
    [('Check', 'import torch')]
    """
    blocks: list[tuple[str, str]] = []
    heading = ""
    lines = markdown.split("\n")
    i = 0
    while i < len(lines):
        h2 = _H2.match(lines[i])
        fence = _PLAIN_PYTHON_FENCE.match(lines[i])
        if h2:
            heading = h2.group(1)
        elif fence:
            pad, marker = fence.groups()
            close = i + 1
            while close < len(lines) and lines[close].strip() != marker:
                close += 1
            code = "\n".join(_dedent(lines[i + 1 : close], len(pad))).strip("\n")
            if needs_only_torch(code):
                blocks.append((heading, code))
            i = close
        i += 1
    return blocks


def _yaml_loader() -> Any:
    import yaml

    class Loader(yaml.SafeLoader):
        """A safe loader that reads MkDocs' ``!!python/name`` and ``!ENV`` tags as None."""

    Loader.add_multi_constructor("", lambda loader, suffix, node: None)
    return Loader


def read_mkdocs_config(root: Path = REPO_ROOT) -> dict[str, Any]:
    """mkdocs.yml as a dict (tags such as ``!!python/name`` read as None)."""
    import yaml

    return yaml.load((root / "mkdocs.yml").read_text(), Loader=_yaml_loader())  # noqa: S506


def nav_paths(nav: Any) -> list[str]:
    """Every page path in a MkDocs nav, in order.

    >>> nav_paths([{"Home": "index.md"}, {"Lessons": [{"A": "lessons/a.md"}, "lessons/b.md"]}])
    ['index.md', 'lessons/a.md', 'lessons/b.md']
    """
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [path for item in nav for path in nav_paths(item)]
    if isinstance(nav, dict):
        return [path for value in nav.values() for path in nav_paths(value)]
    return []


def lesson_order(slugs: list[str], nav: Any) -> list[str]:
    """Slugs in the nav's order; lessons not in the nav yet follow, alphabetically.

    >>> lesson_order(["b", "a", "c"], [{"L": ["lessons/c.md", "lessons/a.md"]}])
    ['c', 'a', 'b']
    """
    in_nav = [p[len("lessons/") : -len(".md")] for p in nav_paths(nav) if p.startswith("lessons/")]
    ordered = [s for s in in_nav if s in slugs]
    return ordered + sorted(s for s in slugs if s not in ordered)


def read_lessons(root: Path = REPO_ROOT, nav: Any = None) -> list[Lesson]:
    """Every lesson under docs/lessons, in course order."""
    if nav is None:
        nav = read_mkdocs_config(root).get("nav")
    paths = {p.stem: p for p in (root / "docs" / "lessons").glob("*.md")}
    return [parse_lesson(s, paths[s].read_text()) for s in lesson_order(list(paths), nav)]


# --- MkDocs Markdown to notebook Markdown -------------------------------------------------

_ADMONITION = re.compile(r'^(\s*)(\?\?\?\+?|!!!)\s+([\w-]+)(?:\s+"([^"]*)")?\s*$')
_TAB = re.compile(r'^(\s*)===\+?\s+"([^"]*)"\s*$')
_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*(.*)$")
_MD_LINK = re.compile(r"\]\((?!https?:|#|mailto:)([^)\s]+?\.md)(#[^)\s]*)?\)")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _block(lines: list[str], start: int, indent: int) -> int:
    """Index just past the indented body that starts at ``start``."""
    end = start
    while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > indent):
        end += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return end


def _dedent(lines: list[str], by: int) -> list[str]:
    return [line[by:] if line.strip() else "" for line in lines]


def fence_language(info: str) -> str:
    """The language of a fence's info string, without MkDocs attributes.

    >>> fence_language('{.python notest}'), fence_language('python exec="on" id="a"')
    ('python', 'python')
    >>> fence_language('bash'), fence_language('')
    ('bash', '')
    """
    word = info.strip().lstrip("{").split(" ")[0].rstrip("}")
    return word.lstrip(".")


def notebook_markdown(text: str, links: RepoLinks, lesson_dir: str = "docs/lessons") -> str:
    """Rewrite MkDocs Markdown so Jupyter and Colab render it.

    Collapsible ``???`` blocks become ``<details>``, other admonitions become
    quotes with a bold title, content tabs become bold labels, fence attributes
    are dropped, an included snippet points at its cells, and links to other
    pages point at their source on GitHub.

    >>> links = RepoLinks("o", "r", "main")
    >>> print(notebook_markdown('1. Q?\\n\\n    ??? success "Worked answer"\\n        A.', links))
    1. Q?
    <BLANKLINE>
        <details><summary>Worked answer</summary>
    <BLANKLINE>
        A.
    <BLANKLINE>
        </details>
    >>> notebook_markdown("see [timing](timing.md#why)", links)
    'see [timing](https://github.com/o/r/blob/main/docs/lessons/timing.md#why)'
    >>> notebook_markdown("A source's {q: 84 GB}.", links)  # the quoted-figure marker's text
    "A source's 84 GB."
    """
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        admonition = _ADMONITION.match(line)
        tab = _TAB.match(line)
        fence = _FENCE.match(line)
        if admonition or tab:
            match = admonition or tab
            assert match is not None
            pad = match.group(1)
            end = _block(lines, i + 1, len(pad))
            body = notebook_markdown(
                "\n".join(_dedent(lines[i + 1 : end], len(pad) + 4)).strip("\n"),
                links,
                lesson_dir,
            ).split("\n")
            if tab:
                out += [f"{pad}**{tab.group(2)}**", ""] + [pad + b if b else b for b in body]
            elif admonition and admonition.group(2).startswith("???"):
                summary = admonition.group(4) or admonition.group(3).capitalize()
                out += [f"{pad}<details><summary>{summary}</summary>", ""]
                out += [pad + b if b else b for b in body]
                out += ["", f"{pad}</details>"]
            else:
                assert admonition is not None
                title = admonition.group(4) or admonition.group(3).capitalize()
                out += [f"{pad}> **{title}**", f"{pad}>"]
                out += [f"{pad}> {b}".rstrip() for b in body]
            i = end
        elif fence:
            pad, marker, info = fence.groups()
            close = i + 1
            while close < len(lines) and not lines[close].strip().startswith(marker):
                close += 1
            inner = lines[i + 1 : close]
            included = [m.group(1) for m in map(_INCLUDE.match, inner) if m]
            if fence_language(info) in FACT_FENCES:  # filled from the build's facts
                out.append(
                    f"{pad}*(Figures computed when the site is built: see the lesson page.)*"
                )
            elif included:
                names = ", ".join(f"`{name}`" for name in included)
                out.append(f"{pad}(The program {names}: see its cells above.)")
            else:
                out += [f"{pad}{marker}{fence_language(info)}", *inner, f"{pad}{marker}"]
            i = close + 1
        else:
            out.append(_MD_LINK.sub(lambda m: _link(m, links, lesson_dir), unquoted(line)))
            i += 1
    return "\n".join(out)


def _link(match: re.Match[str], links: RepoLinks, lesson_dir: str) -> str:
    path = posixpath.normpath(posixpath.join(lesson_dir, match.group(1)))
    return f"]({links.blob_url(path)}{match.group(2) or ''})"


def exercise_items(exercises: str) -> tuple[str, list[str]]:
    """Split an exercises section into its intro and its top-level numbered items.

    >>> exercise_items("Try these.\\n\\n1. One.\\n\\n    More.\\n2. Two.")
    ('Try these.', ['1. One.\\n\\n    More.', '2. Two.'])
    """
    starts = [m.start() for m in re.finditer(r"^\d+\. ", exercises, re.MULTILINE)]
    if not starts:
        return exercises.strip(), []
    intro = exercises[: starts[0]].strip()
    bounds = [*starts, len(exercises)]
    return intro, [exercises[a:b].strip() for a, b in zip(bounds, bounds[1:], strict=False)]


# --- Cells ------------------------------------------------------------------------------

RUNTIME_CHECK = """\
# Which runtime is this? Every cell below also runs without a GPU.
import platform

import torch

print(f"Python {platform.python_version()}, torch {torch.__version__}")
if torch.cuda.is_available():
    props = torch.cuda.get_device_properties(0)
    print(f"CUDA GPU attached: {props.name}, {props.total_memory / 2**30:.1f} GiB")
elif torch.backends.mps.is_available():
    print("Apple GPU (MPS) available: cells run on it; CUDA-only cells skip.")
else:
    print("No GPU attached: cells run on the CPU with small sizes.")
    print("To attach one in Colab: Runtime > Change runtime type > GPU > Save.")
"""

NVIDIA_SMI = """\
# GPU cell: the driver's own view of the card. It needs an NVIDIA GPU.
import shutil
import subprocess

if torch.cuda.is_available() and shutil.which("nvidia-smi"):
    print(subprocess.run(["nvidia-smi"], capture_output=True, text=True).stdout)
else:
    print("Skipped: no NVIDIA GPU on this runtime, so no nvidia-smi to ask.")
"""


def snippet_summary(source: str) -> str:
    """The first line of a snippet's module docstring.

    >>> snippet_summary('\"\"\"Pick a device.\\n\\nMore.\"\"\"\\nimport torch\\n')
    'Pick a device.'
    """
    doc = ast.get_docstring(ast.parse(source)) or ""
    return doc.strip().split("\n")[0]


def run_cell(name: str, run: SnippetRun) -> str:
    """The cell that runs a snippet with arguments suited to the runtime.

    >>> print(run_cell("b.py", SnippetRun(("--size", "4096"), ("--size", "256"))))
    import torch
    <BLANKLINE>
    if torch.cuda.is_available():
        %run b.py --size 4096
    else:
        # No CUDA GPU: smaller arguments, so the cell finishes in seconds.
        %run b.py --size 256
    >>> print(run_cell("a.py", SnippetRun()))
    %run a.py
    """
    gpu = " ".join([name, *run.gpu_args])
    if run.cpu_args is None:
        return (
            "import torch\n\nif torch.cuda.is_available():\n"
            f"    %run {gpu}\nelse:\n"
            f'    print("Skipped: {name} needs a CUDA GPU, and this runtime has none.")\n'
            '    print("To attach one in Colab: Runtime > Change runtime type > GPU > Save.")'
        )
    cpu = " ".join([name, *run.cpu_args])
    if cpu == gpu:
        return f"%run {gpu}"
    return (
        "import torch\n\n"
        "if torch.cuda.is_available():\n"
        f"    %run {gpu}\nelse:\n"
        "    # No CUDA GPU: smaller arguments, so the cell finishes in seconds.\n"
        f"    %run {cpu}"
    )


def _cell(kind: str, source: str, index: int) -> dict[str, Any]:
    cell: dict[str, Any] = {
        "cell_type": kind,
        "id": f"cell-{index:02d}",
        "metadata": {},
        "source": source.rstrip("\n").splitlines(keepends=True),
    }
    if kind == "code":
        cell["execution_count"] = None
        cell["outputs"] = []
    return cell


def build_notebook(
    lesson: Lesson, links: RepoLinks, snippets_dir: Path = REPO_ROOT / "snippets"
) -> dict[str, Any]:
    """The companion notebook of one lesson, as nbformat 4 JSON data (no outputs)."""
    cells: list[tuple[str, str]] = []
    sources = [f"[{lesson.source_path}]({links.blob_url(lesson.source_path)})"]
    sources += [f"[snippets/{n}]({links.blob_url('snippets/' + n)})" for n in lesson.snippets]
    cells.append(
        (
            "markdown",
            f"# {lesson.title}: companion notebook\n\n"
            f"The runnable parts of the lesson [{lesson.title}]"
            f"({links.blob_url(lesson.source_path)}): "
            + ("its programs and " if lesson.snippets else "")
            + "its exercises. It needs only PyTorch, and runs on a CUDA GPU, an Apple GPU "
            "(MPS) or a plain CPU.\n\n"
            f"[Open in Colab]({links.colab_url(lesson.notebook_path)}) · "
            "no outputs are stored in this file: every number you see comes from the runtime "
            "you run it on.\n\n"
            f"Generated by `{REGENERATE}` from {', '.join(sources)}. "
            "Edit those files, not this notebook.",
        )
    )
    cells.append(
        (
            "markdown",
            "## Check the runtime\n\n"
            "The first cell says whether a GPU is attached. On Colab's free tier you can attach "
            "one: **Runtime > Change runtime type**, pick a GPU accelerator (such as T4), "
            "**Save**, then run the cell again. Without one, every cell still runs on the CPU "
            "with smaller sizes, and cells that need a GPU say that they skipped.",
        )
    )
    cells += [("code", RUNTIME_CHECK), ("code", NVIDIA_SMI)]
    if lesson.snippets:
        cells.append(
            (
                "markdown",
                "## The programs from the lesson\n\n"
                "Each program takes two cells. The first writes the file exactly as the "
                "repository has it (`%%writefile`), so you can also download it and run it "
                "with `python NAME.py --help`; the second runs it with `%run`, with smaller "
                "arguments when no CUDA GPU is attached.",
            )
        )
    for name in lesson.snippets:
        source = (snippets_dir / name).read_text()
        summary = snippet_summary(source)
        cells.append(
            (
                "markdown",
                f"### {name}\n\n{summary}\n\n"
                f"Source: [snippets/{name}]({links.blob_url('snippets/' + name)}).",
            )
        )
        cells.append(("code", f"%%writefile {name}\n{source}".rstrip("\n")))
        cells.append(("code", run_cell(name, SNIPPET_RUNS.get(name, SnippetRun()))))
    if lesson.code_blocks:
        cells.append(
            (
                "markdown",
                "## Code from the lesson\n\n"
                "The short programs the lesson shows, as they appear on its page (the tests run "
                "each of them).",
            )
        )
    for heading, code in lesson.code_blocks:
        cells.append(("markdown", f"From *{heading}*:" if heading else "From the lesson:"))
        cells.append(("code", code))
    intro, items = exercise_items(lesson.exercises)
    if lesson.exercises:
        head = "## Exercises\n\nTry each one before you open its worked answer."
        if "gpulesson" in lesson.exercises:
            head += (
                " Exercises that use the course's `gpulesson` package or command need it "
                f"installed first: `%pip install git+{links.web_url}` in a cell."
            )
        if intro:
            head += "\n\n" + notebook_markdown(intro, links)
        cells.append(("markdown", head))
    for number, item in enumerate(items, start=1):
        cells.append(("markdown", notebook_markdown(item, links)))
        cells.append(("code", f"# Exercise {number}: your code here."))
    return {
        "cells": [_cell(kind, text, i) for i, (kind, text) in enumerate(cells)],
        "metadata": {
            "accelerator": "GPU",
            "colab": {"name": f"{lesson.slug}.ipynb", "provenance": []},
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def notebook_json(notebook: dict[str, Any]) -> str:
    """Serialise a notebook the way Jupyter writes it (stable, so diffs stay small)."""
    return json.dumps(notebook, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def expected_notebooks(root: Path = REPO_ROOT) -> dict[Path, str]:
    """Every notebook path the sources call for, with the text it should have."""
    config = read_mkdocs_config(root)
    links = repo_links(config.get("repo_url", ""), config.get("edit_uri"))
    return {
        root / lesson.notebook_path: notebook_json(build_notebook(lesson, links, root / "snippets"))
        for lesson in read_lessons(root, config.get("nav"))
    }


def stale_notebooks(root: Path = REPO_ROOT) -> list[str]:
    """Notebook paths that are missing, out of date, or left over from a removed lesson."""
    expected = expected_notebooks(root)
    stale = [
        str(path.relative_to(root))
        for path, text in expected.items()
        if not path.exists() or path.read_text() != text
    ]
    stale += [
        str(path.relative_to(root))
        for path in sorted((root / NOTEBOOK_DIR).glob("*.ipynb"))
        if path not in expected
    ]
    return stale


def write_notebooks(root: Path = REPO_ROOT) -> list[str]:
    """Write every notebook that changed, remove orphans; return the paths touched."""
    touched = stale_notebooks(root)
    expected = expected_notebooks(root)
    (root / NOTEBOOK_DIR).mkdir(parents=True, exist_ok=True)
    for rel in touched:
        path = root / rel
        if path in expected:
            path.write_text(expected[path])
        else:
            path.unlink()
    return touched


def main(argv: list[str] | None = None) -> int:
    """Regenerate the companion notebooks (or, with --check, list the stale ones)."""
    parser = argparse.ArgumentParser(
        prog="python -m gpulesson.site.notebooks",
        description="Regenerate docs/notebooks/*.ipynb from the lessons and snippets/.",
    )
    parser.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 if a notebook is stale"
    )
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_notebooks()
        for path in stale:
            print(f"stale: {path}")
        if stale:
            print(f"Run `{REGENERATE}` to regenerate.", file=sys.stderr)
        return 1 if stale else 0
    for path in write_notebooks():
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
