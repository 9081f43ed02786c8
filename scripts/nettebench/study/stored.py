"""The study that made the results, kept beside them, so regenerating reproduces what it wrote.

``snakemake --workflow-profile profiles/aggregate`` rebuilds tables, figures and the report from
the records under ``results/``. Read against ``config.yaml`` it would aggregate the quick
start's records with the seed study's settings (``target_top1`` 75 in place of the quick
start's 40, "not reached" where the run had said 13.3 s) and leave the quick start's own ``-n``
with work to do. So every successful run stores its resolved config (defaults filled in) as
``results/study.yaml`` (:func:`save`), and an aggregate-only run starts from that file
(:func:`for_aggregate`): what the user gives on top of it (``--configfile compare.yaml``,
``--config target_top1=60``) still wins, as "unless told otherwise" should.

PyYAML, the config file's merge and the ground floor's atomic writes only (it runs while
Snakemake parses).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from nettebench.study.config_file import merge_config
from nettebench.vocabulary.atomic import write_text_atomic
from nettebench.vocabulary.outputs import STUDY_FILE

# Keys of a run, not of its study: never stored, never taken from the stored file.
_RUN_ONLY = ("aggregate_only",)


def save(config: Mapping[str, Any], path: str | os.PathLike[str] = STUDY_FILE) -> Path:
    """Write the run's resolved config to ``path`` (all-or-nothing; rewritten only when it
    differs, so an unchanged study leaves the file's time alone)."""
    path = Path(path)
    study = {key: value for key, value in _plain(config).items() if key not in _RUN_ONLY}
    text = (
        "# The resolved config of the last run that wrote these results\n"
        "# (nettebench.study.stored); profiles/aggregate aggregates with it.\n"
        + yaml.safe_dump(study, sort_keys=False)
    )
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return path
    return write_text_atomic(path, text)


def for_aggregate(
    overrides: Mapping[str, Any], path: str | os.PathLike[str] = STUDY_FILE
) -> dict[str, Any] | None:
    """The config an aggregate-only run should use: the stored study with ``overrides`` (the
    config files and ``--config`` values given on the command line, merged as Snakemake merges
    them) over it; None when no study is stored (results made before this file existed)."""
    path = Path(path)
    if not path.is_file():
        return None
    stored = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    merged = copy.deepcopy(dict(stored))
    merge_config(merged, _plain(overrides))
    return merged


def _plain(value: Any) -> Any:
    """Mappings and sequences as dicts and lists (Snakemake's config may hold immutables.Map)."""
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value
