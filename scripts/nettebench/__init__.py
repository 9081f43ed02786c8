"""nettebench: the Imagenette mixed-precision benchmark, as a package that reads like a plan.

The subpackages stand on floors, listed here bottom to top; a module may import only modules of
its own floor or of a floor below, and the ground floor imports nothing of the package:

1. vocabulary
2. builds, datasets, models
3. records, study, data
4. training
5. benchmarks, check, inference, profiling
6. report

``tests/test_layout.py`` reads this list and checks every import against it. What each
subpackage owns is its own docstring; the map and "to add X, change Y" are ``docs/layout.md``.
"""
