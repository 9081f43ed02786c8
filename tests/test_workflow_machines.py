"""End to end: one study on two machines, merged, compared; package versions from the registry.

What a user with two clusters does, through the real Snakemake: the same small study runs in two
copies of the project (two "clusters"), one with `--config machine=m1`, the other with
`--config machine=m2`; the cells' package environments (real Pillow 11.3.0 and 12.3.0 wheels
from the registry) are installed by the workflow. Then the first copy aggregates its own results
with the second's (`merge_results:`) through `profiles/aggregate`, which trains nothing, and the
tables show both machines side by side with confidence intervals and the time to accuracy.

Smaller than the quick start (40 training images of 24 px, crops of 16 px, 2 epochs, one
precision) so that six training cells fit the suite's budget.
"""

from __future__ import annotations

import json
import re
import time

import pandas as pd
import pytest
from test_aggregate import as_dict, md_tables

from tests.stages import builds_stage
from tests.workflow_helpers import copy_workflow, planned_jobs, run_study, snakemake, write_config

pytestmark = [
    pytest.mark.workflow,
    *builds_stage("installs package environments from the registry"),
]

PINS = {"pillow11": "11.3.0", "pillow12": "12.3.0"}
TARGET_TOP1 = 40.0


def study(environments):
    """The study of one machine: two seeds of the cell in the first environment (so the machines
    compare with confidence intervals), one seed in each other environment."""
    first, *others = environments
    return {
        "datasets": {
            "tiny": {"synthetic": {"size": 24, "train_images": 40, "val_images": 20, "classes": 4}}
        },
        "environments": {name: {"packages": [f"pillow=={pin}"]} for name, pin in PINS.items()},
        "matrix": {
            "model": "resnet18",
            "batch_size": 8,
            "epochs": 2,
            "image_size": 16,
            "workers": 0,
            "seed": [0, 1],
            "environment": first,
            "include": [{"environment": other, "seed": 0} for other in others],
        },
        "ceiling": False,
    }


@pytest.fixture(scope="module")
def merged(tmp_path_factory):
    root = tmp_path_factory.mktemp("machines")
    timings = {}
    started = time.perf_counter()
    first = copy_workflow(root / "cluster-a")
    config_a = write_config(first, study(["pillow11", "pillow12"]))
    # its cells only, as on the second: the merge below writes the tables the tests read
    run_study(first, config_a, "--config", "machine=m1", "--until", "cell_train")
    timings["m1 (3 cells)"] = time.perf_counter() - started
    second = copy_workflow(root / "cluster-b")
    config_b = write_config(second, study(["pillow11"]))
    # its cells only: the merge reads their records, never this copy's own tables
    run_study(second, config_b, "--config", "machine=m2", "--until", "cell_train")
    timings["m2 (2 cells)"] = time.perf_counter() - started - timings["m1 (3 cells)"]
    compare = write_config(
        first,
        {"merge_results": [str(second / "results")], "target_top1": TARGET_TOP1},
        "compare.yaml",
    )
    before = {p: p.stat().st_mtime for p in (first / "results").rglob("metrics.json")}
    merge = snakemake(
        first, "--workflow-profile", "profiles/aggregate", "--configfile", str(compare)
    )
    timings["merge"] = time.perf_counter() - started - sum(timings.values())
    print("machines workflow:", ", ".join(f"{k} {v:.1f} s" for k, v in timings.items()))
    tables = first / "results" / "tables"
    return {
        "first": first,
        "second": second,
        "config": config_a,
        "merge": merge.stdout + merge.stderr,
        "before": before,
        "runs": pd.read_csv(tables / "runs.csv"),
        "epochs": pd.read_csv(tables / "epochs.csv"),
        "tables": tables,
    }


def test_each_run_labelled_its_cells_and_installed_its_environments(merged):
    runs = merged["runs"]
    assert runs.groupby("machine").size().to_dict() == {"m1": 3, "m2": 2}
    assert runs["path"].map(lambda p: p.rsplit("/", 1)[-1]).tolist() == [
        f"machine~{m}" for m in runs["machine"]
    ]
    assert set(runs["status"]) == {"ok"}
    for _, row in runs.iterrows():
        pin = PINS[row["environment"]]
        assert row["env_pillow"] == pin  # the Pillow the cell imported
        assert json.loads(row["env_packages"]) == {"pillow": pin}
        assert row["env_package_environment"] == row["environment"]
    install = json.loads(
        (merged["first"] / "results" / "environments" / "pillow12" / "install.json").read_text()
    )
    assert install["installed"] == {"pillow": PINS["pillow12"]}


def test_seeds_ran_in_processes_of_their_own(merged):
    runs = merged["runs"]
    assert runs[runs["environment"] == "pillow11"].groupby("machine")["seed"].nunique().eq(2).all()
    assert runs["env_process_id"].is_unique


def test_merging_trained_nothing(merged):
    assert "cell_train" not in merged["merge"] and "environment_install" not in merged["merge"]
    after = {p: p.stat().st_mtime for p in (merged["first"] / "results").rglob("metrics.json")}
    assert after == merged["before"]
    first = merged["first"]
    assert planned_jobs(run_study(first, merged["config"], "--config", "machine=m1", "-n")) == {
        "tables_aggregate": 1,
        "figures_plot": 1,
        "front_page_write": 1,
    }  # only the merged aggregation (and what shows it) differs from this run's own


def test_machines_side_by_side_with_confidence_intervals(merged):
    text = (merged["tables"] / "time_by_machine.md").read_text()
    table = as_dict(dict(md_tables(text))["tiny, 2 epochs"])
    both = table["resnet18 (environment pillow11) O0"]
    assert " ± " in both["m1"] and " ± " in both["m2"]  # two seeds each: a 95 % interval
    # (ns), or no verdict where a side ran under interference (docs/honest-numbers.md)
    # two processes a side: a ratio with its interval between them, and its verdict
    speedup = both["m2: speed-up over m1"]
    assert re.fullmatch(r"\d+\.\d\dx \[[\d.]+-[\d.]+\]( \(ns\)| ‡ \(no verdict\))?", speedup)
    only_m1 = table["resnet18 (environment pillow12) O0"]
    assert re.fullmatch(r"\d+\.\d[‡§]*", only_m1["m1"]) and only_m1["m2"] == ""  # one seed
    assert "(n=1-2)" in text
    headings = [
        h for h, _ in md_tables((merged["tables"] / "time_by_model_precision.md").read_text())
    ]
    assert "tiny, 2 epochs, cpu (" in headings[0] and headings[0].endswith("· machine m1")
    assert any(h.endswith("· machine m2") for h in headings)


def test_time_to_accuracy_from_the_epochs(merged):
    runs, epochs = merged["runs"], merged["epochs"]
    for _, row in runs.iterrows():
        cell = epochs[epochs["path"] == row["path"]].sort_values("epoch")
        reached = cell[cell["val_top1"] >= TARGET_TOP1]
        if reached.empty:
            assert pd.isna(row["time_to_target_s"]) and pd.isna(row["target_epoch"])
        else:
            first = int(reached["epoch"].iloc[0])
            expected = cell.loc[cell["epoch"] <= first, "wall_s"].sum()
            assert row["target_epoch"] == first
            assert row["time_to_target_s"] == pytest.approx(expected)
    text = (merged["tables"] / "time_to_accuracy.md").read_text()
    assert f"first reached {TARGET_TOP1:g} %" in text
    sections = md_tables(text)
    assert len(sections) == 2  # one per machine
    for _, rows in sections:
        for value in rows[1][1:]:  # the pillow11 cell (m2 ran no other, so it has no label)
            assert re.fullmatch(r"not reached|\d+\.\d( ± \d+\.\d)?( \(1/2\))?", value), value
    figure = merged["first"] / "results" / "figures" / "time_to_accuracy.png"
    assert figure.stat().st_size > 1000


def test_pillow_versions_side_by_side(merged):
    text = (merged["tables"] / "time_by_library_version.md").read_text()
    tables = dict(md_tables(text))
    (title,) = [t for t in tables if t.startswith("pillow:")]
    assert title.endswith("machine m1")  # m2 ran one version only: nothing to compare there
    row = as_dict(tables[title])["resnet18 O0"]
    assert " ± " in row["11.3.0 (env pillow11)"]
    assert re.fullmatch(r"\d+\.\d[‡§]*", row["12.3.0 (env pillow12)"])
    speedup = row["12.3.0 (env pillow12): speed-up over 11.3.0 (env pillow11)"]
    # one seed: no test possible; no verdict at all where a side (or its ceiling) was timed
    # under interference (docs/honest-numbers.md: a verdict needs quiet evidence)
    runs = pd.read_csv(merged["tables"] / "runs.csv")
    m1 = runs[(runs["machine"] == "m1") & (runs["kind"] == "matrix")]
    flags = (
        m1[["interference", "ceiling_interference"]]
        .astype(str)
        .apply(lambda c: c.str.lower().eq("true"))
    )
    mark = r"‡ \(no verdict\)" if flags.to_numpy().any() else r"\(n=1\)"
    assert re.fullmatch(r"\d+\.\d\dx " + mark, speedup), speedup
