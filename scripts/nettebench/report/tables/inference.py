"""Inference tables: img/s and latency by model x precision x batch, accuracy by precision, and
the front page's line. Every timing is a median with its order-statistic interval
(:mod:`nettebench.records.spread`), marked ``§`` and ``‡`` as the training tables mark them."""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

import pandas as pd

from nettebench.records.spread import CONFIDENCE
from nettebench.report import caveats as C
from nettebench.report import format as T
from nettebench.report.frames.inference import PERCENTILE_MIN_QUERIES, percentile_shown
from nettebench.report.tables.energy import fmt_joules_or_not_measured

TOO_FEW = "—"
NOTE = (
    "Inference cells: **Offline** img/s at the cell's batch on the device and through the "
    "validation pipeline, its data wait, one device batch's latency; **SingleStream** latency "
    "percentiles at batch 1 over the queries shown; peak memory. "
    f"Medians [{100 * CONFIDENCE:.0f} % interval]; "
    f"{C.UNSTABLE_MARK}: unstable ({C.UNSTABLE_RULE}); "
    f"{C.INTERFERENCE_MARK}: timed under interference; J/img: the Offline phase's energy "
    "(*not measured* without a counter); "
    f"{TOO_FEW}: too few queries for that percentile ("
    + ", ".join(f"{q} needs {n}" for q, n in PERCENTILE_MIN_QUERIES.items())
    + "). Details: docs/inference.md."
)
ACCURACY_NOTE = (
    "The final weights of each finished matrix cell (`weights.pt`), evaluated on the whole "
    "validation split in each inference precision of its model (the reference's resize and "
    "centre crop). Differences are from the fp32 evaluation of the same weights, in percentage "
    "points; *changed* is the share of images whose top-1 class differs from fp32's. Equal "
    "logits rank by class index, the lower first, in top-1, top-5 and *changed* alike. One "
    "image is 100 / images points."
)


def _interval(value: Any, low: Any, high: Any, fmt) -> str:
    if T.is_missing(value):
        return ""
    if T.is_missing(low) or T.is_missing(high):
        return fmt(value)
    return f"{fmt(value)} [{fmt(low)}-{fmt(high)}]"


def _rate(value: Any) -> str:
    if T.is_missing(value):
        return ""
    number = float(value)
    return f"{number:,.0f}" if number >= 100 else f"{number:.1f}"


_ms = T.number_format(".2f")
_signed = T.number_format("+.2f")


def _marks(row: Mapping[str, Any], unstable: str) -> str:
    marks = C.UNSTABLE_MARK if T.as_bool(row.get(unstable)) else ""
    return marks + (C.INTERFERENCE_MARK if T.as_bool(row.get("interference")) else "")


def _variant(row: Mapping[str, Any]) -> str:
    label = str(row["precision"])
    extras = [name for name in ("channels_last", "compile") if T.as_bool(row.get(name))]
    if not T.is_missing(row.get("precision_emulated")):
        label += f" {C.EMULATED_LABEL}"
    return label + (f" ({', '.join(extras)})" if extras else "")


def inference_markdown(cells: pd.DataFrame) -> T.Document:
    """The inference table, one section per device."""
    if cells.empty:
        return T.document("Inference", NOTE, [], empty="No inference cell has run.")
    header = ["Model", "Precision", "Batch", "img/s on device", "J/img on device"]
    header += ["img/s through pipeline", "data wait %", "batch latency ms"]
    header += ["SingleStream p50 / p90 / p99 ms", "queries", "peak MB"]
    sections = []
    for device, group in cells.groupby("device_name", sort=False, dropna=False):
        rows = []
        for _, row in group.iterrows():
            if row["status"] != "ok":
                rows.append([row["model"], _variant(row), row["batch_size"], row["status"]])
                continue
            stream = " / ".join(
                _interval(row[f"ss_{q}"], row[f"ss_{q}_low"], row[f"ss_{q}_high"], _ms)
                if percentile_shown(q, row["ss_queries"])
                else TOO_FEW
                for q in ("median", "p90", "p99")
            )
            queries = "" if T.is_missing(row["ss_queries"]) else f"{int(row['ss_queries']):,}"
            if T.as_bool(row.get("ss_capped")):
                queries += " (capped)"
            rows.append(
                [
                    row["model"],
                    _variant(row),
                    T.fmt_value(row["batch_size"]),
                    _interval(*(row[f"offline_img_s{end}"] for end in ("", "_low", "_high")), _rate)
                    + _marks(row, "offline_unstable"),
                    fmt_joules_or_not_measured(row["offline_j_per_img"]),
                    _rate(row["pipeline_img_s"]) + _marks(row, "pipeline_unstable"),
                    T.fmt_percent(row["pipeline_data_wait_share"]),
                    _ms(row["batch_ms"]),
                    (stream + _marks(row, "ss_unstable")) if queries else "",
                    queries,
                    "" if T.is_missing(row["peak_mem_mb"]) else f"{float(row['peak_mem_mb']):,.0f}",
                ]
            )
        threads = group["threads"].dropna()
        where = str(device)
        if len(threads) and group["device_type"].iloc[0] == "cpu":
            where += f", {int(threads.iloc[0])} threads, {group['cpu_capability'].iloc[0]}"
        notes = [
            f"{row['model']} {row['precision']} batch {row['batch_size']}: {row['message']}"
            for _, row in group.iterrows()
            if row["status"] != "ok" and not T.is_missing(row["message"])
        ]
        sections += T.section(where, T.table(header, rows, "lllrrrrrrrr"), notes=notes, level=2)
    return T.document("Inference", NOTE, sections)


def accuracy_markdown(accuracy: pd.DataFrame) -> T.Document:
    """Top-1/top-5 of each trained cell in each inference precision, and the change from fp32."""
    if accuracy.empty:
        return T.document(
            "Accuracy by inference precision",
            ACCURACY_NOTE,
            [],
            empty="No accuracy was evaluated (`inference: {accuracy: true}` keeps the matrix "
            "cells' final weights and evaluates them).",
        )
    header = ["Model", "Trained as", "Seed", "Inference precision", "top-1 %", "top-5 %"]
    header += ["Δ top-1 pp", "Δ top-5 pp", "changed %", "images"]
    rows = []
    for _, row in accuracy.iterrows():
        variant = "" if T.is_missing(row.get("precision")) else _variant(row)
        if row.get("status") != "ok":
            rows.append([row["model"], row["trained_precision"], row["seed"], variant, "",
                         "", "", "", "", f"{row.get('status')}: {row.get('message')}"])  # fmt: skip
            continue
        rows.append(
            [
                row["model"],
                row["trained_precision"],
                T.fmt_value(row["seed"]),
                variant,
                T.fmt_accuracy(row["top1"]),
                T.fmt_accuracy(row["top5"]),
                _signed(row.get("top1_diff")),
                _signed(row.get("top5_diff")),
                T.fmt_percent(row.get("changed_share")),
                T.fmt_value(row.get("images")),
            ]
        )
    table = T.table(header, rows, "lllrrrrrrr")
    return T.document(
        "Accuracy by inference precision",
        ACCURACY_NOTE,
        T.section("Final weights of the matrix cells", table, level=2),
    )


def headline(cells: pd.DataFrame, accuracy: pd.DataFrame) -> str:
    """One sentence for the front page (empty without inference cells)."""
    done = cells[cells["status"] == "ok"] if not cells.empty else cells
    if done.empty:
        return ""
    best = done.loc[done["offline_img_s"].astype(float).idxmax()]
    parts = [
        f"Inference: at most {_rate(best['offline_img_s'])} img/s on the device "
        f"({best['model']} {_variant(best)}, batch {T.fmt_value(best['batch_size'])}, "
        f"{best['device_name']}), {_rate(best['pipeline_img_s'])} through the input pipeline"
    ]
    stream = done[done["ss_p99"].notna()] if "ss_p99" in done else done.iloc[0:0]
    if not stream.empty:
        fast = stream.loc[stream["ss_median"].astype(float).idxmin()]
        parts.append(
            f"SingleStream p50 {_ms(fast['ss_median'])} ms, p99 {_ms(fast['ss_p99'])} ms "
            f"({fast['model']} {_variant(fast)}, {int(fast['ss_queries']):,} queries)"
        )
    elif "ss_median" in done and done["ss_median"].notna().any():  # too few queries for a p99
        fast = done.loc[done["ss_median"].astype(float).idxmin()]
        parts.append(
            f"SingleStream p50 {_ms(fast['ss_median'])} ms ({fast['model']} {_variant(fast)}, "
            f"{int(fast['ss_queries']):,} queries, too few for a p99)"
        )
    if not accuracy.empty and "top1_diff" in accuracy:
        diffs = accuracy[accuracy["top1_diff"].notna()]
        if not diffs.empty:
            worst = diffs.loc[diffs["top1_diff"].astype(float).abs().idxmax()]
            share = worst.get("changed_share")  # ranked as top-1 is: equal logits alike
            changed = f", {T.fmt_percent(share)} % of predictions changed"
            parts.append(
                f"the largest top-1 change from fp32 is {_signed(worst['top1_diff'])} points"
                f"{'' if T.is_missing(share) else changed} ({worst['model']} trained as "
                f"{worst['trained_precision']}, served in {_variant(worst)})"
            )
    text = "; ".join(parts) + " (tables Inference and Accuracy by inference precision)."
    return f'<p class="inference">{html.escape(text)}</p>\n'
