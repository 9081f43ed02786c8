"""``python -m nettebench <group> [<command>] [options]``: every command of the package; with
``--help`` (or nothing) it lists the groups (:func:`nettebench.vocabulary.commands.top_level`)."""

import sys

from nettebench.vocabulary.commands import top_level

sys.exit(top_level())
