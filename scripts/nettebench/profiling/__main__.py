"""``python -m nettebench.profiling``: profile one cell (options:
:mod:`nettebench.profiling.cli`)."""

import sys

from nettebench.profiling.cli import main

sys.exit(main())
