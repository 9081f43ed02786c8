"""``python -m nettebench.data <command>``.

The command names are :mod:`nettebench.vocabulary.commands`'s.
"""

import sys

from nettebench.vocabulary.commands import main

sys.exit(main("data"))
