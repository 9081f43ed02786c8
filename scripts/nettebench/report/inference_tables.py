"""``python -m nettebench report inference-tables``: the inference cells' records read
(:mod:`nettebench.report.frames.inference`), their tables rendered
(:mod:`nettebench.report.tables.inference`), every file written::

    python -m nettebench report inference-tables --out-dir results/tables \\
        --records results/inference/.../inference.json --accuracy .../accuracy.json

Two tidy frames (``inference.csv``, ``inference_accuracy.csv``: the latency-throughput figure
reads the first), both tables as Markdown and HTML, and the front page's one-line summary.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

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
        "cells": cells.to_csv(index=False, lineterminator="\n"),
        "accuracy": scores.to_csv(index=False, lineterminator="\n"),
        "headline": headline(cells, scores),
    }
    for name, document in (
        ("table", inference_markdown(cells)),
        ("accuracy_table", accuracy_markdown(scores)),
    ):
        texts[name] = document.markdown()
        texts[f"{name}_html"] = document.html()
    written = {}
    for name, text in texts.items():
        written[name] = Path(out_dir) / OUTPUTS[name]
        write_text_atomic(written[name], text)
    return written


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
