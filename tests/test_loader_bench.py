"""The loader benchmark runs both loaders side by side and reports numbers (asserts no speed)."""

import json
import subprocess
import sys

from nettebench.datasets.synthetic import generate


def test_loader_bench_measures_both_loaders(tmp_path):
    generate(tmp_path / "ds", name="lb", size=48, train_images=40, val_images=10, seed=0)
    out = tmp_path / "bench.json"
    result = subprocess.run(
        [sys.executable, "-m", "nettebench.loader_bench", "--data", str(tmp_path / "ds"),
         "--workers", "0", "--batch-size", "8", "--image-size", "32", "--batches", "3",
         "--warmup-batches", "1", "--threads", "1", "--out", str(out)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "cached / pil:" in result.stdout
    results = json.loads(out.read_text())["results"]
    assert [r["loader"] for r in results] == ["pil", "cached"]
    assert all(r["img_s"] > 0 and r["batches"] == 3 for r in results)
    assert "not writable" not in result.stderr
