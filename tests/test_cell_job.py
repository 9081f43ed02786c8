"""A matrix cell's job (python -m nettebench benchmarks cell-job): the ceiling measured right
after the cell's epochs, in the same process, so cell and ceiling share machine, device and
moment."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from PIL import Image

from nettebench.benchmarks import ceiling as bench
from nettebench.records import files as records
from nettebench.vocabulary import outputs
from nettebench.vocabulary.cell import CellSpec


@pytest.fixture(scope="module")
def tiny_tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny")
    for split, count in (("train", 8), ("val", 4)):
        for index, colour in enumerate([(200, 30, 30), (30, 200, 30), (30, 30, 200)]):
            folder = root / split / f"class{index}"
            folder.mkdir(parents=True)
            for i in range(count):
                Image.new("RGB", (40, 36), colour).save(folder / f"{i}.JPEG")
    return root


def _run_job(tiny_tree, out, steps=3, **cell):
    spec = CellSpec(
        **{
            "dataset": "tiny",
            "batch_size": 6,
            "epochs": 2,
            "image_size": 32,
            "workers": 0,
            **cell,
        }
    )
    ceiling = out / outputs.CEILING_FILE
    launched = time.time()
    job = subprocess.run(
        [
            sys.executable,
            "-m",
            "nettebench",
            "benchmarks",
            "cell-job",
            "--data",
            str(tiny_tree),
            "--out-dir",
            str(out),
            "--ceiling",
            str(ceiling),
            "--threads",
            "1",
            "--ceiling-steps",
            str(steps),
            "--ceiling-warmup-steps",
            "1",
            *spec.cli_args(),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    (out / "job.log").write_text(job.stdout + job.stderr)
    metrics = records.read_metrics(out / outputs.METRICS_FILE)
    return metrics, json.loads(ceiling.read_text()), ceiling, launched


def test_the_ceiling_follows_the_epochs_in_the_same_job(tiny_tree, tmp_path):
    # many steps: the CPU cap (a tenth of the epochs' time, at least 1 s) ends them
    metrics, ceiling, path, launched = _run_job(tiny_tree, tmp_path / "cell", steps=10_000)
    assert metrics["status"] == ceiling["status"] == "ok"
    assert ceiling["context"] == "cell job"
    assert ceiling["cell_id"] == metrics["cell_id"]  # the cell's own identity, dataset included
    assert ceiling["device"] == metrics["device"]  # same device and threads
    assert ceiling["environment"] == metrics["environment"]
    # right after the epochs, and written before the record (so a crash leaves no half job)
    assert 0 <= ceiling["conditions"]["started_at"] - metrics["conditions"]["ended_at"] < 30
    assert path.stat().st_mtime_ns <= (path.parent / outputs.METRICS_FILE).stat().st_mtime_ns
    # the cell's wall time (from its process start, after `launched`; /proc gives that start
    # to the boot time's whole second) ends before the ceiling's steps, which take at least the
    # cap's floor and at most a tenth of the epochs' timing window (or the floor) plus a step,
    # unless the cap came before the ceiling's floor of timed steps, which then ended them
    epochs_s = metrics["conditions"]["wall_s"]
    cap = max(1.0, epochs_s / 10)
    slowest_step = ceiling["step_ms_p90"] / 1000  # of the timed steps; the last one may be slower
    timed = ceiling["conditions"]["wall_s"]
    assert timed >= 1.0
    # (2 s for the last step and the window's closing scan of /proc on a loaded machine)
    assert ceiling["steps"] == bench.MIN_STEPS or timed <= cap + 3 * slowest_step + 2.0
    assert metrics["summary"]["wall_s"] <= ceiling["conditions"]["started_at"] - launched + 1.0
    assert ceiling["img_s"] > 0 and bench.MIN_STEPS <= ceiling["steps"] < 10_000
    # the log names each number: the epochs' training img/s, then the ceiling's
    log = (tmp_path / "cell" / "job.log").read_text()
    epoch_lines = [line for line in log.splitlines() if line.startswith("epoch ")]
    assert len(epoch_lines) == 2 and all(" training " in line for line in epoch_lines), log
    assert f"compute ceiling {ceiling['img_s']:,.0f} img/s (no input pipeline;" in log


def test_a_cell_the_device_cannot_run_gets_an_unsupported_ceiling(tiny_tree, tmp_path):
    metrics, ceiling, _, _ = _run_job(tiny_tree, tmp_path / "cell", precision="O1")
    assert metrics["status"] == ceiling["status"] == "unsupported"
    assert metrics["conditions"] is None  # no epoch ran
