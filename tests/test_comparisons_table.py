"""The front page's comparisons as a Markdown table (report/tables/comparisons.py)."""

from __future__ import annotations

import math
import statistics

import record_factory as F

from nettebench.report.aggregate import aggregate

STEADY = [96.0, 100.0, 104.0]  # three processes' steady rates


def _cpu_cell(tmp_path, precision, loader, rates):
    """One record per process (seed) of a cell, each with its steady rate."""
    return [
        F.make_cell(tmp_path, precision=precision, device_type="cpu", seed=seed,
                    extra_cell={"loader": loader}, train_img_s=rate)
        for seed, rate in enumerate(rates)
    ]  # fmt: skip


def test_cached_over_pil_is_a_row_of_comparisons_md(tmp_path):
    cached = [2.0 * r for r in STEADY]
    paths = _cpu_cell(tmp_path / "p", "O0", "pil", STEADY)
    paths += _cpu_cell(tmp_path / "c", "O0", "cached", cached)
    paths += _cpu_cell(tmp_path / "b", "bf16", "pil", [0.18 * r for r in STEADY])
    text = aggregate(paths, tmp_path / "tables")["comparisons"].read_text()
    # equal log spreads, three a side: Welch's df is 4, t(0.975, 4) = 2.776 (published tables)
    logs = [math.log(r) for r in STEADY]
    se = math.sqrt(2 * statistics.variance(logs) / 3)
    low, high = 2.0 * math.exp(-2.776 * se), 2.0 * math.exp(2.776 * se)
    row = next(line for line in text.splitlines() if "| cached / pil, resnet18" in line)
    assert "| 2.00x | 3 / 3 |" in row and row.endswith("| yes |"), row
    assert f"95 % interval {low:.2f}-{high:.2f}x between 3 and 3 processes" in row
    assert f"## A CPU ({F.CPU_MODEL})" in text
    assert any("| bf16 / O0, " in line and "| 0.18x |" in line for line in text.splitlines())


def test_no_matrix_cell_says_so(tmp_path):
    text = aggregate([], tmp_path / "tables")["comparisons"].read_text()
    assert text.startswith("# Comparisons") and "|" not in text
