"""MkDocs hook: a Content-Security-Policy on every built page (defence in depth).

Named last in ``mkdocs.yml`` under ``hooks:``. After a page is rendered (``on_post_page``,
and ``on_post_template`` for the theme's ``404.html``) it puts a
``<meta http-equiv="Content-Security-Policy">`` at the top of ``<head>``, right after the
``<meta charset>`` declaration (which must stay within the first 1024 bytes, and which a
policy does not govern), so the policy covers every script, style and link that follows.

The policy, as strict as the theme allows:

- ``default-src 'self'``: nothing from another host (fetches, fonts, frames, workers: the
  search worker is a same-origin file);
- ``script-src 'self'`` plus one ``'sha256-...'`` per inline script the page carries
  (mkdocs-material's ``__md_scope``, palette and tab scripts, mkdocs-jupyter's copy
  button), computed from this page's final HTML: no ``'unsafe-inline'``, so an injected
  ``<script>`` or an inline event handler (``onerror=...``) does not run, and no
  ``'unsafe-eval'``: the charts run Vega's CSP-safe expression interpreter
  (``ast: true`` in ``docs/javascripts/charts.js``). Scripts of a non-executable type
  (``application/json``: the theme's ``__config``, the chart specs) need no hash;
- ``style-src 'self' 'unsafe-inline'``: the theme and nbconvert write ``style``
  attributes and ``<style>`` blocks, and vega-embed and vega-tooltip add ``<style>``
  elements at run time; styles cannot run code;
- ``img-src 'self' data:`` (the theme's icons are ``data:`` SVGs in its CSS),
  ``object-src 'none'``, ``base-uri 'self'``, ``form-action 'self'`` (the search form is
  never submitted; the last two do not fall back to ``default-src``).

A page whose own markup has an inline event handler (``onclick="..."``) or a
``javascript:`` URL stops the build: the policy would silently disable it.

Under ``mkdocs serve`` the dev server appends its live-reload ``<script>`` (with a
per-request id, so it cannot be hashed) to every page it serves, so there ``script-src``
lists ``'unsafe-inline'`` instead of the hashes; every other directive, and the absence of
``'unsafe-eval'`` and of other hosts, is the same. ``mkdocs build`` (the published site,
and the site the tests check) always has the strict policy.
"""

from __future__ import annotations

import base64
import hashlib
import re
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.plugins import event_priority

#: Every directive but script-src, in the order they are written.
FIXED_DIRECTIVES = (
    ("default-src", "'self'"),
    ("style-src", "'self' 'unsafe-inline'"),
    ("img-src", "'self' data:"),
    ("object-src", "'none'"),
    ("base-uri", "'self'"),
    ("form-action", "'self'"),
)
#: ``type`` values (lower case, parameters dropped) under which a browser runs a script.
EXECUTABLE_TYPES = frozenset(
    {
        "",
        "module",
        "text/javascript",
        "application/javascript",
        "application/ecmascript",
        "text/ecmascript",
        "application/x-javascript",
        "text/x-javascript",
    }
)
_ATTRS = r"""(?:\s+(?:[^\s"'>/=]+(?:\s*=\s*(?:"[^"]*"|'[^']*'|[^\s"'>]+))?)|\s*/)*"""
_SCRIPT = re.compile(rf"<script(?P<attrs>{_ATTRS})\s*>(?P<body>.*?)</script\s*>", re.I | re.S)
_ATTR = re.compile(r"""([^\s"'>/=]+)(?:\s*=\s*("[^"]*"|'[^']*'|[^\s"'>]+))?""")
_TAG = re.compile(rf"<[a-zA-Z][\w:-]*{_ATTRS}\s*>")
_HANDLER = re.compile(r"""\son[a-z]+\s*=|\s(?:href|src|action)\s*=\s*["']?\s*javascript:""", re.I)
_HEAD = re.compile(r"<head(?:\s[^>]*)?>", re.I)
_CHARSET = re.compile(r"\s*<meta\s+charset\s*=\s*[\"']?[\w-]+[\"']?\s*/?>", re.I)
_EXISTING = re.compile(r"<meta[^>]+http-equiv\s*=\s*[\"']?content-security-policy", re.I)


def _attributes(text: str) -> dict[str, str]:
    """A tag's attributes by lower-case name, quotes removed (no value: empty string).

    >>> _attributes(' id="__config" type=application/json async')
    {'id': '__config', 'type': 'application/json', 'async': ''}
    """
    found = {}
    for name, value in _ATTR.findall(text):
        found[name.lower()] = value[1:-1] if value[:1] in "\"'" and value else value
    return found


def script_hash(body: str) -> str:
    """The CSP source that allows one inline script: ``'sha256-'`` + base64(sha256(text)).

    The browser hashes the script's text as UTF-8 after the HTML parser has turned every
    CR LF and lone CR into LF, so the same is done here.

    >>> script_hash("alert(1)")
    "'sha256-bhHHL3z2vDgxUt0W3dWQOrprscmda2Y5pLsLg4GF+pI='"
    >>> script_hash("alert(1)") == script_hash("alert(1)".replace("\\n", "\\r\\n"))
    True
    """
    text = body.replace("\r\n", "\n").replace("\r", "\n")
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode('ascii')}'"


def script_hashes(html: str) -> tuple[str, ...]:
    """The hash of each inline script the page would run, in page order, each once.

    Scripts with ``src`` (allowed by ``'self'``) and scripts of a non-executable type
    (``application/json`` data) are left out.

    >>> script_hashes('<script>a()</script><script type="application/json">{}</script>'
    ...               '<script src="x.js"></script><script type="module">a()</script>')
    ("'sha256-qVpDBgj7bpq5hMAcGp3AOc79J3Y1Z4HvySTwKrWDoy4='",)
    """
    hashes: list[str] = []
    for match in _SCRIPT.finditer(html):
        attrs = _attributes(match.group("attrs"))
        kind = attrs.get("type", "").split(";")[0].strip().lower()
        if "src" in attrs or kind not in EXECUTABLE_TYPES:
            continue
        source = script_hash(match.group("body"))
        if source not in hashes:
            hashes.append(source)
    return tuple(hashes)


def policy(hashes: tuple[str, ...], serving: bool = False) -> str:
    """The policy text for a page whose inline scripts have these hashes.

    ``serving`` (``mkdocs serve``): inline scripts are allowed instead of hashed, for the
    dev server's live-reload script (a hash beside ``'unsafe-inline'`` would disable it).

    >>> policy(("'sha256-abc='",)).split("; ")[:2]
    ["default-src 'self'", "script-src 'self' 'sha256-abc='"]
    >>> "unsafe-inline" in policy(()).split("; ")[1], "unsafe-eval" in policy(())
    (False, False)
    >>> policy(("'sha256-abc='",), serving=True).split("; ")[1]
    "script-src 'self' 'unsafe-inline'"
    """
    sources = ("'unsafe-inline'",) if serving else hashes
    directives = [FIXED_DIRECTIVES[0], ("script-src", " ".join(("'self'", *sources)))]
    directives += FIXED_DIRECTIVES[1:]
    return "; ".join(f"{name} {value}" for name, value in directives)


def inline_handlers(html: str) -> list[str]:
    """Tags outside scripts whose markup runs code the policy forbids (``on*=``, ``javascript:``).

    >>> inline_handlers('<img src=x onerror="f()"><p>onclick=</p><a href="javascript:f()">')
    ['<img src=x onerror="f()">', '<a href="javascript:f()">']
    """
    outside_scripts = _SCRIPT.sub("", html)
    return [tag.group(0) for tag in _TAG.finditer(outside_scripts) if _HANDLER.search(tag.group(0))]


def with_policy(html: str, where: str = "the page", serving: bool = False) -> str:
    """The page with its Content-Security-Policy ``<meta>`` first in ``<head>``.

    It goes right after ``<meta charset>`` when that opens the head, else right after
    ``<head>``; ``serving`` as for :func:`policy`. Raises ValueError, naming ``where``, for
    a page without ``<head>``, one that already has a policy, or one with an inline event
    handler the policy would block.

    >>> page = '<html><head><meta charset="utf-8"><title>t</title></head>'
    >>> page += '<body><script>go()</script></body></html>'
    >>> out = with_policy(page)
    >>> out.startswith('<html><head><meta charset="utf-8"><meta http-equiv=')
    True
    >>> script_hash("go()") in out.split("<title>")[0]
    True
    >>> with_policy("<p>no head</p>", "404.html")
    Traceback (most recent call last):
    ...
    ValueError: 404.html: no <head> for the Content-Security-Policy; keep the template's <head>
    """
    head = _HEAD.search(html)
    if head is None:
        raise ValueError(
            f"{where}: no <head> for the Content-Security-Policy; keep the template's <head>"
        )
    if _EXISTING.search(html):
        raise ValueError(
            f"{where}: already has a Content-Security-Policy <meta>; remove it from the "
            "template or page (gpulesson/site/csp_hook.py writes the one policy)"
        )
    handlers = inline_handlers(html)
    if handlers:
        raise ValueError(
            f"{where}: inline event handler or javascript: URL {handlers[0][:120]!r}, which "
            "the Content-Security-Policy blocks; attach the handler from a script in "
            "docs/javascripts/ instead"
        )
    at = head.end()
    charset = _CHARSET.match(html, at)
    if charset:
        at = charset.end()
    text = policy(script_hashes(html), serving)
    meta = f'<meta http-equiv="Content-Security-Policy" content="{text}">'
    return html[:at] + meta + html[at:]


#: Set by ``on_startup``: True under ``mkdocs serve`` (see the module docstring).
_SERVING = {"on": False}


def on_startup(command: str, dirty: bool) -> None:
    """Note whether this is ``mkdocs serve``, whose live-reload script is inline."""
    _SERVING["on"] = command == "serve"


@event_priority(-100)  # last: after every hook and plugin that edits the page's HTML
def on_post_page(output: str, page: Any, config: Any) -> str:
    """Put the policy, with this page's script hashes, at the top of its ``<head>``."""
    try:
        where = f"{page.file.src_uri} ({page.url or 'home'})"
        return with_policy(output, where, _SERVING["on"])
    except ValueError as error:
        raise PluginError(str(error)) from None


@event_priority(-100)
def on_post_template(output: str, template_name: str, config: Any) -> str:
    """The same for the theme's static HTML pages (``404.html``); other templates as they are."""
    if not template_name.endswith(".html"):
        return output
    try:
        return with_policy(output, template_name, _SERVING["on"])
    except ValueError as error:
        raise PluginError(str(error)) from None
