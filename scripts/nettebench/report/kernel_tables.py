"""``python -m nettebench report kernel-tables --out-dir DIR [PROFILE_JSON ...]``: the profiled
cells read (:mod:`nettebench.report.frames.kernels`), written as ``kernel_categories.csv`` (one
tidy row per cell and category; the category figure reads only this file) and the top kernels
table (:mod:`nettebench.report.tables.kernels`) as Markdown and HTML.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from nettebench.report import format as T
from nettebench.report.frames.kernels import (
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
from nettebench.vocabulary.atomic import write_text_atomic

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
    categories = categories_frame(profiles, cells)
    texts = {
        "categories": T.csv_text(categories),
        **T.texts("top_kernels", top_kernels_markdown(profiles, cells, categories, top)),
    }
    return {name: write_text_atomic(Path(out_dir) / OUTPUTS[name], t) for name, t in texts.items()}


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
