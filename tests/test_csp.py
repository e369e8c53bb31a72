"""The Content-Security-Policy hook (gpulesson/site/csp_hook.py): its output, and the built site.

The hashes are checked against base64(sha256(text)) computed here, and on the built site
against the inline scripts Python's own HTML parser finds, so the hook's script matching is
compared with a second parser, not with itself. The browser side (what the policy lets run
and what it blocks) is tests/test_csp_browser.py.
"""

from __future__ import annotations

import base64
import hashlib
import re
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace

import pytest
from mkdocs.exceptions import PluginError

from gpulesson.site import csp_hook

PAGE = (
    '<!doctype html>\n<html><head>\n  <meta charset="utf-8">\n  <title>t</title>\n'
    '  <script>var a = "</b>";\r\nstart(a)</script>\n'
    '  <script id="__config" type="application/json">{"base": "."}</script>\n'
    '  <script src="assets/bundle.js"></script>\n'
    "</head><body>\n"
    "<script type='text/javascript'>second()</script>\n"
    '<script type="module">third()</script>\n'
    "<script>second()</script>\n"  # the same text again: one hash
    "</body></html>\n"
)


def _b64_sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode()


def _policy_of(html: str) -> dict[str, list[str]]:
    """The directives of the page's one CSP <meta>, by name."""
    (content,) = re.findall(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)">', html)
    directives = {}
    for part in content.split(";"):
        name, *sources = part.split()
        assert name not in directives, f"{name} twice"
        directives[name] = sources
    return directives


def test_the_hashes_are_base64_sha256_of_each_executable_inline_script():
    out = csp_hook.with_policy(PAGE)
    script_src = _policy_of(out)["script-src"]
    # the browser hashes the text after the HTML parser turned CR LF into LF
    expected = [
        _b64_sha256('var a = "</b>";\nstart(a)') + "'",
        _b64_sha256("second()") + "'",
        _b64_sha256("third()") + "'",
    ]
    assert script_src == ["'self'", *expected]  # no JSON, no src script, no repeat


def test_the_policy_is_strict_and_names_no_other_host():
    directives = _policy_of(csp_hook.with_policy(PAGE))
    assert directives["default-src"] == ["'self'"]
    assert directives["object-src"] == ["'none'"]
    assert directives["base-uri"] == ["'self'"]
    assert directives["form-action"] == ["'self'"]
    assert directives["img-src"] == ["'self'", "data:"]
    script = directives["script-src"]
    assert "'unsafe-inline'" not in script and "'unsafe-eval'" not in script
    assert not any(s in script for s in ("*", "blob:", "data:", "'unsafe-hashes'"))
    allowed = re.compile(r"^('self'|'none'|'unsafe-inline'|data:|'sha256-[A-Za-z0-9+/]+=*')$")
    every = [source for sources in directives.values() for source in sources]
    assert [s for s in every if not allowed.match(s)] == []  # no host, no scheme but data:


def test_the_meta_comes_first_in_head_right_after_the_charset():
    out = csp_hook.with_policy(PAGE)
    head = out[out.index("<head>") + len("<head>") :]
    before = head[: head.index('<meta http-equiv="Content-Security-Policy"')]
    assert before.strip() == '<meta charset="utf-8">'
    assert out.index("Content-Security-Policy") < out.index("<script")
    no_charset = csp_hook.with_policy("<html><head><title>t</title></head></html>")
    assert no_charset.startswith('<html><head><meta http-equiv="Content-Security-Policy"')


@pytest.mark.parametrize(
    ("page", "problem"),
    [
        ("<p>no head</p>", "no <head>"),
        (
            '<head><meta http-equiv="content-security-policy" content="x"></head>',
            "already has a Content-Security-Policy",
        ),
        ('<head></head><body><img src="x.png" onerror="go()"></body>', "inline event handler"),
        ('<head></head><body><a href="javascript:go()">x</a></body>', "javascript: URL"),
    ],
)
def test_a_page_the_policy_cannot_cover_is_refused_by_name(page: str, problem: str):
    with pytest.raises(ValueError, match=re.escape(problem)) as error:
        csp_hook.with_policy(page, "lessons/x.md (lessons/x/)")
    assert str(error.value).startswith("lessons/x.md (lessons/x/): ")


def test_text_that_only_looks_like_a_handler_is_not_refused():
    page = "<head></head><body><p>onclick=&quot;go()&quot;</p><pre>&lt;img onerror=x&gt;</pre>"
    page += '<script>el.setAttribute("onclick", "x")</script></body>'
    assert "Content-Security-Policy" in csp_hook.with_policy(page)


def test_under_mkdocs_serve_inline_scripts_are_allowed_for_live_reload_and_nothing_else():
    page = SimpleNamespace(file=SimpleNamespace(src_uri="index.md"), url="")
    try:
        csp_hook.on_startup(command="serve", dirty=False)
        served = _policy_of(csp_hook.on_post_page(PAGE, page=page, config={}))
    finally:
        csp_hook.on_startup(command="build", dirty=False)
    built = _policy_of(csp_hook.on_post_page(PAGE, page=page, config={}))
    # the dev server appends <script>livereload(epoch, request id)</script>: no hash fits it
    assert served["script-src"] == ["'self'", "'unsafe-inline'"]
    assert "'unsafe-inline'" not in built["script-src"] and len(built["script-src"]) == 4
    assert {k: v for k, v in served.items() if k != "script-src"} == {
        k: v for k, v in built.items() if k != "script-src"
    }


def test_the_hook_names_the_page_it_refuses():
    page = SimpleNamespace(file=SimpleNamespace(src_uri="lessons/x.md"), url="lessons/x/")
    with pytest.raises(PluginError, match=r"^lessons/x\.md \(lessons/x/\): inline event handler"):
        csp_hook.on_post_page("<head></head><p onclick='f()'>", page=page, config={})
    assert csp_hook.on_post_template("<urlset/>", template_name="sitemap.xml", config={}) == (
        "<urlset/>"
    )
    assert "Content-Security-Policy" in csp_hook.on_post_template(
        "<head></head>", template_name="404.html", config={}
    )


class _Scripts(HTMLParser):
    """Python's HTML parser's view: each inline script's text, with its attributes."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[dict[str, str | None], str]] = []
        self._open: dict[str, str | None] | None = None
        self._text: list[str] = []
        self.meta_csp: list[str | None] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "script":
            self._open, self._text = dict(attrs), []
        if tag == "meta" and (dict(attrs).get("http-equiv") or "").lower() == (
            "content-security-policy"
        ):
            self.meta_csp.append(dict(attrs).get("content"))

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "script" and self._open is not None:
            self.found.append((self._open, "".join(self._text)))
            self._open = None


def _site_pages(site: Path) -> list[Path]:
    return sorted(site.rglob("*.html"))


def test_every_built_page_carries_one_policy_with_its_own_scripts_hashes(built_site: Path):
    pages = _site_pages(built_site)
    assert len(pages) > 30 and built_site / "404.html" in pages
    hashed_scripts = 0
    for path in pages:
        html = path.read_text(encoding="utf-8")
        parser = _Scripts()
        parser.feed(html)
        parser.close()
        where = str(path.relative_to(built_site))
        assert len(parser.meta_csp) == 1, f"{where}: {len(parser.meta_csp)} CSP <meta>"
        head = html[html.index("<head>") + len("<head>") :]
        first = head[: head.index("<meta http-equiv")].strip()
        assert first == '<meta charset="utf-8">', f"{where}: {first[:80]!r} before the policy"
        executable = {
            _b64_sha256(text.replace("\r\n", "\n")) + "'"
            for attrs, text in parser.found
            if "src" not in attrs and (attrs.get("type") or "") in ("", "text/javascript")
        }
        script_src = _policy_of(html)["script-src"]
        assert set(script_src) == {"'self'"} | executable, where
        hashed_scripts += len(executable)
    assert hashed_scripts >= 3 * len(pages) - 3  # the theme's own inline scripts, at least
