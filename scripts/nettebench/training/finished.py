"""The record of a finished cell, so an interruption never makes anyone train it again.

A cell's results (``metrics.json``, ``epochs.csv``) are Snakemake's outputs, and Snakemake owns
them: a job it started but never saw end (Snakemake killed, or stopped by Ctrl-C while the
trainer finished) leaves them marked incomplete, and the next run deletes them and runs the job
again. The trainer's per-epoch checkpoint cannot help there: it is gone once the cell finished.

So after its last epoch the trainer writes ``finished.json`` beside the results, atomically and
*before* them: the exact text of both files (and of files its job wrote beside them, such as the
ceiling) plus the result's key (:func:`nettebench.training.validity.key`: everything the result
depends on, including what the rule hands over). It is no Snakemake output, so Snakemake never
deletes it. A trainer started on a cell whose ``finished.json`` holds the same key and a
restorable status (:data:`~nettebench.training.validity.RESTORABLE_STATUSES`) writes the files
back byte for byte and exits in a second (:func:`restore`); anything that changed trains the
cell, and the log names the first part of the key that differs. To measure a finished cell again
on purpose, pass ``--retrain`` (``NETTEBENCH_RETRAIN=1`` for ``snakemake --forcerun``) or delete
the file.

It holds a few kilobytes of text and no model state, so it costs nothing after the last epoch
(no checkpoint is needed there).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from nettebench.records import files as records
from nettebench.training import validity
from nettebench.vocabulary.atomic import write_json_atomic, write_text_atomic
from nettebench.vocabulary.outputs import EPOCHS_FILE, METRICS_FILE

FINISHED_FILE = "finished.json"
FORMAT_VERSION = 2  # 2: keyed by validity.key
RESULT_FILES = (EPOCHS_FILE, METRICS_FILE)  # the order they are written back in
RETRAIN_ENV = "NETTEBENCH_RETRAIN"


def write(out_dir: str | os.PathLike[str], key: dict[str, Any], texts: dict[str, str]) -> Path:
    """Write ``finished.json`` (the result's key + the results' texts), atomically."""
    return write_json_atomic(
        Path(out_dir) / FINISHED_FILE,
        {"format_version": FORMAT_VERSION, "key": key, "files": texts},
    )


def restore(
    out_dir: str | os.PathLike[str], key: dict[str, Any], needs: tuple[Path, ...] = ()
) -> tuple[bool, str | None]:
    """Write the results back from ``finished.json`` when it holds ``key`` and a restorable
    status, and every file of ``needs`` is there (files the cell writes that finished.json does
    not hold, such as its final weights: gone, only training makes them again). Returns
    (restored, what to log after the cell's name): what was restored, or why nothing was (None
    when there is no record at all)."""
    out_dir = Path(out_dir)
    path = out_dir / FINISHED_FILE
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return False, None
    except (OSError, ValueError) as error:
        return False, f"{path} is unreadable ({error}); training from scratch"
    missing = [str(need) for need in needs if not Path(need).is_file()]
    if missing:
        return False, f"{', '.join(missing)} is gone and only training writes it; training again"
    files = record.get("files") or {}
    if record.get("format_version") != FORMAT_VERSION:
        changed = f"its format {record.get('format_version')} is not {FORMAT_VERSION}"
    else:
        changed = validity.first_difference(record.get("key"), key)
    if changed:
        return False, f"{path} no longer matches ({changed}); training from scratch"
    if not all(isinstance(files.get(name), str) for name in RESULT_FILES):
        return False, f"{path} lacks {', '.join(RESULT_FILES)}; training from scratch"
    status = _status(files[METRICS_FILE])
    if status not in validity.RESTORABLE_STATUSES:
        return False, (
            f"the result in {path} has status {status}, which a run now need not repeat (only "
            + ", ".join(validity.RESTORABLE_STATUSES)
            + " are restored); training again"
        )
    extras = [name for name in files if name not in RESULT_FILES]  # the ceiling, say
    for name in [*extras, *RESULT_FILES]:  # metrics.json last: it is what says "done"
        write_text_atomic(out_dir / name, files[name])
    return True, (
        f"wrote back {', '.join([*extras, *RESULT_FILES])} (status {status}) from {path}: its "
        "key matches (same options, inputs, code, packages and hardware), so the cell is not "
        f"trained again; --retrain (${RETRAIN_ENV}=1) trains it anyway"
    )


def _status(metrics_text: str) -> str | None:
    try:
        return json.loads(metrics_text).get("status")
    except (ValueError, AttributeError):
        return None


def retrain_requested(flag: bool) -> bool:
    return flag or os.environ.get(RETRAIN_ENV, "") not in ("", "0")


def result_texts(record: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, str]:
    """metrics.json and epochs.csv exactly as :mod:`nettebench.records.files` writes them."""
    with tempfile.TemporaryDirectory(prefix="nettebench-result-") as scratch:
        records.write_epochs(scratch, rows)
        records.write_metrics(scratch, record)
        return {name: (Path(scratch) / name).read_text(encoding="utf-8") for name in RESULT_FILES}


def file_texts(out_dir: str | os.PathLike[str], paths) -> dict[str, str]:
    """The texts of files a cell's job wrote beside its results (by name; files elsewhere are
    not the cell's to restore)."""
    out_dir = Path(out_dir).resolve()
    return {
        Path(path).name: Path(path).read_text(encoding="utf-8")
        for path in paths
        if Path(path).resolve().parent == out_dir
    }
