"""The resume checkpoint: streamed to disk, all-or-nothing."""

from __future__ import annotations

import tracemalloc

import pytest
import torch

from nettebench.training import checkpoint
from nettebench.training.checkpoint import CHECKPOINT_FILE


def test_a_checkpoint_streams_to_disk_without_a_copy_in_memory(tmp_path):
    """Saving 32 MB of weights allocates no 32 MB buffer on the Python heap (torch.save into
    a BytesIO, then getvalue(), made one or two)."""
    weights = torch.randn(8 * 2**20)
    tracemalloc.start()
    try:
        checkpoint.save(tmp_path, {"cell_id": "c", "trainer": {"w": weights}})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * 2**20, f"{peak / 2**20:.1f} MB on the heap while saving"
    assert torch.equal(checkpoint.load(tmp_path, "c")["trainer"]["w"], weights)


class _Unpicklable:
    def __reduce__(self):
        raise RuntimeError("cannot be saved")


def test_a_save_that_fails_midway_keeps_the_previous_checkpoint(tmp_path):
    checkpoint.save(tmp_path, {"cell_id": "c", "rows": [1]})
    with pytest.raises(RuntimeError, match="cannot be saved"):
        checkpoint.save(tmp_path, {"cell_id": "c", "rows": [1, 2], "bad": _Unpicklable()})
    assert checkpoint.load(tmp_path, "c")["rows"] == [1]
    assert [path.name for path in tmp_path.iterdir()] == [CHECKPOINT_FILE]  # no temporary left
