"""A verdict needs quiet evidence (docs/honest-numbers.md): a comparison where either side, or
either side's ceiling, was timed under interference is never supported, in any table that
states a ratio, in the front page's words and in the figure; each says which side and the
command that measures exactly those cells again (report/rerun.py).

The records are written with tests/record_factory.py (the trainer's own writers), several
processes (seeds) a side, so that each comparison would be tested, and supported, were it
quiet; the expected ratios and intervals are computed here from the raw per-process values
(geometric means and Welch's interval on the logs, by hand), and which cells were disturbed
from the conditions written into them.
"""

from __future__ import annotations

import math
import shlex
import statistics
import subprocess
import sys

import pandas as pd
import record_factory as F

from nettebench.report.aggregate import aggregate

# Three processes a side with the same spread of logs on both sides: Welch's degrees of freedom
# are exactly 2 (n - 1), whose 97.5 % t quantiles the tables give as 4.303 (df 2), 2.776 (df 4).
BASE = [96.0, 100.0, 104.0]
T_975 = {2: 4.303, 4: 2.776}
LOADED = F.window(0.6, reasons=("other processes took 60 % of the job's CPUs",))
QUIET = F.window(0.01)


def _welch_by_hand(faster, slower) -> tuple[float, float, float]:
    """``faster`` over ``slower`` (rates: other over reference; seconds: the reference's over
    other's), the ratio of geometric means, and its 95 % interval for n a side with equal log
    spreads."""
    a, b = [math.log(x) for x in faster], [math.log(x) for x in slower]
    n = len(a)
    assert len(b) == n and math.isclose(statistics.stdev(a), statistics.stdev(b))
    se = math.sqrt(statistics.variance(a) / n + statistics.variance(b) / n)
    diff, half = statistics.mean(a) - statistics.mean(b), T_975[2 * (n - 1)] * se
    return math.exp(diff), math.exp(diff - half), math.exp(diff + half)


def _cells(root, rates, *, disturbed=(), ceilings=None, **kwargs):
    """One CPU record per process (seed) with its own steady rate; the seeds in ``disturbed``
    ran under interference (their epochs, or, with ``ceilings``, only their ceiling)."""
    paths = []
    for seed, rate in enumerate(rates):
        loaded = LOADED if seed in disturbed else QUIET
        path = F.make_cell(
            root,
            device_type="cpu",
            seed=seed,
            train_img_s=rate,
            conditions=QUIET if ceilings else loaded,
            **kwargs,
        )
        if ceilings:
            F.make_ceiling(path, img_s=300.0, conditions=loaded)
        paths.append(path)
    return paths


def _torch_release_study(root, *, disturbed: bool):
    """Two torch releases side by side, as a study with `environment: [installed, torch212]`
    and three seeds records them: the environment's processes imported torch 2.12.1 (its pins),
    the others 2.14.1. Each torch212 process trained 2.33x faster, and (``disturbed``) its seed
    1 ran while others took 60 % of the CPUs: the speed-up may be the load's."""
    fast = [2.33 * r for r in BASE]
    installed = _cells(root, BASE, extra_cell={"environment": "installed"})
    pinned = {"torch": "2.12.1", "torchvision": "0.27.1"}
    env = {"torch": "2.12.1", "torchvision": "0.27.1", "package_environment": "torch212",
           "packages": pinned}  # fmt: skip
    other = _cells(root, fast, disturbed=(1,) if disturbed else (), env=env,
                   extra_cell={"environment": "torch212"})  # fmt: skip
    return installed, other, fast


def test_two_torch_releases_one_disturbed_state_no_verdict_anywhere(tmp_path):
    installed, other, fast = _torch_release_study(tmp_path / "runs", disturbed=True)
    out = aggregate([*installed, *other], tmp_path / "tables")
    runs = pd.read_csv(out["runs"])
    # What the records say, read back from runs.csv: one process disturbed, the others quiet.
    flagged = runs.set_index("path")["interference"].astype(str).str.lower()
    assert [flagged[str(p.parent)] for p in installed] == ["false"] * 3
    assert [flagged[str(p.parent)] for p in other] == ["false", "true", "false"]
    ratio, low, high = _welch_by_hand(fast, BASE)
    assert low > 1  # quiet, the processes would support it
    rerun = (
        "NETTEBENCH_RETRAIN=1 snakemake --configfile results/study.yaml "
        f"--replace-workflow-config --forcerun {shlex.quote(str(other[1]))}"
    )

    versions = out["time_by_library_version"].read_text()
    torch_table = versions.split("## torch:")[1].split("\n## ")[0]
    row = next(line for line in torch_table.splitlines() if line.startswith("| resnet18 O0"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    # the 2.12.1 time carries ‡, the 2.14.1 one does not; the speed-up states no verdict
    assert not cells[1].endswith("‡") and cells[2].endswith("‡"), row
    assert cells[3] == f"{ratio:.2f}x [{low:.2f}-{high:.2f}] ‡ (no verdict)", row
    assert "timed under interference" in torch_table and rerun in torch_table

    comparisons = out["comparisons"].read_text()
    assert "No matrix cells" not in comparisons
    line = next(x for x in comparisons.splitlines() if x.startswith("| torch212"))
    assert "torch212 (torch 2.12.1) / installed (torch 2.14.1), resnet18" in line, line
    assert f"| {ratio:.2f}x | 3 / 3 |" in line, line
    assert "| no verdict: torch212 (torch 2.12.1)'s epochs (seed 1) ‡ |" in line, line
    assert rerun in comparisons

    headline = out["headline"].read_text()
    sentence = next(p for p in headline.split("\n") if "torch212" in p)
    assert "no verdict" in sentence and "faster" not in sentence, sentence
    assert "torch212 (torch 2.12.1)&#x27;s epochs (seed 1) timed under interference" in sentence
    assert f"{ratio:.2f}x" in sentence and "rerun" in sentence


def test_the_same_study_quiet_states_its_verdict_in_words_and_tables(tmp_path):
    installed, other, fast = _torch_release_study(tmp_path / "runs", disturbed=False)
    out = aggregate([*installed, *other], tmp_path / "tables")
    ratio, low, high = _welch_by_hand(fast, BASE)
    headline = out["headline"].read_text()
    assert (
        f"torch212 (torch 2.12.1) trains resnet18 {ratio:.2f}x faster than installed (torch "
        f"2.14.1) (95 % interval {low:.2f}-{high:.2f}x between 3 and 3 processes"
    ) in headline
    versions = out["time_by_library_version"].read_text()
    assert "no verdict" not in versions and "‡" not in versions.split("## Versions")[0]
    assert f"| {ratio:.2f}x [{low:.2f}-{high:.2f}] |" in versions  # supported: no mark
    comparisons = out["comparisons"].read_text()
    assert any(
        x.startswith("| torch212") and x.endswith("| yes |") for x in comparisons.splitlines()
    )


def test_a_ceiling_disturbed_alone_withholds_the_loader_verdict_and_is_rerun(tmp_path):
    """The cells' epochs were quiet; the ceiling of `cached`'s seed 2 (measured in its own job,
    right after) was not. The loader comparison, which the processes would support, states no
    verdict and names that ceiling."""
    root = tmp_path / "runs"
    fast = [1.2 * r for r in BASE]
    pil = _cells(root, BASE, extra_cell={"loader": "pil"}, ceilings=True)
    cached = _cells(root, fast, disturbed=(2,), extra_cell={"loader": "cached"}, ceilings=True)
    assert _welch_by_hand(fast, BASE)[1] > 1  # quiet, the processes would support it
    out = aggregate([*pil, *cached], tmp_path / "tables")
    comparisons = out["comparisons"].read_text()
    line = next(x for x in comparisons.splitlines() if x.startswith("| cached / pil"))
    assert line.endswith("| no verdict: cached's ceiling (seed 2) ‡ |"), line
    headline = out["headline"].read_text()
    assert "no verdict: cached&#x27;s ceiling (seed 2) timed under interference" in headline
    assert "faster" not in headline.split("Caveats")[0]
    # the rerun command, from runs.csv alone: exactly the cell whose ceiling was disturbed
    done = subprocess.run(
        [sys.executable, "-m", "nettebench", "report", "rerun", "--runs", str(out["runs"])],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    command = done.stdout.strip().splitlines()[-1]
    assert command == (
        "NETTEBENCH_RETRAIN=1 snakemake --configfile results/study.yaml "
        f"--replace-workflow-config --forcerun {shlex.quote(str(cached[2]))}"
    )
    assert f"# {cached[2].parent}: ceiling under interference" in done.stdout


def test_a_disturbed_o0_withholds_every_precision_verdict_of_the_time_table(tmp_path):
    """Three processes a side, O1 and O3 clearly faster than O0 (by the processes' intervals);
    the baseline's seed 1 was disturbed, so neither verdict is stated."""
    root = tmp_path / "runs"
    o0 = [100.0, 104.0, 96.0]  # seconds for the epochs; O1 and O3 take 0.5 and 0.4 of them
    others = {"O1": [0.5 * t for t in o0], "O3": [0.4 * t for t in o0]}
    paths = [
        F.make_cell(root, precision="O0", seed=s, time_for_epochs_s=t,
                    conditions=LOADED if s == 1 else QUIET)
        for s, t in enumerate(o0)
    ] + [
        F.make_cell(root, precision=p, seed=s, time_for_epochs_s=t, conditions=QUIET)
        for p, times in others.items()
        for s, t in enumerate(times)
    ]  # fmt: skip
    out = aggregate(paths, tmp_path / "tables")
    text = out["time_by_model_precision"].read_text()
    speedups = text.split("## Speed-up over O0")[1]
    row = next(x for x in speedups.splitlines() if x.startswith("| resnet18"))
    for column, precision in ((2, "O1"), (3, "O3")):
        ratio, low, high = _welch_by_hand(o0, others[precision])  # seconds: O0's over the other's
        assert low > 1
        assert row.split("|")[column].strip() == (
            f"{ratio:.2f}x [{low:.2f}-{high:.2f}] ‡ (no verdict)"
        ), row
    assert (
        "no verdict is stated whatever its interval says (resnet18 O0's epochs (seed 1))"
        in speedups
    )
    assert shlex.quote(str(paths[1])) in speedups
    assert not any(shlex.quote(str(p)) in speedups for p in paths[:1] + paths[2:])


def test_the_rerun_command_says_when_nothing_was_disturbed(tmp_path):
    out = aggregate(_cells(tmp_path / "runs", BASE), tmp_path / "tables")
    done = subprocess.run(
        [sys.executable, "-m", "nettebench", "report", "rerun", "--runs", str(out["runs"])],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0 and "nothing to rerun" in done.stdout


def test_two_machines_one_seed_disturbed_state_no_verdict_in_the_machines_table(tmp_path):
    """Two labelled machines, two seeds each; site-b's seed 0 ran beside another process. The
    times differ clearly (Welch's interval between the processes excludes 1), but the verdict
    is withheld, and its time carries ‡."""
    root = tmp_path / "runs"
    paths = {}
    times = {"site-a": [1440.0, 1450.0], "site-b": [720.0, 725.0]}
    for machine, seconds in times.items():
        for seed, total in enumerate(seconds):
            loaded = machine == "site-b" and seed == 0
            paths[machine, seed] = F.make_cell(
                root / machine, model="resnet50", precision="O1", seed=seed,
                time_for_epochs_s=total, extra_cell={"machine": machine},
                conditions=LOADED if loaded else QUIET,
            )  # fmt: skip
    out = aggregate(list(paths.values()), tmp_path / "tables")
    text = out["time_by_machine"].read_text()
    row = next(x for x in text.splitlines() if x.startswith("| resnet50 O1"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    # seconds: site-a's over site-b's; two processes a side, so Welch's df is 2
    ratio, low, high = _welch_by_hand(times["site-a"], times["site-b"])
    assert low > 1
    assert not cells[1].endswith("‡") and cells[2].endswith("‡"), row
    assert cells[3] == f"{ratio:.2f}x [{low:.2f}-{high:.2f}] ‡ (no verdict)", row
    assert "resnet50 O1 on site-b's epochs (seed 0)" in text
    assert shlex.quote(str(paths["site-b", 0])) in text
    assert shlex.quote(str(paths["site-b", 1])) not in text
