"""Aggregation of fake cell records (tests/record_factory.py) into runs.csv, epochs.csv, tables."""

from __future__ import annotations

import csv
import html
import json
import math
import re

import pandas as pd
import pytest
import record_factory as rf

from nettebench.records import environment
from nettebench.report import aggregate as agg
from nettebench.report import format as T
from nettebench.report import stats
from nettebench.report.frames import runs as collect
from nettebench.vocabulary import outputs
from nettebench.vocabulary.cell import PARAMETER_NAMES
from nettebench.vocabulary.record_keys import EPOCH_COLUMNS, SCHEMA_VERSION, SUMMARY_KEYS

CELL_COUNT = 2 * (3 + 3 + 3 + 1) + 1  # (model, batch) x precisions x 2 seeds + CPU baseline


def md_tables(text: str) -> list[tuple[str, list[list[str]]]]:
    """(heading, rows: header first, rule dropped) for every pipe table in a markdown text."""
    found: list[tuple[str, list[list[str]]]] = []
    heading, rows = "", None
    for line in text.splitlines():
        if line.startswith("|"):
            if re.fullmatch(r"\|(-+:?\|)+", line):
                continue
            if rows is None:
                rows = []
                found.append((heading, rows))
            rows.append([c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]])
        else:
            rows = None
            if line.startswith("#"):
                heading = line.lstrip("#").strip()
    return found


def headings(text: str) -> list[str]:
    return [line.lstrip("#").strip() for line in text.splitlines() if line.startswith("## ")]


def as_dict(rows: list[list[str]]) -> dict[str, dict[str, str]]:
    """{row label: {column: text}} of one parsed table."""
    header = rows[0]
    return {row[0]: dict(zip(header[1:], row[1:], strict=True)) for row in rows[1:]}


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    root = tmp_path_factory.mktemp("study")
    paths = rf.make_study(root / "cells")
    written = agg.aggregate(paths, root / "tables")
    return {"paths": paths, "written": written, "root": root}


def test_writes_every_output(study):
    assert sorted(study["written"]) == sorted(agg.OUTPUTS)
    for name, path in study["written"].items():
        assert path.name == agg.OUTPUTS[name]
        assert path.stat().st_size > 0


def test_runs_csv_has_one_row_per_cell_with_columns_in_order(study):
    runs = pd.read_csv(study["written"]["runs"])
    assert len(runs) == CELL_COUNT == len(study["paths"])
    columns = list(runs.columns)
    first_cell_keys = ["dataset", "model", "precision", "batch_size", "epochs", "seed"]
    assert columns[:6] == first_cell_keys
    kind = columns.index("kind")
    assert columns[kind : kind + len(collect.RECORD_COLUMNS)] == list(collect.RECORD_COLUMNS)
    summary_at = kind + len(collect.RECORD_COLUMNS)
    ceiling_at = summary_at + len(SUMMARY_KEYS)
    assert columns[summary_at:ceiling_at] == list(SUMMARY_KEYS)
    assert columns[ceiling_at : ceiling_at + 3] == list(collect.CEILING_COLUMNS)
    # the factory's records predate package environments (tests/test_environment_keys.py)
    env = [f"env_{k}" for k in environment.KEYS if k not in environment.PACKAGE_KEYS]
    assert [c for c in columns if c.startswith("env_")] == env
    assert {"env_git_dirty", "env_slurm_job_id"} <= set(columns)
    assert columns[-1] == "path"
    assert set(runs["path"]) == {str(p.parent) for p in study["paths"]}
    assert runs["cell_id"].is_unique


def test_runs_csv_is_sorted_and_keeps_ints_as_ints(study):
    runs = pd.read_csv(study["written"]["runs"])
    assert list(runs["kind"]) == ["matrix"] * (CELL_COUNT - 1) + ["cpu_baseline"]
    resnet18 = runs[runs["model"] == "resnet18"]
    assert list(resnet18["precision"]) == ["O0", "O0", "O1", "O1", "O3", "O3"]
    assert list(resnet18["seed"]) == [0, 1] * 3
    resnet50 = runs[runs["model"] == "resnet50"]
    assert list(resnet50["batch_size"]) == [128] * 6 + [256] * 2
    with open(study["written"]["runs"], newline="") as handle:
        row = next(csv.DictReader(handle))
    assert row["batch_size"] == "256"  # not "256.0"
    assert row["max_steps"] == ""


def test_non_ok_cells_are_rows_with_their_message(study):
    runs = pd.read_csv(study["written"]["runs"])
    oom = runs[runs["status"] == "oom"]
    assert len(oom) == 2
    assert oom["message"].str.contains("out of memory").all()
    assert oom["time_for_epochs_s"].isna().all()
    assert (runs["status"] == "unsupported").sum() == 2


def test_epochs_csv_is_tidy(study):
    epochs = pd.read_csv(study["written"]["epochs"])
    assert list(epochs.columns) == [*collect.EPOCH_ID_COLUMNS, *EPOCH_COLUMNS]
    ok_matrix = 2 * (3 + 2 + 3)
    assert len(epochs) == ok_matrix * rf.STUDY_EPOCHS + 1  # + the one-epoch CPU baseline
    assert set(epochs.groupby("cell_id").size()) == {rf.STUDY_EPOCHS, 1}


def ci(values, fmt=T.fmt_seconds) -> str:
    """What a table prints for these per-seed values: mean ± 95 % CI half-width."""
    return stats.with_ci(stats.summarize(values), fmt)


def test_time_table_holds_the_means_and_the_outcomes(study):
    text = study["written"]["time_by_model_precision"].read_text()
    assert f"{T.SEEDS_TEXT} (n=2)" in text
    heading, rows = md_tables(text)[0]
    assert heading == f"{rf.DATASET}, {rf.STUDY_EPOCHS} epochs, cuda ({rf.GPU_NAME})"
    assert rows[0] == ["model", "O0", "O1", "O3"]
    table = as_dict(rows)
    assert list(table) == [
        "resnet18 (batch 256)", "resnet34 (batch 256)", "resnet50 (batch 128)",
        "resnet50 (batch 256)",
    ]  # fmt: skip
    for label, model in [
        ("resnet18 (batch 256)", "resnet18"),
        ("resnet50 (batch 128)", "resnet50"),
    ]:
        for precision in ("O0", "O1", "O3"):
            times = rf.study_times(model, precision)
            assert table[label][precision] == ci(times)
            mean = sum(times) / 2
            half = stats.t_quantile(0.975, 1) * stats.summarize(times).sd / 2**0.5
            assert table[label][precision] == f"{mean:.1f} ± {half:.1f}"
    assert table["resnet34 (batch 256)"]["O3"] == "n/a"
    assert table["resnet50 (batch 256)"] == {"O0": "OOM", "O1": "", "O3": ""}
    assert "OOM: ran out of memory" in text
    assert "~" not in text


def test_time_table_marks_extrapolated_cells_and_partial_seeds(tmp_path):
    paths = [
        rf.make_cell(tmp_path, precision="O0", max_steps=10, time_for_epochs_s=30.0),
        rf.make_cell(tmp_path, precision="O1", seed=0, time_for_epochs_s=20.0),
        rf.make_cell(tmp_path, precision="O1", seed=1, status="oom"),
    ]
    text = agg.aggregate(paths, tmp_path / "out")["time_by_model_precision"].read_text()
    table = as_dict(md_tables(text)[0][1])
    assert table["resnet18"] == {"O0": "~30.0", "O1": "20.0†"}
    assert "~ extrapolated" in text and "† some seeds did not finish" in text
    assert "(n=1)" in text


def test_accuracy_table_shape_and_values(study):
    text = study["written"]["accuracy_by_epoch"].read_text()
    assert len(headings(text)) == 4  # resnet18, resnet34, resnet50 at 128 and at 256 (OOM)
    tables = dict(md_tables(text))
    assert len(tables) == 3  # resnet50 at 256 has no epochs
    heading = f"resnet18, batch 256, {rf.DATASET}, {rf.STUDY_EPOCHS} epochs, cuda ({rf.GPU_NAME})"
    rows = tables[heading]
    assert rows[0] == ["", "1", "2", "3"]
    assert [r[0] for r in rows[1:]] == [
        "O0 Top1", "O0 Top5", "O1 Top1", "O1 Top5", "O3 Top1", "O3 Top5"
    ]  # fmt: skip
    table = as_dict(rows)
    for epoch in (1, 3):
        top1 = [rf.top1_for("resnet18", "O1", s, epoch) for s in rf.STUDY_SEEDS]
        top5 = [rf.top5_for("resnet18", "O1", s, epoch) for s in rf.STUDY_SEEDS]
        assert table["O1 Top1"][str(epoch)] == ci(top1, T.fmt_accuracy)
        assert table["O1 Top5"][str(epoch)] == ci(top5, T.fmt_accuracy)
    resnet34 = as_dict(tables[heading.replace("resnet18", "resnet34")])
    assert "O3 Top1" not in resnet34
    assert "Not shown: O3 (n/a)" in text
    assert "Not shown: O0 (OOM)" in text


def test_throughput_tables(study):
    text = study["written"]["throughput"].read_text()
    tables = md_tables(text)
    assert len(tables) == 2  # no ceiling tables: no cell has a ceiling.json
    assert "No compute ceilings were measured" in text
    rate, wait = (as_dict(rows) for _, rows in tables)
    runs = pd.read_csv(study["written"]["runs"])
    r18 = runs[(runs["model"] == "resnet18") & (runs["precision"] == "O1")]
    assert rate["resnet18 (batch 256)"]["O1"] == ci(r18["train_img_s"], T.fmt_rate)
    assert wait["resnet18 (batch 256)"]["O1"] == "25.0 ± 0.0"  # every seed waited 25 %
    assert rate["resnet50 (batch 256)"]["O0"] == "OOM"


def test_cpu_vs_gpu_speedups(study):
    text = study["written"]["cpu_vs_gpu"].read_text()
    ((_, rows),) = md_tables(text)
    (row,) = [dict(zip(rows[0], r, strict=True)) for r in rows[1:]]
    cpu_s = rf.time_for("resnet34", "fp32", 0, 1, kind="cpu_baseline")
    fast_s = rf.study_mean_time("resnet34", "O1") / rf.STUDY_EPOCHS
    o0_s = rf.study_mean_time("resnet34", "O0") / rf.STUDY_EPOCHS
    per_epoch = {
        p: [t / rf.STUDY_EPOCHS for t in rf.study_times("resnet34", p)] for p in ("O0", "O1")
    }
    assert row["model"] == "resnet34"
    assert row["threads"] == "4"
    assert row["CPU"] == rf.CPU_MODEL
    assert row["CPU s/epoch"] == "~" + T.fmt_seconds(cpu_s)
    assert row["device"] == rf.GPU_NAME
    assert row["precision"] == "O1 (faster than O0)"  # Welch on the two seeds a side
    assert row["s/epoch"] == ci(per_epoch["O1"])
    assert row["speed-up"] == T.fmt_speedup(cpu_s / fast_s)
    assert row["O0 s/epoch"] == ci(per_epoch["O0"])
    assert row["O0 speed-up"] == T.fmt_speedup(cpu_s / o0_s)


def test_cpu_vs_gpu_without_baselines_or_matches(tmp_path):
    matrix_only = [rf.make_cell(tmp_path / "a")]
    text = agg.aggregate(matrix_only, tmp_path / "a_out")["cpu_vs_gpu"].read_text()
    assert "No CPU baseline cells" in text
    cpu_only = [rf.make_cell(tmp_path / "b", kind="cpu_baseline", model="vgg19", epochs=1)]
    text = agg.aggregate(cpu_only, tmp_path / "b_out")["cpu_vs_gpu"].read_text()
    assert "no matching matrix cell" in text
    assert "1 of 1 CPU baseline cell(s) have no finished matrix cell" in text


def test_unknown_cell_keys_pass_through_and_label_rows(tmp_path):
    paths = [
        rf.make_cell(tmp_path, extra_cell={"loader": "pil", "status": "weird"}),
        rf.make_cell(tmp_path, extra_cell={"loader": "dali", "compiler": {"v": "0.29"}}),
    ]
    written = agg.aggregate(paths, tmp_path / "out")
    runs = pd.read_csv(written["runs"])
    # the cell's own parameters first (the last of them, then the unknown keys), then the record
    assert list(runs.columns[: runs.columns.get_loc("kind")])[-3:] == [
        PARAMETER_NAMES[-1], "compiler", "cell_status"
    ]  # fmt: skip
    assert sorted(runs["loader"]) == ["dali", "pil"]
    assert set(runs["status"]) == {"ok"}  # the record's status, not the parameter
    assert json.loads(runs["compiler"].dropna().iloc[0]) == {"v": "0.29"}
    table = as_dict(md_tables(written["time_by_model_precision"].read_text())[0][1])
    assert set(table) == {
        "resnet18 (loader pil, compiler default, cell_status weird)",
        'resnet18 (loader dali, compiler {"v": "0.29"}, cell_status default)',
    }


def test_no_cells_gives_empty_tables(tmp_path):
    written = agg.aggregate([], tmp_path)
    assert sorted(written) == sorted(agg.OUTPUTS)
    runs = pd.read_csv(written["runs"])
    assert runs.empty and "dataset" in runs.columns and runs.columns[-1] == "path"
    assert {"ceiling_img_s", "ceiling_share", "env_git_dirty", "env_slurm_job_id"} <= set(
        runs.columns
    )
    assert pd.read_csv(written["epochs"]).empty
    for name in (*agg.MARKDOWN_TABLES, "runs_html"):
        assert "No cells have finished yet" in written[name].read_text(), name
    for name in agg.MARKDOWN_TABLES:
        assert "No cells have finished yet" in written[f"{name}_html"].read_text(), name
    assert "No compute ceilings were measured" in written["throughput"].read_text()


def test_cli_without_metrics_files(tmp_path, capsys):
    out = tmp_path / "tables"
    assert agg.main(["--out-dir", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(agg.OUTPUTS.values())
    assert "aggregated 0 cell(s)" in capsys.readouterr().err


def test_wrong_schema_version_names_the_file(tmp_path):
    path = rf.make_cell(tmp_path, schema_version=SCHEMA_VERSION + 1)
    with pytest.raises(collect.RecordError, match=re.escape(str(path))):
        agg.aggregate([path], tmp_path / "out")


def test_missing_files_name_the_file(tmp_path):
    missing = tmp_path / "nowhere" / "metrics.json"
    with pytest.raises(collect.RecordError, match=re.escape(str(missing))):
        collect.read_cell(missing)
    no_epochs = rf.make_cell(tmp_path, write_epochs=False)
    with pytest.raises(collect.RecordError, match="epochs.csv"):
        collect.read_cell(no_epochs)
    oom_without_epochs = rf.make_cell(tmp_path / "oom", status="oom", write_epochs=False)
    assert collect.read_cell(oom_without_epochs).epochs.empty


def test_cli(tmp_path, capsys):
    paths = [str(rf.make_cell(tmp_path / "cells", precision=p)) for p in ("O0", "O3")]
    assert agg.main(["--out-dir", str(tmp_path / "tables"), *paths]) == 0
    assert (tmp_path / "tables" / "cpu_vs_gpu.md").exists()
    bad = rf.make_cell(tmp_path / "bad", schema_version=0)
    capsys.readouterr()
    assert agg.main(["--out-dir", str(tmp_path / "t2"), str(bad)]) == 1  # commands.FAILED
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("error: ") and "schema_version 0" in line


# ------------------------------------------------------------------------------- compute ceiling


@pytest.fixture(scope="module")
def ceiling_study(tmp_path_factory):
    root = tmp_path_factory.mktemp("ceiling_study")
    paths = rf.make_study(root / "cells", ceilings=True)
    written = agg.aggregate(paths, root / "tables", target_top1=TARGET_TOP1)
    return {"paths": paths, "written": written, "runs": pd.read_csv(written["runs"])}


TARGET_TOP1 = 60.0  # reached at epoch 2 by every fake cell (top1_for), so every table has rows


def test_ceiling_record_carries_what_aggregation_reads():
    assert {"status", "message", "img_s", "step_ms_median", "peak_mem_mb"} <= set(rf.ceiling_keys())


def test_ceiling_columns_are_the_ceiling_and_the_share_of_it(ceiling_study):
    runs = ceiling_study["runs"]
    ok = runs[(runs["kind"] == "matrix") & (runs["status"] == "ok")]
    assert len(ok) == 2 * (3 + 2 + 3) and (ok["ceiling_status"] == "ok").all()
    for _, row in ok.iterrows():
        ceiling = rf.ceiling_for(row["model"], row["precision"], row["batch_size"])
        assert row["ceiling_img_s"] == pytest.approx(ceiling)
        assert row["ceiling_share"] == pytest.approx(row["train_img_s"] / ceiling)
    not_ok = runs[(runs["kind"] == "matrix") & (runs["status"] != "ok")]
    assert sorted(not_ok["ceiling_status"]) == ["oom", "oom", "unsupported", "unsupported"]
    assert not_ok[["ceiling_img_s", "ceiling_share"]].isna().all().all()
    cpu = runs[runs["kind"] == "cpu_baseline"]  # no ceiling.json beside it
    assert cpu[list(collect.CEILING_COLUMNS)].isna().all().all()


def test_throughput_ceiling_tables(ceiling_study):
    text = ceiling_study["written"]["throughput"].read_text()
    assert "No compute ceilings" not in text
    assert headings(text) == [
        "Training throughput (img/s)",
        "Time waiting for data (% of training time)",
        "Share of the compute ceiling (%)",
        "Compute ceiling (img/s)",
    ]
    rate, wait, share, ceiling = (as_dict(rows) for _, rows in md_tables(text))
    runs = ceiling_study["runs"]
    for model, batch in (("resnet18", 256), ("resnet50", 128)):
        label = f"{model} (batch {batch})"
        for precision in ("O0", "O1", "O3"):
            cells = runs[(runs["model"] == model) & (runs["precision"] == precision)]
            cells = cells[cells["batch_size"] == batch]
            shares = cells["train_img_s"] / rf.ceiling_for(model, precision, batch)
            assert share[label][precision] == ci(shares, T.fmt_percent)
            img_s = rf.ceiling_for(model, precision, batch)
            assert ceiling[label][precision] == ci([img_s, img_s], T.fmt_rate)
    assert ceiling["resnet50 (batch 256)"]["O0"] == "OOM"
    assert ceiling["resnet34 (batch 256)"]["O3"] == "n/a"
    assert share["resnet50 (batch 256)"]["O0"] == "OOM"  # the cell itself ran out of memory


def test_oom_or_missing_ceiling_gives_no_number(tmp_path):
    measured = rf.make_cell(tmp_path, precision="O0", train_img_s=500.0)
    rf.make_ceiling(measured, img_s=1000.0)
    oom = rf.make_cell(tmp_path, precision="O1", train_img_s=800.0)
    rf.make_ceiling(oom, status="oom")
    absent = rf.make_cell(tmp_path, precision="O3", train_img_s=900.0)
    written = agg.aggregate([measured, oom, absent], tmp_path / "out")
    runs = pd.read_csv(written["runs"]).set_index("precision")
    assert runs.loc["O0", "ceiling_img_s"] == 1000.0
    assert runs.loc["O0", "ceiling_share"] == 0.5
    assert runs.loc["O1", "ceiling_status"] == "oom"
    assert math.isnan(runs.loc["O1", "ceiling_img_s"])
    assert math.isnan(runs.loc["O1", "ceiling_share"])
    assert math.isnan(runs.loc["O3", "ceiling_img_s"]) and pd.isna(runs.loc["O3", "ceiling_status"])
    tables = md_tables(written["throughput"].read_text())
    assert len(tables) == 4
    share, ceiling = (as_dict(rows) for _, rows in tables[2:])
    assert share["resnet18"] == {"O0": "50.0", "O1": "", "O3": ""}
    assert ceiling["resnet18"] == {"O0": "1,000", "O1": "OOM", "O3": ""}


def test_broken_ceiling_names_the_file(tmp_path):
    path = rf.make_cell(tmp_path)
    ceiling = path.parent / outputs.CEILING_FILE
    ceiling.write_text("{not json")
    with pytest.raises(collect.RecordError, match=re.escape(str(ceiling))):
        agg.aggregate([path], tmp_path / "out")
    ceiling.write_text("[]")
    with pytest.raises(collect.RecordError, match="not a ceiling record"):
        collect.read_cell(path)


# ------------------------------------------------------------------------------------------ HTML


def test_every_table_has_an_html_page_with_its_values(ceiling_study):
    written = ceiling_study["written"]
    # scaling: this study has no data-parallel cell (tests/test_scaling.py checks its page)
    for name in (n for n in agg.MARKDOWN_TABLES if n != "scaling"):
        page = written[f"{name}_html"]
        assert page.name == f"{name}.html" and page.parent == written[name].parent
        text = page.read_text()
        assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>")
        assert "<style>" in text and "<script" not in text
        tables = md_tables(written[name].read_text())
        assert text.count("<table>") == len(tables) > 0
        for heading, rows in tables:
            assert html.escape(heading) in text
            for row in rows:
                for value in row:
                    assert f">{html.escape(value.replace(chr(92) + '|', '|'))}</t" in text


def _html_tables(page: str) -> list[list[list[str]]]:
    """Every table of an HTML page as rows of cell texts (tags dropped, entities unescaped)."""
    tables = []
    for table in re.findall(r"<table>(.*?)</table>", page, flags=re.S):
        rows = re.findall(r"<tr>(.*?)</tr>", table, flags=re.S)
        cells = [re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, flags=re.S) for row in rows]
        tables.append([[html.unescape(re.sub(r"<[^>]+>", "", c)) for c in row] for row in cells])
    return tables


def test_the_html_tables_are_the_markdown_tables_cell_for_cell(ceiling_study):
    """The HTML comes from the rows the Markdown was written from (no parsing back): the same
    tables, in the same order, with the same cells, and the same headings."""
    written = ceiling_study["written"]
    for name in agg.MARKDOWN_TABLES:
        markdown, page = written[name].read_text(), written[f"{name}_html"].read_text()
        expected = [
            [[cell.replace("\\|", "|").replace("`", "") for cell in row] for row in rows]
            for _, rows in md_tables(markdown)
        ]
        assert _html_tables(page) == expected, name
        titles = [line.lstrip("#").strip() for line in markdown.splitlines() if line[:1] == "#"]
        found = [
            html.unescape(re.sub(r"<[^>]+>", "", h)) for h in re.findall(r"<h\d>(.*?)</h\d>", page)
        ]
        assert found == [title.replace("`", "") for title in titles], name


def test_runs_html_holds_every_cell(ceiling_study):
    text = ceiling_study["written"]["runs_html"].read_text()
    runs = ceiling_study["runs"]
    assert text.count("<tr>") == len(runs) + 1
    with open(ceiling_study["written"]["runs"], newline="") as handle:
        first = next(csv.DictReader(handle))
    for column in ("cell_id", "train_img_s", "ceiling_img_s", "ceiling_share", "path"):
        assert f">{html.escape(column)}</th>" in text
        assert f'<td class="{"l" if column in ("cell_id", "path") else "r"}">' in text
        assert f">{html.escape(first[column])}</td>" in text


def test_library_versions_side_by_side_like_the_studys_pytorch_table(tmp_path):
    """Two torchvision builds (one per cell parameter) and two torch versions (records merged
    from two environments): one table per library, a column per version, OOM kept. The seed run
    under torch 2.15.0 is a column of its own in the torchvision table: a cell measured under
    another torch is not a seed of the same measurement."""
    old = {"torchvision": "0.29.1+cu130", "torchvision_commit": "1f1a920d68", "torch": "2.14.1"}
    new = {
        "torchvision": "0.30.0a0+8d2f1c4",
        "torchvision_commit": "8d2f1c4aa0",
        "torchvision_build": "main",
        "torch": "2.14.1",
    }
    paths = []
    for model, seconds in (("resnet18", (600.0, 500.0)), ("resnet34", (700.0, None))):
        paths.append(rf.make_cell(tmp_path, model=model, time_for_epochs_s=seconds[0], env=old))
        paths.append(
            rf.make_cell(
                tmp_path,
                model=model,
                time_for_epochs_s=seconds[1],
                status="ok" if seconds[1] else "oom",
                env=new,
                extra_cell={"torchvision": "main"},
            )
        )
    paths.append(rf.make_cell(tmp_path, model="resnet18", seed=1, env={**old, "torch": "2.15.0"}))
    text = agg.aggregate(paths, tmp_path / "out")["time_by_library_version"].read_text()
    tables = dict(md_tables(text))
    torchvision = as_dict(tables[f"torchvision: {rf.DATASET}, 3 epochs, cuda ({rf.GPU_NAME})"])
    old_label, new_label = "0.29.1+cu130 @1f1a920", "0.30.0a0+8d2f1c4 @8d2f1c4 (build main)"
    seed1 = rf.time_for("resnet18", "O0", 1, rf.STUDY_EPOCHS)  # the cell under torch 2.15.0
    old_14, old_15, new_14 = (
        f"{old_label} (torch 2.14.1)",
        f"{old_label} (torch 2.15.0)",
        f"{new_label} (torch 2.14.1)",
    )
    assert {k: v for k, v in torchvision["resnet18 O0"].items() if "speed-up" not in k} == {
        old_14: "600.0",
        old_15: T.fmt_seconds(seed1),
        new_14: "500.0",
    }
    assert torchvision["resnet18 O0"][f"{new_14}: speed-up over {old_14}"] == "1.20x (n=1)"
    assert torchvision["resnet34 O0"][old_14] == "700.0"
    assert torchvision["resnet34 O0"][new_14] == "OOM"
    torch = as_dict(tables[f"torch: {rf.DATASET}, 3 epochs, cuda ({rf.GPU_NAME})"])
    speedup = "2.15.0: speed-up over 2.14.1"
    assert torch["resnet18 (torchvision main) O0"] == {"2.14.1": "500.0", "2.15.0": "", speedup: ""}
    assert torch["resnet18 (torchvision default) O0"] == {
        "2.14.1": "600.0",
        "2.15.0": T.fmt_seconds(seed1),
        speedup: f"{600.0 / seed1:.2f}x (n=1)",
    }
    versions = tables["Versions recorded"]
    assert ["torchvision", new_label, "2"] in versions and ["torch", "2.15.0", "1"] in versions
