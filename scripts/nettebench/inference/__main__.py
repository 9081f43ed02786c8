"""``python -m nettebench.inference``: see :mod:`nettebench.inference.cli`."""

import sys

from nettebench.inference.cli import main

sys.exit(main())
