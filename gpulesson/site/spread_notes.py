"""A page's spread warnings, collapsed into one.

Every timing table flags a row whose interquartile range passes a share of its median
(``gpulesson.timing.results``), in a "Spread warning" admonition below the table. A page
with several timed tables measured on a busy machine would repeat the same warning, so the
build keeps the first admonition, where the first noisy table is, gathers every flagged row
into it, and drops the others.

>>> one = ('<div class="admonition warning">\\n<p class="admonition-title">Spread warning</p>'
...        '\\n<ul>\\n<li>a: IQR 20%.</li>\\n</ul>\\n</div>')
>>> two = one.replace("a: IQR 20%", "b: IQR 15%")
>>> out = collapse(f"<p>x</p>{one}<p>y</p>{two}<p>z</p>")
>>> out.count("Spread warning"), out.count("<li>"), out.index("b: IQR") < out.index("<p>y</p>")
(1, 2, True)
>>> collapse("<p>nothing noisy</p>")
'<p>nothing noisy</p>'
"""

from __future__ import annotations

import re

TITLE = "Spread warning"
_ADMONITION = re.compile(
    r'<div class="admonition warning">\s*<p class="admonition-title">'
    + re.escape(TITLE)
    + r"</p>\s*<ul>(?P<items>.*?)</ul>\s*</div>",
    re.S,
)


def collapse(page_html: str) -> str:
    """The page with its spread warnings gathered into the first one (see the module)."""
    found = list(_ADMONITION.finditer(page_html))
    if len(found) < 2:
        return page_html
    items = "".join(m["items"] for m in found)
    first = found[0]
    merged = (
        f'<div class="admonition warning">\n<p class="admonition-title">{TITLE}</p>\n'
        f"<p>Rows on this page whose repeats spread widely:</p>\n<ul>{items}</ul>\n</div>"
    )
    out, end = [page_html[: first.start()], merged], first.end()
    for m in found[1:]:
        out.append(page_html[end : m.start()])
        end = m.end()
    out.append(page_html[end:])
    return "".join(out)
