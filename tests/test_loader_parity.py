"""Same learning: a ``cached`` cell ends within 2 top-1 points of its ``pil`` twin.

Run by ``.ci/run``'s learning stage (``NETTEBENCH_LEARNING=1``; docs/development.md), not in the
suite's 10 minutes.

Both cells train resnet18 for 6 epochs on the same learnable synthetic dataset with the same
seed; only the input pipeline differs (the store's full frames and batched crops against
ImageFolder + PIL + torchvision transforms). A cosine schedule from a modest learning rate lets
both settle, so the final top-1 measures what was learned rather than where a noisy last step
landed, and 1,024 training images make every batch full in both (the reference keeps an odd
last batch, ``cached`` drops it: with 1,000 images that one small full-lr step before every
validation alone moved a pil run by several points).

32 px crops of 40 px images, as the quick start trains. Measured on the 2-core AVX2-only EPYC
(others at 0-1 % of the CPUs by the cells' records) with this pair (then a scratch copy of it;
now ``python tests/bench_loader_parity.py --seeds 0,1,2``), seeds 0, 1 and 2: pil 89.5 / 90.2 /
92.4 %, cached 90.2 / 91.2 / 91.2 % (gaps +0.7, +1.0, -1.2 points), 173-179 s for the pair. The
same pair at 48 px crops of 56 px images (this test before stop 36), seed 0, same machine: pil
95.3 %, cached 96.7 % (gap +1.4), 230 s. So the gaps are alike and the pair costs a quarter
less; the "both learned" floor moved with the accuracy, from 90 % to 85 %, keeping its margin of
about 5 points, and the 2-point gap, the check itself, is unchanged.
Earlier, at 48 px on a quiet 2-core Xeon: pil 95.9 / 96.1 / 95.7 %, cached 96.5 / 96.9 / 96.3 %;
10 epochs at lr 0.05: 96.1 / 96.5 % seed 0; 6 epochs at 0.05 left seed 0's cached cell 7 points
behind, its early epochs too unsettled. The crop distribution itself is tested in
test_augment.py and test_data_cached.py.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from nettebench.datasets.synthetic import generate
from nettebench.training.cli import run_cell
from nettebench.vocabulary.cell import CellSpec
from tests.stages import learning_stage

MAX_GAP_POINTS = 2.0
LEARNED_TOP1 = 85.0  # chance: 10 %; measured 89.5-92.4 % (the docstring)
# The test's setting; tests/bench_loader_parity.py runs the same pair with others.
IMAGE_SIZE, DATA_SIZE, EPOCHS, SEED = 32, 40, 6, 0


def train_pair(
    work: Path, *, seed: int = SEED, image_size: int = IMAGE_SIZE, data_size: int = DATA_SIZE,
    epochs: int = EPOCHS,
) -> dict[str, float]:  # fmt: skip
    """Final top-1 of the ``pil`` and the ``cached`` cell, trained one after the other."""
    generate(work / "ds", name="parity", size=data_size, train_images=1024, val_images=512, seed=0)
    top1 = {}
    for loader in ("pil", "cached"):
        cell = CellSpec(
            dataset="parity", model="resnet18", batch_size=32, epochs=epochs, seed=seed,
            image_size=image_size, workers=1, lr=0.02, lr_schedule="cosine", loader=loader,
        )  # fmt: skip
        record = run_cell(
            cell, work / "ds" / "dataset.json", work / loader, threads=2, store_dir=work / "store"
        )
        assert record["status"] == "ok"
        epochs_csv = pd.read_csv(work / loader / "epochs.csv")
        print(loader, "top-1 by epoch:", epochs_csv["val_top1"].round(1).tolist())
        top1[loader] = record["summary"]["final_top1"]
    return top1


# Twelve epochs of resnet18 (about 150 CPU-s, a fifth of the suite's budget on 2 cores). Its two
# cells run in this process: it needs no worker and shares none.
@learning_stage("trains 12 epochs (~150 CPU-s)")
def test_cached_cell_learns_what_the_pil_cell_learns(tmp_path):
    top1 = train_pair(tmp_path)
    assert min(top1.values()) > LEARNED_TOP1, top1  # both learned
    assert abs(top1["cached"] - top1["pil"]) <= MAX_GAP_POINTS, top1
