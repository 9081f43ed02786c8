"""A cell killed mid-epoch resumes from its last checkpoint and ends exactly where an
uninterrupted run ends (fixed seed, CPU)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from nettebench.datasets.synthetic import generate
from nettebench.study import outputs
from nettebench.study.cell import CellSpec
from nettebench.training.checkpoint import CHECKPOINT_FILE

# Long enough epochs (~1 s on 2 cores) that a poll finds the run inside epoch 2.
CELL = CellSpec(
    dataset="resume", model="resnet18", batch_size=8, epochs=3, image_size=48, workers=1, lr=0.05
)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("resume-data")
    generate(root, name="resume", size=56, train_images=240, val_images=40, seed=3)
    return root


def train_command(dataset, out_dir):
    return [
        sys.executable, "-m", "nettebench.training", "--data", str(dataset), "--out-dir",
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


def test_sigkill_mid_epoch_then_resume_equals_an_uninterrupted_run(dataset, tmp_path):
    straight = tmp_path / "straight"
    subprocess.run(train_command(dataset, straight), check=True, capture_output=True)

    killed = tmp_path / "killed"
    process = subprocess.Popen(
        train_command(dataset, killed), stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    deadline = time.time() + 120
    while not (killed / CHECKPOINT_FILE).exists():
        assert process.poll() is None, "the run ended before its first checkpoint"
        assert time.time() < deadline
        time.sleep(0.01)
    time.sleep(0.3)  # well inside epoch 2
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert not (killed / outputs.METRICS_FILE).exists(), "killed before the end"

    resumed = subprocess.run(train_command(dataset, killed), capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resumed from the checkpoint after epoch" in resumed.stdout + resumed.stderr

    record_a, learning_a = final_metrics(straight)
    record_b, learning_b = final_metrics(killed)
    assert learning_b == learning_a  # every epoch's loss, accuracy and lr, to the last digit
    for key in ("final_top1", "final_top5", "final_train_loss", "best_top1"):
        assert record_b["summary"][key] == record_a["summary"][key]
    assert record_a["summary"]["resumed_from_epoch"] is None
    assert record_b["summary"]["resumed_from_epoch"] in (1, 2)
    assert not (killed / CHECKPOINT_FILE).exists(), "checkpoint removed once results exist"


def test_checkpoint_of_another_cell_is_ignored(dataset, tmp_path):
    from nettebench.training import checkpoint

    checkpoint.save(tmp_path, {"cell_id": "someone-else", "rows": [], "batch_size": 8})
    other = CELL.__class__(**{**CELL.as_dict(), "epochs": 1})
    result = subprocess.run(
        [
            sys.executable, "-m", "nettebench.training", "--data", str(dataset), "--out-dir",
            str(tmp_path), "--threads", "1", *other.cli_args(),
        ],  # fmt: skip
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "resumed" not in result.stdout + result.stderr
    record = json.loads((tmp_path / outputs.METRICS_FILE).read_text())
    assert record["summary"]["resumed_from_epoch"] is None


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
