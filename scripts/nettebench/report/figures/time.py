"""The time figure: seconds for all epochs by model, one bar per precision, as the time table
gives them (:func:`nettebench.report.tables.time.time_grids`): its marks over each bar, its
footnotes under the panels."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from nettebench.report import stats
from nettebench.report.figures import facets as F
from nettebench.report.figures.plotting import empty_figure, finish
from nettebench.report.tables.time import time_grids


def plot_time(runs: pd.DataFrame) -> Figure:
    title = "Time for all epochs by model and precision"
    facets = F.matrix_facets(runs)
    if not facets:
        return empty_figure(title, "no data: no matrix cells in runs.csv")
    grids = time_grids(runs)
    ylabel = f"seconds (mean ± {stats.LEVEL} CI over seeds)"
    marks = F.grid_marks(facets, grids)
    fig, _ = F.precision_bar_panels(runs, facets, "time_for_epochs_s", ylabel, marks)
    fig.suptitle(title)
    return finish(fig, [note for grid in grids for note in grid.notes()])
