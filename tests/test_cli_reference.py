"""The CLI reference page is generated from the parser and lists every option."""

from __future__ import annotations

import argparse

from gpulesson.cli import build_parser
from gpulesson.cli.reference import _subcommands, to_markdown


def test_every_subcommand_and_option_is_documented():
    parser = build_parser()
    page = to_markdown(parser)
    subs = _subcommands(parser)
    assert subs, "the parser has no subcommands"
    for name, sub in subs:
        assert f"### `gpulesson {name}`" in page
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            for flag in action.option_strings:
                assert f"`{flag}`" in page, f"{name} {flag} missing from the reference"


def test_choices_and_defaults_are_shown():
    parser = argparse.ArgumentParser(prog="tool")
    parser.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32", help="precision")
    page = to_markdown(parser)
    assert "| `--dtype` `{fp32,bf16}` | precision | `fp32` |" in page
