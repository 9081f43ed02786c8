"""``python -m nettebench report kernel-tables``: the profiled cells read
(:mod:`nettebench.report.frames.kernels`), their tables rendered
(:mod:`nettebench.report.tables.kernels`), and written::

    python -m nettebench report kernel-tables --out-dir results/tables [PROFILE_JSON ...]

- ``kernel_categories.csv``: one tidy row per profiled cell and category (the cell's
  parameters, device, backend, where the categories came from, time per step and share); the
  category figure reads only this file;
- ``top_kernels.md`` and ``top_kernels.html``: the category shares of every profiled cell side
  by side, then each cell's top kernels (or, for a CPU-only profile, its top CPU operators).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import pandas as pd

from nettebench.records import files as records
from nettebench.report.frames.kernels import (
    CELL_COLUMNS,
    RECORD_COLUMNS,
    ProfileRecordError,
    categories_frame,
    cells_frame,
    read_profile,
)
from nettebench.report.tables.kernels import (
    CATEGORIES_CSV,
    TOP_KERNELS,
    TOP_N,
    top_kernels_markdown,
)
from nettebench.vocabulary import commands

OUTPUTS = {
    "categories": CATEGORIES_CSV,
    "top_kernels": f"{TOP_KERNELS}.md",
    "top_kernels_html": f"{TOP_KERNELS}.html",
}


def aggregate(
    summary_paths: Iterable[str | Path], out_dir: str | Path, *, top: int = TOP_N
) -> dict[str, Path]:
    """Write kernel_categories.csv, top_kernels.md and top_kernels.html into ``out_dir``."""
    profiles = [read_profile(path) for path in summary_paths]
    cells = cells_frame(profiles)
    categories = (
        categories_frame(profiles, cells)
        if not cells.empty
        else pd.DataFrame(columns=[*CELL_COLUMNS, *RECORD_COLUMNS])
    )
    tables = top_kernels_markdown(profiles, cells, categories, top)
    texts = {
        "categories": categories.to_csv(index=False, lineterminator="\n"),
        "top_kernels": tables.markdown(),
        "top_kernels_html": tables.html(),
    }
    out = Path(out_dir)
    written = {}
    for name, text in texts.items():
        written[name] = records.atomic_write_text(out / OUTPUTS[name], text)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = commands.Parser(
        prog="python -m nettebench report kernel-tables",
        description="Collect profiled cells into kernel_categories.csv and top_kernels.md/html.",
    )
    parser.add_argument("--out-dir", required=True, type=Path, help="folder for the tables")
    parser.add_argument("--top", type=int, default=TOP_N, help="kernels per cell")
    parser.add_argument("profiles", nargs="*", metavar="PROFILE_JSON")
    return commands.run(parser, _aggregate, argv, errors=(ProfileRecordError,))


def _aggregate(args: argparse.Namespace) -> list[str]:
    aggregate(args.profiles, args.out_dir, top=args.top)
    return [f"aggregated {len(args.profiles)} profile(s) into {args.out_dir}"]


if __name__ == "__main__":  # run as python -m nettebench report kernel-tables
    sys.exit(commands.moved(__spec__.name))
