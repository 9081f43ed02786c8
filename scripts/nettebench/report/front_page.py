"""The report's front page: the answer first.

Two steps, because the figure is drawn after the tables: the aggregation writes
``results/tables/headline.html`` (:func:`headline_html`: the answer in words, stating only the
differences the data support, :mod:`nettebench.report.answers`; one line counting the caveats a
reader must know before quoting a number; the headline table); then ``python -m nettebench
report front-page`` (:func:`compose`) adds the throughput figure as a data URI, so the page
stays one file, into ``results/front_page.html``, which ``report/workflow.rst`` includes.
"""

from __future__ import annotations

import argparse
import base64
import html
import sys
from dataclasses import replace
from pathlib import Path

import pandas as pd

from nettebench.report import caveats as C
from nettebench.report import format as T
from nettebench.report.tables.energy import energy_sentence
from nettebench.vocabulary import commands
from nettebench.vocabulary.atomic import write_text_atomic


def caveat_parts(runs: pd.DataFrame) -> list[tuple[str, bool]]:
    """The caveats line's parts, each with whether it warns (a count above zero, conditions
    never recorded, an emulated precision) or only reports that nothing was found."""
    if runs.empty:
        return []
    # A cell counts as measured when either of its windows was (its epochs' or its ceiling's).
    columns = ["interference", "ceiling_interference"]
    measured = runs[~runs[columns].apply(lambda c: c.map(T.is_missing)).all(axis=1)]
    count = int(measured[columns].apply(lambda c: c.map(T.as_bool)).any(axis=1).sum())
    parts = [
        (
            f"{count} of {len(measured)} cells were timed under interference, "
            f"theirs or their ceiling's ({C.INTERFERENCE_MARK}; table Timing conditions)",
            count > 0,
        )
        if len(measured)
        else ("no timing conditions were recorded (older records)", True)
    ]
    impossible = int(runs["implausible"].map(lambda v: not T.is_missing(v)).sum())
    if impossible:
        text = f"{impossible} cell(s) have a figure that cannot be true as measured"
        parts.append((f"{text} ({C.IMPOSSIBLE_MARK}; `implausible` in runs.csv)", True))
    emulated = runs.loc[~runs["precision_emulated"].map(T.is_missing), "precision"]
    if len(emulated):
        text = f"{', '.join(sorted(set(map(str, emulated))))} ran emulated on this CPU"
        parts.append((f"{text} (no native bf16): its times measure the emulation", True))
    return parts


def caveat_line(runs: pd.DataFrame) -> str:
    """``Caveats: 2 of 5 cells were timed under interference (‡) ...`` (plain text)."""
    parts = caveat_parts(runs)
    return "Caveats: " + "; ".join(text for text, _ in parts) + "." if parts else ""


def caveats_html(runs: pd.DataFrame) -> str:
    """The caveats line: bold red (``p.caveats``) only when one of its parts warns; a line that
    found nothing to warn of (``0 of 4 cells ...``) is plain (``p.caveats-none``)."""
    parts = caveat_parts(runs)
    if not parts:
        return ""
    line = html.escape(caveat_line(runs))
    if any(warns for _, warns in parts):
        return f'<p class="caveats"><strong>{line}</strong></p>\n'
    return f'<p class="caveats-none">{line}</p>\n'


def answer_text(runs: pd.DataFrame, sentences: list[str]) -> str:
    """The front page's answer (``sentences``, :func:`answer_sentences` of ``runs``) and caveats
    line as plain text, a line each: what a run prints in the terminal at its end
    (``results/tables/answer.txt``); empty when there is none."""
    lines = [*sentences, caveat_line(runs)]
    return "".join(f"{line}\n" for line in lines if line)


def headline_html(runs: pd.DataFrame, headline: T.Document, sentences: list[str]) -> str:
    """The answer in words (``sentences``, :func:`answer_sentences` of ``runs``, computed once
    for this page and answer.txt; backticks as code), the caveats line, then the headline
    table's HTML (headings one level down)."""
    answer = "".join(f'<p class="answer">{T.inline_html(text)}</p>\n' for text in sentences)
    blocks = [
        replace(b, level=b.level + 1) if isinstance(b, T.Heading) else b for b in headline.blocks
    ]
    body = T.Document(tuple(blocks)).html_body()
    return f"{answer}{energy_sentence(runs)}{caveats_html(runs)}{body}\n"


# Snakemake's landing panel is `flex items-center h-screen overflow-auto`: a description taller
# than the window is centred and its top cannot be scrolled to; and it is a 32rem column. Its
# Tailwind `prose` class colours every <strong> itself (--tw-prose-bold), so the caveats line's
# red must be set on the <strong> too, or it renders black.
REPORT_CSS = """
div.h-screen.items-center { align-items: flex-start; }
div.prose.max-w-lg { max-width: 60rem; }
.nettebench-front-page img { max-width: 100%; height: auto; }
.nettebench-front-page p.caveats, .nettebench-front-page p.caveats strong { color: #9a1b1b; }
.nettebench-front-page td.r, .nettebench-front-page th.r { text-align: right; }
.nettebench-front-page code::before, .nettebench-front-page code::after { content: none; }
"""


def compose(headline: str, figure_png: bytes, *, caption: str, extras: tuple[str, ...] = ()) -> str:
    """The front page: the headline fragment, ``extras`` (HTML fragments: the inference
    sentence, nettebench.report.tables.inference), then the figure (a PNG data URI) and caption."""
    uri = "data:image/png;base64," + base64.b64encode(figure_png).decode("ascii")
    figure = (
        f'<figure><img src="{uri}" alt="{html.escape(caption)}">'
        f"<figcaption>{html.escape(caption)}</figcaption></figure>\n"
    )
    return (
        f'<style>{REPORT_CSS}</style>\n<div class="nettebench-front-page">\n'
        f"{headline}{''.join(extras)}{figure}</div>\n"
    )


FIGURE_CAPTION = (
    "Training throughput of every cell (bars) against its compute ceiling (dashed), measured in "
    "the cell's own job; marks: ‡ timed under interference, ✗ faster than its own ceiling."
)


def main(argv: list[str] | None = None) -> int:
    parser = commands.Parser(prog="python -m nettebench report front-page")
    parser.add_argument("--headline", required=True, type=Path, help="tables/headline.html")
    parser.add_argument("--figure", required=True, type=Path, help="figures/throughput.png")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument(
        "--extra", nargs="*", type=Path, default=[], help="HTML fragments after the headline"
    )
    return commands.run(parser, _front_page, argv, errors=(FileNotFoundError,))


def _front_page(args: argparse.Namespace) -> tuple[str, ...]:
    page = compose(
        args.headline.read_text(encoding="utf-8"),
        args.figure.read_bytes(),
        caption=FIGURE_CAPTION,
        extras=tuple(path.read_text(encoding="utf-8") for path in args.extra),
    )
    write_text_atomic(args.out, page)
    return ()


if __name__ == "__main__":  # run as python -m nettebench report front-page
    sys.exit(commands.moved(__spec__.name))
