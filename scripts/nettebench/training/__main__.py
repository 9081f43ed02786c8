"""``python -m nettebench.training``: train one cell (options: :mod:`nettebench.training.cli`)."""

import sys

from nettebench.training.cli import main
from nettebench.vocabulary import command_start

sys.exit(command_start.run(main))
