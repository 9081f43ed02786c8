"""``python -m nettebench report inference-figure``: the inference cells' latency-throughput
figure (:mod:`nettebench.report.figures.inference`) from ``inference.csv`` alone::

    python -m nettebench report inference-figure --cells results/tables/inference.csv \\
        --out-dir results/figures
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import matplotlib as mpl
import pandas as pd

from nettebench.report.figures.inference import plot_inference
from nettebench.report.figures.plotting import save, style
from nettebench.vocabulary import commands

NAME = "inference_latency_throughput"


def main(argv: list[str] | None = None) -> int:
    parser = commands.Parser(prog="python -m nettebench report inference-figure")
    parser.add_argument("--cells", required=True, type=Path, help="tables/inference.csv")
    parser.add_argument("--out-dir", required=True, type=Path)
    return commands.run(parser, _figure, argv, errors=(FileNotFoundError,))


def _figure(args: argparse.Namespace) -> tuple[str, ...]:
    text = args.cells.read_text(encoding="utf-8").strip()
    cells = pd.read_csv(args.cells) if text else pd.DataFrame()
    with mpl.rc_context(style()):  # as every figure command draws
        save(plot_inference(cells), args.out_dir, NAME)
    return ()


if __name__ == "__main__":  # run as python -m nettebench report inference-figure
    sys.exit(commands.moved(__spec__.name))
