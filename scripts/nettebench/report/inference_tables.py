"""``python -m nettebench report inference-tables --out-dir DIR --records ... --accuracy ...``:
the inference cells' and accuracy jobs' records read (:mod:`nettebench.report.frames.inference`),
written as two tidy CSVs (the latency-throughput figure reads ``inference.csv``), both tables
(:mod:`nettebench.report.tables.inference`) as Markdown and HTML, and the front page's line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nettebench.report import format as T
from nettebench.report.frames.inference import accuracy_frame, cells_frame, read_records
from nettebench.report.tables.inference import accuracy_markdown, headline, inference_markdown
from nettebench.vocabulary import commands
from nettebench.vocabulary.atomic import write_text_atomic

OUTPUTS = {
    "cells": "inference.csv",
    "accuracy": "inference_accuracy.csv",
    "table": "inference.md",
    "table_html": "inference.html",
    "accuracy_table": "inference_accuracy.md",
    "accuracy_table_html": "inference_accuracy.html",
    "headline": "inference_headline.html",
}


def write(records: list[str], accuracy: list[str], out_dir: str | Path) -> dict[str, Path]:
    """Every file of :data:`OUTPUTS` in ``out_dir``."""
    cells = cells_frame(read_records(records))
    scores = accuracy_frame(read_records(accuracy))
    texts = {
        "cells": T.csv_text(cells),
        "accuracy": T.csv_text(scores),
        "headline": headline(cells, scores),
        **T.texts("table", inference_markdown(cells)),
        **T.texts("accuracy_table", accuracy_markdown(scores)),
    }
    return {name: write_text_atomic(Path(out_dir) / OUTPUTS[name], t) for name, t in texts.items()}


def main(argv: list[str] | None = None) -> int:
    parser = commands.Parser(prog="python -m nettebench report inference-tables")
    parser.add_argument("--out-dir", required=True, type=Path)
    parser.add_argument("--records", nargs="*", default=[], help="inference.json files")
    parser.add_argument("--accuracy", nargs="*", default=[], help="accuracy.json files")
    return commands.run(parser, _write, argv)


def _write(args: argparse.Namespace) -> list[str]:
    written = write(args.records, args.accuracy, args.out_dir)
    return [f"wrote {len(written)} files in {args.out_dir}"]


if __name__ == "__main__":  # run as python -m nettebench report inference-tables
    sys.exit(commands.moved(__spec__.name))
