"""The report's comparisons as a table: along every axis that varies (loader, precision, package
environment, library build, software stack, batch size, ...), each value against its reference,
the ratio, its test and whether the data support it; the front page's sentences
(:func:`nettebench.report.answers.comparisons`) one row each, one Holm family. A side timed
under interference gets no verdict (:func:`nettebench.report.compare.quiet_evidence`).
"""

from __future__ import annotations

import pandas as pd

from nettebench.report import answers, stats
from nettebench.report import format as T
from nettebench.report.compare import no_verdict_note
from nettebench.report.grids import no_matrix

NOTE = (
    "Along every axis that varies, each value against its reference (loader `pil`, precision "
    "O0, build `installed`, else the first), all else held: the ratio of steady img/s (above "
    f"1: faster), processes a side, Welch's {stats.LEVEL} interval between processes and its p, "
    "and the "
    "verdict (`no`: not after Holm's correction over this table; `untested`: one process a "
    "side; `no verdict`: a side timed under interference). Raw and corrected p: "
    "`comparisons.csv`."
)
_SUPPORTED = {True: "yes", False: "no", None: "untested"}
NOTHING_VARIES = (
    "No comparison: every matrix cell on the same hardware has the same parameters and "
    "software (add a second value to an axis, e.g. `loader: [pil, cached]`)."
)
# comparisons.csv: one row per comparison of the table, its family's correction included
CSV_COLUMNS = ("where", "axis", "compared", "reference", "subject", "ratio", "low", "high")
CSV_COLUMNS += ("n_reference", "n_compared", "p", "p_holm", "family_size", "supported", "disturbed")


def comparison_sections(
    found: list[answers.Comparison],
) -> tuple[dict[str, list[list[str]]], list, str]:
    """Per hardware, ``[compared, ratio, processes, test, supported]`` for every comparison,
    the reasons of those whose verdict is withheld, and the family's sentence."""
    sections: dict[str, list[list[str]]] = {}
    withheld = []
    for c in found:
        supported = _SUPPORTED[c.found.supported]
        if c.found.disturbed is not None:
            supported = f"no verdict: {c.found.disturbed.what} ‡"
            withheld.append(c.found.disturbed)
        rows = sections.setdefault(c.where, [])
        n_reference, n_compared = c.found.n
        rows.append(
            [
                f"{c.name} / {c.reference}, {c.subject}",
                f"{c.found.ratio:.2f}x",
                f"{n_compared} / {n_reference}",
                c.found.how(),
                supported,
            ]
        )
    family = found[0].found.family.note() if found else ""
    return sections, withheld, family


def comparisons_markdown(runs: pd.DataFrame, compared: list[answers.Comparison]) -> T.Document:
    """The table of ``compared``, :func:`answers.comparisons` of ``runs`` (the aggregate writes
    the CSV from the same family)."""
    found, withheld, family = comparison_sections(compared)
    if not found:
        has_matrix = not runs.empty and (runs["kind"] == "matrix").any()
        empty = NOTHING_VARIES if has_matrix else no_matrix(runs)
        return T.document("Comparisons", NOTE, [], empty=empty)
    header = ["compared", "ratio", "processes", "test", "supported"]
    sections = [
        block
        for where, rows in found.items()
        for block in T.section(
            where[0].upper() + where[1:], T.table(header, rows, "lrrll"), level=2
        )
    ]
    if withheld:
        sections.append(T.Paragraph(no_verdict_note(withheld)))
    return T.document("Comparisons", f"{NOTE} {family}", sections)


def comparisons_frame(compared: list[answers.Comparison]) -> pd.DataFrame:
    """The table's comparisons (:func:`answers.comparisons` of the runs), one row each, with the
    raw p of Welch's test between processes and the p after Holm's correction over the table
    (``p_holm``)."""
    return pd.DataFrame([_csv_row(c) for c in compared], columns=list(CSV_COLUMNS))


def _csv_row(c: answers.Comparison) -> tuple:
    """A comparison as a row of comparisons.csv, in :data:`CSV_COLUMNS`' order."""
    s, names = c.found, (c.where, c.axis, c.name, c.reference, c.subject)
    size = None if s.family is None else s.family.size
    disturbed = None if s.disturbed is None else s.disturbed.what
    return (*names, s.ratio, s.low, s.high, *s.n, s.p, s.p_corrected, size, s.supported, disturbed)
