"""``python -m nettebench.inference``: see :mod:`nettebench.inference.cli`."""

from nettebench.inference.cli import main
from nettebench.vocabulary import command_start

command_start.run(main)
