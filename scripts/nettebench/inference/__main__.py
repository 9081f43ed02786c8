"""``python -m nettebench.inference``: see :mod:`nettebench.inference.cli`."""

import sys

from nettebench.inference.cli import main
from nettebench.vocabulary import command_start

sys.exit(command_start.run(main))
