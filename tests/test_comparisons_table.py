"""The front page's comparisons as a Markdown table (report/tables/comparisons.py)."""

from __future__ import annotations

import record_factory as F

from nettebench.report import stats
from nettebench.report.aggregate import aggregate

STEADY = [100.0, 101.0, 99.0, 100.5, 99.5, 100.0, 100.2, 99.8, 100.1, 99.9]


def _cpu_cell(tmp_path, precision, loader, blocks):
    return F.make_cell(
        tmp_path,
        precision=precision,
        device_type="cpu",
        extra_cell={"loader": loader},
        train_img_s=sum(blocks) / len(blocks),
        summary_extra={"train_block_img_s": blocks},
    )


def test_cached_over_pil_is_a_row_of_comparisons_md(tmp_path):
    cached = [1.1 * r for r in STEADY]
    paths = [
        _cpu_cell(tmp_path, "O0", "pil", STEADY),
        _cpu_cell(tmp_path, "O0", "cached", cached),
        _cpu_cell(tmp_path, "bf16", "pil", [0.18 * r for r in STEADY]),
    ]
    text = aggregate(paths, tmp_path / "tables")["comparisons"].read_text()
    speedup = stats.ratio_interval(cached, STEADY)
    row = next(line for line in text.splitlines() if "| cached / pil, resnet18" in line)
    assert f"| {speedup.ratio:.2f}x |" in row and row.endswith("| yes |"), row
    assert f"95 % interval {speedup.low:.2f}-{speedup.high:.2f}x" in row
    assert f"## A CPU ({F.CPU_MODEL})" in text
    assert any("| bf16 / O0, " in line and "| 0.18x |" in line for line in text.splitlines())


def test_no_matrix_cell_says_so(tmp_path):
    text = aggregate([], tmp_path / "tables")["comparisons"].read_text()
    assert text.startswith("# Comparisons") and "|" not in text
