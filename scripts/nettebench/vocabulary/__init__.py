"""The ground floor: the names every floor of the package spells the same way.

Owns the cell and its defaults (:mod:`.cell`: identity, path, hash, trainer options), the
precision table (:mod:`.precision`), the names of the workflow's outputs (:mod:`.outputs`), the
model names known without torch (:mod:`.model_names`), the libraries that can be built and the
files a build leaves (:mod:`.build_catalog`), the datasets known by name (:mod:`.dataset_catalog`)
and the dataset layer's error (:mod:`.dataset_errors`), a record's keys and the outcomes it
records (:mod:`.record_keys`: ``STATUS_*``, ``METRICS_KEYS``, ``EPOCH_COLUMNS``), the one
all-or-nothing writer of files and folders that every floor writes with (:mod:`.atomic`),
the commands' names with the dispatcher every subpackage's ``__main__`` calls
(:mod:`.commands`), and a job's line in the terminal its run was started from (:mod:`.terminal`).

Imports the standard library only, and nothing of the package but itself
(``tests/test_layout.py``): Snakemake imports it while it parses, and every floor above may
import it.
"""
