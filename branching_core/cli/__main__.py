"""``python -m branching_core.cli``: the same as the ``branching`` script."""

import sys

from branching_core.cli import main

sys.exit(main())
