"""What the workflow reads while Snakemake parses: the config turned into cells and plans.

Owns the cell (:mod:`.cell`: identity, path, hash, trainer options), the grid (:mod:`.grid`: the
matrix expanded once), the study (:mod:`.workflow`: datasets, cells and the files they make),
the names of the workflow's outputs (:mod:`.outputs`), the precision table (:mod:`.precision`),
model names (:mod:`.model_names`), library build plans (:mod:`.builds`), job sizes
(:mod:`.resources`), which code each rule group runs (:mod:`.code_groups`, one manifest per
group as the rules' code input), the study stored beside the results for regenerating them
(:mod:`.stored`) and a cell's command-line options (:mod:`.cell_options`).

The bottom of the package: it imports only the standard library, itself, and the stdlib-only
leaves :mod:`nettebench.datasets.catalog`, :mod:`nettebench.datasets.walk` (a local folder's
stamp) and :mod:`nettebench.builds.catalog`. Never torch,
torchvision, pandas or numpy (``tests/test_layout.py``): a dry run over a large matrix must not
pay for them. Everything else in the package may import from here; nothing here imports upward.
"""
