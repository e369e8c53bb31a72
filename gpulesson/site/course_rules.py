r"""The rules every lesson keeps, checked in one place when the site is built.

A lesson is a page ``docs/lessons/<stem>.md``. The build (``labs_hook.on_config``, through
:func:`check`) stops with every offender listed, each naming the file, the rule and the fix,
when a lesson breaks one of these (CONTRIBUTING.md, "Adding a lesson", states them too):

1. it has a quiz beside it, ``docs/lessons/<stem>.quiz.yml``;
2. the quiz has at least :data:`MIN_QUESTIONS` questions, each with at least
   :data:`MIN_OPTIONS` options (the loader alone accepts fewer: a fixture or a draft is fine);
3. at least one question is *predict-then-reveal*: it names the block that computes its
   answer (``before:``) and reads the facts that block publishes (``facts:``), so the page
   asks for the number before it shows it; and every question that reads the page's facts
   says ``before:``, so no question asks for a number the page printed earlier;
4. the lesson ends with a ``## Sources`` section of at least :data:`MIN_SOURCES` distinct
   absolute ``http(s)`` links, and every one of them is also cited in the lesson's body,
   where the fact it supports is used.

>>> page = "# L\n\nA [fact][a].\n\n## Sources\n\n- [A][a]\n- [B](https://b.org/y)\n"
>>> for line in sources_problems("l.md", page + "\n[a]: https://a.org/a\n"):
...     print(line.split(": add")[0].split(" is listed")[0])
l.md: sources: 2 links under ## Sources; a lesson cites at least 3
l.md: sources: https://b.org/y
"""

from __future__ import annotations

import functools
import html
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from gpulesson.site.content import QUIZ_SUFFIX, Content
from gpulesson.site.quizzes import Question

MIN_QUESTIONS = 3
MIN_OPTIONS = 3
MIN_SOURCES = 3
RULES_AT = 'CONTRIBUTING.md, "Adding a lesson"'

_H2 = re.compile(r"^## (.+)$", re.M)
_INLINE = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")
_REFERENCE = re.compile(r"\[([^\]]+)\]\[([^\]]*)\]")
_DEFINITION = re.compile(r"^\[([^\]]+)\]:\s*(\S+)\s*$", re.M)
_FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def _links(markdown: str, definitions: dict[str, str]) -> list[str]:
    """Every link target in ``markdown``: inline ones and reference ones resolved."""
    found = [url for _, url in _INLINE.findall(markdown)]
    for label, ref in _REFERENCE.findall(markdown):
        key = (ref or label).lower()
        if key in definitions:
            found.append(definitions[key])
    return found


def sources_of(markdown: str) -> tuple[str, list[str], list[str]]:
    """The Sources section, the links in it, and the links of the body before it.

    Raises ValueError when the last H2 is not ``## Sources``.
    """
    definitions = {label.lower(): url for label, url in _DEFINITION.findall(markdown)}
    headings = _H2.findall(markdown)
    if not headings or headings[-1].strip() != "Sources":
        raise ValueError(f"the last H2 is {headings[-1:] or 'missing'}, not '## Sources'")
    start = markdown.rindex("\n## Sources")
    section = _DEFINITION.sub("", markdown[start:])
    body = _FENCE.sub("", _DEFINITION.sub("", markdown[:start]))
    return section, _links(section, definitions), _links(body, definitions)


def well_formed(url: str) -> bool:
    """An absolute http(s) URL with a dotted host and no spaces.

    >>> well_formed("https://pytorch.org/docs/stable/amp.html"), well_formed("pytorch.org")
    (True, False)
    """
    parsed = urlparse(url)
    return parsed.scheme in ("http", "https") and "." in parsed.netloc and " " not in url


def sources_problems(label: str, markdown: str) -> list[str]:
    """Rule 4 for one lesson's Markdown: what is wrong with its sources, each with the fix."""
    try:
        _, links, cited = sources_of(markdown)
    except ValueError as exc:
        return [f"{label}: sources: {exc}: end the lesson with a ## Sources list of its links"]
    problems = []
    distinct = sorted(set(links), key=links.index)
    if len(distinct) < MIN_SOURCES:
        problems.append(
            f"{label}: sources: {len(distinct)} links under ## Sources; a lesson cites at least "
            f"{MIN_SOURCES}: add the sources its facts come from"
        )
    problems += [
        f"{label}: sources: {url} is not an absolute http(s) link: give the page's full URL"
        for url in distinct
        if not well_formed(url)
    ]
    problems += [
        f"{label}: sources: {url} is listed but never cited in the body: link it where its "
        "fact is used, or drop it"
        for url in distinct
        if url not in cited
    ]
    return problems


def quiz_problems(label: str, questions: tuple[Question, ...]) -> list[str]:
    """Rules 2 and 3 for one lesson's quiz, each with the fix.

    >>> from gpulesson.site.quizzes import Option
    >>> q = Question(prompt="Why?", options=(Option("a", True, "."), Option("b", False, ".")))
    >>> for line in quiz_problems("x.quiz.yml", (q,)):
    ...     print(line.split(";")[0].split(": add")[0])
    x.quiz.yml: questions: 1
    x.quiz.yml: question 1 ("Why?"): options: 2
    x.quiz.yml: questions: none is a predict-then-reveal question
    """
    problems = []
    if len(questions) < MIN_QUESTIONS:
        problems.append(
            f"{label}: questions: {len(questions)}; a lesson's quiz has at least "
            f"{MIN_QUESTIONS}: add questions that need the lesson's reasoning"
        )
    for number, q in enumerate(questions, 1):
        prompt = " ".join(q.prompt.split())
        shown = prompt if len(prompt) <= 40 else prompt[:40] + "..."
        if len(q.options) < MIN_OPTIONS:
            problems.append(
                f'{label}: question {number} ("{shown}"): options: {len(q.options)}; a question '
                f"offers at least {MIN_OPTIONS}: add a plausible wrong answer with its why"
            )
        if q.facts and not q.before:
            problems.append(
                f'{label}: question {number} ("{shown}"): before: missing; a question that '
                "reads the page's facts asks for a number the page computes, so it stands "
                "before the block that computes it, never after: add before: <that block's id>"
            )
    if not any(q.before and q.facts for q in questions):
        problems.append(
            f"{label}: questions: none is a predict-then-reveal question; every quiz asks the "
            "reader to predict a number before the block that computes it: give one question "
            "before: <block id> and the facts: and values: that block publishes (see "
            'CONTRIBUTING.md, "Quizzes and the glossary")'
        )
    return problems


def problems(course: Content) -> list[str]:
    """Every broken rule of every lesson under ``course.docs_dir``, lesson by lesson."""
    name = course.docs_dir.name
    found = []
    for stem in sorted(course.lessons):
        page = Path(course.docs_dir) / "lessons" / f"{stem}.md"
        label = f"{name}/lessons/{stem}"
        if stem not in course.quizzes:
            found.append(
                f"{label}{QUIZ_SUFFIX}: missing: every lesson has a quiz beside it; write one "
                'as CONTRIBUTING.md, "Quizzes and the glossary" shows'
            )
        else:
            found += quiz_problems(f"{label}{QUIZ_SUFFIX}", course.quizzes[stem])
        found += sources_problems(f"{label}.md", page.read_text(encoding="utf-8"))
    return found


def check(course: Content) -> None:
    """Raise ValueError listing every broken lesson rule (one line each), or return."""
    found = problems(course)
    if found:
        count = f"{len(found)} lesson rule{'s are' if len(found) > 1 else ' is'} broken"
        raise ValueError(f"{count} ({RULES_AT}):\n  " + "\n  ".join(found))


# --- Rule 5: no typed figures in lesson prose ------------------------------------------------

#: Every typed figure in ``docs/lessons/*.md`` is a build warning (``typed_hook.py``), so the
#: strict build stops, each naming file, line, the figure and this fix.
TYPED_FIX = (
    "fill it from a fact with a ```describe block, or mark a quoted source figure or teaching "
    "estimate as {q: ...}; see CONTRIBUTING.md"
)
Q_TITLE = "Quoted from a cited source or a teaching estimate: not computed by this build"
_Q_SPAN = '<span class="gl-q" title="{title}">{text}</span>'

#: The one marker for a figure typed on purpose: ``{q: 84 GB}``.
_Q_MARKER = re.compile(r"\{q:[ \t]*([^{}\n]*?)[ \t]*\}")
#: Longest first, so "GB/s" wins over "GB" and "ms" over "s".
TYPED_UNITS = (
    "tokens per second", "GPU-hours", "GPU-hour", "GPU hours", "GPU hour", "tokens/s",
    "tok/s", "TFLOP/s", "GFLOP/s", "PFLOP/s", "FLOP/s", "TFLOPS", "TFLOPs", "GFLOPS",
    "GFLOPs", "PFLOPS", "PFLOPs", "FLOPs", "FLOP/byte", "FLOP/B", "B/param", "bytes",
    "byte", "FLOP", "GB/s", "TB/s", "MB/s", "GiB/s", "GiB", "MiB", "KiB", "TiB", "GB", "MB", "KB",
    "kB", "TB", "GHz", "MHz", "hours", "hour", "seconds", "second", "minutes", "ms", "µs",
    "μs", "us", "ns", "s", "W", "%", "x", "×",
)  # fmt: skip
_UNIT = "|".join(re.escape(u) for u in sorted(TYPED_UNITS, key=len, reverse=True))
_FIGURE = re.compile(
    r"(?<![\w.^/\\])(?P<currency>\$)?(?P<number>(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?)(?![.,]?\d)"
    r"(?P<space>[ \t\u00a0\u202f]|&nbsp;|&thinsp;)?"
    rf"(?:(?P<unit>{_UNIT})(?!\w)|(?(currency)|(?!)))"
)
#: Words after which a number is a version, a section or an item, not a figure.
_NOT_AFTER = re.compile(
    r"(?:\b(?:section|sections|chapter|figure|fig\.|table|version|versions|"
    r"v|torch|pytorch|cuda|python|cudnn|nccl|triton|driver|capability|sm|issue|pep|"
    r"rfc)|§)\s*$",
    re.IGNORECASE,
)
_FENCE_OPEN = re.compile(r"^[ \t]*(`{3,}|~{3,})(.*)$")
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)((?:(?!\n[ \t]*\n).)+?)(?<!`)\1(?!`)", re.S)
_DEFINITION_LINE = re.compile(r"^[ \t]{0,3}\[[^\]^][^\]]*\]:[ \t]*\S.*$", re.M)
_ABBREVIATION_LINE = re.compile(r"^[ \t]*\*\[[^\]]+\]:.*$", re.M)
_LINK_TARGET = re.compile(r"\]\([^)\n]*\)")
_URL = re.compile(r"<?\bhttps?://[^\s)>\]]+>?")
_HTML_TAG = re.compile(r"</?[A-Za-z][^<>\n]*>")
_ATTR_LIST = re.compile(r"\{:?[ \t]*[.#][^{}\n]*\}")
_VENDOR_WORDS = {"nvidia", "amd", "apple", "geforce", "instinct", "or"}


@dataclass(frozen=True)
class TypedFigure:
    """A number with a unit typed into a lesson's prose: line (from 1), figure, the line's text."""

    line: int
    figure: str
    text: str


def _blank(match: re.Match[str]) -> str:
    """The match as spaces, its newlines kept, so offsets and line numbers do not move."""
    return re.sub(r"[^\n]", " ", match.group(0))


@functools.cache
def product_names() -> re.Pattern[str]:
    """The datasheet table's product names ("A100 80GB", "H100 SXM5 80GB"), as one pattern.

    Read from ``gpulesson/results/datasheets.json``: a row's name without the vendor's words
    and its parenthesis is a model ("A100", "RTX 3090") and its qualifiers ("80GB", "SXM4");
    a product name is a model followed by up to three of its rows' qualifiers.

    >>> [m.group(0) for m in product_names().finditer("an A100 80GB, an H200 141 GB, a T4")]
    ['A100 80GB', 'H200 141 GB', 'T4']
    """
    from gpulesson.results import datasheets

    qualifiers: dict[str, set[str]] = {}
    for row in datasheets.all_rows():
        words = re.sub(r"\(.*?\)", " ", row.name).split()
        words = [w for w in words if w.lower() not in _VENDOR_WORDS]
        model_end = next((i for i, w in enumerate(words) if re.search(r"\d", w)), 0) + 1
        model = " ".join(words[:model_end])
        qualifiers.setdefault(model, set()).update(words[model_end:])
    alternatives = []
    for model, words in sorted(qualifiers.items(), key=lambda kv: -len(kv[0])):
        spelled = sorted(
            (re.sub(r"^(\d+)(GB|GiB)$", r"\1 ?\2", re.escape(w)) for w in words), key=len
        )[::-1]
        tail = rf"(?:[ -](?:{'|'.join(spelled)})(?!\w)){{0,3}}" if spelled else ""
        alternatives.append(rf"\b{re.escape(model)}(?!\w){tail}")
    return re.compile("|".join(alternatives))


def _fenced_lines(lines: list[str]) -> set[int]:
    """The indexes of the lines in fenced code blocks (``` or ~~~, fences included)."""
    inside: set[int] = set()
    fence = None
    for i, line in enumerate(lines):
        if fence is None:
            opened = _FENCE_OPEN.match(line)
            if opened and not (opened.group(1)[0] == "`" and "`" in opened.group(2)):
                fence = opened.group(1)
                inside.add(i)
        else:
            inside.add(i)
            closing = line.strip()
            if closing.startswith(fence[0] * len(fence)) and not closing.strip(fence[0]):
                fence = None
    return inside


#: Fenced blocks whose body is prose filled from facts (gpulesson.site.claim_fence): the
#: rule reads their text, with the ``{fact}`` fields blanked.
FACT_FENCES = ("claim", "describe")
_FIELD = re.compile(r"\{[^{}\n]*\}")


def _fact_fence_bodies(lines: list[str]) -> set[int]:
    """The indexes of the body lines of ``claim`` and ``describe`` blocks (fences excluded)."""
    bodies: set[int] = set()
    fence, prose = None, False
    for i, line in enumerate(lines):
        if fence is None:
            opened = _FENCE_OPEN.match(line)
            if opened and not (opened.group(1)[0] == "`" and "`" in opened.group(2)):
                fence = opened.group(1)
                prose = opened.group(2).strip().split(" ")[0] in FACT_FENCES
        else:
            closing = line.strip()
            if closing.startswith(fence[0] * len(fence)) and not closing.strip(fence[0]):
                fence = None
            elif prose:
                bodies.add(i)
    return bodies


def _front_matter_end(lines: list[str]) -> int:
    """How many lines the YAML front matter takes (0 when the page has none)."""
    if lines and lines[0].rstrip() == "---":
        for i, line in enumerate(lines[1:], 1):
            if line.rstrip() in ("---", "..."):
                return i + 1
    return 0


def prose_only(markdown: str) -> str:
    """``markdown`` with everything that is not prose blanked, line by line, in place.

    Blanked: YAML front matter, fenced code blocks (any language; of ``claim`` and
    ``describe`` blocks, whose bodies are prose, only the fences and the ``{fact}`` fields),
    HTML comments, inline code spans, link targets and bare URLs, reference-link and
    abbreviation definitions, HTML tags, attribute lists, ``{q: ...}`` markers and the
    datasheet table's product names.

    >>> prose_only("A `24 GB` [card](https://x.org/80GB) <!-- 5 ms --> has {q: 84 GB}.").split()
    ['A', '[card]', 'has', '.']
    >>> prose_only("```describe\\nRead {d.gb:.0f} GB of 24 GB.\\n```").split()
    ['Read', 'GB', 'of', '24', 'GB.']
    """
    lines = markdown.split("\n")
    bodies = _fact_fence_bodies(lines)
    lines = [
        _FIELD.sub(_blank, _Q_MARKER.sub(_blank, line)) if i in bodies else line
        for i, line in enumerate(lines)
    ]
    skip = (_fenced_lines(lines) - bodies) | set(range(_front_matter_end(lines)))
    text = "\n".join(" " * len(line) if i in skip else line for i, line in enumerate(lines))
    for pattern in (_COMMENT, _CODE_SPAN, _Q_MARKER, _DEFINITION_LINE, _ABBREVIATION_LINE):
        text = pattern.sub(_blank, text)
    text = _LINK_TARGET.sub(lambda m: "]" + _blank(m)[1:], text)
    for pattern in (_URL, _HTML_TAG, _ATTR_LIST):
        text = pattern.sub(_blank, text)
    return product_names().sub(_blank, text)


def _is_figure(prose: str, match: re.Match[str]) -> bool:
    """Whether a number-and-unit match is a figure, not a year, version, exponent, product
    (``7 x 10^9``, ``2 x layers x heads``) or formula term."""
    number, unit = match.group("number"), match.group("unit")
    before = prose[max(0, match.start() - 40) : match.start()]
    after = prose[match.end() : match.end() + 80]
    if before.endswith("^") or re.search(r"\d[ \t]*\*\*$", before):
        return False  # an exponent: 2^30 bytes, 2**30
    if _NOT_AFTER.search(before):
        return False  # a version, a section, an item: CUDA 12.1, section 3
    if unit == "s" and not match.group("space") and re.fullmatch(r"(19|20)\d\d", number):
        return False  # a decade: the 1990s
    if unit in ("x", "×"):
        if re.match(r"\s*[-−(]?\s*\d", after):
            return False  # a product of numbers: 7 x 10^9, 4 x 4, 8.1 x (newline) 10^12
        spaced = bool(match.group("space"))
        if spaced and re.match(r"\s*(?:\(|[^\s(]+\s*(?:[×*+/=)]|x(?!\w)))", after):
            return False  # a formula: 2 x layers x heads, 4 x (N-1)/N, 1000 x major + ...
        if spaced and re.search(r"(?:[×*+=<>≈(/]|(?<!\w)x)\s*$", before):
            return False  # inside a formula: hidden x 4 x hidden, n > 6 x ridge
    return True


def typed_figures(markdown: str) -> list[TypedFigure]:
    """Every number with a unit typed into the prose of ``markdown``, in order.

    >>> for f in typed_figures("It needs about 24.5 GB,\\nand runs 12x faster at 95%."):
    ...     print(f.line, f.figure)
    1 24.5 GB
    2 12x
    2 95%
    >>> typed_figures(
    ...     "An A100 80GB or H100 SXM on CUDA 12.1 since 2020 holds 7 x 10^9 fp16 weights, "
    ...     "2^30 bytes each {q: 84 GB} (`24 GB`), 2 x layers x heads x bytes."
    ... )
    []
    """
    lines = markdown.split("\n")
    prose = prose_only(markdown)
    found = []
    for match in _FIGURE.finditer(prose):
        if _is_figure(prose, match):
            number = prose.count("\n", 0, match.start())
            found.append(TypedFigure(number + 1, match.group(0).strip(), lines[number]))
    return found


def typed_figures_errors(path: str | Path, label: str | None = None) -> list[str]:
    """Rule 5 for one lesson file: one message per typed figure, naming file, line and fix.

    ``label`` names the file in the messages (default: ``path`` as given).
    """
    text = Path(path).read_text(encoding="utf-8")
    name = label or str(path)
    return [
        f'{name}:{f.line}: typed figure "{f.figure}" in the prose: {TYPED_FIX}'
        for f in typed_figures(text)
    ]


def typed_figures_problems(docs_dir: str | Path) -> list[str]:
    """Rule 5 for every lesson under ``docs_dir``: one message per typed figure."""
    docs = Path(docs_dir)
    return [
        problem
        for page in sorted((docs / "lessons").glob("*.md"))
        for problem in typed_figures_errors(page, f"{docs.name}/lessons/{page.name}")
    ]


def unquoted(line: str) -> str:
    """One line with each ``{q: TEXT}`` marker outside code spans replaced by its TEXT.

    For places the marker's span cannot go (the companion notebooks).

    >>> unquoted("About {q: 84 GB}, not `{q: 1 GB}`.")
    'About 84 GB, not `{q: 1 GB}`.'
    """
    spans = [m.span() for m in _CODE_SPAN.finditer(line)]
    return _Q_MARKER.sub(
        lambda m: m.group(0) if any(a <= m.start() < b for a, b in spans) else m.group(1), line
    )


def render_quoted(markdown: str) -> str:
    """``{q: TEXT}`` as a marked span, outside code blocks and code spans, before conversion.

    >>> print(render_quoted("About {q: 84 GB}, not `{q: 1 GB}`."))  # doctest: +ELLIPSIS
    About <span class="gl-q" title="Quoted from ...">84 GB</span>, not `{q: 1 GB}`.
    """
    lines = markdown.split("\n")
    code = _fenced_lines(lines)
    out = []
    for i, line in enumerate(lines):
        if i in code or "{q:" not in line:
            out.append(line)
            continue
        spans = [m.span() for m in _CODE_SPAN.finditer(line)]
        pieces, end = [], 0
        for marker in _Q_MARKER.finditer(line):
            if not any(a <= marker.start() < b for a, b in spans):
                text = html.escape(marker.group(1))
                pieces += [line[end : marker.start()], _Q_SPAN.format(title=Q_TITLE, text=text)]
                end = marker.end()
        out.append("".join(pieces) + line[end:])
    return "\n".join(out)
