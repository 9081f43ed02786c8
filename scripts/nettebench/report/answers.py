"""The report's answer in words: one sentence per comparison, generated from the runs frame.

For every piece of hardware of the study and every model: each loader against ``pil``, each
precision against O0, and each software stack against the one installed, the other parameters
held (:func:`comparisons`, which the comparisons table lists whole). A sentence states a
difference only where the data support it (:func:`nettebench.report.compare.speedup`, the
definition the tables and figures use); where they do not, it says the two cannot be told
apart, with the figure and its interval, so a reader never quotes noise as a result.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import pandas as pd

from nettebench.report import format as T
from nettebench.report.compare import BASELINE_PRECISION, Family, Speedup, speedup
from nettebench.report.grids import device_title, groups, hardware_keys, row_keys
from nettebench.vocabulary.record_keys import STATUS_OK

REFERENCE_LOADER = "pil"


def _finished(cells: pd.DataFrame) -> pd.DataFrame:
    return cells[cells["status"] == STATUS_OK]


FASTER, SLOWER, ALIKE, UNTESTED = "faster", "slower", "alike", "untested"
DISTURBED = "disturbed"  # a side was timed under interference: no verdict


def direction(found: Speedup | None) -> str | None:
    """A :class:`~compare.Speedup`'s verdict in one word, the one every output that states it
    uses (the front page's sentence, the CPU-versus-GPU table's precision): a direction only
    where the data support a difference, never where a side was disturbed."""
    if found is None:
        return None
    if found.disturbed is not None:
        return DISTURBED
    if found.supported:
        return FASTER if found.ratio >= 1 else SLOWER
    return ALIKE if found.supported is False else UNTESTED


def sentence(where: str, subject: str, other: str, reference: str, found: Speedup) -> str:
    """One comparison in words (``where``: ``On a CPU (...), ``); a difference only where
    ``found`` supports it, none where a side was disturbed (which side, and the rerun)."""
    ratio, how = found.ratio, found.how()
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
            f"{where}{other} and {reference} train {subject} at speeds their processes cannot "
            f"tell apart: {ratio:.2f}x ({how})."
        )
    verdict = f", no verdict: {found.disturbed.text()}" if word == DISTURBED else ""
    return f"{where}{other} against {reference} on {subject}: {ratio:.2f}x ({how}){verdict}."


def _label(row_values: dict) -> str:
    """``resnet18`` plus the other parameters that vary in the table (``(precision O0)``)."""
    extra = [f"{k} {T.fmt_value(v)}" for k, v in row_values.items() if k != "model"]
    return row_values["model"] + (f" ({', '.join(extra)})" if extra else "")


def _varying(table: pd.DataFrame, keys: Iterable[str]) -> list[str]:
    return [k for k in keys if k in table and table[k].map(T.fmt_value).nunique() > 1]


# What each axis is compared against; an axis not named here, against its first value.
REFERENCES = {"loader": REFERENCE_LOADER, "precision": BASELINE_PRECISION}
# Cell parameters that pick the software a cell runs (a package environment, a source build):
# cells that differ in one differ in their setup too, so the setup is not held for them.
VERSION_AXES = ("environment", "torchvision", "apex")
SOFTWARE = "setup"  # the axis of records merged from two software stacks with no parameter
# The axes the front page states in words (the table has every axis that varies).
SENTENCE_AXES = ("loader", "precision", *VERSION_AXES, SOFTWARE)
_PREFERRED_REFERENCE = "installed"  # of a version axis: the stack the study runs by default


@dataclass(frozen=True)
class Comparison:
    """One comparison of the study: ``name`` against ``reference`` along ``axis``, the other
    parameters held (``subject``), on the hardware ``where`` names."""

    where: str
    axis: str
    name: str
    reference: str
    subject: str
    found: Speedup  # read once the family (all comparisons returned together) is complete
    emulated: bool


def _side(value: str, cells: pd.DataFrame, versions: bool) -> str:
    """A side's name: its value, with the torch it imported where the sides' torch differ."""
    if not versions or "env_torch" not in cells:
        return value
    torch = sorted({T.fmt_value(v) for v in _finished(cells)["env_torch"] if not T.is_missing(v)})
    return f"{value} (torch {', '.join(torch)})" if torch else value


def comparisons(runs: pd.DataFrame, axes: Iterable[str] | None = None) -> list[Comparison]:
    """Every comparison of the study's matrix along ``axes`` (default: every axis that varies
    but the model), in order: per hardware, the axes of :data:`SENTENCE_AXES` first. They are
    one family: each verdict is Holm-corrected over all the comparisons returned together."""
    if runs.empty:
        return []
    matrix = runs[runs["kind"] == "matrix"]
    found: list[Comparison] = []
    family = Family()
    for _, table in groups(matrix, hardware_keys(matrix)):
        where = device_title(table, spoken=True)
        machine = table["machine"].iloc[0] if "machine" in table else None
        where += "" if T.is_missing(machine) else f", machine {T.fmt_value(machine)}"
        varying = _varying(table, [*row_keys(runs), "precision"])
        software = [SOFTWARE] if _varying(table, [SOFTWARE]) else []
        keys = ["model", *varying, *software]
        picked = any(a in varying for a in VERSION_AXES)
        candidates = [a for a in SENTENCE_AXES if a in keys]
        candidates += [a for a in keys if a not in candidates and a != "model"]
        for axis in candidates:
            if axes is not None and axis not in axes:
                continue
            if axis == SOFTWARE and picked:
                continue  # the parameter that picked the software compares it already
            versions = axis in VERSION_AXES or axis == SOFTWARE
            held = [k for k in keys if k != axis and not (versions and k == SOFTWARE)]
            found += _along(where, axis, table, held, versions, family)
    return found


def _along(
    where: str, axis: str, table: pd.DataFrame, held: list[str], versions: bool, family: Family
):
    if axis == "precision":
        order = T.sort_precisions(table["precision"])
    else:
        order = list(dict.fromkeys(table[axis].map(T.fmt_value)))
    preferred = REFERENCES.get(axis) or (_PREFERRED_REFERENCE if axis in VERSION_AXES else None)
    reference = preferred if preferred in order else order[0]
    found = []
    for values, part in groups(table, held):
        names = part[axis].map(T.fmt_value)
        base = part[names == reference]
        if base.empty:
            continue
        for name in [n for n in order if n != reference and (names == n).any()]:
            cells = part[names == name]
            first = _side(reference, base, versions)
            second = _side(name, cells, versions)
            result = speedup(base, cells, names=(first, second), family=family)
            if not result:
                continue
            emulated = axis == "precision" and (
                _finished(cells)["precision_emulated"].map(T.is_missing).eq(False).any()
            )
            subject = _label(dict(zip(held, values, strict=True)))
            found.append(Comparison(where, axis, second, first, subject, result, bool(emulated)))
    return found


def answer_sentences(runs: pd.DataFrame) -> list[str]:
    """The comparisons of :data:`SENTENCE_AXES` in words, one sentence each."""
    found = []
    for c in comparisons(runs, SENTENCE_AXES):
        where = f"On {c.where}, "
        if c.emulated:
            found.append(
                f"{where}{c.name} is emulated: {c.found.ratio:.2f}x {c.reference} on "
                f"{c.subject} ({c.found.how()})"
                + (f", no verdict: {c.found.disturbed.text()}." if c.found.disturbed else ".")
            )
        else:
            name, reference = (f"`{n}`" if c.axis == "loader" else n for n in (c.name, c.reference))
            found.append(sentence(where, c.subject, name, reference, c.found))
    return found
