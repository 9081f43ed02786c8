"""End to end: the quick-start study through the real Snakemake, and what reruns afterwards."""

from __future__ import annotations

import html
import json
import re
import shlex
import shutil
import subprocess
import sys
import time

import pandas as pd
import pytest
import yaml

from nettebench.study import grid
from tests.workflow_helpers import (
    QUICKSTART_STUDY,
    copy_workflow,
    edit_module,
    planned_jobs,
    run_study,
    snakemake,
    write_config,
)

pytestmark = pytest.mark.workflow

TABLES = (
    "time_by_model_precision",
    "accuracy_by_epoch",
    "throughput",
    "timing_conditions",
)
FIGURES = ("time_by_model_precision", "speedup_over_O0", "accuracy_curves", "throughput")


def matrix_cells(study: dict) -> list:
    """The study's matrix cells (CellSpec), expanded as the workflow expands them."""
    return grid.expand(study["matrix"], section="matrix", datasets=list(study["datasets"]))


def matching(cells: list, chosen: dict) -> list:
    """The cells a filter over the matrix picks (``inference: accuracy``)."""
    return [c for c in cells if all(getattr(c, k) == v for k, v in chosen.items())]


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory):
    """One full quick-start run in a copy of the project, then its report in a call of its own,
    as ``make quickstart`` does."""
    workdir = copy_workflow(tmp_path_factory.mktemp("quickstart"))
    config = workdir / "profiles" / "quickstart" / "study.yaml"
    started = time.perf_counter()
    run = run_study(workdir, config)
    (workdir / "run.log").write_text(run.stdout + run.stderr)
    result = run_study(workdir, config, "--report", "results/report.html")
    print(f"quick-start workflow and report: {time.perf_counter() - started:.1f} s")
    (workdir / "quickstart.log").write_text(result.stdout + result.stderr)
    return workdir, config


def test_the_steps_are_exported(quickstart):
    workdir, _ = quickstart
    steps = pd.read_csv(workdir / "results" / "tables" / "steps.csv")
    assert set(steps["phase"]) == {"warmup", "steady"}
    assert steps.loc[steps["phase"] == "steady", "seconds"].gt(0).all()
    study = yaml.safe_load(QUICKSTART_STUDY.read_text())
    # one pyperf file per trained cell: 6, each seed of each precision
    trained = len(matrix_cells(study))
    assert len(list((workdir / "results" / "pyperf").rglob("*.json"))) == trained == 6


def test_every_cell_ran_and_learned(quickstart):
    workdir, _ = quickstart
    study = yaml.safe_load(QUICKSTART_STUDY.read_text())
    runs = pd.read_csv(workdir / "results" / "tables" / "runs.csv")
    # O0 and bf16 (the include), each in one process per seed
    seeds = study["matrix"]["seed"]
    expected_matrix = len(seeds) * (1 + len(study["matrix"]["include"]))
    assert (runs["kind"] == "matrix").sum() == expected_matrix == len(matrix_cells(study)) == 6
    assert (runs["kind"] == "cpu_baseline").sum() == 0  # every cell is a CPU run here
    assert set(runs["status"]) == {"ok"}
    matrix = runs[runs["kind"] == "matrix"]
    for precision in ("O0", "bf16"):
        assert sorted(matrix.loc[matrix["precision"] == precision, "seed"]) == seeds, precision
    chance = 100 / study["datasets"]["synthetic-quick"]["synthetic"]["classes"]
    # Learnable synthetic data: the training path works end to end only if accuracy beats chance
    # (in the cells that train whole epochs; bf16 trains 4 steps of each and is extrapolated).
    full = matrix[~matrix["extrapolated"].astype(bool)]
    assert set(full["precision"]) == {"O0"} and sorted(full["seed"]) == seeds
    # each process has a directory of its own (seed~0, seed~1, ...), and the reference loader,
    # the default, is no part of any path
    parts = [path.split("/") for path in matrix["path"]]
    assert [[p for p in path if p.startswith("seed~")] for path in parts] == [
        [f"seed~{seed}"] for seed in matrix["seed"]
    ]
    assert set(matrix["loader"]) == {"pil"}
    assert not [p for path in parts for p in path if p.startswith("loader~")]
    assert (full["final_top1"] > 2 * chance).all(), full[["seed", "final_top1"]]
    # every matrix cell's compute ceiling was measured beside it
    assert (matrix["ceiling_img_s"] > 0).all() and (matrix["ceiling_share"] > 0).all()


def test_cell_records_hold_parameters_and_environment(quickstart):
    workdir, _ = quickstart
    metrics = sorted((workdir / "results" / "runs").rglob("metrics.json"))
    assert metrics, "no cell wrote metrics.json"
    record = json.loads(metrics[0].read_text())
    assert record["cell"]["model"] == "resnet18"
    assert record["environment"]["torch"]
    assert record["device"]["threads"] == 2
    epochs = pd.read_csv(metrics[0].parent / "epochs.csv")
    study = yaml.safe_load(QUICKSTART_STUDY.read_text())
    assert list(epochs["epoch"]) == list(range(1, study["matrix"]["epochs"] + 1))


def test_tables_figures_and_report_exist(quickstart):
    workdir, _ = quickstart
    results = workdir / "results"
    for name in TABLES:
        for ext in ("md", "html"):
            text = (results / "tables" / f"{name}.{ext}").read_text()
            assert "resnet" in text, name
    time_table = (results / "tables" / "time_by_model_precision.md").read_text()
    assert "O0" in time_table and "bf16" in time_table
    for name in FIGURES:
        for ext in ("png", "svg"):
            assert (results / "figures" / f"{name}.{ext}").stat().st_size > 1000
    report = results / "report.html"
    assert report.stat().st_size > 10_000
    # no `profile:` in the quick start (its time): tests/test_workflow_profile.py runs profiles
    assert not (results / "profiles").exists()
    assert not (results / "tables" / "top_kernels.md").exists()


def test_the_quickstart_says_what_it_was_timed_in_and_leads_with_the_answer(quickstart):
    workdir, _ = quickstart
    results = workdir / "results"
    seeds = yaml.safe_load(QUICKSTART_STUDY.read_text())["matrix"]["seed"]
    processes = len(seeds)  # each cell's: one per seed
    runs = pd.read_csv(results / "tables" / "runs.csv")
    # every timed window was measured: cells and ceilings (in the cell's own job)
    assert runs["interference"].notna().all()
    matrix = runs[runs["kind"] == "matrix"]
    assert set(matrix["ceiling_context"]) == {"cell job"}
    assert matrix["ceiling_interference"].notna().all()
    # the CPU is described, and bf16 is marked emulated exactly where the CPU emulates it
    assert runs["env_cpu_capability"].notna().all() and runs["env_cpu_flags"].notna().all()
    bf16 = matrix[matrix["precision"] == "bf16"]
    assert len(bf16) == processes
    assert (bf16["precision_emulated"].isna() == bf16["env_bf16_native"].astype(bool)).all()
    # the timed processes ran round-robin by seed: every cell's first, then every second, ...
    assert sorted(matrix["timed_order"]) == list(range(1, len(matrix) + 1))  # every one timed
    in_order = matrix.sort_values("timed_order")
    order = in_order[["precision", "seed", "replicate", "timed_order"]]
    assert list(in_order["replicate"]) == sorted(in_order["replicate"]), order
    conditions = (results / "tables" / "timing_conditions.md").read_text()
    assert "0 overlapped another timed window" in conditions
    # the report's front page: caveats line, headline table, the figure, then the prose
    report = (results / "report.html").read_text()
    start = report.index("var workflow_desc")
    answer = report.index("answer", start)  # the answer's paragraphs (their class) lead
    caveats = report.index("Caveats: ", start)
    headline = report.index("Time by model and precision", start)
    figure = report.index("data:image/png;base64,", start)
    prose = report.index("turns a hand-run deep-learning benchmarking study", start)
    assert answer < caveats < headline < figure < prose
    # the answer in words: bf16 against O0 (the one comparison), its interval between the two
    # cells' processes (three a side), whatever the verdict on this machine
    front = (results / "tables" / "headline.html").read_text()
    answers = re.findall(r'<p class="answer">(.*?)</p>', front, flags=re.S)
    assert len(answers) == 1, answers
    between = f"between {processes} and {processes} processes"
    assert re.search(rf"95 % interval \S+x {between}", answers[0]), answers
    # every timed cell carries its spread: 6+ steady steps, so a 95 % interval of its median
    assert (matrix["train_steps_steady"] >= 6).all()
    assert (matrix["train_img_s_low"] <= matrix["train_img_s"]).all()
    assert (matrix["train_img_s"] <= matrix["train_img_s_high"]).all()


def test_the_run_ends_with_the_front_pages_answer_in_the_terminal(quickstart):
    """The run's last lines (after its last job) are the front page's answer and caveats line,
    as plain text: the same sentences as headline.html's paragraphs."""
    workdir, _ = quickstart
    tables = workdir / "results" / "tables"
    front = (tables / "headline.html").read_text()
    paragraphs = re.findall(r'<p class="(?:answer|caveats[^"]*)">(.*?)</p>', front, flags=re.S)
    plain = [html.unescape(re.sub(r"<[^>]+>", "", p)) for p in paragraphs]
    assert len(plain) == 2 and plain[1].startswith("Caveats: "), plain
    written = (tables / "answer.txt").read_text().splitlines()
    assert [line.replace("`", "") for line in written] == plain  # the page sets `...` as code
    log = (workdir / "run.log").read_text()
    heading = log.rindex("nettebench: the answer")
    assert heading > log.rindex("Finished job")
    # each sentence wrapped to the terminal's width: a line indented by two spaces starts one,
    # its continuation lines are indented by four
    printed = []
    for line in log[heading:].splitlines()[1:]:
        if line.startswith("    ") and printed:
            printed[-1] += " " + line.strip()
        elif line.startswith("  "):
            printed.append(line.strip())
    assert printed == written, log[heading:]


def test_snakemakes_text_of_the_run_has_no_line_a_terminal_cannot_hold(quickstart):
    """No job's reason (the profiles' `quiet: reason`: it lists every input that changed, 3,600
    characters for `all` in the quick start); the rules that gather the study say what they
    make in one line (`message:`); a cell's job names its first output, log and resources
    (rules/common.smk `cell_message`: its file lists ran to 574 characters); and the answer is
    wrapped: no line of the run's output is over 300 characters."""
    workdir, _ = quickstart
    lines = (workdir / "run.log").read_text().splitlines()
    long = [f"{line[:100]}... ({len(line)} characters)" for line in lines if len(line) > 300]
    assert long == []
    assert not [line for line in lines if line.lstrip().startswith(("reason: ", "Reason: "))]
    assert "Job " in next(line for line in lines if "tables_aggregate: the tables in" in line)


def test_inference_cells_ran_with_paths_that_omit_defaults(quickstart):
    workdir, _ = quickstart
    root = workdir / "results" / "inference" / "synthetic-quick" / "model~resnet18"
    found = sorted(p.relative_to(root).as_posix() for p in root.rglob("inference.json"))
    assert found == ["precision~bf16/batch~1/image_size~32/workers~1/inference.json"]
    for path in root.rglob("inference.json"):
        record = json.loads(path.read_text())
        assert record["status"] == "ok" and record["offline"]["img_s"] > 0
        assert record["pipeline"]["images"] > 0
        assert (record["single_stream"] is None) == (record["cell"]["batch_size"] != 1)
        assert record["environment"]["cpu_capability"] and record["conditions"]["wall_s"] > 0


def test_the_o0_seed_0_cells_final_weights_are_evaluated_in_each_precision(quickstart):
    """Only the cell the study names (precision O0, seed 0: one process of the full O0 cell)
    is evaluated; its fp32 top-1 is the trainer's final one, as test_inference.py tests it."""
    workdir, config = quickstart
    study = yaml.safe_load(config.read_text())
    found = sorted((workdir / "results" / "inference_accuracy").rglob("accuracy.json"))
    (chosen,) = matching(matrix_cells(study), study["inference"]["accuracy"])
    assert len(found) == 1 and found[0].parent.as_posix().endswith(chosen.path())
    parts = found[0].as_posix().split("/")
    assert {"precision~O0", "seed~0"} <= set(parts), parts
    assert not [p for p in parts if p.startswith(("loader~", "max_steps~"))], parts
    cell = found[0].parent.relative_to(workdir / "results" / "inference_accuracy")
    trained = workdir / "results" / "runs" / cell
    assert (trained / "weights.pt").stat().st_size > 40e6  # resnet18 in fp32
    accuracy = json.loads(found[0].read_text())
    rows = {row["precision"]: row for row in accuracy["rows"]}
    val_images = study["datasets"]["synthetic-quick"]["synthetic"]["val_images"]
    assert list(rows) == ["fp32", "bf16"] and rows["fp32"]["images"] == val_images
    final = json.loads((trained / "metrics.json").read_text())["summary"]["final_top1"]
    assert accuracy["trained_final_top1"] == final
    # the same weights on the same validation images through the reference pipeline (the
    # trainer's validation ran at batch 32): the same top-1, give or take one near-tied image
    assert abs(rows["fp32"]["top1"] - final) <= 100 / val_images + 1e-9, (rows["fp32"], final)
    assert rows["bf16"]["top1_diff"] == pytest.approx(rows["bf16"]["top1"] - rows["fp32"]["top1"])


def test_tables_figure_and_front_page_show_inference(quickstart):
    workdir, _ = quickstart
    tables = workdir / "results" / "tables"
    table = (tables / "inference.md").read_text()
    assert table.count("| resnet18 |") == 1 and "SingleStream" in table
    assert (
        "| resnet18 | O0 | 0 | bf16 (channels_last) |"
        in (tables / "inference_accuracy.md").read_text()
    )
    assert (workdir / "results" / "figures" / "inference_latency_throughput.png").stat().st_size
    assert "Inference: at most" in (workdir / "results" / "front_page.html").read_text()


def test_accuracy_off_reruns_no_cell(quickstart):
    workdir, config = quickstart
    study = yaml.safe_load(config.read_text())
    study["inference"]["accuracy"] = False
    planned = planned_jobs(run_study(workdir, write_config(workdir, study, "off.yaml"), "-n"))
    # without weights.pt among cell_train's outputs its other outputs are still current
    assert planned == {"inference_tables": 1, "inference_figure": 1, "front_page_write": 1}


def test_a_dry_run_of_the_quick_start_leaves_the_report(quickstart):
    """After the full run there is nothing to do. A profile with report-after-run rewrote
    results/report.html after `-n` too; the quick-start profile writes no report (``make
    quickstart`` asks for it after the run)."""
    workdir, _ = quickstart
    report = workdir / "results" / "report.html"
    before = report.stat().st_mtime_ns
    result = snakemake(workdir, "--workflow-profile", "profiles/quickstart", "-n")
    assert planned_jobs(result) == {}
    assert "Report created" not in result.stdout + result.stderr
    assert report.stat().st_mtime_ns == before


def test_the_aggregate_profile_rebuilds_from_scratch_what_the_run_wrote(quickstart):
    """profiles/aggregate reads the study stored with the results (results/study.yaml), not
    config.yaml, and rebuilds every table and figure after they are deleted (the inference ones
    included: `inference_tables`, `inference_figure`): the tables come back as the run wrote
    them and the run's `-n` stays empty."""
    workdir, config = quickstart
    stored = yaml.safe_load((workdir / "results" / "study.yaml").read_text())
    assert stored["target_top1"] == yaml.safe_load(config.read_text())["target_top1"]
    tables, figures = workdir / "results" / "tables", workdir / "results" / "figures"
    before = {path.name: path.read_text() for path in tables.glob("*.md")}
    names = {folder: sorted(p.name for p in folder.iterdir()) for folder in (tables, figures)}
    assert "inference.md" in before and "inference_latency_throughput.png" in names[figures]
    shutil.rmtree(tables)
    shutil.rmtree(figures)
    snakemake(workdir, "--workflow-profile", "profiles/aggregate")
    assert {folder: sorted(p.name for p in folder.iterdir()) for folder in names} == names
    assert {path.name: path.read_text() for path in tables.glob("*.md")} == before
    assert planned_jobs(run_study(workdir, config, "-n")) == {}


def test_the_rerun_line_reruns_exactly_the_disturbed_cell(quickstart, tmp_path):
    """`python -m nettebench report rerun` on the run's runs.csv, with one cell's ceiling
    marked disturbed (the quick start itself may have been quiet): its line, dry-run by the
    real Snakemake, schedules that cell's job and the report after it, no other cell."""
    workdir, config = quickstart
    runs = pd.read_csv(workdir / "results" / "tables" / "runs.csv")
    matrix = runs.index[runs["kind"] == "matrix"]
    runs["interference"] = False
    runs["ceiling_interference"] = False
    runs.loc[matrix[0], "ceiling_interference"] = True
    edited = tmp_path / "runs.csv"
    runs.to_csv(edited, index=False)
    done = subprocess.run(
        [sys.executable, "-m", "nettebench", "report", "rerun", "--runs", str(edited)],
        cwd=workdir, capture_output=True, text=True, check=True,
    )  # fmt: skip
    line = shlex.split(done.stdout.strip().splitlines()[-1])
    assert line[:2] == ["NETTEBENCH_RETRAIN=1", "snakemake"], line
    assert line[2:6] == [
        "--configfile",
        "results/study.yaml",
        "--replace-workflow-config",
        "--forcerun",
    ]
    assert line[6:] == [f"{runs.loc[matrix[0], 'path']}/metrics.json"]
    # as printed (the study the run stored, the workflow's default profile), dry run
    jobs = planned_jobs(snakemake(workdir, *line[2:], "-n"))
    assert jobs["cell_train"] == 1 and "cpu_baseline_train" not in jobs, jobs
    assert jobs["tables_aggregate"] == 1 and jobs["front_page_write"] == 1, jobs


def test_a_new_batch_size_schedules_only_new_cells_and_aggregates(quickstart):
    workdir, config = quickstart
    study = yaml.safe_load(config.read_text())
    before = {cell.path() for cell in matrix_cells(study)}
    study["matrix"]["batch_size"] = [study["matrix"]["batch_size"], 16]
    new = [cell for cell in matrix_cells(study) if cell.path() not in before]
    # every cell again at batch 16: O0 and bf16, each in its three processes
    assert len(new) == len(before) == 6 and {cell.batch_size for cell in new} == {16}
    bigger = write_config(workdir, study, "bigger.yaml")
    jobs = planned_jobs(run_study(workdir, bigger, "-n"))
    assert jobs == {
        "cell_train": len(new),
        "tables_aggregate": 1,
        "figures_plot": 1,
        "front_page_write": 1,
        # the quick start evaluates the O0 cell's seed 0's final weights per inference
        # precision (inference: accuracy), so the new one's too
        "inference_accuracy": len(matching(new, study["inference"]["accuracy"])),
        "inference_tables": 1,
        "inference_figure": 1,
    }
    assert jobs["inference_accuracy"] == 1


def test_editing_plotting_code_reruns_only_figures(quickstart):
    workdir, config = quickstart
    report = workdir / "scripts" / "nettebench" / "report"
    edit_module(report / "figures" / "time.py")  # a study figure's own module
    # the front page embeds the throughput figure, so it is written again too
    redrawn = {"figures_plot": 1, "front_page_write": 1}
    assert planned_jobs(run_study(workdir, config, "-n")) == redrawn
    # the inference figure shares the study figures' plotting helpers, so it is redrawn too
    edit_module(report / "figures" / "plotting.py")
    assert planned_jobs(run_study(workdir, config, "-n")) == {**redrawn, "inference_figure": 1}


def test_editing_training_code_marks_training_outdated(quickstart):
    workdir, config = quickstart
    edit_module(workdir / "scripts" / "nettebench" / "training" / "loop.py")
    jobs = planned_jobs(run_study(workdir, config, "-n"))
    assert jobs == {
        "cell_train": len(matrix_cells(yaml.safe_load(config.read_text()))),  # all 6
        "tables_aggregate": 1,
        "figures_plot": 1,
        "front_page_write": 1,
        # inference reuses the trainer's precision step and loop helpers
        "inference_measure": 1,
        "inference_accuracy": 1,
        "inference_tables": 1,
        "inference_figure": 1,
    }


def test_aggregate_only_profile_never_trains(quickstart):
    """After the training code changed, the aggregate profile plans the tables from what exists
    and no cell, profile or baseline (that its run rebuilds the tables as the run wrote them is
    the test above)."""
    workdir, _ = quickstart
    edit_module(workdir / "scripts" / "nettebench" / "training" / "loop.py")
    edit_module(workdir / "scripts" / "nettebench" / "report" / "aggregate.py")
    planned = planned_jobs(snakemake(workdir, "--workflow-profile", "profiles/aggregate", "-n"))
    assert planned.get("tables_aggregate") == 1, planned
    assert not {"cell_train", "cpu_baseline_train", "cell_profile"} & set(planned), planned
    assert not {"inference_measure", "inference_accuracy"} & set(planned), planned


def test_no_caption_of_the_quick_starts_tables_runs_past_ninety_words(quickstart):
    """What a table shows and how to read its marks, in at most 90 words; the formulas are in
    docs/honest-numbers.md (tests/test_captions.py:captions says what a caption is)."""
    from test_captions import CAPTION_WORDS, captions

    workdir, _ = quickstart
    long = {
        path.name: len(caption.split())
        for path in sorted((workdir / "results" / "tables").glob("*.md"))
        for caption in captions(path.read_text())
        if len(caption.split()) > CAPTION_WORDS
    }
    assert long == {}
