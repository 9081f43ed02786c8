"""steps.csv and the pyperf files, written from records the factory builds, read by pyperf."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import pytest
from record_factory import make_cell

from nettebench.records import files, spread
from nettebench.report import steps_export

pytest.importorskip("pyperf")


def with_steps(metrics, step_ms_by_epoch):
    """Give a factory cell's epochs.csv the steady steps' times, as the trainer writes them."""
    cell_dir = metrics.parent
    with open(cell_dir / files.EPOCHS_FILE, newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row, step_ms in zip(rows, step_ms_by_epoch, strict=True):
        row["step_ms"] = spread.step_ms_text(ms / 1000 for ms in step_ms)
        row["train_images"] = 32 * len(step_ms)
    files.write_epochs(cell_dir, rows)
    return metrics


@pytest.fixture
def exported(tmp_path):
    """Two 2-epoch CPU cells of 6 steps an epoch (5 warm-up steps in the first: 1 steady)."""
    made = {}
    for loader, base in (("pil", 100.0), ("cached", 80.0)):
        metrics = make_cell(
            tmp_path / "results", kind="cpu_baseline", epochs=2, batch_size=32,
            extra_cell={"loader": loader},
            summary_extra={"steps_per_epoch": 6, "steps_timed": 6, "batch_size_used": 32},
        )  # fmt: skip
        first, later = [base + 1], [base + d for d in (0, 2, -1, 1, 3)]
        made[loader] = with_steps(metrics, [first, later])
    steps, pyperf_dir = tmp_path / "steps.csv", tmp_path / "pyperf"
    lines = list(steps_export.export(made.values(), steps, pyperf_dir))
    return made, steps, pyperf_dir, lines


def test_steps_csv_has_a_row_per_step_with_its_phase(exported):
    made, steps, _, _ = exported
    rows = list(csv.DictReader(steps.open()))
    assert tuple(rows[0]) == steps_export.STEPS_COLUMNS
    pil = [r for r in rows if "loader~pil" in r["cell"]]
    assert [(r["epoch"], r["step"], r["phase"]) for r in pil[:7]] == [
        *(("1", str(s), "warmup") for s in range(1, 6)),
        ("1", "6", "steady"),
        ("2", "1", "warmup"),
    ]
    assert pil[5]["seconds"] == "0.101000" and pil[5]["images"] == "32"
    assert pil[0]["seconds"] == "" and len(pil) == 12
    record = json.loads(made["pil"].read_text())
    assert {r["cell_id"] for r in pil} == {record["cell_id"]}
    assert pil[0]["cell"].startswith("cpu_baseline/imagenette2-320/model~") and pil[0][
        "cell"
    ].endswith("loader~pil")


def test_pyperf_reads_the_files(exported):
    _, _, pyperf_dir, lines = exported
    pil, cached = (next(pyperf_dir.rglob(f"*loader~{n}.json")) for n in ("pil", "cached"))
    assert all(": 6 steady steps of 12" in line for line in lines), lines
    stats = subprocess.run(
        [sys.executable, "-m", "pyperf", "stats", str(pil)], capture_output=True, text=True
    )
    assert stats.returncode == 0, stats.stderr
    assert "Number of run with values: 2" in stats.stdout, stats.stdout  # one run an epoch
    assert "Median +- MAD" in stats.stdout, stats.stdout
    compare = subprocess.run(
        [sys.executable, "-m", "pyperf", "compare_to", str(pil), str(cached)],
        capture_output=True,
        text=True,
    )
    assert compare.returncode == 0, compare.stderr
    assert "faster" in compare.stdout, compare.stdout


def test_a_cell_that_did_not_train_gets_no_file(tmp_path):
    metrics = make_cell(tmp_path / "results", status="oom")
    lines = list(steps_export.export([metrics], tmp_path / "s.csv", tmp_path / "p"))
    assert lines[0].startswith("skipped") and not list((tmp_path / "p").iterdir())
    assert (tmp_path / "s.csv").read_text().strip() == ",".join(steps_export.STEPS_COLUMNS)


def test_images_per_step_keep_the_epochs_total():
    assert steps_export.step_images(100, 4, 32) == [32, 32, 32, 4]
    assert steps_export.step_images(96, 3, 32) == [32, 32, 32]
    assert steps_export.step_images(90, 3, None) == [30, 30, 30]
