"""Small pure helpers that turn numbers into the text of the study's markdown tables.

Kept apart from :mod:`nettebench.aggregate` so that module reads as data shaping only, and so
every formatting rule (one decimal for seconds, thousands separators for img/s, ``OOM``/``n/a``
for cells that did not run, ``~`` for extrapolated times) lives in one place with its tests.
:mod:`nettebench.figures` uses the same precision order and row labels, so a table and a figure
of the same data list precisions and models the same way.

Tables are GitHub pipe tables written by hand: the ``tabulate`` package is not a dependency.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from nettebench.precision import PRECISION_NAMES

# Display order of precisions: the precision table's own order (O0, tf32, O1, O2, O3, bf16, fp32),
# so every table and figure reads from "plain fp32" towards "least precise".
PRECISION_ORDER: tuple[str, ...] = tuple(PRECISION_NAMES)

# What a cell shows when it has no number, by status (records.STATUSES).
OUTCOME_TEXT = {"oom": "OOM", "unsupported": "n/a"}
APPROX_MARK = "~"  # prefix of an extrapolated time
PARTIAL_MARK = "†"  # suffix when only some seeds of a cell finished
MISSING_LABEL = "unset"  # a parameter a cell does not have (added after it ran)


def precision_rank(name: Any) -> tuple[int, str]:
    """Sort key: canonical precisions first in their order, unknown ones after, alphabetically."""
    text = str(name)
    if text in PRECISION_ORDER:
        return (PRECISION_ORDER.index(text), "")
    return (len(PRECISION_ORDER), text)


def sort_precisions(names: Iterable[Any]) -> list[str]:
    """Distinct precision names in display order (missing values dropped)."""
    return sorted({str(name) for name in names if not is_missing(name)}, key=precision_rank)


def is_missing(value: Any) -> bool:
    """True for None, NaN and pandas' NA: "no value" whichever way a CSV or JSON spelled it."""
    if value is None:
        return True
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # lists and other containers are values
        return False


def as_bool(value: Any) -> bool:
    """A flag read from JSON or CSV (True, "True", "true", 1) as a bool; missing is False."""
    if is_missing(value):
        return False
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    return bool(value)


def fmt_value(value: Any) -> str:
    """A parameter value for a label: ints without ``.0``, missing as ``unset``."""
    if is_missing(value):
        return MISSING_LABEL
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def fmt_seconds(value: Any) -> str:
    """Seconds with one decimal, like the study's tables (``1440.3``)."""
    return "" if is_missing(value) else f"{float(value):.1f}"


def fmt_rate(value: Any) -> str:
    """Images per second as an integer with thousands separators (``5,765``)."""
    return "" if is_missing(value) else f"{round(float(value)):,}"


def fmt_percent(share: Any) -> str:
    """A share in [0, 1] as a percentage with one decimal (``12.5``)."""
    return "" if is_missing(share) else f"{100 * float(share):.1f}"


def fmt_accuracy(value: Any) -> str:
    """An accuracy that is already in percent, one decimal (``79.2``)."""
    return "" if is_missing(value) else f"{float(value):.1f}"


def fmt_speedup(value: Any) -> str:
    """A ratio as ``12.3x``."""
    if is_missing(value) or not math.isfinite(float(value)):
        return ""
    return f"{float(value):.1f}x"


def outcome_cell(
    statuses: Sequence[Any],
    value: Any,
    fmt: Callable[[Any], str],
    *,
    approx: bool = False,
) -> str:
    """The text of one table cell summarising the seeds of one cell of the grid.

    ``statuses`` are the seeds' outcomes and ``value`` the aggregate of the ones that finished.
    Any finished seed gives a number (``~`` in front when extrapolated, ``†`` after when other
    seeds did not finish); otherwise ``OOM`` wins over ``n/a``; no seeds at all gives a blank, so
    "not in the study" and "did not run" never look alike.
    """
    statuses = [str(s) for s in statuses if not is_missing(s)]
    if "ok" in statuses and not is_missing(value):
        text = fmt(value)
        if approx:
            text = APPROX_MARK + text
        if any(s != "ok" for s in statuses):
            text += PARTIAL_MARK
        return text
    for status in ("oom", "unsupported"):
        if status in statuses:
            return OUTCOME_TEXT[status]
    return ""


def _escape(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def pipe_table(header: Sequence[Any], rows: Iterable[Sequence[Any]], align: str = "") -> str:
    """A GitHub pipe table; ``align`` has one letter per column, ``l`` or ``r`` (default ``l``).

    Short rows are padded with blanks so a ragged row cannot break the table.
    """
    width = len(header)
    align = (align + "l" * width)[:width]
    rule = ["---:" if a == "r" else "---" for a in align]
    lines = ["| " + " | ".join(_escape(h) for h in header) + " |", "|" + "|".join(rule) + "|"]
    for row in rows:
        cells = [_escape(c) for c in row][:width]
        cells += [""] * (width - len(cells))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def section(title: str, body: str, *, notes: Sequence[str] = (), level: int = 3) -> str:
    """A heading, the table (or text) under it, then footnote lines."""
    parts = [f"{'#' * level} {title}", "", body.rstrip("\n"), ""]
    for note in notes:
        parts += [note, ""]
    return "\n".join(parts)


def document(title: str, note: str, sections: Sequence[str], *, empty: str = "") -> str:
    """A whole markdown file: heading, the one-line note, then the sections (or ``empty``)."""
    body = "\n".join(s.rstrip("\n") + "\n" for s in sections) if sections else empty + "\n"
    return f"# {title}\n\n{note}\n\n{body}".rstrip("\n") + "\n"


def seeds_note(counts: Iterable[int]) -> str:
    """``mean over seeds (n=2)``, or ``(n=1-3)`` when cells finished different numbers of seeds."""
    counts = sorted({int(c) for c in counts if c})
    if not counts:
        return "mean over seeds"
    n = str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
    return f"mean over seeds (n={n})"


def row_label(model: Any, params: Mapping[str, Any]) -> str:
    """``resnet50 (batch 128, workers 8)``: the model, then the parameters that tell rows apart."""
    parts = [f"{'batch' if k == 'batch_size' else k} {fmt_value(v)}" for k, v in params.items()]
    return f"{model} ({', '.join(parts)})" if parts else str(model)


def varying_keys(frame: pd.DataFrame, keys: Sequence[str], within: Sequence[str]) -> list[str]:
    """The ``keys`` that take more than one value inside some group of ``within`` columns.

    A parameter that follows from the model and batch size (a learning rate scaled with the
    batch) cannot tell two rows apart and is left out; one that varies for the same model and
    batch (a new ``loader`` axis) is exactly what tells them apart, so it is kept.
    """
    within = [w for w in within if w in frame.columns]
    found = []
    for key in keys:
        if key not in frame.columns or key in within:
            continue
        values = frame[key].map(fmt_value)  # "unset" counts as a value of its own
        if within:
            spread = values.groupby([frame[w].map(fmt_value) for w in within]).nunique()
        else:
            spread = pd.Series([values.nunique()])
        if len(spread) and spread.max() > 1:
            found.append(key)
    return found


def row_labels(frame: pd.DataFrame, keys: Sequence[str]) -> pd.Series:
    """A row label per row of ``frame``: the model, then the parameters that tell rows apart.

    Batch size is shown whenever it varies (``resnet50 (batch 128)`` next to ``resnet18
    (batch 256)``); any other key in ``keys`` only when it varies for the same model and batch
    size (see :func:`varying_keys`). A parameter that is the same for all rows would only
    repeat itself in every label.
    """
    if frame.empty:
        return pd.Series([], index=frame.index, dtype=object)
    shown = varying_keys(frame, ["batch_size"], within=())
    shown += varying_keys(frame, [k for k in keys if k != "model"], within=["model", "batch_size"])
    return pd.Series(
        [row_label(row["model"], {k: row[k] for k in shown}) for _, row in frame.iterrows()],
        index=frame.index,
        dtype=object,
    )
