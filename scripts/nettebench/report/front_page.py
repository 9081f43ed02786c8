"""The report's front page: the answer first.

An HTML fragment (``results/tables/front_page.html``) that ``report/workflow.rst`` embeds above
its prose, followed there by the throughput-against-ceiling figure: the study's headline table
(seconds by model x precision, with its marks and footnotes), and one line that counts the
caveats a reader must know before quoting it (windows timed under interference, figures
withheld as impossible, precisions the CPU emulated), pointing at the tables that give them.
"""

from __future__ import annotations

import html

import pandas as pd

from nettebench.report import caveats as C
from nettebench.report import format as T


def _demote(body: str) -> str:
    """Headings one level down (the report page has its own title)."""
    for level in range(5, 0, -1):
        body = body.replace(f"<h{level}>", f"<h{level + 1}>").replace(
            f"</h{level}>", f"</h{level + 1}>"
        )
    return body


def caveat_line(runs: pd.DataFrame) -> str:
    """``Caveats: 2 of 5 cells were timed under interference (‡) ...`` (plain text)."""
    if runs.empty:
        return ""
    parts = []
    measured = runs[~runs["interference"].map(T.is_missing)]
    if len(measured):
        disturbed = measured["interference"].map(C._flag) | measured["ceiling_interference"].map(
            C._flag
        )
        parts.append(
            f"{int(disturbed.sum())} of {len(measured)} cells were timed under interference, "
            f"theirs or their ceiling's ({C.INTERFERENCE_MARK}; table *Timing conditions*)"
        )
    else:
        parts.append("no timing conditions were recorded (older records)")
    impossible = int(runs["implausible"].map(lambda v: not T.is_missing(v)).sum())
    if impossible:
        parts.append(
            f"{impossible} cell(s) have a figure that cannot be true as measured "
            f"({C.IMPOSSIBLE_MARK}; `implausible` in runs.csv)"
        )
    emulated = sorted(
        {
            str(p)
            for p, e in zip(runs["precision"], runs["precision_emulated"], strict=True)
            if not T.is_missing(e)
        }
    )
    if emulated:
        parts.append(
            f"{', '.join(emulated)} ran emulated on this CPU (no native bf16): its times "
            "measure the emulation"
        )
    return "Caveats: " + "; ".join(parts) + "."


def front_page_html(runs: pd.DataFrame, headline_markdown: str) -> str:
    """The fragment: the headline table's HTML, then the caveats line."""
    _, body = T.markdown_body(headline_markdown)
    line = caveat_line(runs)
    caveats = f'<p class="caveats"><strong>{html.escape(line)}</strong></p>\n' if line else ""
    return f'<div class="nettebench-front-page">\n{caveats}{_demote(body)}\n</div>\n'
