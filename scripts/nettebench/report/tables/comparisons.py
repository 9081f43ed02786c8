"""The report's comparisons as a table: along every axis that varies in the study (loader,
precision, package environment, library build, records from two software stacks, batch size,
...), each value against its reference, with the ratio, how it was tested and whether the data
support it.

The same verdicts as the front page's sentences (:func:`nettebench.report.answers.comparisons`),
one row each, so a ratio such as cached / pil can be read (and diffed) in a Markdown file. A
comparison with a side timed under interference states no verdict
(:func:`nettebench.report.compare.quiet_evidence`): it says which side, and the footnote gives
the one command that measures exactly those cells again.
"""

from __future__ import annotations

import pandas as pd

from nettebench.report import answers
from nettebench.report import format as T
from nettebench.report.compare import no_verdict_note
from nettebench.report.grids import no_matrix

NOTE = (
    "Along every axis that varies, each value against its reference (loader `pil`, precision "
    "O0, package environment or build `installed`, else the first), the other parameters and "
    "the hardware held: the ratio of steady img/s (above 1: faster), how it was tested, and "
    "whether the data support a difference (`no`: the interval holds 1; `no verdict`: a side "
    "or its ceiling was timed under interference)."
)
_SUPPORTED = {True: "yes", False: "no", None: "untested"}
NOTHING_VARIES = (
    "No comparison: every matrix cell on the same hardware has the same parameters and "
    "software (add a second value to an axis, e.g. `loader: [pil, cached]`)."
)


def comparison_sections(runs: pd.DataFrame) -> tuple[dict[str, list[list[str]]], list]:
    """Per hardware, ``[compared, ratio, test, supported]`` for every comparison, and the
    reasons of those whose verdict is withheld."""
    sections: dict[str, list[list[str]]] = {}
    withheld = []
    for c in answers.comparisons(runs):
        supported = _SUPPORTED[c.found.supported]
        if c.found.disturbed is not None:
            supported = f"no verdict: {c.found.disturbed.what} ‡"
            withheld.append(c.found.disturbed)
        rows = sections.setdefault(c.where, [])
        rows.append(
            [
                f"{c.name} / {c.reference}, {c.subject}",
                f"{c.found.ratio:.2f}x",
                c.found.how,
                supported,
            ]
        )
    return sections, withheld


def comparisons_markdown(runs: pd.DataFrame) -> str:
    found, withheld = comparison_sections(runs)
    if not found:
        has_matrix = not runs.empty and (runs["kind"] == "matrix").any()
        empty = NOTHING_VARIES if has_matrix else no_matrix(runs)
        return T.document("Comparisons", NOTE, [], empty=empty)
    header = ["compared", "ratio", "test", "supported"]
    sections = [
        T.section(where[0].upper() + where[1:], T.pipe_table(header, rows, "lrll"), level=2)
        for where, rows in found.items()
    ]
    if withheld:
        sections.append(no_verdict_note(withheld) + "\n")
    return T.document("Comparisons", NOTE, sections)
