"""``python -m nettebench.training``: train one cell (options: :mod:`nettebench.training.cli`)."""

import sys

from nettebench.training.cli import main

sys.exit(main())
