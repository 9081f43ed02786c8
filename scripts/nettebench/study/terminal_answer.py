"""A run's answer in the terminal: the front page's sentences, printed when the run ends.

The aggregation writes them as plain text (``results/tables/answer.txt``,
:func:`nettebench.report.front_page.answer_text`); the workflow's ``onsuccess`` prints them, so
a study run ends with its answer rather than with the report's path. Only an answer this run
wrote is printed: a run that trained one cell again and left the tables alone says nothing
that could be stale.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

from nettebench.vocabulary import outputs

ANSWER = Path("results/tables") / outputs.ANSWER_FILE


def print_answer(since: float, path: Path = ANSWER, stream: TextIO | None = None) -> bool:
    """Print the answer at ``path`` if it was written at or after ``since`` (a Unix time): a
    heading line, then each sentence indented. True when something was printed."""
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
        print(f"  {line}", file=stream)
    return True
