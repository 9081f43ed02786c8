"""``python -m nettebench.benchmarks <command>``.

The command names are :mod:`nettebench.vocabulary.commands`'s. Each benchmark also runs as its
own module (``python -m nettebench.benchmarks.ceiling``), the name the rules, the docs and its
parser's usage line use.
"""

import sys

from nettebench.vocabulary.commands import main

sys.exit(main("benchmarks"))
