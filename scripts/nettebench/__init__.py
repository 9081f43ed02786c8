"""nettebench: the Imagenette mixed-precision benchmark, as a package that reads like a plan.

The subpackages stand on floors, listed here bottom to top; a module may import only modules of
its own floor or of a floor below, and the ground floor imports nothing of the package:

1. vocabulary
2. builds, datasets, models
3. records, study, data
4. training
5. benchmarks, inference, profiling
6. report

``tests/test_layout.py`` reads this list and checks every import against it. What each
subpackage owns is its own docstring; the map and "to add X, change Y" are ``docs/layout.md``.

A command (``python -m nettebench.<...>``) imports with the garbage collector paused until its
work starts (:mod:`nettebench.vocabulary.command_start` says why); importing the package as a
library leaves the collector alone.
"""

from nettebench.vocabulary import command_start as _command_start

_command_start.pause_while_importing()
