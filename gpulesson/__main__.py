"""``python -m gpulesson`` runs the CLI."""

import sys

from gpulesson.cli import main

if __name__ == "__main__":
    sys.exit(main())
