"""Render the CLI reference page from the argument parser itself.

The page ``docs/reference/cli.md`` calls :func:`to_markdown` at build time, so
the reference cannot drift from the options the command really accepts.

>>> import argparse
>>> parser = argparse.ArgumentParser(prog="tool", description="Does things.")
>>> _ = parser.add_argument("--json", action="store_true", help="print JSON")
>>> print(to_markdown(parser).splitlines()[0])
## `tool`
"""

from __future__ import annotations

import argparse

from gpulesson.tables import markdown_table


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:  # argparse keeps subparsers only here
        if isinstance(action, argparse._SubParsersAction):
            return list(action.choices.items())
    return []


def _option_rows(parser: argparse.ArgumentParser) -> list[tuple[str, str, str]]:
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        name = ", ".join(f"`{s}`" for s in action.option_strings) or f"`{action.dest}`"
        if action.metavar and action.option_strings:
            name += f" `{action.metavar}`"
        elif action.choices and action.option_strings:
            name += " `{" + ",".join(str(c) for c in action.choices) + "}`"
        default = action.default
        shown = (
            ""
            if default in (None, False, argparse.SUPPRESS) or action.option_strings == []
            else f"`{default}`"
        )
        help_text = (action.help or "").replace("|", "/").replace("%%", "%")
        rows.append((name, help_text, shown))
    return rows


def _section(parser: argparse.ArgumentParser, level: str) -> list[str]:
    lines = [f"{level} `{parser.prog}`", ""]
    if parser.description:
        lines += [parser.description, ""]
    lines += ["```text", parser.format_usage().strip(), "```", ""]
    rows = _option_rows(parser)
    if rows:
        lines += [markdown_table(("option", "meaning", "default"), rows, align="lll"), ""]
    return lines


def to_markdown(parser: argparse.ArgumentParser) -> str:
    """The parser and each subcommand as Markdown sections with option tables."""
    lines = _section(parser, "##")
    for _, sub in _subcommands(parser):
        lines += _section(sub, "###")
    return "\n".join(lines).rstrip() + "\n"
