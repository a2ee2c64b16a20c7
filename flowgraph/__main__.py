"""`python -m flowgraph run SCRIPT.py [ARGS...]` (or `server ...`): the `flowgraph` command."""

import sys

from flowgraph.cli import main

sys.exit(main())
