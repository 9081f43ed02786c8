"""``python -m nettebench report tables --out-dir results/tables [METRICS_JSON ...]``.

Reads the cells' records into the ``runs`` and ``epochs`` frames
(:mod:`nettebench.report.frames.runs`), the only input of every table and figure, so a table
traces back to the cell directories in runs.csv's ``path``; renders every table of the registry
(``vocabulary/outputs.py``'s ``TABLES``) and writes each as Markdown and as a self-contained HTML
page (Snakemake's report shows HTML inline, Markdown and CSV only as downloads), with runs.csv,
epochs.csv, comparisons.csv and the front page's headline. Cells that did not run (``oom``,
``unsupported``) stay rows: "did not fit" is a result. No metrics files: tables that say so.
Imports pandas, no torch or matplotlib: aggregation runs on any login node.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import pandas as pd

from nettebench.report import format as T
from nettebench.report.answers import answer_sentences, comparisons
from nettebench.report.duplicates import Merge, merge_duplicates
from nettebench.report.frames.runs import RecordError, epochs_frame, read_cells, runs_frame
from nettebench.report.front_page import answer_text, headline_html
from nettebench.report.grids import NO_CELLS_NOTE
from nettebench.report.registry import render
from nettebench.report.tables.comparisons import comparisons_frame
from nettebench.vocabulary import commands, outputs
from nettebench.vocabulary.atomic import write_text_atomic

# The markdown tables (outputs.TABLES, the registry); each is also written as HTML.
MARKDOWN_TABLES = outputs.TABLE_NAMES

# Output name -> file name; aggregate() returns {name: path} with these names.
OUTPUTS = {
    "runs": "runs.csv",
    "runs_html": "runs.html",
    "epochs": "epochs.csv",
    "comparisons_csv": outputs.COMPARISONS_CSV,
    **{name: f"{name}.md" for name in MARKDOWN_TABLES},
    **{f"{name}_html": f"{name}.html" for name in MARKDOWN_TABLES},
    "headline": outputs.HEADLINE_FILE,
    "answer": outputs.ANSWER_FILE,
}

_RUNS_NOTE = (
    "One row per cell, exactly as in `runs.csv`: parameters, outcome, device, summary, compute "
    "ceiling, environment (`env_*`) and the cell directory (`path`)."
)


def aggregate(
    metrics_paths: Iterable[str | os.PathLike],
    out_dir: str | os.PathLike,
    *,
    target_top1: float | None = None,
    copies: list[tuple[str, str]] | None = None,
    merged: list[Merge] | None = None,
) -> dict[str, Path]:
    """Every file of :data:`OUTPUTS` in ``out_dir``, {name: path}. ``target_top1`` (%) gives
    each cell its time to accuracy; ``copies`` receives the byte-identical copies of a record
    read once, ``merged`` the records of one cell, seed and setup counted once
    (:mod:`nettebench.report.duplicates`)."""
    cells = read_cells(metrics_paths, copies=copies)
    runs, merges = merge_duplicates(runs_frame(cells, target_top1=target_top1))
    if merged is not None:
        merged.extend(merges)
    epochs = epochs_frame(cells, runs)
    runs = runs.reset_index(drop=True)
    compared = comparisons(runs)  # one family: comparisons.md and comparisons.csv
    frames = {"runs": runs, "epochs": epochs, "compared": compared}
    tables = {name: render(target, frames) for name, target in outputs.TABLES.items()}
    texts = {
        "runs": T.csv_text(runs),
        "epochs": T.csv_text(epochs),
        "comparisons_csv": T.csv_text(comparisons_frame(compared)),
        **{name: table.markdown() for name, table in tables.items()},
        **{f"{name}_html": table.html() for name, table in tables.items()},
    }
    texts["runs_html"] = T.csv_to_html(texts["runs"], "Runs", _RUNS_NOTE, empty=NO_CELLS_NOTE)
    headline = tables["time_by_model_precision"].blocks
    if _several_setups(runs):  # a merge of machines: the front page sets them side by side too
        headline += tables["time_by_machine"].blocks
    sentences = answer_sentences(runs)  # the front page's and answer.txt's
    texts["headline"] = headline_html(runs, T.Document(headline), sentences)
    texts["answer"] = answer_text(runs, sentences)
    return {name: write_text_atomic(Path(out_dir) / OUTPUTS[name], t) for name, t in texts.items()}


def _several_setups(runs: pd.DataFrame) -> bool:
    """Whether the matrix cells ran on more than one setup (machine label or environment)."""
    if runs.empty or "setup" not in runs:
        return False
    return runs.loc[runs["kind"] == "matrix", "setup"].map(T.fmt_value).nunique() > 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = commands.Parser(
        prog="python -m nettebench report tables",
        description="Aggregate cell records (metrics.json, epochs.csv and an optional "
        "ceiling.json) into CSV, markdown and HTML tables.",
    )
    parser.add_argument("--out-dir", required=True, type=Path, help="folder for the tables")
    parser.add_argument(
        "--target-top1",
        type=float,
        default=None,
        help="validation top-1 (%%) whose time to reach is reported (config target_top1)",
    )
    parser.add_argument(
        "metrics",
        nargs="*",
        metavar="METRICS_JSON",
        help="cell metrics.json files (none: write empty tables)",
    )
    return commands.run(parser, _aggregate, argv, errors=(RecordError,))


def _aggregate(args: argparse.Namespace) -> list[str]:
    copies: list[tuple[str, str]] = []
    merged: list[Merge] = []
    written = aggregate(
        args.metrics, args.out_dir, target_top1=args.target_top1, copies=copies, merged=merged
    )
    return [
        *(f"read once: {copy} is a copy of {original}" for copy, original in copies),
        *(merge.line() for merge in merged),
        f"aggregated {len(args.metrics)} cell(s) into {len(written)} files in {args.out_dir}",
    ]


if __name__ == "__main__":  # run as python -m nettebench report tables
    sys.exit(commands.moved(__spec__.name))
