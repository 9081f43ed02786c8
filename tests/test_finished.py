"""finished.json: a finished cell's results come back byte for byte while nothing they depend on
changed, and only then."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from nettebench.datasets.synthetic import generate
from nettebench.study.cell import CellSpec
from nettebench.training import finished

CELL = CellSpec(
    dataset="fin", model="squeezenet1_1", batch_size=20, epochs=1, image_size=32, workers=0
)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("finished-data")
    generate(root, name="fin", size=40, train_images=40, val_images=20, seed=1)
    return root


def train(dataset, out_dir, *extra, env=None):
    return subprocess.run(
        [sys.executable, "-m", "nettebench.training", "--data", str(dataset / "dataset.json"),
         "--out-dir", str(out_dir), "--threads", "2", *CELL.cli_args(), *extra],
        capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=600,
    )  # fmt: skip


def stamp(dataset, **changes):
    values = {"kind": "matrix", "data": dataset / "dataset.json", "warmup_steps": 5}
    values["store_dir"] = None
    return finished.fingerprint(changes.pop("cell", CELL), **{**values, **changes})


def test_a_finished_cell_is_restored_not_trained_and_retrain_trains(dataset, tmp_path):
    out = tmp_path / "cell"
    first = train(dataset, out)
    assert first.returncode == 0, first.stderr
    record = json.loads((out / finished.FINISHED_FILE).read_text())
    results = {name: (out / name).read_bytes() for name in finished.RESULT_FILES}
    assert {name: text.encode() for name, text in record["files"].items()} == results
    assert not (out / "checkpoint.pt").exists()

    for name in finished.RESULT_FILES:  # what Snakemake does to an unrecorded job's outputs
        (out / name).unlink()
    again = train(dataset, out)
    assert again.returncode == 0 and again.stderr.startswith("restored: " + CELL.path())
    assert "epoch 1/1" not in again.stderr
    assert {name: (out / name).read_bytes() for name in finished.RESULT_FILES} == results

    forced = train(dataset, out, env={finished.RETRAIN_ENV: "1"})
    assert forced.returncode == 0 and "epoch 1/1" in forced.stderr, forced.stderr
    assert not forced.stderr.startswith("restored")


def test_the_fingerprint_follows_what_the_result_depends_on(dataset, tmp_path):
    base = stamp(dataset)
    assert stamp(dataset) == base  # stable
    assert stamp(dataset, cell=CellSpec(**{**CELL.as_dict(), "seed": 1})) != base
    assert stamp(dataset, kind="cpu_baseline") != base
    assert stamp(dataset, warmup_steps=3) != base
    copy = tmp_path / "data"
    copy.mkdir()
    info = json.loads((dataset / "dataset.json").read_text())
    info["root"] = str(dataset / info["root"])
    (copy / "dataset.json").write_text(json.dumps(info))
    assert stamp(dataset, data=copy / "dataset.json")["data"] != base["data"]
    assert set(base) == {"cell_id", "kind", "warmup_steps", "data", "store", "builds", "code",
                         "versions"}  # fmt: skip
    assert base["versions"]["torch"]


def test_a_record_that_does_not_match_restores_nothing(dataset, tmp_path):
    base = stamp(dataset)
    finished.write(tmp_path, base, {"metrics.json": "{}", "epochs.csv": "epoch\n"})
    assert not finished.restore(tmp_path, {**base, "code": "edited"})
    assert not (tmp_path / "metrics.json").exists()
    assert finished.restore(tmp_path, base)
    assert (tmp_path / "metrics.json").read_text() == "{}"
    (tmp_path / finished.FINISHED_FILE).write_text("not json")
    assert not finished.restore(tmp_path, base)
    assert not finished.restore(tmp_path / "nowhere", base)


def test_retrain_is_asked_by_the_option_or_the_environment(monkeypatch):
    monkeypatch.delenv(finished.RETRAIN_ENV, raising=False)
    assert not finished.retrain_requested(False)
    assert finished.retrain_requested(True)
    monkeypatch.setenv(finished.RETRAIN_ENV, "1")
    assert finished.retrain_requested(False)
    monkeypatch.setenv(finished.RETRAIN_ENV, "0")
    assert not finished.retrain_requested(False)
