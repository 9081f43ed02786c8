"""What the workflow reads while Snakemake parses: the config turned into cells and plans.

Owns the config schema's application (:mod:`.schema`: every rule of one key lives in
schemas/config.schema.yaml; the package keeps only the rules across keys, in :mod:`.grid` and
the plans), the grid (:mod:`.grid`: the matrix expanded once), the study (:mod:`.workflow`:
datasets, cells and the files they make), library build plans (:mod:`.builds`), job sizes
(:mod:`.resources`), the order of the timed jobs (:mod:`.replicates`: round-robin by seed),
which code each rule group runs (:mod:`.code_groups`, one manifest per group as the rules' code
input), the study stored beside the results for regenerating them (:mod:`.stored`) and a cell's
command-line options (:mod:`.cell_options`).

The cell, the precision table, output and model names are the ground floor's
(:mod:`nettebench.vocabulary`). May import the ground floor and the stdlib-only
:mod:`nettebench.datasets.walk` (a local folder's stamp); never torch, torchvision, pandas or
numpy (``tests/test_layout.py``): a dry run over a large matrix must not pay for them.
"""
