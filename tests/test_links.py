"""Every internal link and anchor in the built site resolves, checked offline.

Parses each HTML page with the standard library, resolves every ``href`` and
``src`` that stays inside the site to a file, and checks that every ``#anchor``
is an ``id`` (or ``<a name>``) in the page it points at. External links
(http, https, mailto, ...) are skipped: nothing here touches the network.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlsplit

REPO = Path(__file__).resolve().parent.parent
LINK_ATTRIBUTES = ("href", "src")
EXTERNAL_SCHEMES = ("http", "https", "mailto", "tel", "data", "javascript", "ftp")


@dataclass(frozen=True)
class Page:
    """What one HTML page links to and which anchors it offers."""

    links: tuple[str, ...]
    ids: frozenset[str]


@dataclass(frozen=True)
class BrokenLink:
    """One link that does not resolve, with the reason."""

    page: str
    link: str
    reason: str

    def __str__(self) -> str:
        return f"{self.page}: {self.link!r} {self.reason}"


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            if name in LINK_ATTRIBUTES:
                self.links.append(value.strip())
            elif name == "id" or (tag == "a" and name == "name"):
                self.ids.add(value)


def parse_page(html: str) -> Page:
    """The links and anchor ids of one HTML page.

    >>> page = parse_page('<h2 id="a">A</h2><a href="#a">x</a><img src="i.png">')
    >>> page.links, sorted(page.ids)
    (('#a', 'i.png'), ['a'])
    """
    collector = _Collector()
    collector.feed(html)
    collector.close()
    return Page(tuple(collector.links), frozenset(collector.ids))


def site_prefix(mkdocs_yml: str) -> str:
    """The URL path the site is served under, from ``site_url`` ('/' when unset).

    >>> site_prefix("site_url: https://gpulesson.github.io/gpulesson/\\n")
    '/gpulesson/'
    >>> site_prefix("site_name: x\\n")
    '/'
    """
    match = re.search(r"^site_url:\s*['\"]?([^'\"\s]+)", mkdocs_yml, re.MULTILINE)
    if not match:
        return "/"
    path = urlsplit(match.group(1)).path or "/"
    return path if path.endswith("/") else path + "/"


def _is_external(link: str) -> bool:
    parts = urlsplit(link)
    return parts.scheme.lower() in EXTERNAL_SCHEMES or link.startswith("//")


def _target_file(site: Path, page_rel: PurePosixPath, path: str, prefix: str) -> Path | None:
    """The file a link's path part points at, or None when it leaves the site."""
    if path.startswith("/"):
        if not path.startswith(prefix) and path + "/" != prefix:
            return None
        parts = PurePosixPath(path[len(prefix) :] if path.startswith(prefix) else "")
    else:
        parts = page_rel.parent / path
    resolved: list[str] = []
    for part in parts.parts:
        if part == "..":
            if not resolved:
                return None
            resolved.pop()
        elif part not in (".", ""):
            resolved.append(part)
    target = site.joinpath(*resolved)
    if path.endswith("/") or target.is_dir():
        target = target / "index.html"
    return target


def check_site(site: Path, prefix: str = "/") -> list[BrokenLink]:
    """Every internal link or anchor in ``site`` that does not resolve."""
    pages = {
        html.relative_to(site).as_posix(): parse_page(html.read_text(encoding="utf-8"))
        for html in sorted(site.rglob("*.html"))
    }
    broken: list[BrokenLink] = []
    for name, page in pages.items():
        page_rel = PurePosixPath(name)
        for link in page.links:
            if not link or _is_external(link):
                continue
            parts = urlsplit(link)
            if parts.path:
                target = _target_file(site, page_rel, unquote(parts.path), prefix)
                if target is None:
                    broken.append(BrokenLink(name, link, "leaves the site"))
                    continue
                if not target.is_file():
                    broken.append(BrokenLink(name, link, "points at a missing file"))
                    continue
                target_name = target.relative_to(site).as_posix()
            else:
                target_name = name
            anchor = unquote(parts.fragment)
            if not anchor or target_name not in pages:
                continue
            if anchor not in pages[target_name].ids:
                broken.append(BrokenLink(name, link, f"has no id {anchor!r} in {target_name}"))
    return broken


def _write(site: Path, name: str, html: str) -> None:
    path = site / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(html, encoding="utf-8")


def test_checker_accepts_a_sound_site(tmp_path: Path):
    _write(
        tmp_path,
        "index.html",
        '<p id="top"></p><a href="a/">A</a><a href="a/#x">x</a><a href="#top">t</a>',
    )
    _write(tmp_path, "a/index.html", '<h2 id="x"></h2><a href="../">home</a><img src="../i.png">')
    _write(tmp_path, "i.png", "")
    _write(tmp_path, "404.html", '<a href="/a/">A</a><a href="https://example.com/#nope">e</a>')
    assert check_site(tmp_path) == []


def test_checker_reports_missing_files_anchors_and_escapes(tmp_path: Path):
    _write(
        tmp_path,
        "a/index.html",
        '<h2 id="x"></h2><a href="../b/">b</a><a href="#y">y</a>'
        '<a href="../../../etc/passwd">out</a><script src="../gone.js"></script>',
    )
    reasons = sorted(str(b) for b in check_site(tmp_path))
    assert reasons == [
        "a/index.html: '#y' has no id 'y' in a/index.html",
        "a/index.html: '../../../etc/passwd' leaves the site",
        "a/index.html: '../b/' points at a missing file",
        "a/index.html: '../gone.js' points at a missing file",
    ]


def test_checker_honours_the_site_url_prefix(tmp_path: Path):
    _write(tmp_path, "index.html", '<a href="/course/a/">ok</a><a href="/a/">wrong prefix</a>')
    _write(tmp_path, "a/index.html", "")
    broken = check_site(tmp_path, prefix="/course/")
    assert [b.link for b in broken] == ["/a/"]


def test_every_internal_link_and_anchor_in_the_built_site_resolves(built_site: Path):
    prefix = site_prefix((REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    broken = check_site(built_site, prefix)
    assert not broken, "broken internal links:\n" + "\n".join(map(str, broken))
