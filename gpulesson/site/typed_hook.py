"""MkDocs hook: the ``{q: ...}`` marker, and the typed-figures lesson rule.

Named in ``mkdocs.yml`` under ``hooks:``.

- ``on_page_markdown`` turns ``{q: TEXT}`` into a marked span before the Markdown is
  converted (:func:`gpulesson.site.course_rules.render_quoted`; never inside code): a figure
  quoted from a cited source or a teaching estimate, typed on purpose.
- ``on_config`` checks every lesson for figures typed into its prose
  (:func:`gpulesson.site.course_rules.typed_figures_problems`). Each figure is one build
  warning naming file, line, the figure and the fix, so ``mkdocs build --strict`` stops on
  any, and a non-strict ``mkdocs serve`` still shows the page being fixed.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from gpulesson.site import course_rules

log = logging.getLogger("mkdocs.plugins.gpulesson.typed_figures")


def check_typed_figures(docs_dir: str | Path) -> list[str]:
    """Log each typed figure in the lessons under ``docs_dir`` as a warning; return them."""
    found = course_rules.typed_figures_problems(docs_dir)
    for problem in found:
        log.warning(problem)
    return found


def on_config(config: Any) -> Any:
    """Run the typed-figures rule on the lessons."""
    check_typed_figures(config["docs_dir"])
    return config


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Render the ``{q: ...}`` markers of the page as marked spans."""
    return course_rules.render_quoted(markdown)
