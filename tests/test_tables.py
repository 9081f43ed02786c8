"""The table helpers: number formats, cell outcomes, the document model (Markdown and HTML
from the same blocks), row labels."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from nettebench.report import format as T


def test_precisions_sort_in_display_order_unknown_last_alphabetically():
    names = ["fp32", "zeta", "O3", "O0", "bf16", "alpha", "tf32", "O1", "O2", None, "O0"]
    assert T.sort_precisions(names) == [
        "O0", "tf32", "O1", "O2", "O3", "bf16", "fp32", "alpha", "zeta"
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("fmt", "value", "text"),
    [
        (T.fmt_seconds, 1440.268, "1440.3"),
        (T.fmt_seconds, 7.0, "7.0"),
        (T.fmt_rate, 5765.4, "5,765"),
        (T.fmt_rate, 12.6, "13"),
        (T.fmt_percent, 0.125, "12.5"),
        (T.fmt_accuracy, 79.16, "79.2"),
        (T.fmt_speedup, 72.34, "72.3x"),
        (T.fmt_speedup, math.inf, ""),
        (T.fmt_value, 256.0, "256"),
        (T.fmt_value, 0.05, "0.05"),
        (T.fmt_value, None, "default"),
    ],
)
def test_number_formats(fmt, value, text):
    assert fmt(value) == text


@pytest.mark.parametrize("fmt", [T.fmt_seconds, T.fmt_rate, T.fmt_percent, T.fmt_accuracy])
@pytest.mark.parametrize("missing", [None, float("nan"), pd.NA])
def test_missing_numbers_are_blank(fmt, missing):
    assert fmt(missing) == ""


@pytest.mark.parametrize(
    ("statuses", "value", "approx", "text"),
    [
        (["ok", "ok"], 12.34, False, "12.3"),
        (["ok"], 12.34, True, "~12.3"),
        (["ok", "oom"], 12.34, False, "12.3†"),
        (["oom", "oom"], None, False, "OOM"),
        (["unsupported"], None, False, "n/a"),
        (["unsupported", "oom"], None, False, "OOM"),
        ([], None, False, ""),
    ],
)
def test_outcome_cell(statuses, value, approx, text):
    assert T.outcome_cell(statuses, value, T.fmt_seconds, approx=approx) == text


@pytest.mark.parametrize(
    ("value", "flag"),
    [(True, True), ("True", True), ("false", False), (None, False), (float("nan"), False)],
)
def test_as_bool(value, flag):
    assert T.as_bool(value) is flag


def test_table_aligns_escapes_and_pads():
    table = T.table(["model", "O0", "O1"], [["a|b", 1.0], ["c", "2.0", "3.0", "cut"]], "lrr")
    assert table.rows == (("a|b", "1.0", ""), ("c", "2.0", "3.0"))
    assert table.markdown().splitlines() == [
        "| model | O0 | O1 |",
        "|---|---:|---:|",
        "| a\\|b | 1.0 |  |",
        "| c | 2.0 | 3.0 |",
    ]
    assert T.table(["a", "b"], []).align == "ll"


def test_document_and_sections():
    doc = T.document("Title", "One line note.", T.section("Part", T.Paragraph("body"), notes=["f"]))
    assert doc.markdown() == "# Title\n\nOne line note.\n\n### Part\n\nbody\n\nf\n"
    assert T.document("Title", "Note.", [], empty="Nothing yet.").blocks[-1] == T.Paragraph(
        "Nothing yet."
    )
    assert T.document("Title", "Note.", [T.Paragraph("x")], empty="unused").markdown() == (
        "# Title\n\nNote.\n\nx\n"
    )
    assert T.document("Title", "Note.").markdown() == "# Title\n\nNote.\n"


def test_seeds_note():
    assert T.seeds_note([2, 2]) == "mean ± 95 % confidence interval over seeds (n=2)"
    assert T.seeds_note([1, 3, 2]) == "mean ± 95 % confidence interval over seeds (n=1-3)"
    assert T.seeds_note([]) == "mean ± 95 % confidence interval over seeds"


def test_row_labels_show_only_parameters_that_tell_rows_apart():
    frame = pd.DataFrame(
        {
            "model": ["resnet18", "resnet50", "resnet50", "resnet50"],
            "batch_size": [256, 128, 128, 256],
            "lr": [0.1, 0.05, 0.05, 0.1],  # follows the batch size: never shown
            "loader": ["pil", "pil", "dali", "pil"],  # varies for resnet50 at 128: shown
            "workers": [4, 4, 4, 4],  # constant: never shown
        }
    )
    labels = T.row_labels(frame, ["batch_size", "lr", "loader", "workers"])
    assert list(labels) == [
        "resnet18 (batch 256, loader pil)",
        "resnet50 (batch 128, loader pil)",
        "resnet50 (batch 128, loader dali)",
        "resnet50 (batch 256, loader pil)",
    ]
    same_batch = frame[frame["batch_size"] == 128]
    assert list(T.row_labels(same_batch, ["batch_size", "lr"])) == ["resnet50", "resnet50"]
    assert T.row_labels(frame.iloc[:0], ["batch_size"]).empty


def sample_document() -> T.Document:
    """Headings, a paragraph over two lines, a table with an escaped pipe, HTML to escape, a
    short row, a footnote, a heading of its own, a paragraph right under a heading."""
    table = T.table(
        ["model", "O0", "O1", "mid"],
        [["resnet18 (a|b)", "5,765", "<b>x</b>", "c"], ["vgg19", "OOM"]],
        "lrrl",
    )
    return T.document(
        "Throughput <all> & more",
        "Images per second, `summary.train_img_s`,\nmean over seeds.",
        [
            T.Heading(2, "Training throughput (img/s)"),
            *T.section("imagenette, 3 epochs", table, notes=["~ extrapolated: `max_steps` steps."]),
            *T.section("Deeper", T.Paragraph("Paragraph right under a heading."), level=4),
        ],
    )


def test_html_document_headings_paragraphs_tables_and_escaping():
    page = sample_document().html()
    assert page.startswith("<!DOCTYPE html>\n") and page.endswith("</html>\n")
    assert "<title>Throughput &lt;all&gt; &amp; more</title>" in page
    assert "<style>" in page and "<script" not in page and "<link" not in page
    assert "<h1>Throughput &lt;all&gt; &amp; more</h1>" in page
    assert "<h2>Training throughput (img/s)</h2>" in page
    assert "<h3>imagenette, 3 epochs</h3>" in page
    assert "<h4>Deeper</h4>" in page
    assert "<p>Images per second, <code>summary.train_img_s</code>, mean over seeds.</p>" in page
    assert (
        '<thead><tr><th class="l">model</th><th class="r">O0</th><th class="r">O1</th>'
        '<th class="l">mid</th></tr></thead>'
    ) in page
    assert (
        '<tr><td class="l">resnet18 (a|b)</td><td class="r">5,765</td>'
        '<td class="r">&lt;b&gt;x&lt;/b&gt;</td><td class="l">c</td></tr>'
    ) in page
    assert '<tr><td class="l">vgg19</td><td class="r">OOM</td><td class="r"></td>' in page
    assert "<b>" not in page
    assert '<p class="note">~ extrapolated: <code>max_steps</code> steps.</p>' in page
    assert "<p>Paragraph right under a heading.</p>" in page
    assert page.count("<table>") == 1


def test_markdown_puts_one_blank_line_between_blocks():
    assert sample_document().markdown() == (
        "# Throughput <all> & more\n\n"
        "Images per second, `summary.train_img_s`,\nmean over seeds.\n\n"
        "## Training throughput (img/s)\n\n"
        "### imagenette, 3 epochs\n\n"
        "| model | O0 | O1 | mid |\n|---|---:|---:|---|\n"
        "| resnet18 (a\\|b) | 5,765 | <b>x</b> | c |\n| vgg19 | OOM |  |  |\n\n"
        "~ extrapolated: `max_steps` steps.\n\n"
        "#### Deeper\n\n"
        "Paragraph right under a heading.\n"
    )


def test_html_document_renders_what_the_table_holds():
    doc = T.document(
        "T", "n", T.section("S", T.table(["a", "b"], [["x|y", "1"]], "lr"), notes=["f"])
    )
    page = doc.html(title="Given")
    assert "<title>Given</title>" in page
    assert '<td class="l">x|y</td><td class="r">1</td>' in page
    assert '<p class="note">f</p>' in page


def test_documents_joined_keep_every_table():
    doc = T.document("T", "n", T.section("S", T.table(["a"], [["1"]])))
    both = T.Document(doc.blocks + doc.blocks)
    assert both.html_body().count("<table>") == 2 == both.markdown().count("|---|")
    assert both.html_body().count("<h1>T</h1>") == 2


def test_text_is_what_its_block_says_never_read_back_as_markdown():
    """A paragraph that looks like a heading or a table stays a paragraph, and a heading's
    text is never a paragraph: a block is what its caller built, in both renderings."""
    doc = T.document(
        "T",
        "# 3 seeds ran",
        [T.Paragraph("| not | a table |\nmore"), T.Heading(2, "a `code` heading")],
        empty="## unused",
    )
    assert not isinstance(doc, str)
    assert [type(b) for b in doc.blocks] == [T.Heading, T.Paragraph, T.Paragraph, T.Heading]
    body = doc.html_body()
    assert body == (
        "<h1>T</h1>\n<p># 3 seeds ran</p>\n<p>| not | a table | more</p>\n"
        "<h2>a <code>code</code> heading</h2>"
    )
    assert (
        doc.markdown() == "# T\n\n# 3 seeds ran\n\n| not | a table |\nmore\n\n## a `code` heading\n"
    )


def test_csv_to_html_right_aligns_numeric_columns_and_keeps_csv_text():
    page = T.csv_to_html("model,img_s,note\nresnet18,5765.25,<ok>\nvgg19,,\n", "Runs", "A `note`.")
    assert "<h1>Runs</h1>" in page and "<p>A <code>note</code>.</p>" in page
    assert '<th class="l">model</th><th class="r">img_s</th><th class="l">note</th>' in page
    assert '<td class="r">5765.25</td><td class="l">&lt;ok&gt;</td>' in page
    assert '<td class="l">vgg19</td><td class="r"></td><td class="l"></td>' in page
    empty = T.csv_to_html("model,img_s\n", "Runs", empty="Nothing ran.")
    assert "<p>Nothing ran.</p>" in empty and "<th" in empty and "<td" not in empty
    assert "Nothing ran." in T.csv_to_html("", "Runs", empty="Nothing ran.")


def test_one_setup_says_how_to_set_machines_side_by_side(tmp_path):
    """A study of one machine gets the machines table's instructions (label, merge_results,
    aggregate) above its one setup, not a table of one column."""
    import record_factory as rf

    from nettebench.report import aggregate as agg

    paths = [rf.make_cell(tmp_path, seed=seed) for seed in (0, 1)]
    text = agg.aggregate(paths, tmp_path / "tables")["time_by_machine"].read_text()
    how = text.index("All matrix cells ran on one setup")
    assert "`--config machine=a100`" in text and "`merge_results:`" in text
    assert how < text.index("## Setups")


def test_a_partial_cell_side_by_side_has_its_footnote(tmp_path):
    """A cell one of whose seeds ran out of memory on one machine shows `†` in the machines
    table, and the table explains it."""
    import record_factory as rf

    from nettebench.report import aggregate as agg
    from nettebench.report.grids import PARTIAL_NOTE

    paths = [
        rf.make_cell(tmp_path / machine, seed=seed, status=status, extra_cell={"machine": machine})
        for machine, statuses in (("a", ("ok", "ok")), ("b", ("ok", "oom")))
        for seed, status in enumerate(statuses)
    ]
    text = agg.aggregate(paths, tmp_path / "tables")["time_by_machine"].read_text()
    rows = [line for line in text.splitlines() if line.startswith("| resnet18")]
    assert rows and any(T.PARTIAL_MARK in row for row in rows)
    assert PARTIAL_NOTE in text


def test_the_outcome_legend_is_under_a_table_whose_cell_reads_oom_not_one_with_a_dagger(tmp_path):
    """The time table explains "OOM", "n/a" and blanks where a cell reads OOM or n/a, as every
    other table does. A seed that ran out of memory beside one that finished makes its cell a
    number with `†`, which the partial footnote explains; "OOM" appears nowhere to explain."""
    import record_factory as rf

    from nettebench.report import aggregate as agg
    from nettebench.report.grids import LEGEND, PARTIAL_NOTE

    def time_table(study: str, statuses: dict[str, tuple[str, str]]) -> str:
        paths = [
            rf.make_cell(tmp_path / study, precision=precision, seed=seed, status=status)
            for precision, each in statuses.items()
            for seed, status in enumerate(each)
        ]
        tables = agg.aggregate(paths, tmp_path / study / "tables")
        return tables["time_by_model_precision"].read_text()

    partial = time_table("partial", {"O0": ("ok", "ok"), "O1": ("ok", "oom")})
    assert T.PARTIAL_MARK in partial and PARTIAL_NOTE in partial
    assert "| OOM |" not in partial
    assert LEGEND not in partial
    failed = time_table("failed", {"O0": ("ok", "ok"), "O1": ("oom", "oom")})
    assert "| OOM |" in failed and LEGEND in failed
