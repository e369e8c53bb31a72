"""A strict build of the whole site, as the README's test command runs it."""

from __future__ import annotations

import dataclasses
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace

import markdown
import pytest

from gpulesson.site import hooks as site_hooks
from gpulesson.site import provenance
from gpulesson.site.provenance import BuildRecord

from .conftest import mkdocs_build

REPO = Path(__file__).resolve().parent.parent


def test_build_writes_the_build_record(built_site: Path):
    record = json.loads((built_site / "build-record.json").read_text())
    for key in (
        "gpulesson_version",
        "git_commit",
        "torch_version",
        "device_type",
        "device_name",
        "device_memory_bytes",
        "cpu_model",
        "built_at_utc",
    ):
        assert key in record
    assert record["device_type"] in ("cuda", "mps", "cpu")


def test_executed_pages_show_the_stamp_and_the_live_probe(built_site: Path):
    page = (built_site / "lessons" / "software-stack" / "index.html").read_text()
    assert 'class="gl-stamp"' in page
    assert "../../build-record.json" in page
    assert "Device picked (cuda, mps, cpu)" in page  # the probe ran at build


# --- nothing the site loads comes from another host ---------------------------------------

# link rel values that make a browser fetch the href (canonical, alternate... do not)
_FETCHING_RELS = {
    "stylesheet", "icon", "shortcut", "apple-touch-icon", "mask-icon", "manifest",
    "preload", "modulepreload", "prefetch", "preconnect", "dns-prefetch",
}  # fmt: skip
_LOADING_ATTRIBUTES = {"src", "srcset", "poster", "data", "xlink:href"}
_CSS_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)
_CSS_URL = re.compile(r"""url\(\s*(['"]?)(.*?)\1\s*\)|@import\s+(['"])(.*?)\3""", re.DOTALL)
_JS_URL = re.compile(r"""["'`]((?:https?:)?//[A-Za-z0-9-]+\.[A-Za-z0-9.-]+[^"'`\s]*)""")
# mkdocs-material's bundle carries these loaders; each runs only under a condition this site
# never meets, and the test checks the condition where a page can show it.
THEME_LOADERS = {
    "https://unpkg.com/mermaid": "a page with a mermaid diagram (no page has one: checked)",
    "https://unpkg.com/resize-observer-polyfill": "a browser without ResizeObserver "
    "(every browser the theme supports has it)",
    "https://api.github.com/": "the repository widget (not rendered: checked)",
}


# The chart renderer's builds (docs/javascripts/vendor/, loaded by charts.js) hold these
# strings, none of which is ever loaded: each file's exact set is checked, so an update that
# adds one fails until it is read and listed here.
VENDOR_STRINGS = {
    "vega.min.js": {
        "http://www.w3.org/1999/xlink": "an XML namespace name in the SVG it writes",
        "http://www.w3.org/2000/svg": "an XML namespace name in the SVG it writes",
        "http://www.w3.org/2000/xmlns/": "an XML namespace name in the SVG it writes",
    },
    "vega-lite.min.js": {
        "https://vega.github.io/schema/vega/v6.json": "the $schema it writes into the Vega "
        "spec it compiles (vega reads it as a name; charts.js sets mode, nothing fetches it)",
    },
    "vega-embed.min.js": {
        "https://vega.github.io/editor/": "the 'Open in Vega Editor' action, a link shown "
        "only with actions on (charts.js turns actions off: checked)",
    },
}


def _outside(url: str) -> bool:
    url = url.strip().lower()
    return url.startswith(("http:", "https:", "//"))


def outside_loads_in_css(text: str) -> list[str]:
    """URLs on other hosts that a stylesheet imports or loads (fonts, images).

    >>> outside_loads_in_css('@import "https://cdn.jsdelivr.net/x.css"; /* https://a.b */')
    ['https://cdn.jsdelivr.net/x.css']
    >>> outside_loads_in_css("a{background:url(data:image/svg+xml;x)} b{src:url('../f.woff2')}")
    []
    """
    found = []
    for match in _CSS_URL.finditer(_CSS_COMMENT.sub("", text)):
        url = match.group(2) if match.group(2) is not None else match.group(4)
        if _outside(url):
            found.append(url.strip())
    return found


class _Loads(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.urls: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        if tag == "link" and set(values.get("rel", "").lower().split()) & _FETCHING_RELS:
            self.urls.append(values.get("href", ""))
        for name in _LOADING_ATTRIBUTES & values.keys():
            self.urls += [part.split()[0] for part in values[name].split(",") if part.split()]
        if tag in ("image", "use") and "href" in values:
            self.urls.append(values["href"])
        self.urls += outside_loads_in_css(values.get("style", ""))
        self._in_style = tag == "style"

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.urls += outside_loads_in_css(data)

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False


def outside_loads_in_html(text: str) -> list[str]:
    """URLs on other hosts that a page loads: scripts, stylesheets, icons, images, styles.

    >>> outside_loads_in_html('<a href="https://x.org">ok</a><link rel="canonical" '
    ...     'href="https://x.org/"><img src="https://x.org/i.png"><script src="//cdn.x/s.js">')
    ['https://x.org/i.png', '//cdn.x/s.js']
    """
    parser = _Loads()
    parser.feed(text)
    parser.close()
    return [url for url in parser.urls if _outside(url)]


def outside_urls_in_js(text: str) -> list[str]:
    """Absolute URLs written as strings in a script (comments and licences are not strings).

    >>> outside_urls_in_js('/*! https://lic.org */ x="//nbsp"; load(`https://cdn.x/a.js`)')
    ['https://cdn.x/a.js']
    """
    return _JS_URL.findall(text)


def test_the_scan_finds_pyodides_cdn_import():
    pyodide_css = '@import "https://cdn.jsdelivr.net/npm/highlightjs-themes@1.0.0/tomorrow.css";'
    assert outside_loads_in_css(pyodide_css) == [
        "https://cdn.jsdelivr.net/npm/highlightjs-themes@1.0.0/tomorrow.css"
    ]
    page = '<link rel="stylesheet" href="https://fonts.googleapis.com/css?family=Roboto">'
    assert outside_loads_in_html(page) == ["https://fonts.googleapis.com/css?family=Roboto"]
    styled = '<div style="background: url(https://img.example/bg.png)"></div>'
    assert outside_loads_in_html(styled) == ["https://img.example/bg.png"]


def test_markdown_exec_is_configured_without_pyodide():
    config = (REPO / "mkdocs.yml").read_text()
    languages = re.search(r"- markdown-exec:\s*\n\s*languages: \[(.*?)\]", config)
    assert languages is not None
    assert "pyodide" not in languages.group(1)


def test_built_site_loads_nothing_from_outside(built_site: Path):
    found = []
    for path in sorted(built_site.rglob("*")):
        name = path.relative_to(built_site).as_posix()
        if path.suffix == ".html":
            text = path.read_text(encoding="utf-8")
            found += [f"{name}: {url}" for url in outside_loads_in_html(text)]
            assert 'data-md-component="source"' not in text, name  # calls the GitHub API
            assert 'class="mermaid"' not in text, name  # would load mermaid from unpkg
        elif path.suffix == ".css":
            found += [f"{name}: {url}" for url in outside_loads_in_css(path.read_text())]
        elif path.suffix in (".js", ".mjs"):
            urls = outside_urls_in_js(path.read_text(encoding="utf-8", errors="replace"))
            if path.parent.name == "vendor" and path.name in VENDOR_STRINGS:
                assert set(urls) == set(VENDOR_STRINGS[path.name]), name
                continue
            found += [f"{name}: {u}" for u in urls if not u.startswith(tuple(THEME_LOADERS))]
    assert not found, "the site loads from other hosts:\n" + "\n".join(found)
    assert not list(built_site.rglob("_markdown_exec_pyodide*"))


def test_charts_js_loads_only_the_vendored_renderer_and_lets_it_fetch_nothing():
    """The conditions VENDOR_STRINGS relies on: no actions (no editor link), a loader that
    refuses every URL, the renderer's files from beside charts.js, each of them shipped."""
    script = (REPO / "docs" / "javascripts" / "charts.js").read_text()
    assert "actions: false" in script
    assert "loader.load = loader.sanitize = function" in script
    assert "loader: refusingLoader()" in script
    assert 'new URL("vendor/", script.src)' in script
    files = re.search(r"FILES = \[(.*?)\]", script).group(1)
    names = re.findall(r'"([^"]+)"', files)
    assert names == list(VENDOR_STRINGS)
    for name in names:
        assert (REPO / "docs" / "javascripts" / "vendor" / name).is_file()
    assert outside_urls_in_js(script) == []


def test_require_cuda_fails_without_a_cuda_device(tmp_path: Path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA; the failure path needs a machine without it")
    result = mkdocs_build(tmp_path / "site", GPULESSON_REQUIRE_DEVICE="cuda")
    assert result.returncode != 0
    assert "GPULESSON_REQUIRE_DEVICE=cuda but this build would run on" in result.stderr


def _record(device_type: str) -> BuildRecord:
    return BuildRecord(
        "0.1.0",
        "abc123",
        "2.13.0",
        None,
        device_type,
        "Test CPU",
        2**33,
        "Test CPU",
        4,
        "no_nvidia_gpu",
        "2026-01-01T00:00:00Z",
    )


@pytest.mark.parametrize(("device_type", "warned"), [("cpu", True), ("mps", True), ("cuda", False)])
def test_gpu_pages_warn_unless_built_on_cuda(monkeypatch, device_type, warned):
    monkeypatch.setitem(site_hooks._state, "record", _record(device_type))
    page = SimpleNamespace(url="lessons/x/", meta={"gpu_figures": True})
    markdown = '# Title\n\n```python exec="on" id="a"\nprint(1)\n```\n'
    out = site_hooks.on_page_markdown(markdown, page, None, None)
    assert out.startswith("# Title\n")
    assert 'class="gl-stamp"' in out
    assert "GPU figures were not measured in this build" not in out  # one stamp line instead
    assert "GPU figures on this page: predicted" in out
    assert ("none measured on this build" in out) is warned


def test_pages_without_executed_code_are_left_alone(monkeypatch):
    monkeypatch.setitem(site_hooks._state, "record", _record("cpu"))
    page = SimpleNamespace(url="x/", meta={"gpu_figures": True})
    markdown = "# Title\n\n```python\nprint(1)\n```\n"
    assert site_hooks.on_page_markdown(markdown, page, None, None) == markdown


# --- machine facts on a page are text, never markup ------------------------------------

_HOSTILE = '<img src=x onerror="alert(1)"> [link](javascript:alert(2)) a|b *c*'


def _hostile_record() -> BuildRecord:
    return dataclasses.replace(
        _record("cpu"), device_name=_HOSTILE, cpu_model=_HOSTILE, git_commit="<b>abc</b>"
    )


def _rendered(text: str) -> str:
    return markdown.Markdown(extensions=["tables", "admonition"]).convert(text)


def test_the_stamp_escapes_machine_facts():
    stamp = provenance.stamp_html(_hostile_record(), "../build-record.json")
    assert "<img" not in stamp and "<b>" not in stamp
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in stamp
    assert "&lt;b&gt;abc&lt;/b&gt;" in stamp


@pytest.mark.parametrize("render", ["record_markdown", "no_gpu_notice_markdown"])
def test_machine_facts_in_markdown_render_as_text(render):
    html = _rendered(getattr(provenance, render)(_hostile_record()))
    assert "<img" not in html and "<a " not in html and "<em>" not in html
    assert (
        "&lt;img src=x onerror=&quot;alert(1)&quot;&gt; [link](javascript:alert(2)) a|b *c*" in html
    )
    if render == "record_markdown":
        assert html.count("<tr>") == 7  # the header and six rows: no cell split by "|"
