"""The summary tables every backend writes: per name, calls, total, average, min, max, share.

These are nvprof's summary columns (``Time(%)``, ``Time``, ``Calls``, ``Avg``, ``Min``, ``Max``,
``Name``), with the units in the column names: totals in milliseconds, per-call times in
microseconds, the share in percent of the table's total. A backend hands over either raw
durations per name (the torch trace) or rows already summarised by the tool (nsys, nvprof); both
end up as the same rows, sorted by total time, largest first.

Standard library only, so the profile command runs where pandas is not installed.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nettebench.profiling import (
    API_COLUMNS,
    CPU_OP_COLUMNS,
    KERNEL_COLUMNS,
)
from nettebench.profiling.categories import CATEGORIES, categorize
from nettebench.vocabulary.atomic import write_text_atomic


@dataclass
class Stat:
    """Durations of one name, in microseconds."""

    name: str
    calls: int = 0
    total_us: float = 0.0
    min_us: float = float("inf")
    max_us: float = 0.0
    self_us: float | None = None  # CPU operators: time not spent in operators they called

    def add(self, duration_us: float, self_us: float | None = None) -> None:
        self.calls += 1
        self.total_us += duration_us
        self.min_us = min(self.min_us, duration_us)
        self.max_us = max(self.max_us, duration_us)
        if self_us is not None:
            self.self_us = (self.self_us or 0.0) + self_us

    def add_summary(self, calls: int, total_us: float, min_us: float, max_us: float) -> None:
        """Merge a row a tool already summarised (nsys, nvprof) into this name's numbers."""
        self.calls += calls
        self.total_us += total_us
        self.min_us = min(self.min_us, min_us)
        self.max_us = max(self.max_us, max_us)


@dataclass
class Tables:
    """What a backend found, before it is written: rows with the columns of the CSV files."""

    kernels: list[dict[str, Any]] = field(default_factory=list)
    api: list[dict[str, Any]] = field(default_factory=list)
    cpu_ops: list[dict[str, Any]] = field(default_factory=list)


def collect(items: Iterable[tuple[str, float]]) -> dict[str, Stat]:
    """Group (name, duration in us) pairs into one :class:`Stat` per name."""
    stats: dict[str, Stat] = {}
    for name, duration_us in items:
        stats.setdefault(name, Stat(name)).add(duration_us)
    return stats


def timing_rows(stats: Iterable[Stat], *, with_category: bool) -> list[dict[str, Any]]:
    """kernels.csv rows (``with_category``) or api.csv rows, largest total first."""
    stats = sorted(stats, key=lambda s: (-s.total_us, s.name))
    grand_total = sum(s.total_us for s in stats)
    rows = []
    for stat in stats:
        row: dict[str, Any] = {"name": stat.name}
        if with_category:
            row["category"] = categorize(stat.name)
        row.update(
            calls=stat.calls,
            total_ms=stat.total_us / 1000,
            avg_us=stat.total_us / stat.calls if stat.calls else 0.0,
            min_us=stat.min_us if stat.calls else 0.0,
            max_us=stat.max_us,
            share_pct=100 * stat.total_us / grand_total if grand_total else 0.0,
        )
        rows.append(row)
    return rows


def cpu_op_rows(stats: Iterable[Stat]) -> list[dict[str, Any]]:
    """cpu_ops.csv rows, by self time (or total time where self time is unknown)."""
    stats = list(stats)
    has_self = all(s.self_us is not None for s in stats)

    def weight(stat: Stat) -> float:
        return (stat.self_us or 0.0) if has_self else stat.total_us

    grand_total = sum(weight(s) for s in stats)
    rows = []
    for stat in sorted(stats, key=lambda s: (-weight(s), s.name)):
        rows.append(
            {
                "name": stat.name,
                "category": categorize(stat.name),
                "calls": stat.calls,
                "self_ms": stat.self_us / 1000 if has_self else None,
                "total_ms": stat.total_us / 1000,
                "avg_self_us": stat.self_us / stat.calls if has_self and stat.calls else None,
                "share_pct": 100 * weight(stat) / grand_total if grand_total else 0.0,
            }
        )
    return rows


def category_rows(
    rows: Sequence[Mapping[str, Any]], *, source: str, time_column: str, steps: int
) -> list[dict[str, Any]]:
    """categories.csv: every category, in :data:`CATEGORIES` order, summed over ``rows``."""
    totals = {category: [0, 0.0] for category in CATEGORIES}
    for row in rows:
        entry = totals[row["category"]]
        entry[0] += int(row["calls"])
        entry[1] += float(row[time_column] or 0.0)
    grand_total = sum(total for _, total in totals.values())
    return [
        {
            "category": category,
            "source": source,
            "calls": calls,
            "total_ms": total,
            "ms_per_step": total / steps if steps else None,
            "share_pct": 100 * total / grand_total if grand_total else 0.0,
        }
        for category, (calls, total) in totals.items()
    ]


# --------------------------------------------------------------------------------------- files


TABLE_COLUMNS = {"kernels": KERNEL_COLUMNS, "api": API_COLUMNS, "cpu_ops": CPU_OP_COLUMNS}


def csv_text(columns: Sequence[str], rows: Iterable[Mapping[str, Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({column: _cell(row.get(column)) for column in columns})
    return buffer.getvalue()


def write_csv(path: str | os.PathLike, columns: Sequence[str], rows: Iterable[Mapping]) -> Path:
    return write_text_atomic(path, csv_text(columns, rows))


def read_csv(path: str | os.PathLike) -> list[dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def _cell(value: Any) -> Any:
    if isinstance(value, float):
        return repr(round(value, 6))
    return "" if value is None else value
