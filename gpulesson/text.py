"""Contributed text made safe for a page: one helper for Markdown, one for JSON in HTML.

Strings from result bundles, datasheets, published rows, YAML files and the probed machine
reach Markdown that Python-Markdown converts with ``mkdocs.yml``'s extensions (``abbr``,
``admonition``, ``attr_list``, ``md_in_html``, ``tables``, ``toc`` and pymdownx's details,
highlight, inlinehilite, superfences, tabbed, snippets; no magiclink, so a bare URL stays
text). :func:`inert` makes such a string plain text there: HTML-escaped, so no tag, comment
or autolink (``<http://...>``) can start, and every other character that Markdown reads as
syntax backslash-escaped, which Python-Markdown turns back into the character itself, so a
reader sees and copies the original text. :func:`script_json` serialises data for a
``<script type="application/json">`` element so that no value can end the element or open
a comment in it. Raw HTML outside Markdown (``markdown="0"``) uses ``html.escape``.

>>> inert('<img src=x onerror="alert(1)">')
'&lt;img src=x onerror=&quot;alert(1)&quot;&gt;'
>>> print(script_json({"name": "</script><!--"}))
{"name":"\\u003c/script\\u003e\\u003c!--"}
"""

from __future__ import annotations

import html
import json
import re
import unicodedata
from typing import Any

#: The most characters :func:`inert` keeps; a longer string is cut and ends with "…".
MAX_CHARS = 300  # a device name is ~30, a probe verdict ~200; a 5,000-character name is cut
ELLIPSIS = "…"

#: Characters Markdown (with this site's extensions) reads as syntax anywhere in a line,
#: each of which Python-Markdown takes back from a backslash escape: escapes, code spans
#: and inlinehilite, emphasis, attribute lists (``{: ...}``, ``{#id}``), links, images and
#: abbreviation definitions (``[``, ``]``, ``!``), headings and ids, and table cells.
MARKDOWN_SYNTAX = "\\`*_{}[]!#|"
#: A start that would open a block (a list, a rule, a numbered list) at a line's start.
_LINE_START = re.compile(r"^([+\-]|[0-9]+\.(\s|$))")
_BIDI = {0x200E, 0x200F, 0x061C, *range(0x202A, 0x202F), *range(0x2066, 0x206A)}


def _is_control(char: str) -> bool:
    """Control characters, line and paragraph separators, and bidirectional controls."""
    return unicodedata.category(char) in ("Cc", "Zl", "Zp") or ord(char) in _BIDI


def _inside_word(text: str, i: int) -> bool:
    """An underscore between two letters or digits, which never starts or ends emphasis."""
    return (
        text[i] == "_" and 0 < i < len(text) - 1 and text[i - 1].isalnum() and text[i + 1].isalnum()
    )


def inert(value: object, max_chars: int = MAX_CHARS) -> str:
    r"""``value`` as literal text in Markdown: no element, link, emphasis, block or cell break.

    Control characters and newlines become spaces, runs of white space one space, and the
    ends are trimmed (so the text can neither end a table row nor start a block). Text
    longer than ``max_chars`` is cut to ``max_chars`` characters, the last an ellipsis.
    Each character of :data:`MARKDOWN_SYNTAX` is backslash-escaped (except ``_`` inside a
    word, as in ``fixture_h100.json``, where Markdown never reads it as emphasis), then
    ``& < > " '`` are HTML-escaped, and a first ``-``, ``+`` or ``1.`` is escaped so that
    no list or rule starts. The page shows the original characters.

    >>> print(inert("[.](#){: autofocus onfocus=x } *a* _b_ `c` e|f ![i](http://x.test/i.png)"))
    \[.\](\#)\{: autofocus onfocus=x \} \*a\* \_b\_ \`c\` e\|f \!\[i\](http://x.test/i.png)
    >>> print(inert("NVIDIA\n### Owned\r\n\x00\u2028 H100"))
    NVIDIA \#\#\# Owned H100
    >>> print(inert("<!--<script> <http://x.test/> &amp; 'q'"))
    &lt;\!--&lt;script&gt; &lt;http://x.test/&gt; &amp;amp; &#x27;q&#x27;
    >>> print(inert("- item"), inert("+"), inert("12. item"), inert("2.5.1+cu121"))
    \- item \+ 12\. item 2.5.1+cu121
    >>> print(inert("fixture_h100.json"), inert(None), inert(12.5))
    fixture_h100.json None 12.5
    >>> inert("x" * 5000) == "x" * (MAX_CHARS - 1) + ELLIPSIS
    True
    """
    text = "".join(" " if _is_control(c) else c for c in str(value))
    text = " ".join(text.split())
    if len(text) > max_chars:
        text = text[: max_chars - 1].rstrip() + ELLIPSIS
    escaped = "".join(
        "\\" + c if c in MARKDOWN_SYNTAX and not _inside_word(text, i) else c
        for i, c in enumerate(text)
    )
    start = _LINE_START.match(text)  # its characters are not escaped above
    if start:
        cut = 0 if start.group(1) in "+-" else len(start.group(1).rstrip()) - 1
        escaped = escaped[:cut] + "\\" + escaped[cut:]
    return html.escape(escaped, quote=True)


#: What :func:`script_json` writes as JSON escapes: what could end a script element or
#: open a comment in it (``</script>``, ``<!--``), entities, and the separators that
#: JavaScript (before ES2019) reads as line ends.
_SCRIPT_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028"}
_SCRIPT_ESCAPES["\u2029"] = "\\u2029"


def code_span(value: object, max_chars: int = MAX_CHARS) -> str:
    """``value`` as a Markdown code span that shows it literally, whatever it holds.

    Markdown shows a code span's text as it is (``<`` stays text), so the only way out is a
    backtick: the fence is one backtick longer than the longest run inside. Control
    characters go, as :func:`inert` drops them, and a long value is cut the same way.

    >>> code_span("aten::mm"), code_span("a`b"), code_span("<img src=x>")
    ('`aten::mm`', '`` a`b ``', '`<img src=x>`')
    """
    text = "".join(c for c in str(value) if not _is_control(c))
    if len(text) > max_chars:
        text = text[: max_chars - 1] + ELLIPSIS
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if longest or text.startswith(" ") or text.endswith(" ") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def script_json(data: Any) -> str:
    """``data`` as compact JSON safe inside ``<script type="application/json">``.

    ``JSON.parse`` reads it back unchanged: the escaped characters can only occur inside
    JSON strings, where ``\\u003c`` means ``<``. A value that is not finite (NaN,
    infinity) is a ``ValueError``, since ``JSON.parse`` would refuse the page's data.

    >>> script_json(["a\\u2028b", "x & y"])
    '["a\\\\u2028b","x \\\\u0026 y"]'
    >>> json.loads(script_json({"k": "<!--<script>"}))
    {'k': '<!--<script>'}
    >>> script_json(float("nan"))
    Traceback (most recent call last):
    ...
    ValueError: cannot write NaN or infinity into a page's JSON: drop or replace the value
    """
    try:
        text = json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except ValueError:
        raise ValueError(
            "cannot write NaN or infinity into a page's JSON: drop or replace the value"
        ) from None
    return "".join(_SCRIPT_ESCAPES.get(c, c) for c in text)


#: Markup that authored Markdown (quiz, glossary and lab YAML) may not carry, outside code
#: spans: raw HTML, attribute lists (which can add event handlers), script URL schemes, remote
#: images (a page would load from another host), and control characters.
_HAZARDS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"<\s*[A-Za-z!/?]"), "raw HTML"),
    (re.compile(r"\{\s*[:.#]|\{[^}]*\bon[a-z]+\s*="), "an attribute list"),
    (re.compile(r"\b(javascript|vbscript|data)\s*:", re.IGNORECASE), "a script or data URL"),
    (re.compile(r"!\[[^\]]*\]\(\s*<?\s*(https?:)?//", re.IGNORECASE), "a remote image"),
)
_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.DOTALL)


def markup_hazard(text: str) -> str | None:
    """What in authored Markdown ``text`` could run or load something on a page, or None.

    Code spans are shown literally, so what is inside them is not looked at.

    >>> markup_hazard("Use `<img>` tags *sparingly*; see [the lesson](../timing/).") is None
    True
    >>> markup_hazard('Nice [x](#){: onclick="alert(1)" }')
    'an attribute list'
    >>> markup_hazard("<img src=x onerror=alert(1)>"), markup_hazard("[a](javascript:alert(1))")
    ('raw HTML', 'a script or data URL')
    >>> markup_hazard("![](https://example.com/x.png)"), markup_hazard("a\\x1b[2J")
    ('a remote image', 'a control character')
    """
    outside = _CODE_SPAN.sub(" ", text)
    if any(_is_control(c) and c not in "\n\t" for c in text):
        return "a control character"
    for pattern, what in _HAZARDS:
        if pattern.search(outside):
            return what
    return None
