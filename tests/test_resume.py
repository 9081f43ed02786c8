"""A cell killed mid-epoch resumes from its last checkpoint and ends exactly where an
uninterrupted run ends (fixed seed, CPU)."""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import torch

import nettebench
from nettebench.datasets.synthetic import generate
from nettebench.records import files as records
from nettebench.training.checkpoint import CHECKPOINT_FILE
from nettebench.vocabulary import outputs
from nettebench.vocabulary.cell import CellSpec
from tests.stages import learning_stage

# Long enough epochs (20 steps, ~2 s on 2 cores quiet, twice that loaded) that a run killed
# 0.3 s after its first checkpoint is well inside epoch 2.
CELL = CellSpec(
    dataset="resume", model="resnet18", batch_size=8, epochs=3, image_size=32, workers=1, lr=0.05
)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("resume-data")
    generate(root, name="resume", size=40, train_images=160, val_images=40, seed=3)
    return root


def train_command(dataset, out_dir):
    return [
        sys.executable, "-m", "nettebench", "training", "--data", str(dataset), "--out-dir",
        str(out_dir), "--threads", "1", *CELL.cli_args(),
    ]  # fmt: skip


def final_metrics(out_dir):
    record = json.loads((out_dir / outputs.METRICS_FILE).read_text())
    epochs = (out_dir / outputs.EPOCHS_FILE).read_text().splitlines()
    keep = ("train_loss", "val_loss", "val_top1", "val_top5", "lr")
    header = epochs[0].split(",")
    learning = [
        {k: v for k, v in zip(header, line.split(","), strict=True) if k in keep}
        for line in epochs[1:]
    ]
    return record, learning


def csv_rows(out_dir):
    with (out_dir / outputs.EPOCHS_FILE).open() as handle:
        return list(csv.DictReader(handle))


def kill_after_a_checkpoint(dataset, out_dir):
    """Start the cell, SIGKILL it well inside the epoch after its first checkpoint; the
    checkpoint's rows as they stood at the kill."""
    process = subprocess.Popen(
        train_command(dataset, out_dir), stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    deadline = time.time() + 120
    while not (out_dir / CHECKPOINT_FILE).exists():
        assert process.poll() is None, "the run ended before its first checkpoint"
        assert time.time() < deadline
        time.sleep(0.01)
    time.sleep(0.3)  # well inside epoch 2
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert not (out_dir / outputs.METRICS_FILE).exists(), "killed before the end"
    return torch.load(out_dir / CHECKPOINT_FILE, weights_only=False)["rows"]


@learning_stage("trains a cell straight and again killed and resumed (~35 s)")
def test_sigkill_mid_epoch_then_resume_equals_an_uninterrupted_run(dataset, tmp_path):
    """Also: the uninterrupted run starts beside another cell's checkpoint, which it discards
    (a checkpoint is resumed only by the cell whose key it holds)."""
    from nettebench.training import checkpoint

    straight = tmp_path / "straight"
    straight.mkdir()
    checkpoint.save(straight, {"key": {"cell": "someone-else"}, "rows": [], "batch_size": 8})
    checkpoint.wait()  # written in the background
    alone = subprocess.run(train_command(dataset, straight), capture_output=True, text=True)
    assert alone.returncode == 0, alone.stderr[-3000:]
    assert "discarded the checkpoint" in alone.stderr
    assert "resumed" not in alone.stdout + alone.stderr

    killed = tmp_path / "killed"
    saved_rows = kill_after_a_checkpoint(dataset, killed)
    earlier_s = torch.load(killed / CHECKPOINT_FILE, weights_only=False)["wall_s"]
    done = len(saved_rows)
    began = time.time()
    resumed = subprocess.run(train_command(dataset, killed), capture_output=True, text=True)
    resumed_s = time.time() - began  # this process's life, and a little more
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    log = resumed.stdout + resumed.stderr
    assert f"resumed from the checkpoint after epoch {done}" in log
    # a resume, not a retrain: this process trained no epoch the checkpoint holds ...
    assert all(f"epoch {n}/{CELL.epochs} " not in log for n in range(1, done + 1)), log
    assert f"epoch {done + 1}/{CELL.epochs} " in log
    # ... and the first rows of epochs.csv are the checkpoint's, timings and all
    with tempfile.TemporaryDirectory() as scratch:
        records.write_epochs(scratch, saved_rows)
        kept = (Path(scratch) / outputs.EPOCHS_FILE).read_text().splitlines()
    assert (killed / outputs.EPOCHS_FILE).read_text().splitlines()[: done + 1] == kept

    record_a, learning_a = final_metrics(straight)
    record_b, learning_b = final_metrics(killed)
    assert learning_b == learning_a  # every epoch's loss, accuracy and lr, to the last digit
    for key in ("final_top1", "final_top5", "final_train_loss", "best_top1"):
        assert record_b["summary"][key] == record_a["summary"][key]
    assert record_a["summary"]["resumed_from_epoch"] is None
    assert record_b["summary"]["resumed_from_epoch"] == done
    # the cell's time: the killed process's until its checkpoint, then the resumed one's,
    # which trained the later epochs (epochs.csv) at least
    later_s = sum(float(row["wall_s"]) for row in csv_rows(killed)[done:])
    assert earlier_s + later_s <= record_b["summary"]["wall_s"] <= earlier_s + resumed_s
    assert not (killed / CHECKPOINT_FILE).exists(), "checkpoint removed once results exist"


def test_a_code_change_after_an_interruption_trains_from_scratch(dataset, tmp_path):
    """Reported: a one-line change to training/loop.py after a SIGINT, and the rerun resumed
    the old epochs. The trainer runs from a copy of the package, edited between the runs."""
    package = tmp_path / "scripts"
    shutil.copytree(Path(nettebench.__file__).parent, package / "nettebench",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(package)}
    out = tmp_path / "cell"
    cell = CellSpec(**{**CELL.as_dict(), "max_steps": 3})
    command = [*train_command(dataset, out)[: -len(CELL.cli_args())], *cell.cli_args()]
    process = subprocess.run(
        [*command[:1], "-c", INTERRUPT_AFTER_EPOCH_1, *command[4:]],  # less -m nettebench training
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert process.returncode == 130, process.stderr[-3000:]
    assert (out / CHECKPOINT_FILE).exists()
    loop = package / "nettebench" / "training" / "loop.py"
    loop.write_text(loop.read_text() + "\n# a one-line change\n")
    again = subprocess.run(command, capture_output=True, text=True, env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    log = again.stdout + again.stderr
    assert "discarded the checkpoint" in log and "no longer matches (code changed)" in log
    assert "resumed" not in log and f"epoch 1/{CELL.epochs} " in log
    record = json.loads((out / outputs.METRICS_FILE).read_text())
    assert record["summary"]["resumed_from_epoch"] is None


# The trainer, stopped by a SIGINT to itself as its first checkpoint is saved.
INTERRUPT_AFTER_EPOCH_1 = """
import os, signal, sys
from nettebench.training import checkpoint, cli
real_save = checkpoint.save
def save(out_dir, state):
    path = real_save(out_dir, state)
    os.kill(os.getpid(), signal.SIGINT)
    return path
checkpoint.save = save
sys.argv[0] = "nettebench.training"
sys.exit(cli.main(sys.argv[1:]))
"""


def test_no_checkpoint_is_written_after_the_last_epoch(dataset, tmp_path, monkeypatch):
    """A checkpoint after every epoch but the last: the last one's state would be written,
    fsynced and deleted moments later, when the results are written."""
    from nettebench.training import checkpoint
    from nettebench.training.cli import run_cell

    saved = []
    real_save = checkpoint.save

    def save(out_dir, state):
        saved.append(len(state["rows"]))
        return real_save(out_dir, state)

    monkeypatch.setattr(checkpoint, "save", save)
    cell = CellSpec(**{**CELL.as_dict(), "max_steps": 2})
    record = run_cell(cell, dataset, tmp_path, threads=1)
    assert record["status"] == "ok" and record["summary"]["epochs_run"] == 3
    assert saved == [1, 2]  # after epochs 1 and 2 of 3
    assert not (tmp_path / CHECKPOINT_FILE).exists()
