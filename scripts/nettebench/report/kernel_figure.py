"""``python -m nettebench report kernel-figure``: the category figure
(:mod:`nettebench.report.figures.kernels`) from ``kernel_categories.csv`` alone (``python -m
nettebench report kernel-tables``)::

    python -m nettebench report kernel-figure --categories results/tables/kernel_categories.csv \\
        --out-dir results/figures
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import matplotlib as mpl
import pandas as pd

from nettebench.report.figures.kernels import plot_categories
from nettebench.report.figures.plotting import save, style
from nettebench.vocabulary import commands
from nettebench.vocabulary.record_keys import STATUS_OK

FIGURE_NAME = "kernel_categories"


def read_categories(path: str | Path) -> pd.DataFrame:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(
            f"{path}: no such table (run python -m nettebench report kernel-tables)"
        )
    try:
        frame = pd.read_csv(path)
    except pd.errors.EmptyDataError:
        frame = pd.DataFrame()
    if frame.empty or "status" not in frame.columns:
        return pd.DataFrame(columns=["dataset", "source", "label", "category", "ms_per_step"])
    frame = frame[frame["status"] == STATUS_OK].copy()
    frame["ms_per_step"] = pd.to_numeric(frame["ms_per_step"], errors="coerce").fillna(0.0)
    return frame


def main(argv: Sequence[str] | None = None) -> int:
    parser = commands.Parser(
        prog="python -m nettebench report kernel-figure",
        description="Draw the kernel category figure from kernel_categories.csv.",
    )
    parser.add_argument("--categories", required=True, type=Path)
    parser.add_argument("--out-dir", required=True, type=Path)
    return commands.run(parser, _figure, argv, errors=(FileNotFoundError,))


def _figure(args: argparse.Namespace) -> list[str]:
    mpl.use("Agg")
    frame = read_categories(args.categories)
    with mpl.rc_context(style()):
        written = save(plot_categories(frame), args.out_dir, FIGURE_NAME)
    return [f"wrote {', '.join(str(p) for p in written)}"]


if __name__ == "__main__":  # run as python -m nettebench report kernel-figure
    sys.exit(commands.moved(__spec__.name))
