"""The record's vocabulary: the keys of ``metrics.json`` and the columns of ``epochs.csv``, and
the outcomes a cell, a profile, an inference cell or a ceiling records (``status``).

One definition for every floor: the trainer, the profiler and the benchmarks write these names,
:mod:`nettebench.records.files` checks a record against them, and the report reads them. The
files' names are :mod:`.outputs`' (``METRICS_FILE``, ``EPOCHS_FILE``).

Stdlib only (the ground floor).
"""

from __future__ import annotations

SCHEMA_VERSION = 1
# Outcomes of a cell (and of a profile, an inference cell, a ceiling). Anything but "ok" still
# writes its record, so a failed cell is a result (shown in the tables) rather than a hole that
# makes the workflow stop.
STATUS_OK = "ok"
STATUS_OOM = "oom"
STATUS_UNSUPPORTED = "unsupported"
STATUSES = (STATUS_OK, STATUS_OOM, STATUS_UNSUPPORTED)

# Top-level keys of metrics.json.
METRICS_KEYS = (
    "schema_version",  # int, SCHEMA_VERSION
    "status",  # one of STATUSES
    "message",  # str | None: why a cell is not "ok", with a hint the user can act on
    "kind",  # "matrix" (a cell of the study's grid) or "cpu_baseline"
    "cell",  # dict: every parameter of the cell, defaults filled in
    "cell_id",  # str: hash of the cell's identity (see nettebench.cells.cell_id)
    "device",  # dict: {"type": "cpu"|"cuda", "name": str, "threads": int}
    "environment",  # dict: see nettebench.records.environment.collect
    "summary",  # dict: SUMMARY_KEYS (values None when the cell did not run)
)
# Top-level keys a record may have (older records lack them and still read).
OPTIONAL_METRICS_KEYS = (
    "startup",  # dict | None: the start-up and wind-down by phase (training.startup)
    # dict | None: what else the machine did while the epochs ran (records.conditions
    # CONDITION_KEYS, plus "epochs_under_interference": the 1-based epochs whose own window
    # was under interference); None for a cell that trained no epoch
    "conditions",
)

# Keys of metrics.json["summary"].
SUMMARY_KEYS = (
    "epochs_run",  # int: epochs that finished
    "steps_per_epoch",  # int: optimiser steps in one full epoch
    "steps_timed",  # int: steps actually run per epoch (< steps_per_epoch when extrapolated)
    "extrapolated",  # bool: epoch times were scaled from steps_timed to steps_per_epoch
    "wall_s",  # float: process start to metrics written (includes model build, data setup);
    # for a resumed cell, plus what earlier processes spent on the epochs they finished
    "time_for_epochs_s",  # float: sum of epoch wall times = the study's "seconds for N epochs"
    "epoch_s_median",  # float: median epoch wall time
    # float: median per-step img/s over the steady steps of all epochs (epochs.csv step_ms)
    "train_img_s",
    "data_wait_share",  # float in [0, 1]: share of training time spent waiting for data
    "final_top1",  # float: val top-1 (%) after the last epoch
    "final_top5",  # float: val top-5 (%) after the last epoch
    "best_top1",  # float: best val top-1 (%) over epochs
    "final_train_loss",  # float
    "batch_size_used",  # int: the batch size trained with (chosen when the cell says auto)
    "steady_epoch_s",  # float: median wall time of the epochs after the first
    # float >= 0: first epoch's wall time minus steady_epoch_s (warm-up); never negative: a
    # first epoch faster than the steady ones is no overhead (and, beyond the noise below, a
    # sign of epoch-to-epoch variation: see "epoch_variation")
    "first_epoch_overhead_s",
    # float | None: its noise: the largest deviation of a later epoch from steady_epoch_s (how
    # far an epoch moves with no warm-up at all); None with fewer than two later epochs
    "first_epoch_overhead_noise_s",
    "anomalies",  # list of text: figures of this cell that cannot be true as measured
    "peak_mem_mb",  # float: peak device memory (CUDA allocator, a resident store's left out:
    # store_mem_mb) or peak RSS on a CPU
    "resumed_from_epoch",  # int | None: epochs an earlier, killed process had finished
    "compile_s",  # float | None: torch.compile warm-up before epoch 1 (cells with compile: true)
    # str | None: loader cached: where its store was, "resident" (in the training device's
    # memory) or "streamed" (host memory, streamed to the GPU); None for the pil loader
    "store_mode",
    # float | None: device memory (MB) of a resident store on a GPU, allocated before the epochs
    # and left out of peak_mem_mb (so pil and cached cells compare); None when there is none
    "store_mem_mb",
    # the spread of train_img_s (records.spread): its 95 % order-statistic interval (None with
    # fewer than 6 steady steps), how many steady steps, their sd / mean, and the img/s of 10
    # consecutive blocks of them (the spread within the process; comparisons test the spread
    # between processes, one train_img_s each: report.compare)
    "train_img_s_low",
    "train_img_s_high",
    "train_steps_steady",
    "train_step_cv",
    "train_block_img_s",
    # text | None: the steps spread by a tenth of their mean or more (pyperf's rule), with the
    # spread and its cause where the timing conditions know it
    "unstable",
    # text | None: epoch-to-epoch variation worth a word (a first epoch faster than the later
    # ones), with its size: noise between epochs, not a figure that cannot be true
    "epoch_variation",
)

# Columns of epochs.csv, in order.
EPOCH_COLUMNS = (
    "epoch",  # 1-based
    "train_loss",  # mean training loss over the epoch
    "val_loss",
    "val_top1",  # %
    "val_top5",  # %
    "lr",  # learning rate used in this epoch
    "train_s",  # training wall time of the epoch (extrapolated when "extrapolated")
    "val_s",  # validation wall time (extrapolated when "extrapolated")
    "wall_s",  # train_s + val_s
    "data_wait_s",  # part of train_s spent blocked on the input pipeline
    "compute_s",  # train_s - data_wait_s
    "data_wait_share",  # data_wait_s / train_s
    "train_img_s",  # training images per second, warm-up steps excluded
    "train_images",  # images trained on in the timed steps of this epoch
    "peak_mem_mb",  # peak device memory in the epoch, a resident store's left out (CPU: RSS)
    "extrapolated",  # bool
    # what else the machine did during the epoch (records.conditions): other processes' share
    # of the job's CPUs, the hypervisor's steal share, and the verdict (bool)
    "other_cpu_share",
    "steal_share",
    "interference",
    # the epoch's steady steps (after warm-up and the loader's start-up), each step's time in
    # ms, space-separated: the samples of the cell's img/s and its interval (records.spread)
    "step_ms",
)
