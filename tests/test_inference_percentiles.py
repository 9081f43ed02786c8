"""Latency percentiles are printed only over enough queries: the q-th needs 1 / (1 - q) of them
(p90: 10, p99: 100), so a p99 "from 2 or 16 queries" (issue [4/5], item 4) is never quoted."""

from __future__ import annotations

import pytest
from test_inference_report import record

from nettebench.report.frames import inference as frames
from nettebench.report.tables import inference as table


def _with_queries(queries):
    found = record()
    found["single_stream"]["queries"] = queries
    return found


def _stream_cell(text):
    """The SingleStream column of the table's one row (p50 / p90 / p99), found by its header."""
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("| Model |"))
    column = [cell.strip() for cell in header.split("|")].index("SingleStream p50 / p90 / p99 ms")
    row = next(line for line in lines if line.startswith("| resnet18 | fp32 | 1 |"))
    return [cell.strip() for cell in row.split("|")][column]


@pytest.mark.parametrize(
    "queries, p90, p99",
    [(2, False, False), (9, False, False), (10, True, False), (99, True, False), (100, True, True)],
)
def test_a_percentile_needs_one_over_one_minus_q_queries(queries, p90, p99):
    raw = _with_queries(queries)
    latency = raw["single_stream"]["latency_ms"]
    cells = frames.cells_frame([("a/inference.json", raw)])
    shown = _stream_cell(table.inference_markdown(cells).markdown()).split(" / ")
    median = f"{latency['median']:.2f} [{latency['median_low']:.2f}-{latency['median_high']:.2f}]"
    assert shown[0] == median  # the median always
    ninety = f"{latency['p90']:.2f} [{latency['p90_low']:.2f}-{latency['p90_high']:.2f}]"
    assert shown[1] == (ninety if p90 else table.TOO_FEW)
    ninety_nine = f"{latency['p99']:.2f} [{latency['p99_low']:.2f}-{latency['p99_high']:.2f}]"
    assert shown[2] == (ninety_nine if p99 else table.TOO_FEW)
    # the frame inference.csv and the figure read holds the same: no p99 from too few queries
    assert cells["ss_p99"].notna().item() is p99
    line = table.headline(cells, frames.accuracy_frame([]))
    assert ("p99" in line and "too few" not in line) is p99
    assert f"p50 {latency['median']:.2f} ms" in line
