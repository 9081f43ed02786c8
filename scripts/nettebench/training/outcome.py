"""What a cell's run came to, written down: the record, its summary, and the outcome files.

The trainer (:mod:`nettebench.training.cli`) runs the epochs; this module turns what they left
into ``metrics.json`` (status, message, summary over the epochs, timing conditions, environment)
and writes it with ``epochs.csv``: ``finished.json`` first (:mod:`.finished`), then the results,
then the checkpoint goes. Outcomes that are results rather than crashes (out of memory, a
precision or apex that the device cannot run) get their message here, so the ceiling bench and
the profiler word them the same way.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import sys
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import torch

from nettebench.records import energy, environment, spread
from nettebench.records import files as records
from nettebench.training import checkpoint, finished
from nettebench.training.context import RunContext, Trained
from nettebench.vocabulary import precision
from nettebench.vocabulary.cell import CellSpec
from nettebench.vocabulary.record_keys import SCHEMA_VERSION, SUMMARY_KEYS


def unsupported_reason(cell: CellSpec, device: torch.device) -> str | None:
    """Why ``device`` cannot run the cell's precision, or None. A native cell asks the precision
    table; an apex cell is apex's to refuse (:class:`~nettebench.training.apex.ApexUnsupported`
    when its runner is built), in its own words."""
    if cell.amp_backend == "apex":
        return None
    return precision.unsupported_reason(cell.precision, device.type)


def oom_message(cell: CellSpec, device, error: BaseException) -> str:
    first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    if cell.batch_size == "auto":
        hint = "even batch size 1 does not fit: try a smaller image_size or model"
    else:
        hint = (
            f"lower batch_size for this cell (e.g. {max(cell.batch_size // 2, 1)}, or auto) "
            "in the matrix; large models need their batch size tuned per card"
        )
    return (
        f"out of memory at batch size {cell.batch_size} on {device.type}: {first_line}. "
        f"Hint: {hint}."
    )


def skeleton(cell: CellSpec, kind: str, device) -> dict[str, Any]:
    """The record before the run: what the cell is and where it runs; the rest comes after."""
    return {
        "schema_version": SCHEMA_VERSION,
        "status": None,
        "message": None,
        "kind": kind,
        "cell": cell.as_dict(),
        "cell_id": cell.cell_id(),
        "device": environment.device_info(device),
        "environment": None,  # collected beside the training (see cli.run_cell)
        "summary": dict.fromkeys(SUMMARY_KEYS),
    }


def finish(
    record: dict[str, Any],
    run: RunContext,
    trained: Trained,
    collecting: Future,
    *,
    ended_at: float | None = None,
    extra_files: tuple[Path, ...] = (),
) -> dict[str, Any]:
    """Write the cell's outcome; no signal cuts it short (a cell whose last epoch ended is
    finished). ``finished.json`` first (with ``run.stamp``, holding the results and
    ``extra_files`` written beside them, such as the ceiling), the results, then the checkpoint
    goes. ``ended_at`` (default: now) ends the cell's ``wall_s``."""
    rows, fit, out_dir = trained.rows, trained.fit, run.out_dir
    with run.stop.critical() if run.stop else contextlib.nullcontext():
        record["status"] = trained.status
        record["message"] = trained.message
        earlier_wall_s = 0.0
        if rows:
            record["summary"] = summary(rows)
        if fit is not None:
            record["summary"]["batch_size_used"] = fit.batch_size
            record["summary"]["resumed_from_epoch"] = fit.resumed_from_epoch
            record["summary"]["compile_s"] = fit.compile_s
            record["summary"]["store_mode"] = fit.placement
            record["summary"]["store_mem_mb"] = fit.store_mem_mb
            earlier_wall_s = fit.earlier_wall_s
        record["conditions"] = run_conditions(fit.conditions if fit else None, rows)
        if rows:
            record["summary"]["unstable"] = unstable_text(record["summary"], record["conditions"])
        record["environment"] = collecting.result()
        ended_at = time.time() if ended_at is None else ended_at
        record["summary"]["wall_s"] = earlier_wall_s + ended_at - run.started_at
        if run.stamp is not None:
            texts = finished.result_texts(record, rows)
            texts.update(finished.file_texts(out_dir, extra_files))
            finished.write(out_dir, run.stamp, texts)
        records.write_epochs(out_dir, rows)
        records.write_metrics(out_dir, record)
        checkpoint.remove(out_dir)
    if trained.message:
        print(f"{trained.status}: {trained.message}", file=sys.stderr, flush=True)
    return record


def run_conditions(
    window: dict[str, Any] | None, rows: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """metrics.json's ``conditions``: the window of this process's epochs, every epoch
    (resumed ones too) whose own window was under interference, which marks the cell too, and
    the energy of every epoch's steady training steps (:func:`.energy.steady_totals`: the
    cell's energy per image)."""
    disturbed = [r["epoch"] for r in rows if r.get("interference") is True]
    if window is None and not rows:
        return None
    found = dict(window or {})
    found["epochs_under_interference"] = disturbed
    found.update(energy.steady_totals([r.get("_steady_energy") for r in rows]))
    if disturbed:
        found["interference"] = True
        found["interference_reasons"] = [
            *found.get("interference_reasons", []),
            f"epoch(s) {', '.join(map(str, disturbed))} of {len(rows)} timed under interference",
        ]
    return found


def first_epoch_overhead(walls: list[float]) -> tuple[float | None, float | None, str | None]:
    """(overhead, noise, variation) of a cell's epoch wall times.

    The overhead is the first epoch's time beyond the median of the later ones, never below 0.
    Its noise is the largest deviation of a later epoch from that median. A first epoch faster
    than the fastest later one by more than the noise (and more than a tenth of an epoch) is
    epoch-to-epoch variation, said with its size (the variation text; None otherwise): on a
    shared machine the later epochs can be slowed as well as the first, so it is noise between
    epochs, not a figure that cannot be true."""
    later = walls[1:]
    if not later:
        return None, None, None
    steady = statistics.median(later)
    noise = max(abs(w - steady) for w in later) if len(later) > 1 else None
    excess = walls[0] - steady
    variation = None
    margin = max(noise or 0.0, VARIATION_FLOOR * steady)
    if noise is not None and walls[0] < min(later) - margin:
        variation = (
            f"epoch-to-epoch variation: the first epoch took {walls[0]:.1f} s, "
            f"{-excess:.1f} s ({-excess / steady:.0%}) less than the later epochs' median "
            f"{steady:.1f} s (they ranged {min(later):.1f}-{max(later):.1f} s)"
        )
    return max(excess, 0.0), noise, variation


# A first epoch this share of an epoch faster than every later one is worth a word.
VARIATION_FLOOR = 0.10


def steady_steps(rows: list[dict[str, Any]]) -> tuple[list[float], list[int]]:
    """Seconds and images of every steady step of the epochs, in order (epochs.csv
    ``step_ms``; a resumed epoch's row comes from the checkpoint with the same fields)."""
    seconds: list[float] = []
    images: list[int] = []
    for row in rows:
        found = spread.parse_step_ms(row.get("step_ms"))
        counts = list(row.get("_step_images") or [])
        if len(counts) != len(found):  # an older row: its images spread evenly over its steps
            each = (row.get("train_images") or 0) / max(len(found), 1)
            counts = [each] * len(found)
        seconds += found
        images += counts
    return seconds, images


def step_spread(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The summary's img/s figures from the steady steps: the median per-step rate with its
    interval, the steps' sd / mean, and the block rates (the within-process spread: a
    verdict is tested on the spread between processes, report.compare)."""
    seconds, images = steady_steps(rows)
    if not seconds:
        return {}
    found = spread.median_interval(spread.rates(seconds, images))
    times = spread.median_interval(seconds)
    return {
        "train_img_s": found.value,
        "train_img_s_low": found.low,
        "train_img_s_high": found.high,
        "train_steps_steady": found.n,
        "train_step_cv": times.cv,
        "train_block_img_s": spread.block_rates(seconds, images),
    }


def unstable_text(summary: dict[str, Any], found: dict[str, Any] | None) -> str | None:
    """Why the cell's steps are too spread to quote as one number (pyperf's rule: sd >= 10 %
    of the mean), with the cause where the timing conditions know one; None when stable."""
    cv = summary.get("train_step_cv")
    if cv is None or cv < spread.UNSTABLE_CV:
        return None
    text = (
        f"unstable: its {summary.get('train_steps_steady')} steady steps spread {cv:.0%} "
        f"(sd / mean >= {spread.UNSTABLE_CV:.0%})"
    )
    reasons = (found or {}).get("interference_reasons") or []
    if reasons:
        return f"{text}; timed under interference: {'; '.join(map(str, reasons))}"
    return f"{text}; no interference was measured, so the cause is within the job"


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The record's summary from its epochs' rows: every key of
    :data:`~nettebench.vocabulary.record_keys.SUMMARY_KEYS` (the one list of them), those the
    epochs decide filled here, the rest None until the run fills them (batch size used, wall
    time, resume, store)."""
    train_s = sum(r["train_s"] for r in rows)
    img_s = [r["train_img_s"] for r in rows if not math.isnan(r["train_img_s"])]
    last = rows[-1]
    later = [r["wall_s"] for r in rows[1:]]
    overhead, noise, variation = first_epoch_overhead([r["wall_s"] for r in rows])
    found = dict.fromkeys(SUMMARY_KEYS)
    found.update(
        epochs_run=len(rows),
        steps_per_epoch=last["_steps_per_epoch"],
        steps_timed=last["_steps_run"],
        extrapolated=any(r["extrapolated"] for r in rows),
        time_for_epochs_s=sum(r["wall_s"] for r in rows),
        epoch_s_median=statistics.median(r["wall_s"] for r in rows),
        # records without step times: the median over epochs, as before
        train_img_s=statistics.median(img_s) if img_s else None,
        data_wait_share=sum(r["data_wait_s"] for r in rows) / train_s if train_s else None,
        final_top1=last["val_top1"],
        final_top5=last["val_top5"],
        best_top1=max(r["val_top1"] for r in rows),
        final_train_loss=last["train_loss"],
        steady_epoch_s=statistics.median(later) if later else None,
        first_epoch_overhead_s=overhead,
        first_epoch_overhead_noise_s=noise,
        anomalies=[],
        peak_mem_mb=max(r["peak_mem_mb"] for r in rows),
        epoch_variation=variation,
    )
    found.update(step_spread(rows))
    return found


def epoch_row(epoch: int, lr: float, train, val, peak_mem_mb: float, steps: int) -> dict:
    """One epochs.csv row (plus ``_``-prefixed fields the summary needs, not written)."""
    return {
        "epoch": epoch,
        "train_loss": train.loss,
        "val_loss": val.loss,
        "val_top1": val.top1,
        "val_top5": val.top5,
        "lr": lr,
        "train_s": train.seconds,
        "val_s": val.seconds,
        "wall_s": train.seconds + val.seconds,
        "data_wait_s": train.data_wait_s,
        "compute_s": train.seconds - train.data_wait_s,
        "data_wait_share": train.data_wait_s / train.seconds if train.seconds else float("nan"),
        "train_img_s": train.img_s,
        "train_images": train.images,
        "peak_mem_mb": peak_mem_mb,
        "extrapolated": train.extrapolated or val.extrapolated,
        "step_ms": spread.step_ms_text(train.step_s),  # the steady steps' times (spread)
        "_step_images": train.step_images,
        "_steps_run": train.steps_run,
        "_steps_per_epoch": steps,
    }


def _conditions_text(row: dict[str, Any]) -> str:
    """``  others 48% of the CPUs: timed under interference`` (empty when not measured)."""
    share = row.get("other_cpu_share")
    if share is None:
        return ""
    verdict = ": timed under interference" if row.get("interference") else ""
    return f"  others {100 * share:.0f}% of the CPUs{verdict}"


def log_epoch(cell: CellSpec, row: dict[str, Any]) -> None:
    """One line per epoch: readable in a log file, where the progress bar stays quiet."""

    approx = "~" if row["extrapolated"] else ""
    print(
        f"epoch {row['epoch']}/{cell.epochs}  train_loss {row['train_loss']:.4f}  "
        f"val_top1 {row['val_top1']:.1f}%  val_top5 {row['val_top5']:.1f}%  "
        f"{approx}{row['wall_s']:.1f} s  training {row['train_img_s']:.0f} img/s  "
        f"data wait {100 * row['data_wait_share']:.0f}%  peak {row['peak_mem_mb']:.0f} MB"
        + _conditions_text(row),
        file=sys.stderr,
        flush=True,
    )
