"""``python -m nettebench.profiling``: profile one cell (options:
:mod:`nettebench.profiling.cli`)."""

from nettebench.profiling.cli import main
from nettebench.vocabulary import command_start

command_start.run(main)
