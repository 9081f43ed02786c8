"""Validation under max_steps: a fixed, class-balanced sample, the same for both loaders
(data/val_sample.py and the trainer's build_loaders)."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from nettebench.data import val_sample
from nettebench.datasets.info import load_data_root
from nettebench.datasets.synthetic import generate
from nettebench.training.fit import build_loaders
from nettebench.vocabulary.cell import CellSpec


def test_balanced_indices_take_the_classes_in_turn():
    labels = [0] * 5 + [1] * 5 + [2] * 2  # class-ordered, as ImageFolder reads them
    assert val_sample.balanced_indices(labels, 8) == [0, 5, 10, 1, 6, 11, 2, 7]
    # a small class runs out: the others go on in turn
    assert val_sample.balanced_indices(labels, 10) == [0, 5, 10, 1, 6, 11, 2, 7, 3, 8]
    assert sorted(val_sample.balanced_indices(labels, 99)) == list(range(12))
    assert val_sample.sample_size(None, 32) is None and val_sample.sample_size(3, 32) == 96


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("balanced")
    generate(root, name="balanced", size=24, train_images=40, val_images=40, seed=0)
    return root


def _val_labels(cell, dataset, store_dir):
    data_root = load_data_root(dataset / "dataset.json")
    loaders = build_loaders(
        cell, data_root, dataset / "dataset.json", 8, torch.device("cpu"), store_dir
    )
    labels = [int(t) for _, targets in loaders.val for t in targets]
    return labels, loaders


@pytest.mark.parametrize("loader", ["pil", "cached"])
def test_max_steps_validation_reads_a_balanced_sample_with_both_loaders(loader, dataset, tmp_path):
    common = dict(dataset="balanced", model="resnet18", batch_size=8, image_size=16, workers=0)
    full, _ = _val_labels(CellSpec(**common, loader=loader), dataset, tmp_path / "store")
    assert full == sorted(full)  # the full set is class-ordered: its first batches are class 0
    cell = CellSpec(**common, loader=loader, max_steps=2)
    labels, loaders = _val_labels(cell, dataset, tmp_path / "store")
    counts = Counter(labels)
    assert len(labels) == 16 and len(counts) == len(set(full))
    assert max(counts.values()) - min(counts.values()) <= 1
    assert loaders.val_steps_full == 5  # 40 images / 8: validation time extrapolates to it
    again, _ = _val_labels(cell, dataset, tmp_path / "store")
    assert again == labels  # fixed: the same images every time


def test_both_loaders_sample_the_same_images(dataset, tmp_path):
    common = dict(dataset="balanced", model="resnet18", batch_size=8, image_size=16, workers=0)
    pil, _ = _val_labels(CellSpec(**common, max_steps=2), dataset, tmp_path / "s")
    cached, _ = _val_labels(
        CellSpec(**common, max_steps=2, loader="cached"), dataset, tmp_path / "s"
    )
    assert pil == cached
