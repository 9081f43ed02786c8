"""End to end: two torch releases side by side through the real Snakemake ([1/5] item 5).

A study with ``environment: [installed, torch212]``, ``torch212`` pinning ``torch==2.12.1`` and
``torchvision==0.27.1`` from PyTorch's CPU index: Snakemake installs the environment
(``environment_install``), trains the quick start's O0 cell in both, in its three processes
(seeds) each, and aggregates. Checked against ``runs.csv`` and the timing-conditions verdicts it
holds: each process recorded the torch it imported; the version table has a torch table with
both releases, each time marked ‡ exactly where one of its processes was timed under
interference; its speed-up, the comparisons table's row and the front page's sentence state the
same ratio, and a verdict only where every process of both cells (and their ceilings) was quiet
(report.compare.quiet_evidence).

Cost, why it is not in the 10-minute suite: the environment downloads torch 2.12.1 and
torchvision 0.27.1 CPU wheels (about 200 MB; pip's cache makes a second run quick), installs
them (about a minute on 2 cores), and the six processes train for about a minute and a half
(an O0 process's job took 14-15 s in the quick start on the 2-core VM). Run it where the
registry is reachable:

    NETTEBENCH_TORCH_RELEASE=1 pytest -n 0 -m torch_release tests/test_torch_release.py

(``.ci/run`` can add that line; ``NETTEBENCH_TORCH_RELEASE_INDEX`` names another index, e.g. a
mirror, or ``pypi`` for the package registry's own CUDA builds, several GB each unless pip's
cache holds them; ``NETTEBENCH_TORCH_RELEASE_PINS`` other pins, e.g. ``torch==2.11.0
torchvision==0.26.0``, the H200 twin's, which ``tests/device/twin.sh`` leaves in pip's cache.)
Without the variable the test is skipped and says why.
"""

from __future__ import annotations

import os
import re
import time

import pandas as pd
import pytest
import yaml

from tests.workflow_helpers import QUICKSTART_STUDY, copy_workflow, run_study, write_config

pytestmark = [
    pytest.mark.workflow,
    pytest.mark.torch_release,
    pytest.mark.skipif(
        os.environ.get("NETTEBENCH_TORCH_RELEASE") != "1",
        reason="downloads torch 2.12.1 (~200 MB): set NETTEBENCH_TORCH_RELEASE=1 to run it",
    ),
]

INDEX = os.environ.get("NETTEBENCH_TORCH_RELEASE_INDEX", "https://download.pytorch.org/whl/cpu")
PINS = os.environ.get("NETTEBENCH_TORCH_RELEASE_PINS", "torch==2.12.1 torchvision==0.27.1").split()
RELEASE = PINS[0].split("==")[1]  # the torch release the environment pins


@pytest.fixture(scope="module")
def release_study(tmp_path_factory):
    workdir = copy_workflow(tmp_path_factory.mktemp("torch_release"))
    study = yaml.safe_load(QUICKSTART_STUDY.read_text())
    study["matrix"] = {**study["matrix"], "environment": ["installed", "torch212"]}
    study["matrix"].pop("include", None)  # O0 only, in the quick start's seeds
    for section in ("profile", "inference", "cpu_baseline"):
        study.pop(section, None)
    index = [] if INDEX == "pypi" else ["--index-url", INDEX]
    study["environments"] = {"torch212": {"packages": PINS, "pip_args": index}}
    config = write_config(workdir, study)
    started = time.perf_counter()
    run_study(workdir, config)
    print(f"torch-release study: {time.perf_counter() - started:.1f} s")
    return workdir


def _row(text: str, start: str) -> list[str]:
    line = next(x for x in text.splitlines() if x.startswith(start))
    return [c.strip() for c in line.strip("|").split("|")]


def test_two_releases_say_the_same_thing_everywhere(release_study):
    tables = release_study / "results" / "tables"
    runs = pd.read_csv(tables / "runs.csv")
    runs = runs[runs["kind"] == "matrix"]
    seeds = yaml.safe_load(QUICKSTART_STUDY.read_text())["matrix"]["seed"]
    assert runs.groupby("environment")["seed"].apply(sorted).to_dict() == {
        "installed": seeds,
        "torch212": seeds,
    }
    # one row per environment: the torch its processes imported (one), and whether any of them
    # (or its ceiling) was timed under interference
    by_env = runs.groupby("environment")
    torch = by_env["env_torch"].unique()
    assert all(len(found) == 1 for found in torch), torch
    runs = pd.DataFrame(
        {
            "env_torch": torch.str[0],
            "interference": by_env["interference"].apply(lambda s: s.map(bool).any()),
            "ceiling_interference": by_env["ceiling_interference"].apply(
                lambda s: s.map(bool).any()
            ),
        }
    )
    assert str(runs.loc["torch212", "env_torch"]).startswith(RELEASE)
    assert not str(runs.loc["installed", "env_torch"]).startswith(RELEASE)
    disturbed = {
        env: bool(runs.loc[env, "interference"]) or bool(runs.loc[env, "ceiling_interference"])
        for env in runs.index
    }

    versions = (tables / "time_by_library_version.md").read_text()
    torch_table = versions.split("## torch:")[1].split("\n## ")[0]
    header = _row(torch_table, "| model")
    row = _row(torch_table, "| resnet18")
    for env in runs.index:  # each time marked ‡ exactly where its processes' epochs were
        # the header names the version pip installed (2.11.0), the record what torch says it
        # is (2.11.0+cu130): the release is the part before the local label
        release = str(runs.loc[env, "env_torch"]).split("+")[0]
        column = next(i for i, h in enumerate(header) if release in h)
        marks = row[column].lstrip("~0123456789.,")  # "± 1.2" and the marks: ‡, § in any order
        assert ("‡" in marks) == bool(runs.loc[env, "interference"]), (env, row)
    speedup = row[-1]
    ratio = float(re.match(r"~?([\d.]+)x", speedup).group(1))
    assert speedup.endswith("‡ (no verdict)") == any(disturbed.values()), speedup

    comparisons = (tables / "comparisons.md").read_text()
    assert "No matrix cells" not in comparisons
    # compared | ratio | processes | test | supported
    compared = _row(comparisons, "| torch212")
    installed_first = str(runs.loc["installed", "env_torch"]) in header[1]
    expected = ratio if installed_first else 1 / ratio  # the table's is torch212 / installed
    assert abs(float(compared[1].rstrip("x")) - expected) <= 0.006 * expected, (compared, ratio)
    assert compared[2] == f"{len(seeds)} / {len(seeds)}", compared
    assert compared[-1].startswith("no verdict") == any(disturbed.values()), compared

    front = (tables / "headline.html").read_text()
    sentence = next(p for p in re.findall(r'<p class="answer">(.*?)</p>', front, re.S)
                    if "torch212" in p)  # fmt: skip
    assert ("no verdict" in sentence) == any(disturbed.values()), sentence
