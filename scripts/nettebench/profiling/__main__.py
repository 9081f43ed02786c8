"""``python -m nettebench.profiling``: profile one cell (options:
:mod:`nettebench.profiling.cli`)."""

import sys

from nettebench.profiling.cli import main
from nettebench.vocabulary import command_start

sys.exit(command_start.run(main))
