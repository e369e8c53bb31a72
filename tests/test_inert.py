"""gpulesson.text: inert() makes a string literal text in this site's Markdown; script_json()
writes JSON no value can break out of; and the renderers use them for every data field.
"""

from __future__ import annotations

import ast
import json
from html.parser import HTMLParser
from pathlib import Path

import markdown
import pytest
import yaml

from gpulesson.course.software_stack import markdown_text
from gpulesson.text import ELLIPSIS, MAX_CHARS, inert, script_json

REPO = Path(__file__).resolve().parent.parent
PWN = "window.__pwned=1"


def _convert(text: str) -> str:
    """``text`` through Python-Markdown with mkdocs.yml's extensions and settings."""
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    names, settings = [], {}
    for entry in config["markdown_extensions"]:
        name, options = next(iter(entry.items())) if isinstance(entry, dict) else (entry, {})
        names.append(name)
        settings[name] = options or {}
    return markdown.Markdown(extensions=names, extension_configs=settings).convert(text)


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)

    def handle_data(self, data: str) -> None:
        self.text += data


def _shown(markdown_source: str) -> _Tags:
    parsed = _Tags()
    parsed.feed(_convert(markdown_source))
    return parsed


HOSTILE = [
    f'<img src=x onerror="{PWN}">',
    f'[.](#){{: autofocus onfocus="{PWN}" }}',
    f"[x](javascript:{PWN})",
    "![](http://198.51.100.7/p.png)",
    "<http://198.51.100.7/>",
    "<someone@example.invalid>",
    f"NVIDIA <!--<script>{PWN}</script>",
    f'*[T4]: <b onclick="{PWN}">x</b>',
    "`code` **bold** _em_ ~~del~~ ==mark== ^^ins^^",
    "### heading {#id .cls}",
    f'<div markdown="1" onclick="{PWN}">*x*</div>',
    "- list item",
    "1. numbered",
    "> quote",
    "---",
    "    four-space indent",
    "\\*backslashes\\* \\\\",
    "&amp; &lt;b&gt; &#60;i&#62;",
    "[ref]: http://198.51.100.7/",
    "a | b | c",
    '!!! danger "x"',
]


@pytest.mark.parametrize("text", HOSTILE)
@pytest.mark.parametrize(
    "where", ["{}", "| {} | x |\n|---|---|\n| {} | y |", '!!! info "t"\n    {}']
)
def test_a_hostile_string_is_plain_text_wherever_a_renderer_puts_it(text, where):
    frame = _shown(where.replace("{}", "plain"))
    shown = _shown(where.replace("{}", inert(text)))
    assert shown.tags == frame.tags  # no element added, no table cell or block split off
    assert text.strip() in shown.text  # the reader sees the original characters


@pytest.mark.parametrize(
    ("text", "seen"),
    [
        ("NVIDIA\n\n### Owned\n\n<script>x</script>", "NVIDIA ### Owned <script>x</script>"),
        ("a\r\nb\tc\x00d\x1be\u2028f\u2029g\u202eh\x85i", "a b c d e f g h i"),
        ("  padded  ", "padded"),
    ],
)
def test_control_characters_and_newlines_become_one_space(text, seen):
    out = inert(text)
    assert "\n" not in out and "\r" not in out
    assert all(c.isprintable() for c in out)
    assert _shown(out).text.strip() == seen


def test_a_long_string_is_cut_at_the_stated_maximum_with_an_ellipsis():
    long = "<b>" + "x" * 1000
    assert _shown(inert(long)).text.strip() == ("<b>" + "x" * 1000)[: MAX_CHARS - 1] + ELLIPSIS
    assert len(_shown(inert("y" * 50, max_chars=10)).text.strip()) == 10
    assert inert("y" * MAX_CHARS) == "y" * MAX_CHARS  # at the maximum: kept whole


def test_the_probe_s_markdown_text_is_the_same_helper():
    assert markdown_text is inert


@pytest.mark.parametrize(
    "value",
    [
        "</script><script>alert(1)</script>",
        "<!--<script>",
        "a\u2028b\u2029c",
        "x & y > z",
        {"k</script>": ["<!--", 1.5, None, True]},
    ],
)
def test_script_json_round_trips_and_never_holds_a_tag_or_a_line_separator(value):
    text = script_json(value)
    assert json.loads(text) == value
    assert not any(c in text for c in "<>&\u2028\u2029")


def test_script_json_refuses_values_json_parse_cannot_read():
    with pytest.raises(ValueError, match="NaN or infinity"):
        script_json({"value": float("inf")})


# --- the renderers use the helper for every data field ------------------------------------

#: Free-text fields of a bundle's provenance (and of the build machine's probe).
DATA_FIELDS = {
    "device_name",
    "driver_version",
    "driver_cuda_version",
    "cuda_version",
    "torch_version",
    "python_version",
    "platform",
    "cpu_model",
    "gpulesson_version",
    "gpulesson_commit",
}
#: Renderers of bundle rows and datasheet rows, and the fields they read on top of those:
#: a measurement's label, a bundle's file and source, a datasheet row's name.
ROW_RENDERERS = {
    ("gpulesson/results/render.py", "bundles_markdown"): {"source", "created_utc", "device_type"},
    ("gpulesson/site/gpu_figures.py", "stamp_markdown"): {"file", "date", "device"},
    ("gpulesson/course/roofline.py", "datasheets_markdown"): {"name"},
    ("gpulesson/course/why_gpus.py", "gpu_peaks_markdown"): {"name"},
    ("gpulesson/course/mixed_precision.py", "gpu_markdown"): {"label"},
    ("gpulesson/course/feeding.py", "rows_markdown"): {"label", "name"},
    ("gpulesson/course/why_gpus.py", "_sources"): {"title"},
}
#: Where a field goes into a row tuple that is escaped whole one line later.
ESCAPED_LATER = {("gpulesson/site/provenance.py", "record_markdown")}
WRAPPERS = {"inert", "markdown_text", "escape"}  # html.escape: provenance's markdown="0" stamp
RENDERER_MODULES = sorted(
    {
        *(p.relative_to(REPO).as_posix() for p in (REPO / "gpulesson").rglob("*render*.py")),
        *(p.relative_to(REPO).as_posix() for p in (REPO / "gpulesson" / "course").glob("*.py")),
        "gpulesson/timing/charts.py",
        "gpulesson/probe.py",
        *(
            f"gpulesson/site/{name}.py"
            for name in ("results_pages", "gpu_figures", "provenance", "glossary", "quizzes")
        ),
    }
)


def _names(expr: ast.expr) -> set[str]:
    """The field a formatted value shows: ``p.device_name``, ``device_name``, ``a or b``."""
    if isinstance(expr, ast.Attribute):
        return {expr.attr}
    if isinstance(expr, ast.Name):
        return {expr.id}
    if isinstance(expr, ast.BoolOp):
        return set().union(*(_names(v) for v in expr.values))
    if isinstance(expr, ast.IfExp):
        return _names(expr.body) | _names(expr.orelse)
    return set()


def raw_interpolations(source: str, path: str) -> list[str]:
    """Formatted values of data fields in a renderer not inside inert() (or an error message).

    >>> raw_interpolations("def a_markdown(p):\\n    return f'| {p.device_name} |'", "x.py")
    ['x.py:2 a_markdown: p.device_name']
    >>> raw_interpolations("def a_markdown(p):\\n    return f'| {inert(p.device_name)} |'", "x.py")
    []
    """
    found = []
    for function in ast.walk(ast.parse(source)):
        if not isinstance(function, ast.FunctionDef) or (path, function.name) in ESCAPED_LATER:
            continue
        renders = any(k in function.name for k in ("markdown", "html", "stamp", "_sources"))
        if renders or (path, function.name) in ROW_RENDERERS:
            fields = DATA_FIELDS | ROW_RENDERERS.get((path, function.name), set())
            found += [
                f"{path}:{node.lineno} {function.name}: {ast.unparse(node.value)}"
                for node in _unwrapped(function, fields)
            ]
    return found


def _unwrapped(node: ast.AST, fields: set[str], wrapped: bool = False) -> list[ast.FormattedValue]:
    """The formatted values of ``fields`` under ``node`` outside a wrapper call and a raise."""
    if isinstance(node, ast.Raise):
        return []  # an error message, not a page
    if isinstance(node, ast.Call):
        callee = node.func
        name = callee.attr if isinstance(callee, ast.Attribute) else getattr(callee, "id", "")
        wrapped = wrapped or name in WRAPPERS
    found = []
    if isinstance(node, ast.FormattedValue) and not wrapped and _names(node.value) & fields:
        found.append(node)
    for child in ast.iter_child_nodes(node):
        found += _unwrapped(child, fields, wrapped)
    return found


def test_no_renderer_interpolates_a_data_field_without_the_helper():
    found = [
        line
        for path in RENDERER_MODULES
        for line in raw_interpolations((REPO / path).read_text(), path)
    ]
    assert found == [], "wrap these in gpulesson.text.inert:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("path", "before", "after"),
    [
        ("gpulesson/site/gpu_figures.py", "{inert(p.device_name)}", "{p.device_name}"),
        ("gpulesson/site/gpu_figures.py", "{inert(ref.file)}", "{ref.file}"),
        (
            "gpulesson/results/render.py",
            "inert(p.driver_version or MISSING)",
            "f'{p.driver_version or MISSING}'",
        ),
        ("gpulesson/course/roofline.py", "{inert(r.name)}", "{r.name}"),
    ],
)
def test_the_check_finds_a_raw_use_put_back(path, before, after):
    source = (REPO / path).read_text()
    assert before in source
    assert raw_interpolations(source, path) == []
    assert len(raw_interpolations(source.replace(before, after, 1), path)) == 1
