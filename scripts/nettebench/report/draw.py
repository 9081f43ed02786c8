"""``python -m nettebench report figures``: every figure of the registry
(``vocabulary/outputs.py:FIGURES``) drawn from runs.csv and epochs.csv alone, so a figure can be
redrawn without the cell directories, and written as PNG and a deterministic SVG::

    python -m nettebench report figures --runs results/tables/runs.csv \\
        --epochs results/tables/epochs.csv --out-dir results/figures
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import matplotlib as mpl
import pandas as pd

from nettebench.report import format as T
from nettebench.report.figures.plotting import save, style
from nettebench.report.frames.runs import EPOCH_ID_COLUMNS, runs_frame
from nettebench.report.registry import render
from nettebench.vocabulary import commands, outputs, record_keys

# runs.csv's and epochs.csv's header (a study without cells): a CSV without some of them (an
# empty or older one) gets them as all-missing.
RUN_COLUMNS = tuple(runs_frame([]).columns)
EPOCH_COLUMNS = (*EPOCH_ID_COLUMNS, *record_keys.EPOCH_COLUMNS)
NUMERIC_COLUMNS = (
    *("batch_size", "epochs", "seed", "epoch", "time_for_epochs_s", "epoch_s_median"),
    *("train_img_s", "ceiling_img_s", "val_top1", "val_top5"),
)


def read_table(path: str | os.PathLike, columns: Sequence[str]) -> pd.DataFrame:
    """One aggregate CSV, ``columns`` added as all-missing where absent and numbers coerced, so
    a partial study (an empty file included) draws "no data" panels instead of raising."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such table (run python -m nettebench report tables)")
    try:
        frame = pd.read_csv(path)
    except pd.errors.EmptyDataError:
        frame = pd.DataFrame()
    missing = [column for column in columns if column not in frame.columns]
    if missing:  # all at once: one column at a time fragments the frame (pandas warns)
        empty = pd.DataFrame({column: pd.Series(dtype=object) for column in missing})
        frame = pd.concat([frame, empty.reindex(frame.index)], axis=1)
    for column in NUMERIC_COLUMNS:
        if column in frame.columns:
            frame[column] = pd.to_numeric(frame[column], errors="coerce")
    if "extrapolated" in frame.columns:
        frame["extrapolated"] = frame["extrapolated"].map(T.as_bool).astype(bool)
    return frame.copy()  # one block per dtype again: the columns replaced above fragment it


def make_figures(
    runs_csv: str | os.PathLike, epochs_csv: str | os.PathLike, out_dir: str | os.PathLike
) -> dict[str, list[Path]]:
    """Draw every registered figure from the two aggregate CSVs; {figure name: [png, svg]}."""
    frames = {
        "runs": read_table(runs_csv, RUN_COLUMNS),
        "epochs": read_table(epochs_csv, EPOCH_COLUMNS),
    }
    with mpl.rc_context(style()):
        return {
            name: save(render(target, frames), out_dir, name)
            for name, target in outputs.FIGURES.items()
        }


def main(argv: Sequence[str] | None = None) -> int:
    parser = commands.Parser(
        prog="python -m nettebench report figures",
        description="Draw the study's figures from runs.csv and epochs.csv.",
    )
    parser.add_argument("--runs", required=True, type=Path, help="runs.csv from aggregate")
    parser.add_argument("--epochs", required=True, type=Path, help="epochs.csv from aggregate")
    parser.add_argument("--out-dir", required=True, type=Path, help="folder for the figures")
    return commands.run(parser, _figures, argv, errors=(FileNotFoundError,))


def _figures(args: argparse.Namespace) -> list[str]:
    mpl.use("Agg")  # a command-line run never needs a display, even where one exists
    written = make_figures(args.runs, args.epochs, args.out_dir)
    count = sum(len(paths) for paths in written.values())
    return [f"wrote {count} figure files to {args.out_dir}"]


if __name__ == "__main__":  # run as python -m nettebench report figures
    sys.exit(commands.moved(__spec__.name))
