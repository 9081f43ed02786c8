"""The scaling table and figure: img/s at N processes against the same cell at one."""

from __future__ import annotations

import pytest

from nettebench.report.figures.scaling import plot_scaling
from nettebench.report.frames.runs import read_cells, runs_frame
from nettebench.report.tables.scaling import NO_TWIN, scaling_frame, scaling_markdown
from tests.record_factory import make_cell


def runs(tmp_path, cells):
    paths = [
        make_cell(tmp_path / f"c{i}", train_img_s=rate, seed=seed, extra_cell=extra, **more)
        for i, (rate, seed, extra, more) in enumerate(cells)
    ]
    return runs_frame(read_cells(paths))


def test_efficiency_is_img_s_at_n_over_n_times_img_s_at_one(tmp_path):
    frame = runs(
        tmp_path,
        [
            (1000.0, 0, None, {}),
            (1200.0, 1, None, {}),  # seeds averaged: 1,100 img/s at one process
            (1980.0, 0, {"processes": 2}, {}),
            (3520.0, 0, {"processes": 4}, {}),
            (900.0, 0, {"processes": 2}, {"model": "resnet50"}),  # no 1-process twin
        ],
    )
    table = scaling_frame(frame).set_index(["label", "processes"])
    resnet18 = table.xs(1, level="processes").index[0].split(" on ")[0]
    assert table.loc[(f"{resnet18} on imagenette2-320", 2), "efficiency"] == pytest.approx(
        1980 / (2 * 1100)
    )
    four = table.loc[(f"{resnet18} on imagenette2-320", 4)]
    assert four["efficiency"] == pytest.approx(3520 / (4 * 1100))
    assert four["img_s_per_process"] == pytest.approx(880)
    lonely = table[table["note"] == NO_TWIN]
    assert len(lonely) == 1 and lonely["efficiency"].isna().all()
    text = scaling_markdown(frame).markdown()
    assert "| 90.0 |" in text and "| 80.0 |" in text and NO_TWIN in text
    assert "img/s per process" in text
    fig = plot_scaling(frame)
    (ax,) = fig.axes
    assert [line.get_label() for line in ax.lines][-1] == "perfect scaling"
    assert NO_TWIN in ax.get_title()


def test_a_study_without_data_parallel_cells_says_how_to_get_them(tmp_path):
    frame = runs(tmp_path, [(1000.0, 0, None, {})])
    assert scaling_frame(frame).empty
    assert "set the matrix parameter `processes`" in scaling_markdown(frame).markdown()


def test_an_out_of_memory_at_n_processes_is_shown_as_such(tmp_path):
    frame = runs(
        tmp_path,
        [(1000.0, 0, None, {}), (None, 0, {"processes": 2}, {"status": "oom", "message": "m"})],
    )
    assert "| OOM | OOM | 1,000 |" in scaling_markdown(frame).markdown()


def test_the_aggregate_writes_the_scaling_table_and_its_page(tmp_path):
    from nettebench.report import aggregate as agg

    paths = [
        make_cell(tmp_path / "one", train_img_s=1000.0),
        make_cell(tmp_path / "two", train_img_s=1900.0, extra_cell={"processes": 2}),
    ]
    written = agg.aggregate(paths, tmp_path / "tables")
    assert "| 95.0 |" in written["scaling"].read_text()
    page = written["scaling_html"].read_text()
    assert page.count("<table>") == 1 and ">95.0</t" in page and ">1,900</t" in page
