"""Steady-state training img/s and data-wait share, against the cell's compute ceiling."""

from __future__ import annotations

import functools

import pandas as pd

from nettebench.records.spread import INTERVAL_NAME
from nettebench.report import format as T
from nettebench.report.grids import (
    CEILING_NOTE,
    NO_CEILINGS_NOTE,
    grid_sections,
    model_precision_grids,
    no_matrix,
)


def throughput_markdown(runs: pd.DataFrame) -> T.Document:
    """Training img/s, the share of it spent waiting for data, and, where some matrix cell has a
    ``ceiling.json``, img/s as a share of the compute ceiling and the ceiling's own img/s."""
    grids = functools.partial(model_precision_grids, runs, mark_extrapolated=False)
    rate = grids(
        "train_img_s", T.fmt_rate, interval=("train_img_s_low", "train_img_s_high"), unstable=True
    )
    wait = grids("data_wait_share", T.fmt_percent)
    measured = "ceiling_status"  # the ceiling's tables: only where some cell has a ceiling
    share = grids("ceiling_share", T.fmt_percent, require=measured, caveats="share")
    ceiling = grids(
        "ceiling_img_s", T.fmt_rate, status=measured, require=measured, caveats="ceiling"
    )
    counts = [c for g in rate for c in g.seed_counts]
    note = (
        "Training images per second (`summary.train_img_s`: the median per-step rate over the "
        "steady steps of all epochs, warm-up and each epoch's loader start-up excluded; a cell "
        f"of one seed shows `median [low-high]`, the {INTERVAL_NAME} over its steps, "
        "`train_img_s_low`/`_high`), the percentage of training time spent waiting for "
        "the input pipeline (`summary.data_wait_share`) and, where measured, the same img/s as a "
        f"percentage of the compute ceiling, {T.seeds_note(counts)}."
    )
    if not rate:
        blocks = [T.Paragraph(no_matrix(runs)), T.Paragraph(NO_CEILINGS_NOTE)]
        return T.document("Throughput", note, blocks)
    sections = [
        T.Heading(2, "Training throughput (img/s)"),
        *grid_sections(rate, level=3),
        T.Heading(2, "Time waiting for data (% of training time)"),
        *grid_sections(wait, level=3),
    ]
    if share:
        sections += [
            T.Heading(2, "Share of the compute ceiling (%)"),
            T.Paragraph(
                "Training img/s of the cell as a percentage of its compute ceiling "
                "(`ceiling_share` in runs.csv; 100 = the input pipeline costs nothing). "
                f"{CEILING_NOTE}"
            ),
            *grid_sections(share, level=3),
            T.Heading(2, "Compute ceiling (img/s)"),
            T.Paragraph(
                "Training img/s with the batch already on the device (`ceiling_img_s` in "
                "runs.csv; median step time of `nettebench.benchmarks.ceiling`), mean over the "
                "seeds measured."
            ),
            *grid_sections(ceiling, level=3),
        ]
    else:
        sections.append(T.Paragraph(NO_CEILINGS_NOTE))
    return T.document("Throughput", note, sections)
