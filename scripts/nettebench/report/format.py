"""Numbers and labels as the tables write them, and the document model they are written in.

Every formatting rule (one decimal for seconds, thousands separators for img/s, ``OOM``/``n/a``
for cells that did not run, ``~`` for extrapolated times) and the precision order and row
labels that tables and figures share live here. A table file is a :class:`Document` of blocks,
written as Markdown (GitHub pipe tables) and as a self-contained HTML page (Snakemake's report
shows only HTML inline), never read back; :func:`csv_to_html` does the same for runs.csv.
"""

from __future__ import annotations

import html
import io
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from nettebench.report.stats import LEVEL
from nettebench.vocabulary.precision import PRECISION_NAMES

# Display order of precisions: the precision table's own order (O0, tf32, O1, O2, O3, bf16, fp32),
# so every table and figure reads from "plain fp32" towards "least precise".
PRECISION_ORDER: tuple[str, ...] = tuple(PRECISION_NAMES)

# What a cell shows when it has no number, by status (vocabulary.record_keys.STATUSES).
OUTCOME_TEXT = {"oom": "OOM", "unsupported": "n/a"}
APPROX_MARK = "~"  # prefix of an extrapolated time
PARTIAL_MARK = "†"  # suffix when only some seeds of a cell finished
MISSING_LABEL = "default"  # None, or a parameter added after the cell ran: its default


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
    """A parameter value for a label: ints without ``.0``, missing or None as ``default``."""
    if is_missing(value):
        return MISSING_LABEL
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def number_format(spec: str, suffix: str = "") -> Callable[[Any], str]:
    """A formatter of a number by the format ``spec`` (then ``suffix``), blank for no value."""

    def fmt(value: Any) -> str:
        return "" if is_missing(value) else f"{float(value):{spec}}{suffix}"

    return fmt


fmt_seconds = number_format(".1f")  # seconds, like the study's tables: 1440.3
fmt_accuracy = number_format(".1f")  # an accuracy already in percent: 79.2


def fmt_rate(value: Any) -> str:
    """Images per second as an integer with thousands separators (``5,765``)."""
    return "" if is_missing(value) else f"{round(float(value)):,}"


def fmt_percent(share: Any) -> str:
    """A share in [0, 1] as a percentage with one decimal (``12.5``)."""
    return "" if is_missing(share) else f"{100 * float(share):.1f}"


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


@dataclass(frozen=True)
class Heading:
    """A heading: level 1 is a document's title."""

    level: int
    text: str

    def markdown(self) -> str:
        return f"{'#' * self.level} {self.text}\n"

    def html(self, *, after_table: bool = False) -> str:
        return f"<h{self.level}>{inline_html(self.text)}</h{self.level}>"


@dataclass(frozen=True)
class Paragraph:
    """A paragraph of plain text (backticks mark code); one under a table is its footnote."""

    text: str

    def markdown(self) -> str:
        return f"{self.text}\n"

    def html(self, *, after_table: bool = False) -> str:
        css = ' class="note"' if after_table else ""
        return f"<p{css}>{inline_html(_one_line(self.text))}</p>"


@dataclass(frozen=True)
class Table:
    """A table of text cells, ``align`` one letter per column (``l`` or ``r``); :func:`table`
    builds one from any values."""

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    align: str

    def markdown(self) -> str:
        """A GitHub pipe table (``|`` escaped, a line break a space)."""
        rule = "|" + "|".join("---:" if a == "r" else "---" for a in self.align) + "|"
        lines = [_pipe_row(self.header), rule, *map(_pipe_row, self.rows)]
        return "\n".join(lines) + "\n"

    def html(self, *, after_table: bool = False) -> str:
        return html_table(self.header, self.rows, self.align, lambda c: inline_html(_one_line(c)))


Block = Heading | Paragraph | Table


def table(header: Sequence[Any], rows: Iterable[Sequence[Any]], align: str = "") -> Table:
    """A :class:`Table` of ``str`` of each value; ``align`` defaults to ``l`` per column, rows
    are cut or padded with blanks to the header's width, so a ragged row cannot break it."""
    width = len(header)
    cells = [[str(c) for c in list(row)[:width]] for row in rows]
    return Table(
        tuple(str(h) for h in header),
        tuple(tuple(row + [""] * (width - len(row))) for row in cells),
        (align + "l" * width)[:width],
    )


def _pipe_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |"


def _one_line(text: str) -> str:
    """A cell's or paragraph's text as its HTML shows it: a line break is a space (as Markdown
    reads it), the ends stripped."""
    return text.replace("\n", " ").strip()


def section(title: str, *body: Block, notes: Sequence[str] = (), level: int = 3) -> list[Block]:
    """A heading, the blocks under it (a table, a sentence), then a paragraph per footnote."""
    return [Heading(level, title), *body, *map(Paragraph, notes)]


@dataclass(frozen=True)
class Document:
    """A document as blocks, written twice from them: as Markdown and as an HTML page."""

    blocks: tuple[Block, ...]

    def markdown(self) -> str:
        """The blocks with a blank line between each two."""
        return "\n".join(block.markdown() for block in self.blocks)

    def html_body(self) -> str:
        """The blocks as HTML without the page around it (the report's front page embeds it);
        paragraphs between a table and the next heading are its footnotes, set smaller."""
        parts = []
        after_table = False
        for block in self.blocks:
            parts.append(block.html(after_table=after_table))
            after_table = isinstance(block, Table) or (after_table and isinstance(block, Paragraph))
        return "\n".join(parts)

    def html(self, title: str | None = None) -> str:
        """A self-contained HTML page; ``title`` defaults to the first heading."""
        first = next((b.text for b in self.blocks if isinstance(b, Heading)), "nettebench")
        return html_page(title or first.replace("`", ""), self.html_body())


def document(title: str, note: str, blocks: Iterable[Block] = (), *, empty: str = "") -> Document:
    """A whole table file: the title, its one-paragraph note, then ``blocks`` (or, when there
    are none, the paragraph ``empty``)."""
    body = tuple(blocks) or ((Paragraph(empty),) if empty else ())
    return Document((Heading(1, title), Paragraph(note), *body))


SEEDS_TEXT = f"mean ± {LEVEL} confidence interval over seeds"  # what a table cell holds


def seeds_note(counts: Iterable[int]) -> str:
    """``mean ± 95 % confidence interval over seeds (n=2)``, or ``(n=1-3)`` when cells finished
    different numbers of seeds (a cell with one seed shows its value alone)."""
    counts = sorted({int(c) for c in counts if c})
    if not counts:
        return SEEDS_TEXT
    n = str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
    return f"{SEEDS_TEXT} (n={n})"


def row_label(model: Any, params: Mapping[str, Any]) -> str:
    """``resnet50 (batch 128, workers 8)``: the model, then the parameters that tell rows apart."""
    parts = [f"{'batch' if k == 'batch_size' else k} {fmt_value(v)}" for k, v in params.items()]
    return f"{model} ({', '.join(parts)})" if parts else str(model)


def varying_keys(frame: pd.DataFrame, keys: Sequence[str], within: Sequence[str]) -> list[str]:
    """The ``keys`` that take more than one value inside some group of ``within`` columns.

    A parameter that follows from the model and batch size (a learning rate scaled with the
    batch) cannot tell two rows apart and is left out; one that varies for the same model and
    batch (a new ``loader`` axis) is exactly what tells them apart, so it is kept.

    Values are compared as :func:`fmt_value` writes them ("unset" counts as a value of its
    own), in plain sets: the tables ask this hundreds of times per aggregation, and a pandas
    groupby per key cost more than the rest of building a table.
    """
    within = [w for w in within if w in frame.columns]
    columns = [_formatted(frame, w) for w in within]
    group_of_row = list(zip(*columns, strict=True)) if columns else [()] * len(frame)
    found = []
    for key in keys:
        if key not in frame.columns or key in within:
            continue
        values_in_group: dict[tuple[str, ...], set[str]] = {}
        for group, value in zip(group_of_row, _formatted(frame, key), strict=True):
            values_in_group.setdefault(group, set()).add(value)
        if any(len(values) > 1 for values in values_in_group.values()):
            found.append(key)
    return found


def _formatted(frame: pd.DataFrame, column: str) -> list[str]:
    """A column's values as :func:`fmt_value` writes them, one per row."""
    return frame[column].map(fmt_value).tolist()


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
    # column by column, not iterrows(): a row Series per row of a wide frame is slow
    rows = zip(frame["model"], *(frame[k] for k in shown), strict=True)
    return pd.Series(
        [row_label(model, dict(zip(shown, values, strict=True))) for model, *values in rows],
        index=frame.index,
        dtype=object,
    )


# ------------------------------------------------------------------------------------------ HTML

# One style for every HTML table: readable font, bordered cells, numbers right-aligned in
# tabular figures, zebra rows, a header that stays visible while scrolling a long table.
PAGE_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif;
  font-size: 14px; line-height: 1.45; color: #1f2328; margin: 1.2em 1.5em; max-width: none; }
h1 { font-size: 1.5em; margin: 0 0 0.6em; }
h2 { font-size: 1.25em; margin: 1.4em 0 0.5em; border-bottom: 1px solid #d0d7de; }
h3, h4, h5, h6 { font-size: 1.05em; margin: 1.2em 0 0.4em; }
p { margin: 0.4em 0 0.8em; max-width: 60em; }
p.note { font-size: 0.9em; color: #57606a; }
code { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 0.9em;
  background: #f3f4f6; padding: 0.05em 0.3em; border-radius: 3px; }
.scroll { overflow-x: auto; margin: 0.5em 0 0.8em; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border: 1px solid #c6cbd1; padding: 0.25em 0.6em; vertical-align: top; }
th { background: #eaeef2; font-weight: 600; position: sticky; top: 0; white-space: nowrap; }
tbody tr:nth-child(even) { background: #f6f8fa; }
tbody tr:hover { background: #fff8c5; }
.l { text-align: left; }
.r { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.c { text-align: center; }
"""

_CODE = re.compile(r"`([^`]+)`")


def inline_html(text: Any) -> str:
    """Escape ``text`` for HTML, then turn markdown code spans (`` `x` ``) into ``<code>``."""
    return _CODE.sub(r"<code>\1</code>", html.escape(str(text)))


def html_table(
    header: Sequence[Any],
    rows: Iterable[Sequence[Any]],
    align: str,
    render: Callable[[Any], str] = html.escape,
) -> str:
    """An HTML table of full rows, ``align`` one letter per column (``l``, ``r`` or ``c``),
    ``render`` turning a cell's text into HTML (escaping it)."""

    def cells(tag: str, row: Sequence[Any]) -> str:
        return "".join(
            f'<{tag} class="{a}">{render(c)}</{tag}>' for c, a in zip(row, align, strict=True)
        )

    body = "".join(f"<tr>{cells('td', row)}</tr>\n" for row in rows)
    return (
        '<div class="scroll"><table>\n'
        f"<thead><tr>{cells('th', header)}</tr></thead>\n"
        f"<tbody>\n{body}</tbody>\n"
        "</table></div>"
    )


def html_page(title: str, body: str) -> str:
    """A whole self-contained HTML page (inline CSS, no scripts, no external files)."""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n"
        f"<style>{PAGE_CSS}</style>\n"
        "</head>\n<body>\n"
        f"{body.rstrip()}\n"
        "</body>\n</html>\n"
    )


def csv_text(frame: pd.DataFrame) -> str:
    """A frame as the CSV files of the report write it (no index, ``\\n`` line ends)."""
    return frame.to_csv(index=False, lineterminator="\n")


def texts(name: str, document: Document) -> dict[str, str]:
    """A table file's two texts: ``name`` (Markdown) and ``name_html`` (its HTML page)."""
    return {name: document.markdown(), f"{name}_html": document.html()}


def csv_to_html(csv_text: str, title: str, note: str = "", *, empty: str = "No rows.") -> str:
    """A CSV as an HTML page: each value exactly as the CSV spells it, numeric columns right."""
    try:
        frame = pd.read_csv(io.StringIO(csv_text), dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError:
        frame = pd.DataFrame()
    align = "".join("r" if _numeric_column(frame[c]) else "l" for c in frame.columns)
    parts = [f"<h1>{html.escape(title)}</h1>"]
    if note:
        parts.append(f"<p>{inline_html(note)}</p>")
    if frame.empty:
        parts.append(f"<p>{inline_html(empty)}</p>")
    if len(frame.columns):
        parts.append(html_table(list(frame.columns), frame.itertuples(index=False), align))
    return html_page(title, "\n".join(parts))


def _numeric_column(values: pd.Series) -> bool:
    present = values[values != ""]
    return bool(len(present)) and pd.to_numeric(present, errors="coerce").notna().all()
