"""Claims and described sentences written as Markdown in the lesson, not as Python strings.

A lesson states what its numbers show in a fenced block (three backticks) whose info string
is ``claim rule="..."`` and whose body is the sentence, in Markdown, with
``{fact.name:format}`` fields filled from the page's facts (:mod:`gpulesson.site.facts`);
CONTRIBUTING.md ("Checked claims and described sentences") shows one in full. For example
the info string ``claim rule="timing.naive_x > 10 * timing.honest_x"`` over the body
"On this machine the naive stopwatch reads {timing.naive_x:.0f}x, more than ten times the
honest {timing.honest_x:.1f}x." The options say how it is checked:

* ``rule`` (required): the check, an expression over fact names
  (:func:`gpulesson.site.claims.check_rule`); it must read at least one measured or
  published fact.
* ``teaching="yes"``: the sentence is the lesson's point. When this build's numbers do
  not bear it out the page says "not shown on this build" and a publish build fails.
* ``needs="cuda"``: the sentence is about measured GPU figures; on a build without them
  it is recorded as not checked and the page shows nothing (never a blank number).
  ``needs="cpu"``: the same for figures a block publishes only when the build ran on the
  CPU (a block publishes a fact or not; a claim never branches).

A sentence that follows whatever was measured, or whose numbers are constants or
arithmetic on them, is not a check: a block whose info string is ``describe`` renders its
body from the facts, with no mark ("From batch 1 to {decode.max_batch}, total tokens/s
rose {decode.gain:.1f}x.").

``describe`` takes ``needs="cuda"`` too. Both run in the MkDocs process when the page is
converted, after the executed blocks above them have published (or replayed from the
cache) their facts, so a claim is evaluated afresh on every build.

>>> from gpulesson.site import facts
>>> facts.reset(); facts.begin_page("lessons/t.md")
>>> _ = facts.publish("t.x", 3.0, "x")
>>> options = {}
>>> validator("claim", {"rule": "t.x > 2", "teaching": "yes"}, options, {}, None)
True
>>> options["rule"], options["teaching"], options["needs"]
('t.x > 2', True, None)
>>> evaluate_source("claim", "It is {t.x:.0f}x\\nfaster.", options).status
'holds'
"""

from __future__ import annotations

from typing import Any

from mkdocs.exceptions import PluginError
from pymdownx.superfences import SuperFencesException

from gpulesson.site import block_outputs, claims, course_rules, facts

CLAIM = "claim"
DESCRIBE = "describe"
LANGUAGES = (CLAIM, DESCRIBE)
_YES = ("yes", "true", "on", "1")
_NO = ("no", "false", "off", "0", "")


class ClaimFenceError(SuperFencesException, PluginError):
    """A claim or describe block that cannot be evaluated: stops the build with its page.

    A SuperFencesException, so pymdownx does not swallow it and show the block as plain
    code; a PluginError, so MkDocs prints the message without a traceback.
    """


def _flag(language: str, name: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value in _YES:
        return True
    if value in _NO:
        return False
    where = facts.current_page() or "(no page)"
    raise ClaimFenceError(
        f'{where}: ```{language} {name}="{raw}": write {name}="yes" or leave it out'
    )


def validator(
    language: str, inputs: dict[str, str], options: dict[str, Any], attrs: dict[str, Any], md: Any
) -> bool:
    """Sort a ``claim``/``describe`` fence's options; refuse unknown ones with the fix.

    pymdownx.superfences calls this with the header's ``key="value"`` pairs.
    """
    where = facts.current_page() or "(no page)"
    known = {"rule", "needs", "teaching"} if language == CLAIM else {"needs"}
    unknown = sorted(set(inputs) - known)
    if unknown:
        raise ClaimFenceError(
            f"{where}: ```{language} has option(s) {', '.join(unknown)}; "
            f"it takes {', '.join(sorted(known))}"
        )
    rule = inputs.get("rule", "").strip()
    if language == CLAIM and not rule:
        raise ClaimFenceError(
            f'{where}: ```claim needs rule="...", the check over fact names; a sentence '
            "that checks nothing is a ```describe block"
        )
    needs = inputs.get("needs", "").strip() or None
    if needs not in claims.NEEDS:
        raise ClaimFenceError(
            f'{where}: ```{language} needs="{needs}": use needs="cuda" or needs="cpu"'
        )
    options["rule"] = rule
    options["needs"] = needs
    options["teaching"] = _flag(language, "teaching", inputs.get("teaching", ""))
    return True


def sentence(source: str) -> str:
    """The block's body as one paragraph of Markdown: lines joined, outer space removed, and
    a quoted figure's ``{q: ...}`` marker made its span (so its braces are not a fact field).

    >>> sentence("  One line\\n  and the next.\\n")
    'One line and the next.'
    >>> sentence("Of the {q: 24 GiB} card.")  # doctest: +ELLIPSIS
    'Of the <span class="gl-q" title="Quoted ...">24 GiB</span> card.'
    """
    joined = " ".join(line.strip() for line in source.strip().splitlines() if line.strip())
    return course_rules.render_quoted(joined)


def evaluate_source(language: str, source: str, options: dict[str, Any]) -> claims.Claim:
    """Check a claim fence's sentence against the page's facts (see the module)."""
    return claims.evaluate(
        sentence(source), options["rule"], needs=options["needs"], teaching=options["teaching"]
    )


def to_markdown(language: str, source: str, options: dict[str, Any]) -> str:
    """The Markdown a ``claim`` or ``describe`` block shows."""
    if language == CLAIM:
        return claims.to_markdown(evaluate_source(language, source, options))
    return claims.describe(sentence(source), needs=options["needs"])


def formatter(
    source: str,
    language: str,
    css_class: str,
    options: dict[str, Any],
    md: Any,
    classes: list[str] | None = None,
    id_value: str = "",
    attrs: dict[str, Any] | None = None,
    **kwargs: Any,
) -> str:
    """pymdownx.superfences' format function: the block's Markdown, converted to HTML."""
    import markdown_exec

    where = facts.current_page() or "(no page)"
    try:
        text = to_markdown(language, source, options)
    except ValueError as error:  # pymdownx would swallow it and show the block as code
        raise ClaimFenceError(f"{where}: ```{language} block: {error}") from None
    block_outputs.record_fence(language, text)

    def run(code: str, **_: Any) -> str:
        return code

    return markdown_exec.base_format(language="md", run=run, code=text, md=md)


def custom_fences() -> list[dict[str, Any]]:
    """The superfences entries for ``claim`` and ``describe`` blocks."""
    return [
        {"name": name, "class": name, "validator": validator, "format": formatter}
        for name in LANGUAGES
    ]
