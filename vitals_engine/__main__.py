"""`python -m vitals_engine`: the `vitals` command line."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
