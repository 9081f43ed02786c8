"""The inference cells' and accuracy jobs' records read into frames.

``inference.json`` of each inference cell becomes a row of :func:`cells_frame` (written as
``inference.csv``, which the latency-throughput figure reads) and ``accuracy.json`` of each
accuracy job rows of :func:`accuracy_frame` (``inference_accuracy.csv``); the tables of
:mod:`nettebench.report.tables.inference` render them. Imports pandas, no torch.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from nettebench.report import format as T

# A latency percentile is printed only over enough queries: the q-th needs 1 / (1 - q) of them,
# so that at least one query lies beyond it (p90: 10, p99: 100); from fewer it is the slowest
# query or two, not a percentile. MLPerf asks for far more; this is the least that is one.
PERCENTILE_MIN_QUERIES = {"p90": 10, "p95": 20, "p99": 100}


def _get(record: Mapping[str, Any] | None, *keys: str) -> Any:
    for key in keys:
        if not isinstance(record, Mapping):
            return None
        record = record.get(key)
    return record


def cells_frame(records: Iterable[tuple[str, Mapping[str, Any]]]) -> pd.DataFrame:
    """One row per inference cell (``records``: (path, inference.json) pairs)."""
    rows = []
    for path, record in records:
        cell = record.get("cell") or {}
        rows.append(
            {
                "path": str(Path(path).parent),
                "status": record.get("status"),
                "message": record.get("message"),
                **{k: cell.get(k) for k in ("dataset", "model", "precision", "batch_size")},
                "image_size": cell.get("image_size"),
                "channels_last": record.get("channels_last"),
                "compile": cell.get("compile"),
                "machine": cell.get("machine"),
                "device_type": _get(record, "device", "type"),
                "device_name": _get(record, "device", "name"),
                "threads": _get(record, "device", "threads"),
                "cpu_capability": _get(record, "environment", "cpu_capability"),
                "precision_emulated": record.get("precision_emulated"),
                "offline_img_s": _get(record, "offline", "img_s"),
                "offline_img_s_low": _get(record, "offline", "img_s_low"),
                "offline_img_s_high": _get(record, "offline", "img_s_high"),
                "batch_ms": _get(record, "offline", "batch_ms", "median"),
                "offline_unstable": _get(record, "offline", "batch_ms", "unstable"),
                "offline_j_per_img": _get(record, "offline", "energy", "j_per_img"),  # [3/5]
                "offline_batches": _get(record, "offline", "batches"),
                "compile_s": _get(record, "offline", "compile_s"),
                "pipeline_img_s": _get(record, "pipeline", "img_s"),
                "pipeline_data_wait_share": _get(record, "pipeline", "data_wait_share"),
                "pipeline_unstable": _get(record, "pipeline", "batch_ms", "unstable"),
                "ss_queries": _get(record, "single_stream", "queries"),
                "ss_capped": _get(record, "single_stream", "capped"),
                **{
                    f"ss_{q}{end}": _get(record, "single_stream", "latency_ms", f"{q}{end}")
                    for q in ("median", "p90", "p99")
                    for end in ("", "_low", "_high")
                },
                "ss_unstable": _get(record, "single_stream", "latency_ms", "unstable"),
                "peak_mem_mb": record.get("peak_mem_mb"),
                "peak_mem_kind": record.get("peak_mem_kind"),
                "interference": _get(record, "conditions", "interference"),
                "loadavg": _get(record, "conditions", "loadavg_end"),
            }
        )
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    frame = without_thin_percentiles(frame)
    frame["_rank"] = frame["precision"].map(T.precision_rank)
    frame = frame.sort_values(["device_name", "model", "_rank", "compile", "batch_size"])
    return frame.drop(columns="_rank").reset_index(drop=True)


def percentile_shown(quantile: str, queries: Any) -> bool:
    """Whether percentile ``quantile`` (``p90``, ``p99``) of ``queries`` latencies is one
    (:data:`PERCENTILE_MIN_QUERIES`); the median always is."""
    needed = PERCENTILE_MIN_QUERIES.get(quantile)
    if needed is None:
        return True
    return not T.is_missing(queries) and int(queries) >= needed


def without_thin_percentiles(frame: pd.DataFrame) -> pd.DataFrame:
    """The SingleStream percentiles of a cell with too few queries, blanked (with their
    intervals) in the frame both the table and inference.csv (the figure's input) take."""
    frame = frame.copy()
    for quantile in PERCENTILE_MIN_QUERIES:
        columns = [f"ss_{quantile}{end}" for end in ("", "_low", "_high")]
        present = [c for c in columns if c in frame]
        if not present:
            continue
        thin = ~frame["ss_queries"].map(lambda n, q=quantile: percentile_shown(q, n))
        frame.loc[thin, present] = None
    return frame


def accuracy_frame(records: Iterable[tuple[str, Mapping[str, Any]]]) -> pd.DataFrame:
    """One row per (trained cell, inference variant)."""
    rows = []
    for path, record in records:
        trained = record.get("trained_cell") or {}
        base = {
            "path": str(Path(path).parent),
            "model": record.get("model"),
            "dataset": trained.get("dataset"),
            "trained_precision": trained.get("precision"),
            "seed": trained.get("seed"),
            "trained_final_top1": record.get("trained_final_top1"),
            "device_name": _get(record, "device", "name"),
        }
        if not record.get("rows"):
            rows.append({**base, "status": record.get("status"), "message": record.get("message")})
        for row in record.get("rows") or []:
            rows.append({**base, **row})
    return pd.DataFrame(rows)


def read_records(paths: Iterable[str]) -> list[tuple[str, dict[str, Any]]]:
    """(path, record) of each JSON record at ``paths``."""
    return [(path, json.loads(Path(path).read_text(encoding="utf-8"))) for path in paths]
