"""Re-measure what was disturbed, in one command: the cells (and ceilings) timed under
interference, and the Snakemake line that measures exactly them again.

A cell's ceiling is measured in the cell's own job right after its epochs (rule ``cell_train``),
so rerunning a cell's job measures both again. Snakemake's ``--forcerun`` takes output files, so
the line names each disturbed cell's ``metrics.json``: Snakemake reruns those jobs and the
report jobs after them, nothing else. It reads the study stored beside the results
(:mod:`nettebench.study.stored`), so the same line serves the quick start and ``config.yaml``
alike. ``NETTEBENCH_RETRAIN=1``: a restore of the finished record would copy the disturbed
numbers back instead of measuring them.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

import pandas as pd

from nettebench.report import format as T
from nettebench.vocabulary import commands
from nettebench.vocabulary.outputs import METRICS_FILE, STUDY_FILE
from nettebench.vocabulary.record_keys import STATUS_OK

PRINT_COMMAND = "python -m nettebench report rerun"  # prints the line for every disturbed cell
RETRAIN = "NETTEBENCH_RETRAIN=1"  # training/finished.py's RETRAIN_ENV: measure, never restore
# What made a timing disturbed: the cell's epochs, its ceiling's timed steps (runs.csv columns).
DISTURBED_COLUMNS = {"interference": "epochs", "ceiling_interference": "ceiling"}


def disturbed_parts(row: pd.Series) -> list[str]:
    """``["epochs", "ceiling"]``: which of a cell's timings ran under interference."""
    return [part for column, part in DISTURBED_COLUMNS.items() if T.as_bool(row.get(column))]


def disturbed(runs: pd.DataFrame) -> pd.DataFrame:
    """The finished cells of ``runs`` whose epochs or ceiling were timed under interference."""
    if runs.empty:
        return runs
    ok = runs[runs["status"] == STATUS_OK]
    return ok[ok.apply(lambda row: bool(disturbed_parts(row)), axis=1)]


def command(paths: Iterable[str]) -> str:
    """The line that measures exactly the cells at ``paths`` (their directories) again."""
    targets = [str(Path(p) / METRICS_FILE) for p in dict.fromkeys(map(str, paths))]
    if not targets:
        return ""
    study = f"--configfile {STUDY_FILE} --replace-workflow-config"
    return f"{RETRAIN} snakemake {study} --forcerun {shlex.join(targets)}"


def main(argv: list[str] | None = None) -> int:
    parser = commands.Parser(prog="python -m nettebench report rerun")
    parser.add_argument(
        "--runs",
        type=Path,
        default=Path("results/tables/runs.csv"),
        help="the aggregated runs (default: results/tables/runs.csv)",
    )
    return commands.run(parser, _rerun, argv, errors=(FileNotFoundError,), stream=sys.stdout)


def _rerun(args: argparse.Namespace) -> Iterator[str]:
    if not args.runs.is_file():
        raise FileNotFoundError(f"{args.runs}: no such file (run the tables job first)")
    found = disturbed(pd.read_csv(args.runs))
    if found.empty:
        yield "No cell or ceiling was timed under interference: nothing to rerun."
        return
    for _, row in found.iterrows():
        yield f"# {row['path']}: {' and '.join(disturbed_parts(row))} under interference"
    yield command(found["path"])


if __name__ == "__main__":  # run as python -m nettebench report rerun
    sys.exit(commands.moved(__spec__.name))
