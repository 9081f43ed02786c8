"""Two findings of the outside audit of the statement layer ([4/5] item 5), each checked against
what the raw records say, computed here without the report's code:

- the caveat line counted a cell whose ceiling alone was disturbed only when the cell's own
  epochs had recorded conditions;
- an interval's printed ends were rounded to two decimals after its verdict was taken, so a
  supported speed-up from 1.003 printed ``[1.00-...]``, an interval a reader takes as holding 1.
"""

from __future__ import annotations

import json
import math
import re

import record_factory as F

from nettebench.report.aggregate import aggregate

STEADY = [100.0, 101.0, 99.0, 100.5, 99.5, 100.0, 100.2, 99.8, 100.1, 99.9]
LOADED = F.window(0.6, reasons=("other processes took 60 % of the job's CPUs",))
T_975_DF18 = 2.10092204  # Student's t, 0.975 quantile, 18 degrees of freedom (published tables)


def test_the_caveat_line_counts_a_cell_whose_ceiling_alone_was_disturbed(tmp_path):
    root = tmp_path / "runs"
    old = F.make_cell(root, model="resnet18")  # a record from before its epochs' conditions
    F.make_ceiling(old, conditions=LOADED)  # but its ceiling ran while others took the CPUs
    quiet = F.make_cell(root, model="resnet34", conditions=F.window(0.01))
    paths = [old, quiet]

    def flagged(path, name):
        found = (
            json.loads((path.parent / name).read_text()) if (path.parent / name).exists() else {}
        )
        return (found.get("conditions") or {}).get("interference")

    windows = [(flagged(p, "metrics.json"), flagged(p, "ceiling.json")) for p in paths]
    measured = [w for w in windows if any(v is not None for v in w)]
    disturbed = [w for w in measured if any(w)]
    assert (len(disturbed), len(measured)) == (1, 2)
    headline = aggregate(paths, tmp_path / "tables")["headline"].read_text()
    assert f"Caveats: {len(disturbed)} of {len(measured)} cells were timed under interference" in (
        headline
    )


def test_a_supported_interval_is_printed_on_the_side_of_1_it_was_judged_on(tmp_path):
    """Ten processes a side, other's steady rates k x the reference's: the log-ratio is log k
    exactly, both sides have the same spread, Welch's df is 18, and the interval's low end is
    k exp(-t se): k is chosen so that it is 1.003 (supported, yet 1.00 at two decimals)."""
    logs = [math.log(x) for x in STEADY]
    mean = sum(logs) / len(logs)
    var = sum((x - mean) ** 2 for x in logs) / (len(logs) - 1)
    se = math.sqrt(2 * var / len(logs))
    k = 1.003 * math.exp(T_975_DF18 * se)
    root = tmp_path / "runs"
    paths = [
        F.make_cell(root, precision=p, device_type="cpu", seed=seed, train_img_s=rate)
        for p, rates in (("O0", STEADY), ("O1", [k * r for r in STEADY]))
        for seed, rate in enumerate(rates)
    ]
    out = aggregate(paths, tmp_path / "tables")
    speedups = out["time_by_model_precision"].read_text().split("## Speed-up over O0")[1]
    row = next(x for x in speedups.splitlines() if x.startswith("| resnet18"))
    low, high = (float(v) for v in re.search(r"\[([\d.]+)-([\d.]+)\]", row).groups())
    assert "(ns)" not in row and low > 1, row  # supported, and printed so
    assert math.isclose(low, 1.003, abs_tol=5e-4) and high > k, row
    headline = out["headline"].read_text()
    printed = re.search(r"95 % interval ([\d.]+)-", headline).group(1)
    assert "faster than O0" in headline and float(printed) > 1, headline
