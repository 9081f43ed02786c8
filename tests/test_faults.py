"""Faults injected into real Snakemake runs: nothing finished is lost, every error names the file.

One cell (squeezenet1_1 at 32 px, epochs of a second or less on 2 cores) is trained through
Snakemake and every rerun is interrupted right after its next checkpoint, each time another way:
SIGINT and SIGTERM to the trainer, to Snakemake, to the whole process group (a terminal's
Ctrl-C, SLURM's signal), SIGKILL to the group, SIGKILL to Snakemake alone in the last epoch (the
trainer finishes unseen). A second cell, finished before the first fault, must never run again.
Bad datasets go through one ``--keep-going`` run, bad configs through dry runs. The README's
"Reliability" table is this file, one row per test.
"""

from __future__ import annotations

import json
import os
import re
import signal
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from nettebench.datasets.testing import make_image_tree, make_tgz
from nettebench.profiling.plan import ProfilePlan
from nettebench.study.crossing import ConfigError
from nettebench.study.job_signals import descendants
from nettebench.study.workflow import Study
from nettebench.vocabulary.cell import CellSpec
from tests.workflow_helpers import (
    copy_workflow,
    job_blocks,
    planned_jobs,
    run_study,
    snakemake,
    start_snakemake,
    write_config,
)

pytestmark = pytest.mark.workflow

EPOCHS = 10  # 8 interrupted runs take an epoch each; one spare, should a poll come late
CELL = {"model": "squeezenet1_1", "batch_size": 20, "image_size": 32, "workers": 2, "lr": 0.05}
STUDY = {
    "datasets": {"tiny": {"synthetic": {"size": 40, "train_images": 100, "val_images": 20}}},
    "matrix": {**CELL, "epochs": [1, EPOCHS]},
    "ceiling": False,
}
CHAIN = CellSpec(dataset="tiny", epochs=EPOCHS, **CELL).path()  # the cell every fault hits
KEPT = CellSpec(dataset="tiny", epochs=1, **CELL).path()  # finished before the first fault
STOP_LIMIT_S = 15.0  # "within seconds": measured ~1 s; generous for a loaded CI machine


def metrics(path: str) -> str:
    return f"results/runs/{path}/metrics.json"


@dataclass
class Step:
    fault: str
    returncode: int
    output: str  # Snakemake's
    log: str  # the chain cell's trainer log after this run
    stop_s: float | None = None  # signal -> the trainer process gone
    exit_s: float | None = None  # signal -> Snakemake gone
    epoch: int | None = None  # the epochs the checkpoint held when the signal was sent
    checkpoint_kept: bool = False
    incomplete_markers: list[str] = field(default_factory=list)
    extra: dict = field(default_factory=dict)

    @property
    def resumed_from(self) -> int | None:
        first = self.log.splitlines()[0] if self.log else ""
        prefix = "resumed from the checkpoint after epoch "
        return int(first[len(prefix) :]) if first.startswith(prefix) else None


class Chain:
    def __init__(self, work: Path) -> None:
        self.work = work
        self.config = write_config(work, STUDY)
        self.args = ["--configfile", str(self.config), "--replace-workflow-config", "--cores", "2"]
        self.cell_dir = work / "results" / "runs" / CHAIN
        self.log_path = work / "results" / "logs" / "runs" / f"{CHAIN}.log"
        self.steps: dict[str, Step] = {}

    def targets(self) -> list[str]:
        return [metrics(KEPT), metrics(CHAIN)]

    def log(self) -> str:
        return self.log_path.read_text() if self.log_path.exists() else ""

    def wait_for_checkpoint(self, process, epoch: int | None, timeout: float = 240.0) -> int:
        """Until this run's first checkpoint (or the one after ``epoch``) is on disk: epochs.csv
        holds that many rows and the checkpoint was written after it. Returns the epoch."""
        epochs, ckpt = self.cell_dir / "epochs.csv", self.cell_dir / "checkpoint.pt"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert process.poll() is None, self.fail_text(process)
            try:
                rows = len(epochs.read_text().splitlines()) - 1
                newer = ckpt.stat().st_mtime_ns >= epochs.stat().st_mtime_ns
                if rows >= 1 and newer and (epoch is None or rows >= epoch):
                    assert epoch is None or rows == epoch, f"missed epoch {epoch}: at {rows}"
                    return rows
            except (FileNotFoundError, ValueError):
                pass  # epochs.csv is written once this run finished an epoch
            time.sleep(0.01)
        raise AssertionError(f"no new checkpoint in {timeout} s")

    def fail_text(self, process) -> str:
        return f"snakemake ended early ({process.returncode}); trainer log:\n{self.log()[-3000:]}"

    def interrupted_run(self, fault: str, send, epoch: int | None = None) -> Step:
        """A run of both cells, interrupted by ``send(snakemake, trainer_pid)`` right after the
        chain cell's next checkpoint (or the one after ``epoch``)."""
        out = self.work / f"snakemake-{len(self.steps)}.out"
        process = start_snakemake(self.work, *self.args, *self.targets(), output=out)
        try:
            trainer = trainer_pid(process)
            epoch = self.wait_for_checkpoint(process, epoch)
            sent = time.monotonic()
            send(process, trainer)
            stop_s = wait_gone(trainer) - sent
            process.wait(timeout=120)
            exit_s = time.monotonic() - sent
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        incomplete = self.work / ".snakemake" / "incomplete"
        step = Step(
            fault=fault,
            returncode=process.returncode,
            output=out.read_text(),
            log=self.log(),
            stop_s=stop_s,
            exit_s=exit_s,
            epoch=epoch,
            checkpoint_kept=(self.cell_dir / "checkpoint.pt").is_file(),
            incomplete_markers=[p.name for p in incomplete.rglob("*") if p.is_file()]
            if incomplete.exists()
            else [],
        )
        self.steps[fault] = step
        return step


def trainer_pid(process, cell: str = CHAIN, timeout: float = 120.0) -> int:
    """The trainer of ``cell``: the job process Snakemake started (the rule execs it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, "snakemake ended before the trainer started"
        for pid in descendants(process.pid):
            try:
                command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            mine = f"runs/{cell}".encode() in b" ".join(command)
            trainer = b"-m nettebench training " in b" ".join(command)
            if trainer and parent == process.pid and mine:
                return pid
        time.sleep(0.02)
    raise AssertionError(f"the trainer of {cell} never started")


def wait_gone(pid: int, timeout: float = 120.0) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return time.monotonic()
        if state == "Z":  # ended, not yet reaped by its parent
            return time.monotonic()
        time.sleep(0.01)
    raise AssertionError(f"process {pid} still runs after {timeout} s")


def to_trainer(signum):
    return lambda process, trainer: os.kill(trainer, signum)


def to_snakemake(signum):
    return lambda process, trainer: os.kill(process.pid, signum)


def to_group(signum):
    return lambda process, trainer: os.killpg(process.pid, signum)


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    started = time.monotonic()
    chain = Chain(copy_workflow(tmp_path_factory.mktemp("faults") / "wf"))
    work = chain.work
    # The cell every later run must leave alone; while it trains, a second run is refused. Its
    # trainer is held (SIGSTOP) until the second run has ended, so the first run still holds its
    # lock then: a 1-epoch cell could otherwise end while the second Snakemake starts, and the
    # lock vanish as it is read (seen once: FileNotFoundError on .snakemake/locks/0.input.lock).
    first = start_snakemake(work, *chain.args, metrics(KEPT), output=work / "snakemake-kept.out")
    kept_trainer = trainer_pid(first, KEPT)
    os.kill(kept_trainer, signal.SIGSTOP)
    try:
        chain.second_run = snakemake(work, *chain.args, *chain.targets(), check=False)
    finally:
        os.kill(kept_trainer, signal.SIGCONT)
    assert first.wait(timeout=300) == 0, (work / "snakemake-kept.out").read_text()[-3000:]
    kept = work / metrics(KEPT)
    chain.kept_before = (kept.stat().st_mtime_ns, kept.read_bytes())

    for fault, signame in INTERRUPTS:
        where, _ = fault.split()
        send = {"trainer": to_trainer, "snakemake": to_snakemake, "group": to_group}[where]
        chain.interrupted_run(fault, send(signal.Signals[signame]))
    step = chain.interrupted_run("group SIGKILL", to_group(signal.SIGKILL))
    step.extra["locked"] = snakemake(work, *chain.args, *chain.targets(), check=False)
    snakemake(work, *chain.args, "--unlock")
    # Snakemake killed alone during the last epoch: the trainer finishes with no one watching.
    last = EPOCHS - 1
    step = chain.interrupted_run("snakemake SIGKILL", to_snakemake(signal.SIGKILL), epoch=last)
    step.extra["finished"] = {
        name: (chain.cell_dir / name).read_bytes()
        for name in ("metrics.json", "epochs.csv", "finished.json")
        if (chain.cell_dir / name).exists()
    }
    snakemake(work, *chain.args, "--unlock")
    rerun = snakemake(work, *chain.args, *chain.targets())
    chain.steps["rerun"] = Step("rerun", rerun.returncode, rerun.stdout + rerun.stderr, chain.log())
    chain.dry_run = snakemake(work, *chain.args, *chain.targets(), "-n")
    chain.seconds = time.monotonic() - started
    print(f"\nfault chain: {chain.seconds:.0f} s; signal -> trainer gone, -> snakemake gone:")
    for name, done in chain.steps.items():
        if done.stop_s is not None:
            print(f"  {name:18} {done.stop_s:5.2f} s  {done.exit_s:5.2f} s")
    return chain


# The order the chain runs them in: the fault (who gets the signal, which signal) and its name.
INTERRUPTS = [
    ("trainer SIGINT", "SIGINT"),
    ("trainer SIGTERM", "SIGTERM"),
    ("snakemake SIGINT", "SIGINT"),
    ("snakemake SIGTERM", "SIGTERM"),
    ("group SIGINT", "SIGINT"),
    ("group SIGTERM", "SIGTERM"),
]
NEXT = {
    "trainer SIGINT": "trainer SIGTERM",
    "trainer SIGTERM": "snakemake SIGINT",
    "snakemake SIGINT": "snakemake SIGTERM",
    "snakemake SIGTERM": "group SIGINT",
    "group SIGINT": "group SIGTERM",
    "group SIGTERM": "group SIGKILL",
    "group SIGKILL": "snakemake SIGKILL",
}


@pytest.mark.parametrize(("fault", "name"), INTERRUPTS, ids=[i[0] for i in INTERRUPTS])
def test_a_signal_stops_the_cell_in_seconds_keeping_its_checkpoint(chain, fault, name):
    step = chain.steps[fault]
    epoch = step.epoch
    assert step.stop_s < STOP_LIMIT_S and step.exit_s < STOP_LIMIT_S, (step.stop_s, step.exit_s)
    first = [line for line in step.log.splitlines() if line.startswith("interrupted by")]
    assert first and first[0].startswith(f"interrupted by {name}: {CHAIN} stopped"), step.log
    assert f"kept the checkpoint after epoch {epoch}/{EPOCHS}" in first[0]
    assert step.checkpoint_kept
    assert f"epoch {epoch + 1}/{EPOCHS}" not in step.log, "trained on after the signal"
    for text in (step.log, step.output):
        assert "Traceback" not in text and "Exception ignored" not in text, text[-3000:]
    assert "Cannot close a running event loop" not in step.output
    assert step.returncode == 1  # the run did not complete, and says so
    assert f"non-zero exit status {128 + signal.Signals[name]}" in step.output
    # Its last lines: what the cell kept, and how to resume (nettebench.study.failures).
    ending = step.output[step.output.rindex("Error in rule") :]
    assert f"nettebench: cell_train: interrupted by {name}: {CHAIN} stopped" in ending, ending
    assert "nettebench: run the same command again to resume" in ending
    # Snakemake saw the job end: nothing is left marked incomplete.
    assert step.incomplete_markers == []


@pytest.mark.parametrize(("fault", "name"), INTERRUPTS, ids=[i[0] for i in INTERRUPTS])
def test_the_rerun_resumes_from_that_checkpoint(chain, fault, name):
    assert chain.steps[NEXT[fault]].resumed_from == chain.steps[fault].epoch


@pytest.mark.parametrize("fault", [*NEXT], ids=[*NEXT])
def test_the_rerun_says_its_resume_in_the_terminal(chain, fault):
    """Not only in the cell's log: the run's own output names the cell, the epoch and the file,
    as the trainer resumes (nettebench.vocabulary.terminal, the rule's `3>&2`)."""
    rerun, epoch = chain.steps[NEXT[fault]], chain.steps[fault].epoch
    said = (
        f"nettebench: {CHAIN} resumes after epoch {epoch}/{EPOCHS} from its checkpoint "
        f"(results/runs/{CHAIN}/checkpoint.pt)"
    )
    assert said in rerun.output.splitlines(), rerun.output[-3000:]
    assert "resumes" not in chain.steps["rerun"].output  # a restore is no resume


def test_signals_to_snakemake_are_passed_on_to_its_jobs(chain):
    for fault in ("snakemake SIGINT", "snakemake SIGTERM"):
        output = chain.steps[fault].output
        assert "passed on to" in output and "Will exit after finishing" in output, output


def test_a_second_run_during_a_run_is_refused_by_the_lock(chain):
    second = chain.second_run
    assert second.returncode != 0
    assert "cannot be locked" in second.stdout + second.stderr


def test_sigkill_to_the_group_keeps_the_checkpoint_and_the_lock_says_unlock(chain):
    step = chain.steps["group SIGKILL"]
    assert step.checkpoint_kept and step.returncode == -signal.SIGKILL
    locked = step.extra["locked"]
    assert locked.returncode != 0 and "--unlock" in locked.stdout + locked.stderr
    assert chain.steps["snakemake SIGKILL"].resumed_from == step.epoch


def test_a_cell_finished_unseen_is_restored_not_trained_again(chain):
    """Snakemake killed during the last epoch: the trainer finishes on its own; Snakemake
    never recorded it and runs the job again; the trainer writes back the same results."""
    orphan = chain.steps["snakemake SIGKILL"]
    assert orphan.epoch == EPOCHS - 1 and f"epoch {EPOCHS}/{EPOCHS}" in orphan.log
    assert set(orphan.extra["finished"]) == {"metrics.json", "epochs.csv", "finished.json"}
    rerun = chain.steps["rerun"]
    assert job_blocks(rerun.output, "cell_train")  # Snakemake ran the job again ...
    assert rerun.log.startswith("restored: " + CHAIN), rerun.log  # ... which trained nothing
    assert "epoch " not in rerun.log
    for name in ("metrics.json", "epochs.csv"):
        assert (chain.cell_dir / name).read_bytes() == orphan.extra["finished"][name]
    record = json.loads((chain.cell_dir / "metrics.json").read_text())
    assert record["status"] == "ok" and record["summary"]["epochs_run"] == EPOCHS
    epochs = (chain.cell_dir / "epochs.csv").read_text().splitlines()[1:]
    assert [int(line.split(",")[0]) for line in epochs] == list(range(1, EPOCHS + 1))


def test_the_cell_finished_before_the_faults_never_ran_again(chain):
    kept = chain.work / metrics(KEPT)
    assert (kept.stat().st_mtime_ns, kept.read_bytes()) == chain.kept_before
    assert "Nothing to be done" in chain.dry_run.stdout + chain.dry_run.stderr


def test_an_image_that_stopped_decoding_is_named_first_and_its_rebuild_plans_one_job(chain):
    """After the faults: one image of the generated dataset overwritten, and a cell that reads
    it (seed 1, a study with one seed more). The first line of the failure in the run's output
    names the file and the command that rebuilds the dataset; that command plans the dataset's
    job alone and brings the image back; then the study plans the failed cell alone, not the
    cells that were done (the same dataset.json: Snakemake compares its checksum)."""
    work = chain.work
    study = write_config(work, {**STUDY, "matrix": {**STUDY["matrix"], "seed": [0, 1]}}, "s.yaml")
    args = ["--configfile", str(study), "--replace-workflow-config", "--cores", "2"]
    new = CellSpec(dataset="tiny", epochs=1, seed=1, **CELL).path()
    targets = [metrics(KEPT), metrics(CHAIN), metrics(new)]
    info = work / "results/data/tiny/dataset.json"
    image = sorted((work / "results/data/tiny/data/train").rglob("*.JPEG"))[0]
    image_bytes, info_bytes = image.read_bytes(), info.read_bytes()
    image.write_bytes(b"not a JPEG any more\n")

    failed = snakemake(work, *args, metrics(new), check=False)
    output = failed.stdout + failed.stderr
    assert failed.returncode == 1
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if job_blocks(line, "cell_train"))
    # the job's block (indented), then the failure: its first line
    first = next(line for line in lines[start + 1 :] if not line.startswith(" "))
    shown = image.relative_to(work).as_posix()
    assert first.startswith(f"nettebench: {shown} does not decode ("), output[-3000:]
    command = re.search(r"`snakemake ([^`]*)`", first).group(1).split()
    assert command == ["--force", "results/data/tiny/dataset.json"], first
    assert output.rindex(shown) > output.rindex("Error in rule")  # and again at the end

    assert planned_jobs(snakemake(work, *args, *command, "-n")) == {"dataset_synthesize": 1}
    snakemake(work, *args, *command)
    assert (image.read_bytes(), info.read_bytes()) == (image_bytes, info_bytes)
    assert planned_jobs(snakemake(work, *args, *targets, "-n")) == {"cell_train": 1}  # new's


# -- bad input: datasets ------------------------------------------------------------------------


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


@pytest.fixture(scope="module")
def bad_data(tmp_path_factory):
    """One --keep-going run over datasets that must each fail (or skip) naming what is wrong."""
    src = tmp_path_factory.mktemp("bad-sources")
    tree = make_image_tree(src / "trees" / "tinynette", train_per_class=2, val_per_class=1)
    bad_member = "tinynette/train/n01440764/n01440764_0.JPEG"
    truncate(src / "trees" / bad_member)
    make_tgz(tree, src / "truncated.tgz")
    empty = make_image_tree(src / "empty" / "tinynette", train_per_class=2, val_per_class=1)
    for image in (empty / "val" / "n02102040").iterdir():
        image.unlink()
    make_tgz(empty, src / "emptyclass.tgz")
    (src / "page.tgz").write_text("<!doctype html><html><body>Not Found</body></html>\n")
    good = make_image_tree(src / "good" / "tinynette", train_per_class=2, val_per_class=1)
    evil = tarfile.TarInfo("../evil.txt")
    make_tgz(good, src / "dotdot.tgz", extra=[(evil, b"outside")])
    for top in ("alpha", "beta"):
        make_tgz(good, src / f"{top}.tgz", arcname=top)

    work = copy_workflow(tmp_path_factory.mktemp("bad-data") / "wf")
    datasets = {
        "truncated": {"source": str(src / "truncated.tgz")},
        "skipped": {"source": str(src / "truncated.tgz"), "bad_images": "skip"},
        "baddir": {"source": str(src / "trees" / "tinynette")},
        "emptyclass": {"source": str(src / "emptyclass.tgz")},
        "page": {"source": str(src / "page.tgz")},
        "dotdot": {"source": str(src / "dotdot.tgz")},
        "moving": {"source": str(src / "alpha.tgz")},
    }
    targets = [f"results/data/{name}/dataset.json" for name in datasets]
    config = {"datasets": datasets, "matrix": {"epochs": 1}}
    result = run_study(work, write_config(work, config), "--keep-going", *targets, check=False)
    # what that run made, before the runs below make more
    made = sorted(
        name for name in datasets if (work / targets[list(datasets).index(name)]).exists()
    )
    moved = {}
    for step, source in (("archive", src / "beta.tgz"), ("directory", src / "good/tinynette")):
        config["datasets"]["moving"] = {"source": str(source)}
        run_study(work, write_config(work, config), "results/data/moving/dataset.json")
        moved[step] = sorted(p.name for p in (work / "results/data/moving").iterdir())
    return {
        "work": work,
        "src": src,
        "result": result,
        "member": bad_member,
        "moved": moved,
        "made": made,
    }


def first_line(work: Path, dataset: str, job: str = "extract") -> str:
    return (work / f"results/logs/datasets/{dataset}.{job}.log").read_text().splitlines()[0]


def test_a_truncated_jpeg_in_a_valid_archive_is_rejected_naming_its_member(bad_data):
    line = first_line(bad_data["work"], "truncated")
    assert line.startswith("error: ") and "truncated.tgz, member " + bad_data["member"] in line
    assert "does not decode" in line and "bad_images: skip" in line
    assert not (bad_data["work"] / "results/data/truncated/dataset.json").exists()


def test_the_data_errors_own_sentence_ends_the_terminal_output(bad_data):
    """Not only in the log file: the run's own output names the member and the fix, after
    Snakemake's report of the failed jobs (the onerror handler, nettebench.study.failures)."""
    output = bad_data["result"].stdout + bad_data["result"].stderr
    member = "truncated.tgz, member " + bad_data["member"]
    line = next(line for line in output.splitlines() if member in line and "nettebench:" in line)
    assert line.startswith("nettebench: dataset_extract: ") and "does not decode" in line
    assert "bad_images: skip" in line and "(log: results/logs/datasets/truncated." in line
    assert output.rindex("does not decode") > output.rindex("Error in rule")


def test_bad_images_skip_leaves_it_out_and_records_it(bad_data):
    info = json.loads((bad_data["work"] / "results/data/skipped/dataset.json").read_text())
    (entry,) = info["skipped_images"]
    assert entry["path"] == bad_data["member"].split("/", 1)[1]
    assert entry["source"].endswith("truncated.tgz, member " + bad_data["member"])
    assert info["train_images"] == 5  # 6 in the archive, one left out
    tree = bad_data["work"] / "results/data/skipped" / info["root"]
    assert not (tree / entry["path"]).exists()


def test_a_bad_image_in_a_local_folder_is_rejected_naming_the_file(bad_data):
    line = first_line(bad_data["work"], "baddir", "register")
    assert (
        line.startswith("error: ") and str(bad_data["src"] / "trees" / bad_data["member"]) in line
    )


def test_an_empty_class_folder_is_named_as_the_archive_member(bad_data):
    line = first_line(bad_data["work"], "emptyclass")
    assert "emptyclass.tgz, member tinynette/val/n02102040/ holds no images" in line
    assert ".extract-" not in line


def test_an_html_page_saved_as_tgz_is_named_and_leaves_nothing(bad_data):
    line = first_line(bad_data["work"], "page")
    assert line.startswith("error: ") and "page.tgz" in line
    assert not list((bad_data["work"] / "results/data/page").glob("*"))


def test_a_member_outside_the_archive_is_refused_and_nothing_is_written(bad_data):
    line = first_line(bad_data["work"], "dotdot")
    assert "member '../evil.txt'" in line and "nothing was extracted" in line
    assert not (bad_data["work"] / "results/data/evil.txt").exists()
    assert not list((bad_data["work"] / "results/data/dotdot").glob("*"))


def test_the_run_went_on_past_every_bad_dataset(bad_data):
    """The one --keep-going run failed, and still made the good datasets (the fixture's later
    runs make `moving` again, so what the run made is recorded right after it)."""
    assert bad_data["result"].returncode != 0
    assert bad_data["made"] == ["moving", "skipped"]
    failed = bad_data["result"].stdout + bad_data["result"].stderr
    for name in ("truncated", "baddir", "emptyclass", "page", "dotdot"):
        assert f"results/data/{name}/" in failed


def test_a_new_source_removes_the_old_tree(bad_data):
    assert bad_data["moved"]["archive"] == ["beta", "dataset.json"]
    assert bad_data["moved"]["directory"] == ["dataset.json"]


def test_dataset_json_names_the_real_generator_module(chain):
    info = json.loads((chain.work / "results/data/tiny/dataset.json").read_text())
    assert info["synthetic"]["generator"] == "nettebench.datasets.synthetic"


# -- bad input: config --------------------------------------------------------------------------


def error_first_line(text: str) -> str:
    """The message of the one line a bad config ends in (``Config error: <message>``), with no
    Snakemake "XError in file .../common.smk" header and traceback before it ([4/7])."""
    assert "Error in file" not in text, text[-2000:]
    for line in text.splitlines():
        if line.startswith("Config error: "):
            return line.removeprefix("Config error: ")
    raise AssertionError(f"no 'Config error:' line in:\n{text[-2000:]}")


# Every bad config names its key and what is allowed. Snakemake runs the workflow's parse-time
# checks (rules/common.smk: the study, then the profile plan) and ends with their message, so
# each case is checked against those two calls in-process; two of them also through a real
# Snakemake run, for what the terminal shows (the one line, no traceback, no job run).
BAD_CONFIGS = [
    ({"profile": {"backend": "nvprof2"}}, ["profile.backend", "'nvprof2'", "torch, nsys, nvprof"]),
    (
        {"matrix": {"batch_size": "lots"}},
        ["matrix.batch_size", "'lots'", "an integer >= 1 or auto"],
    ),
    ({"matrix": {"lr": -0.1}}, ["matrix.lr", "> 0", "-0.1"]),
    ({"matrix": {"weight_decay": -1}}, ["matrix.weight_decay", ">= 0"]),
    ({"datasets": {"gone": {"source": "/no/such/dir"}}}, ["datasets.gone.source", "/no/such"]),
    ({"matrix": {"torchvision": "mine"}}, ["matrix.torchvision", "'mine'", "installed"]),
    ({"matrix": {"modle": "resnet18"}}, ["unknown key(s) modle", "allowed: dataset, model"]),
    ({"datasets": {"tiny": {"bad_images": "keep"}}}, ["bad_images", "reject, skip"]),
    ({"matrix": {"model": "resnet51"}}, ["matrix.model", "resnet51", "did you mean resnet50"]),
    ({"matrix": {"precision": "O5"}}, ["matrix.precision", "'O5'", "O0, tf32, O1, O2, O3"]),
    ({"matrix": {"dataset": "imagewoof"}}, ["matrix.dataset", "configured datasets: tiny"]),
    ({"matrix": {"epochs": 0}}, ["matrix.epochs", "integer >= 1"]),
    ({"matrx": {}}, ["unknown config key(s) matrx", "allowed: datasets, matrix"]),
    ({"datasets": {"imagenet": None}}, ["datasets.imagenet", "imagenette2-320", "synthetic"]),
]
THROUGH_SNAKEMAKE = [BAD_CONFIGS[0], BAD_CONFIGS[8]]  # a profile error and a study error


def bad_config(change: dict) -> dict:
    """A small valid study with ``change`` merged in (a section's keys over the study's)."""
    config = {"datasets": {"tiny": {"synthetic": {"size": 16}}}, "matrix": {"epochs": 1}}
    for section, value in change.items():
        if isinstance(value, dict) and isinstance(config.get(section), dict):
            config[section] = {**config[section], **value}
        else:
            config[section] = value
    return config


@pytest.mark.parametrize(("change", "expected"), BAD_CONFIGS, ids=lambda v: str(v)[:32])
def test_a_bad_config_names_key_and_allowed_values(change, expected):
    config = bad_config(change)
    with pytest.raises(ConfigError) as raised:  # rules/common.smk's two parse-time checks
        study = Study.from_config(config)
        ProfilePlan.from_config(config.get("profile"), study.cells["matrix"])
    message = str(raised.value)
    assert "\n" not in message, message
    for fragment in expected:
        assert fragment in message, (fragment, message)


@pytest.fixture(scope="module")
def config_workdir(tmp_path_factory):
    return copy_workflow(tmp_path_factory.mktemp("bad-config") / "wf")


@pytest.mark.parametrize(("change", "expected"), THROUGH_SNAKEMAKE, ids=lambda v: str(v)[:32])
def test_a_bad_config_ends_snakemake_in_its_first_line_before_any_job(
    config_workdir, change, expected
):
    path = write_config(config_workdir, bad_config(change))
    result = run_study(config_workdir, path, check=False)
    text = result.stdout + result.stderr
    assert result.returncode != 0
    line = error_first_line(text)
    for fragment in expected:
        assert fragment in line, (fragment, line)
    # the answer first and alone: no "ConfigError in file .../common.smk" and no traceback
    assert "common.smk" not in text and "Traceback" not in text and 'File "' not in text, text
    assert not (config_workdir / "results").exists(), "no job may run on a bad config"


def test_a_tab_in_config_yaml_names_the_file_and_line(config_workdir):
    work = config_workdir
    good = (work / "config.yaml").read_text()
    try:
        (work / "config.yaml").write_text(
            "datasets:\n  tiny: {synthetic: {size: 16}}\nmatrix:\n\tepochs: 1\n"
        )
        result = snakemake(work, "-n", "--cores", "1", check=False)
    finally:
        (work / "config.yaml").write_text(good)
    line = error_first_line(result.stdout + result.stderr)
    assert line.startswith("config.yaml line 4, column 1:") and "spaces only" in line


# -- where it runs --------------------------------------------------------------------------------


def test_a_path_with_spaces_and_a_workdir_elsewhere(tmp_path):
    """-s <workflow>/Snakefile -d <elsewhere>, both paths with spaces: a job runs there (the shell
    prefix quotes the package path), the results land there, the plan is complete."""
    flow = copy_workflow(tmp_path / "work flow")
    elsewhere = tmp_path / "results here"
    elsewhere.mkdir()
    config = write_config(elsewhere, STUDY)
    args = ["-s", str(flow / "Snakefile"), "-d", str(elsewhere), "--configfile", str(config),
            "--replace-workflow-config", "--cores", "2"]  # fmt: skip
    snakemake(elsewhere, *args, "results/data/tiny/dataset.json")
    info = json.loads((elsewhere / "results/data/tiny/dataset.json").read_text())
    assert info["train_images"] == STUDY["datasets"]["tiny"]["synthetic"]["train_images"]
    assert not (flow / "results").exists()
    assert planned_jobs(snakemake(elsewhere, *args, "-n", metrics(KEPT))) == {"cell_train": 1}
