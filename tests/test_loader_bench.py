"""The loader benchmark runs both loaders side by side and reports numbers (asserts no speed)."""

import json
import subprocess
import sys

from nettebench.datasets.synthetic import generate


def test_loader_bench_measures_both_loaders(tmp_path):
    generate(tmp_path / "ds", name="lb", size=48, train_images=40, val_images=10, seed=0)
    out = tmp_path / "bench.json"
    result = subprocess.run(
        [sys.executable, "-m", "nettebench", "benchmarks", "loader", "--data", str(tmp_path / "ds"),
         "--workers", "0", "--batch-size", "8", "--image-size", "32", "--batches", "3",
         "--warmup-batches", "1", "--threads", "1", "--out", str(out)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "cached / pil:" in result.stdout
    results = json.loads(out.read_text())["results"]
    assert [r["loader"] for r in results] == ["pil", "cached"]
    assert all(r["img_s"] > 0 and r["batches"] == 3 for r in results)
    assert "not writable" not in result.stderr


def test_wallclock_runs_each_variant_as_a_process_and_tabulates_it(tmp_path):
    generate(tmp_path / "ds", name="wc", size=40, train_images=24, val_images=8, num_classes=4)
    out = tmp_path / "wallclock.json"
    result = subprocess.run(
        [sys.executable, "-m", "nettebench", "benchmarks", "wallclock",
         "--data", str(tmp_path / "ds"),
         "--out-dir", str(tmp_path / "runs"), "--json", str(out),
         "--variants", "loader=pil", "loader=cached,workers=1",
         "--", "--epochs", "2", "--batch-size", "8", "--image-size", "32", "--workers", "0",
         "--threads", "1", "--warmup-steps", "1"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert "store:" in result.stdout and "| loader=cached,workers=1 | ok |" in result.stdout
    rows = {row["variant"]: row for row in json.loads(out.read_text())["rows"]}
    assert set(rows) == {"loader=pil", "loader=cached,workers=1"}
    for row in rows.values():
        assert row["status"] == "ok" and row["epochs_run"] == 2
        # the process's wall clock holds the trainer's own wall_s, which holds the epochs
        assert row["process_s"] >= row["wall_s"] >= row["time_for_epochs_s"] > 0
    cached = json.loads(
        (tmp_path / "runs" / "loader~cached_workers~1" / "metrics.json").read_text()
    )
    assert cached["cell"]["loader"] == "cached" and cached["cell"]["workers"] == 1
