"""``python -m nettebench.study <command>``.

The command names are :mod:`nettebench.vocabulary.commands`'s.
"""

from nettebench.vocabulary import command_start
from nettebench.vocabulary.commands import main

command_start.end(main("study"))
