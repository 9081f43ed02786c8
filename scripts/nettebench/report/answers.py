"""The report's answer in words: one sentence per comparison, generated from the runs frame.

For every table of the study (dataset, epochs, device, setup) and every model: each loader
against the reference loader (``pil``) at the same precision, and each precision against O0
with the same loader. A sentence states a difference only where the data support it
(:func:`nettebench.report.compare.cells_speedup`: the within-cell interval of two single-seed
cells' steady rates; Welch's test on the seeds' times where both sides have several); where
they do not, it says the two cannot be told apart, with the figure and its interval, so a
reader never quotes noise as a result. A precision the CPU emulated says so first.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import pandas as pd

from nettebench.report import format as T
from nettebench.report import stats
from nettebench.report.compare import BASELINE_PRECISION, ceiling_drift, cells_speedup, seconds
from nettebench.report.grids import GROUP_KEYS, device_title, groups, row_keys
from nettebench.vocabulary.record_keys import STATUS_OK

REFERENCE_LOADER = "pil"


def _finished(cells: pd.DataFrame) -> pd.DataFrame:
    return cells[cells["status"] == STATUS_OK]


def _where(table: pd.DataFrame) -> str:
    """``a CPU (Intel Xeon ...)`` / ``a GPU (NVIDIA H200)``."""
    kinds = {str(t) for t in table["device_type"] if not T.is_missing(t)}
    names = sorted({str(n) for n in table["device_name"] if not T.is_missing(n)})
    kind = "a GPU" if kinds == {"cuda"} else "a CPU" if kinds == {"cpu"} else device_title(table)
    return f"{kind} ({'; '.join(names)})" if names and kind.startswith("a ") else kind


def verdict(reference: pd.DataFrame, other: pd.DataFrame) -> tuple[float, str, bool | None] | None:
    """(ratio, how it was tested, supported) of ``other`` against ``reference`` (above 1:
    other is faster); None when either side has no finished cell."""
    within = cells_speedup(reference, other)
    if within is not None and within.ratio is not None:
        if within.low is None:
            return within.ratio, "too few steps for an interval", None
        how = f"95 % interval {within.low:.2f}-{within.high:.2f}x over their steady steps"
        drift = ceiling_drift(reference, other)
        if drift is not None:
            how += f", widened by the {math.expm1(drift):.0%} their identical ceilings differed"
        return within.ratio, how, within.supported
    base, found = seconds(reference), seconds(other)
    if not base or not found:
        return None
    ratio = (sum(base) / len(base)) / (sum(found) / len(found))
    tested = stats.welch(base, found)
    if tested.supported is None:
        return ratio, "one seed each and no step times: untested", None
    n = f"{len(base)} and {len(found)} seeds"
    return ratio, f"Welch's t-test over {n}, p = {tested.p:.2g}", tested.supported


FASTER, SLOWER, ALIKE, UNTESTED = "faster", "slower", "alike", "untested"


def direction(found: tuple | None) -> str | None:
    """The verdict of a :func:`verdict` in one word, the one every output that states it uses
    (the front page's sentence, the CPU-versus-GPU table's precision): :data:`FASTER` or
    :data:`SLOWER` only where the data support a difference, :data:`ALIKE` where they do not,
    :data:`UNTESTED` where nothing could be tested; None without a comparison."""
    if found is None:
        return None
    ratio, _, supported = found
    if supported:
        return FASTER if ratio >= 1 else SLOWER
    return ALIKE if supported is False else UNTESTED


def sentence(where: str, subject: str, other: str, reference: str, found: tuple) -> str:
    """One comparison in words (``where``: ``On a CPU (...), ``); a difference only where
    ``found`` supports it."""
    ratio, how, _ = found
    word = direction(found)
    if word == FASTER:
        return f"{where}{other} trains {subject} {ratio:.2f}x faster than {reference} ({how})."
    if word == SLOWER:
        return (
            f"{where}{other} trains {subject} slower than {reference}: {ratio:.2f}x its "
            f"speed ({how})."
        )
    if word == ALIKE:
        return (
            f"{where}{other} and {reference} train {subject} at speeds the noise cannot tell "
            f"apart: {ratio:.2f}x ({how}, which holds 1)."
        )
    return f"{where}{other} against {reference} on {subject}: {ratio:.2f}x ({how})."


def _label(row_values: dict) -> str:
    """``resnet18`` plus the other parameters that vary in the table (``(precision O0)``)."""
    extra = [f"{k} {T.fmt_value(v)}" for k, v in row_values.items() if k != "model"]
    return row_values["model"] + (f" ({', '.join(extra)})" if extra else "")


def _varying(table: pd.DataFrame, keys: Iterable[str]) -> list[str]:
    return [k for k in keys if k in table and table[k].map(T.fmt_value).nunique() > 1]


def answer_sentences(runs: pd.DataFrame) -> list[str]:
    """The comparisons of the study's matrix, one sentence each (see the module)."""
    if runs.empty:
        return []
    matrix = runs[runs["kind"] == "matrix"]
    found: list[str] = []
    for _, table in groups(matrix, GROUP_KEYS):
        where = f"On {_where(table)}, "
        keys = ["model", *_varying(table, [*row_keys(runs), "precision"])]
        if "loader" in keys:
            found += _loader_sentences(where, table, keys)
        if "precision" in keys:
            found += _precision_sentences(where, table, keys)
    return found


def _loader_sentences(where: str, table: pd.DataFrame, keys: list[str]) -> list[str]:
    names = [T.fmt_value(v) for v in dict.fromkeys(table["loader"])]
    reference = REFERENCE_LOADER if REFERENCE_LOADER in names else names[0]
    held = [k for k in keys if k != "loader"]
    found = []
    for values, part in groups(table, held):
        loaders = part["loader"].map(T.fmt_value)
        base = part[loaders == reference]
        for name in dict.fromkeys(n for n in loaders if n != reference):
            result = verdict(base, part[loaders == name])
            if result:
                subject = _label(dict(zip(held, values, strict=True)))
                found.append(sentence(where, subject, f"`{name}`", f"`{reference}`", result))
    return found


def _precision_sentences(where: str, table: pd.DataFrame, keys: list[str]) -> list[str]:
    held = [k for k in keys if k != "precision"]
    found = []
    for values, part in groups(table, held):
        base = part[part["precision"] == BASELINE_PRECISION]
        if base.empty:
            continue
        for precision in T.sort_precisions(part["precision"]):
            if precision == BASELINE_PRECISION:
                continue
            cells = part[part["precision"] == precision]
            result = verdict(base, cells)
            if not result:
                continue
            subject = _label(dict(zip(held, values, strict=True)))
            emulated = _finished(cells)["precision_emulated"].map(T.is_missing).eq(False).any()
            if emulated:
                ratio, how, _ = result
                found.append(
                    f"{where}{precision} is emulated: {ratio:.2f}x "
                    f"{BASELINE_PRECISION} on {subject} ({how})."
                )
            else:
                found.append(sentence(where, subject, precision, BASELINE_PRECISION, result))
    return found
