"""MkDocs hooks: Colab and download links for the companion notebooks.

Named in ``mkdocs.yml`` under ``hooks:``. Each lesson with a notebook in
``docs/notebooks/`` gets a line under its title (after the provenance stamp):
an "Open in Colab" badge, a link to the rendered notebook and a download link.
Each rendered notebook page gets the same line plus a link back to its lesson,
and the Notebooks page's ``<!-- notebooks-index -->`` marker becomes a table of
all of them. The badge image is served by the site (``assets/colab-badge.svg``);
only the link goes to Colab. Colab URLs come from ``repo_url`` in mkdocs.yml.
"""

from __future__ import annotations

import html
import re
from typing import Any

from mkdocs.structure.files import Files
from mkdocs.utils import get_relative_url

from gpulesson.site.notebooks import (
    NOTEBOOK_DIR,
    Lesson,
    RepoLinks,
    read_lessons,
    repo_links,
)
from gpulesson.tables import markdown_table

BADGE = "assets/colab-badge.svg"
INDEX_MARKER = "<!-- notebooks-index -->"
_H1_LINE = re.compile(r"^# .*$", re.MULTILINE)
_STAMP_LINE = re.compile(r'\A\s*<div class="gl-stamp".*\n?')
_H1_HTML = re.compile(r"</h1>")
# nbconvert's MathJax and Mermaid loaders point at cdnjs; the notebooks use neither, and the
# site loads nothing from outside, so notebook pages drop them (restyle_notebook_html).
_OUTSIDE_LOADERS = re.compile(
    r"<!-- Load mathjax -->.*?<!-- End of mermaid configuration -->", re.DOTALL
)
_STYLE = re.compile(r"<style[^>]*>.*?</style>", re.DOTALL)
_CODE_AREA = re.compile(r'<div class="highlight-ipynb hl-(\w+)"><pre>')
_MARKDOWN_CODE = '<div class="highlight"><pre>'  # a fenced block in a Markdown cell


def restyle_notebook_html(content: str) -> str:
    """Use the theme's code colours in a rendered notebook, and make code areas focusable.

    nbconvert inlines Pygments' default colours, several of which are below WCAG AA
    contrast on the theme's code background in light or dark mode; the theme's own
    ``.highlight`` colours pass in both. A code area (a code cell's, or a fenced block in a
    Markdown cell) gets ``tabindex="0"`` so keyboard users can scroll it sideways.

    >>> html = '<style>td.linenos .normal {}</style><div class="highlight-ipynb hl-python"><pre>'
    >>> restyle_notebook_html(html)
    '<div class="highlight highlight-ipynb hl-python"><pre tabindex="0">'
    >>> restyle_notebook_html('<li><div class="highlight"><pre>msg</pre></div></li>')
    '<li><div class="highlight"><pre tabindex="0">msg</pre></div></li>'
    """
    content = _OUTSIDE_LOADERS.sub("", content)
    content = _STYLE.sub(lambda m: "" if "td.linenos" in m.group(0) else m.group(0), content)
    focusable = r'<div class="highlight highlight-ipynb hl-\1"><pre tabindex="0">'
    content = content.replace(_MARKDOWN_CODE, '<div class="highlight"><pre tabindex="0">')
    return _CODE_AREA.sub(focusable, content)


def _links(config: Any) -> RepoLinks:
    return repo_links(config["repo_url"], config.get("edit_uri"))


def _notebook_src(slug: str) -> str:
    return f"notebooks/{slug}.ipynb"


def download_url(notebook_page_url: str, slug: str) -> str:
    """The site URL of the raw .ipynb that mkdocs-jupyter copies next to its page.

    >>> download_url("notebooks/timing/", "timing")
    'notebooks/timing/timing.ipynb'
    """
    return f"{notebook_page_url}{slug}.ipynb"


def links_html(
    slug: str, page_url: str, files: Files, links: RepoLinks, lesson_url: str | None = None
) -> str:
    """The badge line: Open in Colab, the rendered notebook (or lesson), the download."""
    notebook = files.get_file_from_path(_notebook_src(slug))
    if notebook is None:
        return ""
    colab = html.escape(links.colab_url(f"{NOTEBOOK_DIR}/{slug}.ipynb"))
    badge = get_relative_url(BADGE, page_url)
    download = get_relative_url(download_url(notebook.url, slug), page_url)
    parts = [
        f'<a href="{colab}" class="gl-colab" title="Open the companion notebook in Google Colab">'
        f'<img src="{badge}" alt="Open in Colab" width="124" height="20" '
        'style="vertical-align: middle"></a>'
    ]
    if lesson_url is None:
        parts.append(f'<a href="{get_relative_url(notebook.url, page_url)}">Companion notebook</a>')
    else:
        parts.append(f'<a href="{get_relative_url(lesson_url, page_url)}">Back to the lesson</a>')
    parts.append(f'<a href="{download}" download>Download {slug}.ipynb</a>')
    return '<p class="gl-notebook-links">' + " · ".join(parts) + "</p>"


def insert_after_title(markdown: str, block: str) -> str:
    """Insert ``block`` after the page's H1 and the provenance stamp, if there is one.

    >>> page = '# T\\n\\n<div class="gl-stamp">s</div>\\n\\nText'
    >>> print(insert_after_title(page, "B"))
    # T
    <BLANKLINE>
    <div class="gl-stamp">s</div>
    <BLANKLINE>
    B
    <BLANKLINE>
    Text
    """
    match = _H1_LINE.search(markdown)
    if not match:
        return f"{block}\n\n{markdown}"
    end = match.end()
    stamp = _STAMP_LINE.match(markdown[end:])
    if stamp:
        end += stamp.end()
    return f"{markdown[:end].rstrip()}\n\n{block}\n\n{markdown[end:].lstrip()}"


def index_markdown(lessons: list[Lesson], page_url: str, files: Files, links: RepoLinks) -> str:
    """The Notebooks page's table: one row per lesson that has a notebook."""
    rows = []
    for lesson in lessons:
        notebook = files.get_file_from_path(_notebook_src(lesson.slug))
        if notebook is None:
            continue
        lesson_link = f"[{lesson.title}](lessons/{lesson.slug}.md)"
        page_link = f"[read it here](notebooks/{lesson.slug}.ipynb)"
        line = links_html(lesson.slug, page_url, files, links).replace("\n", " ")
        # Only the badge and the download link: the middle column already links the page.
        cells = line.removeprefix('<p class="gl-notebook-links">').removesuffix("</p>")
        badge, _, download = cells.split(" · ")
        rows.append((lesson_link, page_link, f"{badge} {download}"))
    return markdown_table(("lesson", "notebook", "run or download"), rows, align="lll")


def _is_notebook(page: Any) -> bool:
    return page.file.src_uri.startswith("notebooks/") and page.file.src_uri.endswith(".ipynb")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """Put the badge line under each lesson's title; fill the Notebooks page's table."""
    src = page.file.src_uri
    if INDEX_MARKER in markdown:
        table = index_markdown(read_lessons(nav=config.get("nav")), page.url, files, _links(config))
        return markdown.replace(INDEX_MARKER, table)
    match = re.fullmatch(r"lessons/([\w-]+)\.md", src)
    if not match:
        return markdown
    block = links_html(match.group(1), page.url, files, _links(config))
    return insert_after_title(markdown, block) if block else markdown


def on_page_content(content: str, page: Any, config: Any, files: Files) -> str:
    """Put the badge line and a link back to the lesson under a notebook page's title."""
    if not _is_notebook(page):
        return content
    slug = page.file.src_uri[len("notebooks/") : -len(".ipynb")]
    lesson = files.get_file_from_path(f"lessons/{slug}.md")
    block = links_html(slug, page.url, files, _links(config), lesson.url if lesson else page.url)
    content = restyle_notebook_html(content)
    note = (
        '<p class="gl-notebook-note">This page shows the notebook without outputs: run it '
        "(in Colab, or locally with Jupyter) to see the numbers from your own runtime.</p>"
    )
    head = _H1_HTML.search(content)
    at = head.end() if head else 0
    return content[:at] + block + note + content[at:]
