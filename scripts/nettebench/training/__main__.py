"""``python -m nettebench.training``: train one cell (options: :mod:`nettebench.training.cli`)."""

from nettebench.training.cli import main
from nettebench.vocabulary import command_start

command_start.run(main)
