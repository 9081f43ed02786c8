"""The resume checkpoint: streamed to disk, all-or-nothing, resumed only under its key."""

from __future__ import annotations

import threading
import tracemalloc

import pytest
import torch

from nettebench.training import checkpoint
from nettebench.training.checkpoint import CHECKPOINT_FILE

KEY = {"key_version": 2, "cell": "c", "code": "a"}


def test_a_checkpoint_streams_to_disk_without_a_copy_in_memory(tmp_path):
    """Saving 32 MB of weights allocates no 32 MB buffer on the Python heap (torch.save into
    a BytesIO, then getvalue(), made one or two)."""
    weights = torch.randn(8 * 2**20)
    tracemalloc.start()
    try:
        checkpoint.save(tmp_path, {"key": KEY, "trainer": {"w": weights}})
        checkpoint.wait()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * 2**20, f"{peak / 2**20:.1f} MB on the heap while saving"
    assert torch.equal(checkpoint.load(tmp_path, KEY)["trainer"]["w"], weights)


class _Unpicklable:
    def __reduce__(self):
        raise RuntimeError("cannot be saved")


def test_a_save_that_fails_midway_keeps_the_previous_checkpoint(tmp_path):
    checkpoint.save(tmp_path, {"key": KEY, "rows": [1]})
    checkpoint.save(tmp_path, {"key": KEY, "rows": [1, 2], "bad": _Unpicklable()})
    with pytest.raises(RuntimeError, match="cannot be saved"):
        checkpoint.wait()
    assert checkpoint.load(tmp_path, KEY)["rows"] == [1]
    assert [path.name for path in tmp_path.iterdir()] == [CHECKPOINT_FILE]  # no temporary left


def test_a_checkpoint_without_a_key_is_refused(tmp_path):
    with pytest.raises(ValueError, match="key"):
        checkpoint.save(tmp_path, {"cell_id": "c", "rows": []})


def test_a_checkpoint_of_another_key_is_discarded_saying_which_part_changed(tmp_path):
    checkpoint.save(tmp_path, {"key": KEY, "rows": [1]})
    assert checkpoint.load(tmp_path, {**KEY, "code": "b"}) is None
    assert checkpoint.discard_stale(tmp_path, KEY, retrain=False) == []  # its own: kept
    assert checkpoint.load(tmp_path, KEY)["rows"] == [1]
    (said,) = checkpoint.discard_stale(tmp_path, {**KEY, "code": "b"}, retrain=False)
    assert said == (
        f"discarded the checkpoint {tmp_path / CHECKPOINT_FILE}: it no longer matches "
        "(code changed); training from scratch"
    )
    assert not (tmp_path / CHECKPOINT_FILE).exists()


def test_retrain_discards_even_a_matching_checkpoint(tmp_path):
    checkpoint.save(tmp_path, {"key": KEY, "rows": [1]})
    (said,) = checkpoint.discard_stale(tmp_path, KEY, retrain=True)
    assert said == (
        f"discarded the checkpoint {tmp_path / CHECKPOINT_FILE}: asked to retrain (--retrain); "
        "training from scratch"
    )
    assert not (tmp_path / CHECKPOINT_FILE).exists()


def test_an_unreadable_checkpoint_is_discarded(tmp_path):
    (tmp_path / CHECKPOINT_FILE).write_bytes(b"torn")
    (said,) = checkpoint.discard_stale(tmp_path, KEY, retrain=False)
    assert "it is unreadable" in said and not (tmp_path / CHECKPOINT_FILE).exists()


def test_the_temporary_file_of_a_killed_save_is_removed_by_the_next_run(tmp_path):
    checkpoint.save(tmp_path, {"key": KEY, "rows": [1]})
    left = tmp_path / f".{CHECKPOINT_FILE}.4242.deadbeef.tmp"  # what open_atomic names it
    left.write_bytes(b"half a checkpoint")
    other = tmp_path / ".metrics.json.4242.deadbeef.tmp"  # not the checkpoint's to remove
    other.write_bytes(b"")
    (said,) = checkpoint.discard_stale(tmp_path, KEY, retrain=False)
    assert (
        said == f"removed 1 temporary file(s) of a checkpoint save that was cut short ({left.name})"
    )
    assert not left.exists() and other.exists()
    assert checkpoint.load(tmp_path, KEY)["rows"] == [1]


def test_the_pattern_is_the_name_open_atomic_streams_into(tmp_path):
    from nettebench.vocabulary.atomic import open_atomic

    with open_atomic(tmp_path / CHECKPOINT_FILE) as handle:
        handle.write(b"x")
        assert [p.name for p in tmp_path.glob(checkpoint.TEMPORARY_PATTERN)] == [
            handle.name.rsplit("/", 1)[1]
        ]


def test_a_save_returns_before_its_write_and_the_file_holds_the_state_at_the_save(
    tmp_path, monkeypatch
):
    """The trainer pays the host copy only; what it changes after save() is not in the file."""
    release = threading.Event()
    real_write = checkpoint._write

    def slow_write(path, state):
        assert release.wait(30)
        return real_write(path, state)

    monkeypatch.setattr(checkpoint, "_write", slow_write)
    rows = [{"epoch": 1}]
    weights = torch.zeros(4)
    checkpoint.save(tmp_path, {"key": KEY, "rows": rows, "trainer": {"w": weights}})
    assert not (tmp_path / CHECKPOINT_FILE).exists()  # returned, the write still held
    rows.append({"epoch": 2})  # the next epoch goes on
    weights.add_(1)
    release.set()
    checkpoint.wait()
    state = checkpoint.load(tmp_path, KEY)
    assert state["rows"] == [{"epoch": 1}] and torch.equal(state["trainer"]["w"], torch.zeros(4))


def test_a_removal_waits_for_the_write_so_no_checkpoint_comes_back(tmp_path, monkeypatch):
    release = threading.Event()
    real_write = checkpoint._write
    monkeypatch.setattr(
        checkpoint, "_write", lambda path, state: release.wait(30) and real_write(path, state)
    )
    checkpoint.save(tmp_path, {"key": KEY, "rows": [1]})
    threading.Timer(0.2, release.set).start()
    checkpoint.remove(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_removing_a_checkpoint_that_is_not_there_is_no_error(tmp_path):
    """A cell of one epoch never saved one; its results are written all the same."""
    checkpoint.remove(tmp_path)
    assert checkpoint.discard_stale(tmp_path, KEY, retrain=True) == []


def test_on_a_gpu_a_checkpoint_is_due_at_most_every_few_seconds(tmp_path, monkeypatch):
    """Epochs under a second on a GPU: the first epoch's checkpoint, then one per GPU_EVERY_S;
    a stop reports the epochs the checkpoint holds, not those run since. A CPU saves every one."""
    import torch

    from nettebench.training import checkpoint

    clock = [100.0]
    monkeypatch.setattr(checkpoint.time, "monotonic", lambda: clock[0])
    cuda, cpu = torch.device("cuda", 0), torch.device("cpu")
    assert checkpoint.load(tmp_path, {"cell": "c"}) is None  # a cell's epochs begin
    assert checkpoint.due(cuda) and checkpoint.saved_epochs([1, 2]) == 2
    checkpoint.save(tmp_path, {"key": {"cell": "c"}, "rows": [1]})
    clock[0] += checkpoint.GPU_EVERY_S / 2
    assert not checkpoint.due(cuda) and checkpoint.due(cpu)
    assert checkpoint.saved_epochs([1, 2, 3]) == 1
    clock[0] += checkpoint.GPU_EVERY_S / 2
    assert checkpoint.due(cuda)
    checkpoint.wait()
    assert checkpoint.load(tmp_path, {"cell": "c"})["rows"] == [1]
    assert checkpoint.saved_epochs([1, 2]) == 1 and checkpoint.due(cuda)  # a resumed run
