"""gpulesson: the package behind the executable GPU course.

Each module has one job and serves the lessons and the CLI subcommand of the
same name: ``probe`` (what machine is this), ``provenance`` (what built this
page). Results are frozen dataclasses; separate functions render them.
"""

__version__ = "0.1.0"
