"""Hostile strings in every field of a bundle render as text on Results, Compare and the stamp.

Each payload replaces every free-text string of the fixture bundles at once (device name,
driver, CUDA and torch versions, platform, CPU, labels, entries, warnings, params,
skipped reasons, the file name); the renderers' Markdown is converted with Python-Markdown
and ``mkdocs.yml``'s own extensions, as markdown-exec converts a block's output, and the
HTML must hold exactly the elements and attributes that the same page has with the
fixture's own strings: no element, no ``on*`` attribute, no link and no script added by a
payload, and the page's data blocks still parse to the data they were written from.
"""

from __future__ import annotations

import copy
import functools
import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import markdown
import pytest
import yaml

from gpulesson.results import published
from gpulesson.results.bundle import from_dict
from gpulesson.results.compare import Sourced
from gpulesson.site import gpu_figures, results_pages
from gpulesson.text import inert

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"
PWN = "window.__pwned=1"

#: Strings the loader accepts (no control characters): they also go into the browser test.
PAYLOADS = json.loads((FIXTURES / "hostile_render" / "payloads.json").read_text())
#: Strings with newlines and control characters: the loader may refuse them, the renderers
#: must make them inert anyway (here they bypass the loader).
CONTROL_PAYLOADS = [
    f"NVIDIA\n\n### Owned\n\n<script>{PWN}</script>",
    f"a | b\n| c | d |\n|---|---|\n| <img src=x onerror={PWN}> | x |",
    f"H100\r\n!!! danger\n    <b onclick='{PWN}'>x</b>",
    f"x\x00\x1b[31m\u2028\u2029\u202e<svg onload={PWN}>",
    "T4\n*[T4]: <a href='javascript:alert(1)'>x</a>",
    "y" * 5000 + f"<img src=x onerror={PWN}>",
]
#: Fields whose values the schema fixes (enums, patterns, ids): the loader refuses any other.
FIXED = {
    "device_type",
    "datasheet_id",
    "gpulesson_commit",
    "created_utc",
    "compute_capability",
    "name",
    "unit",
    "samples_unit",
    "dtype",
    "limit",
}


def _hostile(data: Any, payload: str) -> Any:
    """``data`` with every free-text string replaced by ``payload``."""
    if isinstance(data, dict):
        return {k: v if k in FIXED else _hostile(v, payload) for k, v in data.items()}
    if isinstance(data, list):
        return [_hostile(v, payload) for v in data]
    return payload if isinstance(data, str) else data


def _fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / "bundles" / name).read_text())


def _bundles(payload: str | None) -> tuple[Sourced, ...]:
    """A reference (H100) and a community (T4) bundle, their strings (and file names) hostile."""
    out = []
    for name, source in (("fixture_h100.json", "reference"), ("fixture_t4.json", "community")):
        data = _fixture(name)
        if payload is not None:
            data = _hostile(data, payload)
        file = name if payload is None else f"{payload}.json"
        out.append(Sourced(from_dict(copy.deepcopy(data)), source, file))
    return tuple(out)


def _use(monkeypatch: pytest.MonkeyPatch, bundles: tuple[Sourced, ...]) -> None:
    """The site's loader returns ``bundles`` (hostile ones bypass the bundle loader)."""

    def load_dir(folder: Path, source: str) -> tuple[Sourced, ...]:
        return tuple(b for b in bundles if b.source == source)

    monkeypatch.setattr(results_pages, "load_dir", load_dir)


@pytest.fixture
def use_bundles(monkeypatch: pytest.MonkeyPatch):
    """The site's loader returns the given bundles (hostile ones bypass the bundle loader)."""

    def use(bundles: tuple[Sourced, ...]) -> None:
        _use(monkeypatch, bundles)

    return use


@functools.cache
def _site_extensions() -> tuple[list[str], dict[str, Any]]:
    """The Markdown extensions of mkdocs.yml and their settings (the file, read once)."""
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    names, settings = [], {}
    for entry in config["markdown_extensions"]:
        name, options = next(iter(entry.items())) if isinstance(entry, dict) else (entry, {})
        names.append(name)
        settings[name] = options or {}
    return names, settings


def _site_markdown() -> markdown.Markdown:
    """Python-Markdown with the extensions and settings of mkdocs.yml (a fresh one each time)."""
    names, settings = copy.deepcopy(_site_extensions())
    return markdown.Markdown(extensions=names, extension_configs=settings)


class _Elements(HTMLParser):
    """Every start tag with its attributes, the text, and each script's content."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, tuple[str, ...]]] = []
        self.attrs: list[tuple[str, str, str]] = []
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self.text: list[str] = []
        self._script: dict[str, str | None] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, tuple(sorted(name for name, _ in attrs))))
        self.attrs += [(tag, name, value or "") for name, value in attrs]
        if tag == "script":
            self._script = dict(attrs)

    def handle_data(self, data: str) -> None:
        if self._script is not None:
            self.scripts.append((self._script, data))
        else:
            self.text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            if self._script is not None and not any(s[0] is self._script for s in self.scripts):
                self.scripts.append((self._script, ""))
            self._script = None


def _parse(html: str) -> _Elements:
    parsed = _Elements()
    parsed.feed(html)
    parsed.close()
    return parsed


def _pages(bundles: tuple[Sourced, ...]) -> dict[str, str]:
    """The HTML of each rendered part, from Markdown as a page's executed block prints it."""
    reference = next(b for b in bundles if b.source == "reference")
    parts = {
        "results": results_pages.results_markdown(),
        "compare": results_pages.compare_html(),
        "compare references": results_pages.references_markdown(),
        "gpu stamp": gpu_figures.stamp_markdown(reference),
    }
    return {name: _site_markdown().convert(text) for name, text in parts.items()}


def _own_scripts(parsed: _Elements) -> list[Any]:
    """The page's own data blocks, each parsed: chart specs and the compare page's data."""
    found = []
    for attrs, content in parsed.scripts:
        assert attrs.get("type") == "application/json", attrs
        assert attrs.get("class") == "gl-chart-spec" or attrs.get("id") == "gl-compare-data"
        found.append(json.loads(content))
    return found


def _assert_inert(parsed: _Elements, benign: _Elements, where: str) -> None:
    assert parsed.tags == benign.tags, f"{where}: the payload added or removed an element"
    for tag, name, value in parsed.attrs:
        assert not name.lower().startswith("on"), f"{where}: <{tag} {name}=...>"
        if name.lower() in ("href", "src", "action", "formaction", "srcset", "xlink:href"):
            target = value.strip().lower()
            assert not target.startswith(("javascript:", "data:", "vbscript:")), (where, value)
            if tag == "a" and value in published.publications():
                continue  # a published row's cited page (published.json), not bundle data
            assert not target.startswith(("http:", "https:", "//")), f"{where}: remote {value}"


@pytest.fixture(scope="module")
def benign_pages() -> dict[str, str]:
    """:func:`_pages` of the fixture bundles with their own strings: what every payload's
    pages are compared with, rendered once."""
    bundles = _bundles(None)
    with pytest.MonkeyPatch.context() as monkeypatch:
        _use(monkeypatch, bundles)
        return _pages(bundles)


@pytest.mark.parametrize("payload", PAYLOADS + CONTROL_PAYLOADS)
def test_a_hostile_string_in_every_field_adds_nothing_to_the_pages(
    payload, use_bundles, benign_pages
):
    benign = {name: _parse(html) for name, html in benign_pages.items()}
    hostile = _bundles(payload)
    use_bundles(hostile)
    pages = _pages(hostile)
    shown = inert(payload)  # what the reader sees: the text, cleaned and cut, as characters
    visible = _parse(_site_markdown().convert(shown)).text
    for name, html in pages.items():
        parsed = _parse(html)
        _assert_inert(parsed, benign[name], name)
        assert len(_own_scripts(parsed)) == len(_own_scripts(benign[name]))
        if name != "compare":  # Compare shows the bundles in the reader's browser only
            assert "".join(visible).strip() in "".join(parsed.text), name
    data = _own_scripts(_parse(pages["compare"]))[-1]
    assert data == json.loads(json.dumps(results_pages.compare_data()))  # the block is whole
    assert data["references"][0]["device"] == payload  # the data keeps the string as it is


def test_the_fixture_bundles_strings_reach_the_pages_as_they_are(benign_pages):
    """The benign side of the comparison above: names, versions and labels shown literally."""
    text = "".join(_parse(benign_pages["results"]).text)
    for b in _bundles(None):
        p = b.bundle.provenance
        assert p.device_name in text and p.torch_version in text and p.driver_version in text


def test_characters_markdown_and_html_read_as_syntax_render_literally(use_bundles):
    """A harmless name full of < > & | * _ [ ] # shows exactly those characters."""
    name = "Lab <GPU> & co | *fast* _x_ [1] #2 `t` {: .c} \\ !"
    data = _fixture("fixture_h100.json")
    data["provenance"]["device_name"] = name
    data["provenance"]["driver_version"] = "550 | *a* _b_ #c"
    bundles = (Sourced(from_dict(data), "reference", "lab.json"),)
    use_bundles(bundles)
    pages = _pages(bundles)
    for part in ("results", "compare references", "gpu stamp"):
        text = "".join(_parse(pages[part]).text)
        assert name in text and "550 | *a* _b_ #c" in text, part
    assert _parse(pages["results"]).tags.count(("td", ())) > 0  # still one table, not split
