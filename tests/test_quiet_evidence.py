"""A verdict needs quiet evidence (docs/honest-numbers.md): a comparison where either side, or
either side's ceiling, was timed under interference is never supported, in any table that
states a ratio, in the front page's words and in the figure; each says which side and the
command that measures exactly those cells again (report/rerun.py).

The records are written with tests/record_factory.py (the trainer's own writers); the expected
ratios are computed here from the raw block rates (geometric means, by hand), and which cells
were disturbed from the conditions written into them.
"""

from __future__ import annotations

import math
import shlex
import subprocess
import sys

import pandas as pd
import record_factory as F

from nettebench.report.aggregate import aggregate

STEADY = [100.0, 101.0, 99.0, 100.5, 99.5, 100.0, 100.2, 99.8, 100.1, 99.9]
LOADED = F.window(0.6, reasons=("other processes took 60 % of the job's CPUs",))
QUIET = F.window(0.01)


def _geomean_ratio(other, reference) -> float:
    """other / reference, each the geometric mean of its block rates, computed here."""
    mean = lambda xs: sum(math.log(x) for x in xs) / len(xs)  # noqa: E731
    return math.exp(mean(other) - mean(reference))


def _cell(root, blocks, *, conditions=QUIET, ceiling_conditions=None, **kwargs):
    path = F.make_cell(
        root,
        device_type="cpu",
        train_img_s=sum(blocks) / len(blocks),
        summary_extra={"train_block_img_s": blocks},
        conditions=conditions,
        **kwargs,
    )
    if ceiling_conditions is not None:
        F.make_ceiling(path, img_s=300.0, conditions=ceiling_conditions)
    return path


def _torch_release_study(root, *, disturbed: bool):
    """Two torch releases side by side, as a study with `environment: [installed, torch212]`
    records them: the environment's cell imported torch 2.12.1 (its pins), the other 2.14.1.
    The torch212 cell trained 2.33x faster, and (``disturbed``) ran while others took 60 % of
    the CPUs: the speed-up is the load's."""
    fast = [2.33 * r for r in STEADY]
    installed = _cell(root, STEADY, extra_cell={"environment": "installed"})
    pinned = {"torch": "2.12.1", "torchvision": "0.27.1"}
    env = {"torch": "2.12.1", "torchvision": "0.27.1", "package_environment": "torch212",
           "packages": pinned}  # fmt: skip
    other = _cell(root, fast, conditions=LOADED if disturbed else QUIET, env=env,
                  extra_cell={"environment": "torch212"})  # fmt: skip
    return installed, other, fast


def test_two_torch_releases_one_disturbed_state_no_verdict_anywhere(tmp_path):
    installed, other, fast = _torch_release_study(tmp_path / "runs", disturbed=True)
    out = aggregate([installed, other], tmp_path / "tables")
    runs = pd.read_csv(out["runs"])
    # What the records say, read back from runs.csv: one cell disturbed, the other quiet.
    flagged = runs.set_index("path")["interference"].astype(str).str.lower()
    assert flagged[str(other.parent)] == "true" and flagged[str(installed.parent)] == "false"
    ratio = _geomean_ratio(fast, STEADY)
    rerun = (
        "NETTEBENCH_RETRAIN=1 snakemake --configfile results/study.yaml "
        f"--replace-workflow-config --forcerun {shlex.quote(str(other))}"
    )

    versions = out["time_by_library_version"].read_text()
    torch_table = versions.split("## torch:")[1].split("\n## ")[0]
    row = next(line for line in torch_table.splitlines() if line.startswith("| resnet18 O0"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    # the 2.12.1 time carries ‡, the 2.14.1 one does not; the speed-up states no verdict
    assert not cells[1].endswith("‡") and cells[2].endswith("‡"), row
    assert cells[3].startswith(f"{ratio:.2f}x [") and cells[3].endswith("‡ (no verdict)"), row
    assert "timed under interference" in torch_table and rerun in torch_table

    comparisons = out["comparisons"].read_text()
    assert "No matrix cells" not in comparisons
    line = next(x for x in comparisons.splitlines() if x.startswith("| torch212"))
    assert "torch212 (torch 2.12.1) / installed (torch 2.14.1), resnet18" in line, line
    assert f"| {ratio:.2f}x |" in line and "| no verdict: torch212 (torch 2.12.1)'s epochs" in line
    assert rerun in comparisons

    headline = out["headline"].read_text()
    sentence = next(p for p in headline.split("\n") if "torch212" in p)
    assert "no verdict" in sentence and "faster" not in sentence, sentence
    assert "torch212 (torch 2.12.1)&#x27;s epochs timed under interference" in sentence
    assert f"{ratio:.2f}x" in sentence and "rerun" in sentence


def test_the_same_study_quiet_states_its_verdict_in_words_and_tables(tmp_path):
    installed, other, fast = _torch_release_study(tmp_path / "runs", disturbed=False)
    out = aggregate([installed, other], tmp_path / "tables")
    ratio = _geomean_ratio(fast, STEADY)
    headline = out["headline"].read_text()
    assert (
        f"torch212 (torch 2.12.1) trains resnet18 {ratio:.2f}x faster than installed (torch 2.14.1)"
    ) in headline
    versions = out["time_by_library_version"].read_text()
    assert "no verdict" not in versions and "‡" not in versions.split("## Versions")[0]
    comparisons = out["comparisons"].read_text()
    assert any(
        x.startswith("| torch212") and x.endswith("| yes |") for x in comparisons.splitlines()
    )


def test_a_ceiling_disturbed_alone_withholds_the_loader_verdict_and_is_rerun(tmp_path):
    """The cells' epochs were quiet; `cached`'s ceiling (measured in its own job, right
    after) was not. The loader comparison states no verdict and names that ceiling."""
    root = tmp_path / "runs"
    pil = _cell(root, STEADY, extra_cell={"loader": "pil"}, ceiling_conditions=QUIET)
    cached = _cell(root, [1.2 * r for r in STEADY], extra_cell={"loader": "cached"},
                   ceiling_conditions=LOADED)  # fmt: skip
    out = aggregate([pil, cached], tmp_path / "tables")
    comparisons = out["comparisons"].read_text()
    line = next(x for x in comparisons.splitlines() if x.startswith("| cached / pil"))
    assert line.endswith("| no verdict: cached's ceiling ‡ |"), line
    headline = out["headline"].read_text()
    assert "no verdict: cached&#x27;s ceiling timed under interference" in headline
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
        f"--replace-workflow-config --forcerun {shlex.quote(str(cached))}"
    )
    assert f"# {cached.parent}: ceiling under interference" in done.stdout


def test_a_disturbed_o0_withholds_every_precision_verdict_of_the_time_table(tmp_path):
    """Several seeds a side (Welch on seconds): the baseline's seed 1 was disturbed."""
    root = tmp_path / "runs"
    paths = [
        F.make_cell(root, precision="O0", seed=s, conditions=LOADED if s else QUIET) for s in (0, 1)
    ] + [F.make_cell(root, precision="O1", seed=s, conditions=QUIET) for s in (0, 1)]
    out = aggregate(paths, tmp_path / "tables")
    text = out["time_by_model_precision"].read_text()
    speedups = text.split("## Speed-up over O0")[1]
    row = next(x for x in speedups.splitlines() if x.startswith("| resnet18"))
    o0 = [F.time_for("resnet18", "O0", s, F.STUDY_EPOCHS) for s in (0, 1)]
    o1 = [F.time_for("resnet18", "O1", s, F.STUDY_EPOCHS) for s in (0, 1)]
    expected = (sum(o0) / 2) / (sum(o1) / 2)
    assert row.split("|")[2].strip() == f"{expected:.2f}x ‡ (no verdict)", row
    assert (
        "no verdict is stated whatever its interval says (resnet18 O0's epochs (seed 1))"
        in speedups
    )
    assert shlex.quote(str(paths[1])) in speedups and shlex.quote(str(paths[0])) not in speedups


def test_the_rerun_command_says_when_nothing_was_disturbed(tmp_path):
    out = aggregate([_cell(tmp_path / "runs", STEADY)], tmp_path / "tables")
    done = subprocess.run(
        [sys.executable, "-m", "nettebench", "report", "rerun", "--runs", str(out["runs"])],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0 and "nothing to rerun" in done.stdout


def test_two_machines_one_seed_disturbed_state_no_verdict_in_the_machines_table(tmp_path):
    """Two labelled machines, two seeds each; site-b's seed 0 ran beside another process. The
    times differ clearly (Welch would support it), but the verdict is withheld, and its time
    carries ‡."""
    root = tmp_path / "runs"
    paths = {}
    for machine, times in (("site-a", (1440.0, 1450.0)), ("site-b", (700.0, 705.0))):
        for seed, seconds in enumerate(times):
            loaded = machine == "site-b" and seed == 0
            paths[machine, seed] = F.make_cell(
                root / machine, model="resnet50", precision="O1", seed=seed,
                time_for_epochs_s=seconds, extra_cell={"machine": machine},
                conditions=LOADED if loaded else QUIET,
            )  # fmt: skip
    out = aggregate(list(paths.values()), tmp_path / "tables")
    text = out["time_by_machine"].read_text()
    row = next(x for x in text.splitlines() if x.startswith("| resnet50 O1"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    expected = (1440.0 + 1450.0) / 2 / ((700.0 + 705.0) / 2)
    assert not cells[1].endswith("‡") and cells[2].endswith("‡"), row
    assert cells[3] == f"{expected:.2f}x ‡ (no verdict)", row
    assert "resnet50 O1 on site-b's epochs (seed 0)" in text
    assert shlex.quote(str(paths["site-b", 0])) in text
    assert shlex.quote(str(paths["site-b", 1])) not in text
