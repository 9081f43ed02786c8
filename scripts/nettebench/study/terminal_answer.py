"""A run's answer in the terminal: the front page's sentences, printed when the run ends.

The aggregation writes them as plain text (``results/tables/answer.txt``,
:func:`nettebench.report.front_page.answer_text`); the workflow's ``onsuccess`` prints them, so
a study run ends with its answer rather than with the report's path. Only an answer this run
wrote is printed: a run that trained one cell again and left the tables alone says nothing
that could be stale.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import TextIO

from nettebench.vocabulary import outputs

ANSWER = Path("results/tables") / outputs.ANSWER_FILE
WIDTH = 100  # a sentence is wrapped to this many columns: a terminal's lines, not one of 1,300


def print_answer(since: float, path: Path = ANSWER, stream: TextIO | None = None) -> bool:
    """Print the answer at ``path`` if it was written at or after ``since`` (a Unix time): a
    heading line, then each sentence indented and wrapped to :data:`WIDTH` columns (its
    continuation lines indented further). True when something was printed."""
    try:
        if path.stat().st_mtime < since:
            return False
    except FileNotFoundError:
        return False
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line]
    if not lines:
        return False
    stream = stream or sys.stderr
    print(f"nettebench: the answer (the report's front page says more; {path}):", file=stream)
    for line in lines:
        # a path or a command is never split: a line may pass WIDTH by one long word
        wrapped = textwrap.fill(
            line, WIDTH, initial_indent="  ", subsequent_indent="    ",
            break_long_words=False, break_on_hyphens=False,
        )  # fmt: skip
        print(wrapped, file=stream)
    return True
