"""The report's comparisons as a table: each loader against ``pil`` and each precision against
O0, with the ratio, how it was tested and whether the data support it.

The same verdicts as the front page's sentences (:mod:`nettebench.report.answers`), one row each,
so a ratio such as cached / pil can be read (and diffed) in a Markdown file.
"""

from __future__ import annotations

import pandas as pd

from nettebench.report import answers
from nettebench.report import format as T
from nettebench.report.compare import BASELINE_PRECISION
from nettebench.report.grids import GROUP_KEYS, groups, no_matrix, row_keys

NOTE = (
    "Each loader against `pil` and each precision against O0, the other parameters held: "
    "the ratio of steady img/s (above 1: faster), how it was tested, and whether the data "
    "support a difference (`no`: the interval holds 1)."
)
_SUPPORTED = {True: "yes", False: "no", None: "untested"}


def comparison_sections(runs: pd.DataFrame) -> dict[str, list[list[str]]]:
    """Per device (and setup), ``[compared, ratio, test, supported]`` for every comparison."""
    sections: dict[str, list[list[str]]] = {}
    if runs.empty:
        return sections
    for _, table in groups(runs[runs["kind"] == "matrix"], GROUP_KEYS):
        rows = sections.setdefault(answers._where(table), [])
        keys = ["model", *answers._varying(table, [*row_keys(runs), "precision"])]
        for axis, reference in (
            ("loader", answers.REFERENCE_LOADER),
            ("precision", BASELINE_PRECISION),
        ):
            if axis not in keys:
                continue
            held = [k for k in keys if k != axis]
            for values, part in groups(table, held):
                names = part[axis].map(T.fmt_value)
                base = part[names == reference]
                if base.empty:
                    continue
                for name in dict.fromkeys(n for n in names if n != reference):
                    found = answers.verdict(base, part[names == name])
                    if found:
                        ratio, how, supported = found
                        label = answers._label(dict(zip(held, values, strict=True)))
                        compared = f"{name} / {reference}, {label}"
                        rows.append([compared, f"{ratio:.2f}x", how, _SUPPORTED[supported]])
    return {where: rows for where, rows in sections.items() if rows}


def comparisons_markdown(runs: pd.DataFrame) -> str:
    found = comparison_sections(runs)
    if not found:
        return T.document("Comparisons", NOTE, [], empty=no_matrix(runs))
    header = ["compared", "ratio", "test", "supported"]
    sections = [
        T.section(where[0].upper() + where[1:], T.pipe_table(header, rows, "lrll"), level=2)
        for where, rows in found.items()
    ]
    return T.document("Comparisons", NOTE, sections)
