"""One rule for equal logits: top-1, top-5 and "prediction changed" rank classes alike.

bf16 logits are often equal. ``topk`` guarantees no order among equal values and ``argmax``
takes the first, so at 2b03d34 a bf16 variant had 0.0 % of its predictions changed (argmax)
while its top-1 moved by +0.62 points (topk), and the front page quoted the +0.62.
"""

from __future__ import annotations

import json
import re

import pytest
import torch

from nettebench.datasets.synthetic import generate
from nettebench.inference import cli
from nettebench.inference.model import InferenceModel
from nettebench.report import inference_tables
from nettebench.training import checkpoint
from nettebench.training.loop import PADDING_TARGET, predicted_classes, topk_correct
from tests.test_inference_report import record as inference_record

CPU = torch.device("cpu")
CLASSES = 10
VAL_IMAGES = 11  # labels are index % 10: class 0 has two images, class 9 one
NEAR_ONE = 1 - 2**-10  # below 1 in fp32; bf16 (8 significant bits) rounds it to 1


def _by_hand(row: list[float]) -> list[int]:
    """Classes by descending value, equal values by ascending class index (plain Python)."""
    return sorted(range(len(row)), key=lambda c: (-row[c], c))


def test_equal_logits_rank_by_class_index_and_top1_is_argmax():
    logits = torch.tensor(
        [[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0], [0.0, 1.0, 0.0, 1.0], [5.0, 0.0, 0.0, 5.0]]
    )
    assert predicted_classes(logits, 4).tolist() == [
        [1, 2, 0, 3],
        [0, 1, 2, 3],
        [1, 3, 0, 2],
        [0, 3, 1, 2],
    ]
    assert predicted_classes(logits).tolist() == [[1], [0], [1], [0]]
    assert predicted_classes(logits, 9).shape == (4, 4)  # k capped at the classes


def test_random_bf16_logits_rank_as_by_hand_and_top1_is_argmax():
    torch.manual_seed(0)
    logits = (torch.randn(64, 12) * 4).round() / 4  # many exact ties
    logits = logits.bfloat16().float()
    found = predicted_classes(logits, 5).tolist()
    expected = [_by_hand(row)[:5] for row in logits.tolist()]
    assert found == expected
    assert sum(len(set(row)) < len(row) for row in logits.tolist()) > 30  # the ties are there
    assert [row[0] for row in found] == logits.argmax(1).tolist()


def test_topk_correct_counts_a_tie_for_the_lower_class():
    # Row 0: classes 1 and 2 tie first; target 2 is second (a top-1 miss, a top-2 hit).
    # Row 1: the same logits, target 1: a top-1 hit. Row 2: classes 0-4 tie at 0 below
    # class 5, so the top-5 are 5, 0, 1, 2, 3 and target 4 is sixth. Row 3: padding.
    logits = torch.tensor(
        [
            [0.0, 2.0, 2.0, 0.0, 0.0, 0.0],
            [0.0, 2.0, 2.0, 0.0, 0.0, 0.0],
            [0.0, 0.0, 0.0, 0.0, 0.0, 1.0],
            [9.0, 9.0, 9.0, 9.0, 9.0, 9.0],
        ]
    )
    targets = torch.tensor([2, 1, 4, PADDING_TARGET])
    assert topk_correct(logits, targets, ks=(1, 2, 5)).tolist() == [1.0, 2.0, 2.0]


@pytest.fixture(scope="module")
def tied_weights(tmp_path_factory):
    """A dataset of 11 images in 10 classes, and resnet18 weights whose head answers the same
    logits for every image: class 0 at 1, class 9 at NEAR_ONE, the rest 0. In fp32 class 0
    wins; in bf16 classes 0 and 9 tie."""
    out = tmp_path_factory.mktemp("tie-data")
    generate(out, name="tiny", size=40, train_images=CLASSES, val_images=VAL_IMAGES,
             num_classes=CLASSES, jobs=1, progress=False)  # fmt: skip
    torch.manual_seed(0)
    model = InferenceModel("resnet18", CLASSES, "fp32", CPU, channels_last=False).model
    with torch.no_grad():
        model.fc.weight.zero_()
        model.fc.bias.zero_()
        model.fc.bias[0] = 1.0
        model.fc.bias[9] = NEAR_ONE
    assert NEAR_ONE < 1 and torch.tensor(NEAR_ONE).bfloat16().item() == 1.0
    weights = checkpoint.save_weights(out / "weights.pt", model, "abc")
    return out / "dataset.json", weights


def test_a_bf16_tie_changes_no_prediction_and_no_top1_and_the_front_page_says_so(
    tied_weights, tmp_path
):
    data, weights = tied_weights
    out = tmp_path / "accuracy.json"
    code = cli.main(
        ["accuracy", "--data", str(data), "--weights", str(weights), "--out", str(out),
         "--model", "resnet18", "--image-size", "32", "--device", "cpu", "--batch-size", "4",
         "--workers", "0", "--variants", "fp32:0:0", "bf16:0:0"]
    )  # fmt: skip
    assert code == 0
    rows = {row["precision"]: row for row in json.loads(out.read_text())["rows"]}
    # By hand: every image is predicted class 0 in both (fp32: 1 > NEAR_ONE; bf16: the tie goes
    # to the lower class), so 2 of 11 are right; the top-5 are 0, 9, 1, 2, 3 in both, which
    # hold 2 + 1 + 1 + 1 + 1 = 6 of the 11 images.
    assert rows["fp32"]["top1"] == pytest.approx(100 * 2 / 11)
    assert rows["bf16"]["top1"] == pytest.approx(100 * 2 / 11)
    assert rows["bf16"]["changed_share"] == 0.0
    assert rows["bf16"]["top1_diff"] == 0.0
    assert rows["fp32"]["top5"] == rows["bf16"]["top5"] == pytest.approx(100 * 6 / 11)

    cell = tmp_path / "inference.json"
    cell.write_text(json.dumps(inference_record()))
    written = inference_tables.write([str(cell)], [str(out)], tmp_path / "tables")
    markdown = written["accuracy_table"].read_text()
    line = next(row for row in markdown.splitlines() if "| bf16" in row)
    cols = [col.strip() for col in line.strip("|").split("|")]
    table_top1, table_changed = cols[6], cols[8]  # Δ top-1 pp, changed %
    assert (table_top1, table_changed) == ("+0.00", "0.0")
    front = written["headline"].read_text()
    found = re.search(r"top-1 change from fp32 is (\S+) points, (\S+) % of predictions", front)
    assert found and found.groups() == (table_top1, table_changed), front
