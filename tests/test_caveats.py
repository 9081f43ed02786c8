"""Caveats in runs.csv, the tables, the throughput figure and the report's front page: numbers
timed under interference are marked, impossible figures withheld, emulated precisions named."""

from __future__ import annotations

import pandas as pd
import pytest
import record_factory as F
from matplotlib.text import Text

from nettebench.report import caveats as C
from nettebench.report import format as T
from nettebench.report.aggregate import aggregate
from nettebench.report.figures.facets import seed_marks
from nettebench.report.figures.throughput import plot_throughput

BUSY = ("other processes used 48% of the job's 16 CPUs (460.8 CPU-s in 60.0 s)",)


def _tables(tmp_path, paths):
    written = aggregate(paths, tmp_path / "tables")
    runs = pd.read_csv(written["runs"])
    return runs, {name: path.read_text() for name, path in written.items() if name != "runs"}


def _row(runs, precision):
    return runs[(runs["precision"] == precision) & (runs["kind"] == "matrix")].iloc[0]


def test_a_cell_faster_than_its_own_ceiling_is_withheld_with_its_reason(tmp_path):
    fast = F.make_cell(tmp_path, precision="O0", train_img_s=5000.0, conditions=F.window())
    F.make_ceiling(fast, img_s=2400.0, conditions=F.window())  # 208 %, both timed quietly
    fine = F.make_cell(tmp_path, precision="O1", train_img_s=1000.0, conditions=F.window())
    F.make_ceiling(fine, img_s=2000.0, conditions=F.window())
    runs, text = _tables(tmp_path, [fast, fine])
    bad = _row(runs, "O0")
    assert bad["above_ceiling"] == True  # noqa: E712 (a CSV bool)
    assert "above its own compute ceiling" in bad["implausible"]
    assert bad["ceiling_fast_img_s"] == pytest.approx(256 / (0.97 * 256 / 2400))
    assert bad["ceiling_share"] == pytest.approx(5000 / 2400)  # the raw ratio stays in runs.csv
    assert _row(runs, "O1")["above_ceiling"] == False  # noqa: E712
    share = text["throughput"].split("## Share of the compute ceiling")[1].split("## Compute")[0]
    assert "208.3" not in share and C.IMPOSSIBLE_MARK in share
    assert "| 50.0 |" in share  # the comparable cell keeps its number
    assert C.IMPOSSIBLE_NOTE in share


def test_a_cell_within_its_ceilings_noise_is_not_impossible(tmp_path):
    # 2 % above the median ceiling, below its fast end (p10 step = 0.97 x median)
    path = F.make_cell(tmp_path, train_img_s=2040.0, conditions=F.window())
    F.make_ceiling(path, img_s=2000.0, conditions=F.window())
    runs, text = _tables(tmp_path, [path])
    assert runs["above_ceiling"].iloc[0] == False  # noqa: E712
    assert "102.0" in text["throughput"]


def test_interference_is_marked_in_every_table_that_shows_the_number(tmp_path):
    busy = F.make_cell(tmp_path, precision="O1", conditions=F.window(0.48, reasons=BUSY))
    quiet = F.make_cell(tmp_path, precision="O0", conditions=F.window())
    runs, text = _tables(tmp_path, [busy, quiet])
    row = _row(runs, "O1")
    assert row["interference"] == True and row["interference_reasons"] == BUSY[0]  # noqa: E712
    assert row["other_cpu_share"] == pytest.approx(0.48)
    seconds = F.time_for("resnet18", "O1", 0, F.STUDY_EPOCHS)
    assert f"{seconds:.1f}{C.INTERFERENCE_MARK}" in text["time_by_model_precision"]
    o0 = F.time_for("resnet18", "O0", 0, F.STUDY_EPOCHS)
    assert f"| {o0:.1f} |" in text["time_by_model_precision"]  # the quiet cell: no mark
    assert "timed under interference" in text["time_by_model_precision"]
    assert C.INTERFERENCE_MARK in text["throughput"]
    assert C.INTERFERENCE_MARK not in text["cpu_vs_gpu"]  # no CPU baseline was disturbed
    conditions = text["timing_conditions"]
    assert "1 of 2 measured timed windows ran under interference" in conditions
    assert "| quiet |" in conditions
    front = text["headline"]
    assert front.startswith('<p class="answer">')  # the answer in words, then the caveats
    assert front.index('<p class="answer">') < front.index('<p class="caveats">')
    assert "1 of 2 cells were timed under interference" in front
    assert "<h2>Time by model and precision</h2>" in front and "<table>" in front


def test_a_cpu_baseline_timed_under_interference_is_marked(tmp_path):
    matrix = F.make_cell(tmp_path, conditions=F.window())
    busy = F.make_cell(
        tmp_path, kind="cpu_baseline", conditions=F.window(0.5, reasons=BUSY), **F.CPU_BASELINE
    )
    _, text = _tables(tmp_path, [matrix, busy])
    row = next(line for line in text["cpu_vs_gpu"].splitlines() if line.startswith("| imagenette"))
    assert row.split("|")[6].strip().endswith(C.INTERFERENCE_MARK)
    assert "timed under interference" in text["cpu_vs_gpu"]


def test_overlapping_timed_windows_on_one_host_are_named(tmp_path):
    a = F.make_cell(tmp_path, precision="O0", conditions=F.window(started_at=1000.0))
    b = F.make_cell(tmp_path, precision="O1", conditions=F.window(started_at=1030.0))
    c = F.make_cell(tmp_path, precision="O3", conditions=F.window(started_at=2000.0))
    d = F.make_cell(
        tmp_path, precision="O2", conditions=F.window(started_at=1010.0), env={"host": "other"}
    )
    _, text = _tables(tmp_path, [a, b, c, d])
    lines = {
        line.split("|")[1].strip(): line.split("|")[-2].strip()
        for line in text["timing_conditions"].splitlines()
        if line.startswith("| resnet18")
    }
    assert lines["resnet18 O0"] == "resnet18 O1 epochs"
    assert lines["resnet18 O1"] == "resnet18 O0 epochs"
    assert lines["resnet18 O3"] == "" and lines["resnet18 O2"] == ""  # later; another host
    assert "2 overlapped another timed window" in text["timing_conditions"]


def test_emulated_bf16_is_named_in_the_header_with_the_cpus_capability(tmp_path):
    env = {
        "cpu_capability": "AVX2",
        "bf16_native": False,
        "cpu_isa_limits": "ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2",
    }
    cells = [
        F.make_cell(tmp_path, precision=p, device_type="cpu", env=env, conditions=F.window())
        for p in ("O0", "bf16")
    ]
    runs, text = _tables(tmp_path, cells)
    assert "emulated in software" in _row(runs, "bf16")["precision_emulated"]
    assert pd.isna(_row(runs, "O0")["precision_emulated"])
    table = text["time_by_model_precision"]
    assert "| model | O0 | bf16 (emulated) |" in table
    assert "torch CPU capability AVX2, capped by ATEN_CPU_CAPABILITY=avx2" in table
    assert "bf16 ran emulated on this CPU" in text["headline"]


def test_native_bf16_and_older_records_carry_no_marks(tmp_path):
    native = F.make_cell(
        tmp_path, precision="bf16", device_type="cpu", env={"bf16_native": True}
    )  # and no conditions at all: a record from before they were measured
    runs, text = _tables(tmp_path, [native])
    assert pd.isna(runs["interference"].iloc[0]) and pd.isna(runs["precision_emulated"].iloc[0])
    assert "(emulated)" not in text["time_by_model_precision"]
    assert C.INTERFERENCE_MARK not in text["time_by_model_precision"]
    assert "not measured" in text["timing_conditions"]
    assert "no timing conditions were recorded" in text["headline"]


def test_the_throughput_figure_marks_the_bars_it_cannot_vouch_for():
    frame = pd.DataFrame(
        {
            "above_ceiling": [True, False, False, None],
            "interference": [False, True, False, None],
            "ceiling_interference": [False, False, True, None],
        }
    )
    marks = [seed_marks([seed]) for seed in frame.to_dict("records")]
    assert marks == [C.IMPOSSIBLE_MARK, "‡", "‡", ""]


def test_the_front_page_embeds_the_figure_and_keeps_its_top_in_view(tmp_path):
    from nettebench.report.front_page import compose, main

    headline = tmp_path / "headline.html"
    headline.write_text('<p class="caveats">Caveats: none.</p>\n<h2>Time</h2><table></table>\n')
    figure = tmp_path / "throughput.png"
    figure.write_bytes(b"\x89PNG\r\n\x1a\nfake")
    out = tmp_path / "front_page.html"
    assert main(["--headline", str(headline), "--figure", str(figure), "--out", str(out)]) == 0
    page = out.read_text()
    # headline first, then the figure as a data URI (the report stays one file)
    assert page.index("Caveats: none.") < page.index("<h2>Time</h2>") < page.index("<figure>")
    assert 'src="data:image/png;base64,iVBORw0KGgpmYWtl"' in page
    # Snakemake's landing panel centres a tall description and cuts its top off: undone
    assert "div.h-screen.items-center { align-items: flex-start; }" in page
    assert compose("", b"", caption="a <b>").count("a &lt;b&gt;") == 2


def test_above_the_ceiling_is_impossible_only_beyond_both_spreads(tmp_path):
    """The ceiling's fast end is 2000 / 0.97 = 2,062 img/s. A cell whose median is 2,300 but
    whose interval reaches down to 2,000 may be noise: its share stays, with the words why. A
    doctored record whose whole interval sits above the fast end cannot be true: ✗."""
    noisy = F.make_cell(
        tmp_path, precision="O0", train_img_s=2300.0,
        summary_extra={"train_img_s_low": 2000.0, "train_img_s_high": 2500.0},
    )  # fmt: skip
    F.make_ceiling(noisy, img_s=2000.0)
    doctored = F.make_cell(
        tmp_path, precision="O1", train_img_s=2300.0,
        summary_extra={"train_img_s_low": 2080.0, "train_img_s_high": 2500.0},
    )  # fmt: skip
    F.make_ceiling(doctored, img_s=2000.0)
    runs, text = _tables(tmp_path, [noisy, doctored])
    within, beyond = _row(runs, "O0"), _row(runs, "O1")
    assert within["above_ceiling"] == False and pd.isna(within["implausible"])  # noqa: E712
    assert "within both spreads" in within["ceiling_exceeded"]
    assert beyond["above_ceiling"] == True and pd.isna(beyond["ceiling_exceeded"])  # noqa: E712
    assert "its interval from 2,080" in beyond["implausible"]
    share = text["throughput"].split("## Share of the compute ceiling")[1].split("## Compute")[0]
    assert "115.0" in share and share.count(C.IMPOSSIBLE_MARK) >= 1
    assert "1 cell(s) have a figure that cannot be true" in text["headline"]


def test_a_first_epoch_faster_than_the_later_ones_is_variation_not_impossible(tmp_path):
    """Records made before epoch_variation wrote it as an anomaly; neither is ✗ now."""
    old = F.make_cell(
        tmp_path, precision="O0",
        summary_extra={"anomalies": [
            "first epoch 1.0 s faster than the later epochs' median 4.2 s (noise 0.2 s): "
            "conditions changed between epochs"
        ]},
    )  # fmt: skip
    new = F.make_cell(
        tmp_path, precision="O1",
        summary_extra={"epoch_variation": "epoch-to-epoch variation: the first epoch took 3.2 s"},
    )  # fmt: skip
    runs, text = _tables(tmp_path, [old, new])
    assert runs["implausible"].isna().all()
    assert "cannot be true" not in text["headline"]
    assert _row(runs, "O1")["epoch_variation"].startswith("epoch-to-epoch variation")


def _drawn_texts(fig) -> list[str]:
    return [t.get_text() for t in fig.findobj(Text) if t.get_text()]


def test_the_drawn_throughput_figure_carries_its_marks_in_its_own_texts(tmp_path):
    """The marks as matplotlib draws them (its Text artists), not only the frame's column."""
    doctored = F.make_cell(
        tmp_path, precision="O0", train_img_s=2300.0,
        summary_extra={"train_img_s_low": 2200.0, "train_img_s_high": 2400.0},
    )  # fmt: skip
    F.make_ceiling(doctored, img_s=2000.0)
    busy = F.make_cell(tmp_path, precision="O1", conditions=F.window(0.48, reasons=BUSY))
    F.make_ceiling(busy)
    noisy = F.make_cell(
        tmp_path, precision="O2", train_img_s=2050.0,
        summary_extra={"train_img_s_low": 1900.0, "train_img_s_high": 2200.0, "unstable": "x"},
    )  # fmt: skip
    F.make_ceiling(noisy, img_s=2000.0)
    runs, _ = _tables(tmp_path, [doctored, busy, noisy])
    texts = _drawn_texts(plot_throughput(runs))
    over_bars = [t for t in texts if set(t) <= set("✗‡≈§")]
    assert sorted(over_bars) == sorted([C.IMPOSSIBLE_MARK, C.INTERFERENCE_MARK, "≈§"])
    legend = " ".join(" ".join(texts).split())  # the figure's note, as its table's notes
    assert C.IMPOSSIBLE_NOTE in legend
    assert C.interference_note("share") in legend
    assert C.WITHIN_NOISE_NOTE in legend
    assert f"{C.UNSTABLE_MARK} unstable" in legend


def test_a_figure_without_caveats_draws_no_marks(tmp_path):
    quiet = F.make_cell(tmp_path, precision="O0", conditions=F.window())
    F.make_ceiling(quiet)
    runs, _ = _tables(tmp_path, [quiet])
    texts = _drawn_texts(plot_throughput(runs))
    assert not [t for t in texts if set(t) & set("✗‡≈§")]


def test_beyond_both_spreads_under_interference_is_noise_not_impossible(tmp_path):
    """The quick start under load: the ceiling slowed more than its cell. Interference explains
    a cell above its ceiling, so it is said in words (≈), not withheld (✗)."""
    cell = F.make_cell(
        tmp_path, precision="O0", train_img_s=2300.0, conditions=F.window(),
        summary_extra={"train_img_s_low": 2200.0, "train_img_s_high": 2400.0},
    )  # fmt: skip
    F.make_ceiling(cell, img_s=2000.0, conditions=F.window(0.5, reasons=BUSY))
    runs, text = _tables(tmp_path, [cell])
    row = _row(runs, "O0")
    assert row["above_ceiling"] == False and pd.isna(row["implausible"])  # noqa: E712
    assert "timed under interference" in row["ceiling_exceeded"]
    share = text["throughput"].split("## Share of the compute ceiling")[1].split("## Compute")[0]
    assert f"115.0{C.INTERFERENCE_MARK}{C.WITHIN_NOISE_MARK}" in share
    assert C.WITHIN_NOISE_NOTE in share
    assert "cannot be true" not in text["headline"]
    # the ceiling itself was disturbed: marked in the ceiling table, named in the conditions
    ceiling = text["throughput"].split("## Compute ceiling (img/s)")[1]
    assert f"2,000{C.INTERFERENCE_MARK}" in ceiling
    assert BUSY[0] in text["timing_conditions"]


def _beyond(busy_cell: bool, busy_ceiling: bool) -> dict:
    """caveat_columns of a cell whose whole interval is above its ceiling's fast end."""

    def conditions(busy):
        return F.window(0.5, reasons=BUSY) if busy else F.window()

    record = {
        "status": "ok", "cell": {"precision": "O0"}, "device": {"type": "cuda"},
        "conditions": conditions(busy_cell),
        "summary": {"train_img_s": 2300.0, "train_img_s_low": 2200.0},
    }  # fmt: skip
    ceiling = {
        "status": "ok", "img_s": 2000.0, "batch_size": 256, "step_ms_p10": 1000 * 256 / 2100,
        "conditions": conditions(busy_ceiling),
    }  # fmt: skip
    return C.caveat_columns(record, ceiling)


@pytest.mark.parametrize(("busy_cell", "busy_ceiling"), [(True, False), (False, True)])
def test_either_sides_own_interference_explains_a_cell_above_its_ceiling(busy_cell, busy_ceiling):
    row = _beyond(busy_cell, busy_ceiling)
    assert row["above_ceiling"] is False and row["implausible"] is None
    assert "timed under interference" in row["ceiling_exceeded"]
    assert row["ceiling_fast_img_s"] == pytest.approx(2100.0)


def test_beyond_both_spreads_timed_quietly_is_impossible():
    row = _beyond(False, False)
    assert row["above_ceiling"] is True and row["ceiling_exceeded"] is None
    assert "above its own compute ceiling (2,000 img/s, 2,100 at the fast end" in row["implausible"]


def test_a_cpu_ceiling_is_an_estimate_that_withholds_no_cell():
    """The same quiet numbers on a CPU (a resnet34 O0 pil cell at 206 img/s against a ceiling
    of 151 was withheld as ✗): said in words, kept, not impossible."""
    record = {
        "status": "ok", "cell": {"precision": "O0"}, "device": {"type": "cpu"},
        "conditions": {"interference": False},
        "summary": {"train_img_s": 206.0, "train_img_s_low": 171.0},
    }  # fmt: skip
    ceiling = {"status": "ok", "img_s": 151.0, "batch_size": 64, "step_ms_p10": 1000 * 64 / 160}
    row = C.caveat_columns(record, ceiling)
    assert row["above_ceiling"] is False and row["implausible"] is None
    assert "on a CPU the ceiling is an estimate" in row["ceiling_exceeded"]
    assert row["ceiling_fast_img_s"] == pytest.approx(160.0)


def test_a_multi_seed_cell_with_one_impossible_seed_is_withheld():
    fine = {"above_ceiling": False, "interference": False, "ceiling_interference": False}
    bad = {**fine, "above_ceiling": True}
    assert C.cell_caveat([fine, bad], "share") == (True, "")
    assert C.cell_caveat([bad, fine], "share") == (True, "")
    assert C.cell_caveat([fine, fine], "share") == (False, "")
    assert C.cell_caveat([fine, bad], "cell") == (False, "")  # a time is not a share
    busy = {**fine, "interference": True}
    assert C.cell_caveat([fine, busy], "cell") == (False, C.INTERFERENCE_MARK)
    assert C.cell_caveat([fine, busy], "ceiling") == (False, "")
    assert C.cell_caveat([fine, {**fine, "ceiling_interference": "True"}], "share")[1] == "‡"


def test_the_caveats_line_is_bold_red_only_when_it_warns(tmp_path):
    from nettebench.report import front_page

    quiet = [F.make_cell(tmp_path, precision=p, conditions=F.window()) for p in ("O0", "O1")]
    runs, text = _tables(tmp_path, quiet)
    assert front_page.caveat_line(runs).startswith("Caveats: 0 of 2 cells were timed under")
    assert '<p class="caveats-none">Caveats: 0 of 2 cells' in text["headline"]
    assert '<p class="caveats">' not in text["headline"]
    assert "<strong>Caveats" not in text["headline"]
    busy = F.make_cell(tmp_path / "b", precision="O2", conditions=F.window(0.48, reasons=BUSY))
    runs, text = _tables(tmp_path / "b", [*quiet, busy])
    assert '<p class="caveats"><strong>Caveats: 1 of 3 cells' in text["headline"]


def test_the_ceilings_fast_end_is_batch_over_its_p10_step_else_its_median():
    ok = {"status": "ok", "img_s": 2000.0, "batch_size": 256, "step_ms_p10": 100.0}
    assert C.ceiling_fast_end(ok) == pytest.approx(2560.0)
    assert C.ceiling_fast_end({**ok, "step_ms_p10": None}) == 2000.0
    assert C.ceiling_fast_end({**ok, "batch_size": 0}) == 2000.0
    assert C.ceiling_fast_end({**ok, "status": "oom"}) is None and C.ceiling_fast_end(None) is None


def test_the_ceiling_verdict_from_each_side_of_its_rules():
    ceiling = {"status": "ok", "img_s": 2000.0, "batch_size": 256, "step_ms_p10": 128.0}  # 2000
    ok = {"status": "ok"}

    def verdict(train, low=None, **kwargs):
        summary = {"train_img_s": train, "train_img_s_low": low}
        return C.ceiling_verdict(ok, summary, {**ceiling, "step_ms_p10": 1000 * 256 / 2100},
                                 **kwargs)  # fmt: skip

    assert verdict(1900.0) == {"ceiling_fast_img_s": pytest.approx(2100), "above_ceiling": False}
    within = verdict(2050.0)  # above the median 2000, below the fast end 2100
    assert within["above_ceiling"] is False and "within both spreads" in within["ceiling_exceeded"]
    assert "its interval" not in within["ceiling_exceeded"]
    assert "(its interval from 1,990)" in verdict(2050.0, low=1990.0)["ceiling_exceeded"]
    beyond = verdict(2200.0, low=2150.0)
    assert beyond["above_ceiling"] is True and "_reason" in beyond
    assert verdict(2200.0, low=2050.0)["above_ceiling"] is False  # its interval reaches below
    assert verdict(2200.0, low=2300.0)["above_ceiling"] is True  # min(low, median) is the end
    assert verdict(2100.0)["above_ceiling"] is False  # at the fast end is not beyond it
    noisy = verdict(2200.0, low=2150.0, disturbed=True)
    assert noisy["above_ceiling"] is False and "interference" in noisy["ceiling_exceeded"]
    assert C.ceiling_verdict({"status": "oom"}, {"train_img_s": 1.0}, ceiling) == {}
    assert C.ceiling_verdict(ok, {"train_img_s": None}, ceiling) == {}


def test_flags_texts_and_reasons_read_runs_csv_values():
    assert [T.as_bool(v) for v in ("True", " 1 ", "false", True, 0, float("nan"), None)] == [
        True, True, False, True, False, False, False,
    ]  # fmt: skip
    assert C.text_of(float("nan")) is None and C.text_of("  ") is None and C.text_of(" a ") == "a"
    assert C.reasons_of('["a", "b"]') == ["a", "b"] and C.reasons_of(" a;  b ") == ["a", "b"]
    assert C.reasons_of("[not json") == ["[not json"] and C.reasons_of(None) == []
    assert C.exceeded([{"ceiling_exceeded": None}, {"ceiling_exceeded": "x"}]) is True
    assert C.exceeded([{"ceiling_exceeded": float("nan")}]) is False


def test_unstable_reasons_are_prefixed_by_seed_only_when_there_are_several():
    one = [{"seed": 0, "unstable": "spread 14%"}]
    assert C.unstable_reasons(one) == ["spread 14%"]
    two = [{"seed": 0, "unstable": "spread 14%"}, {"seed": 1, "unstable": None}]
    assert C.unstable_reasons(two) == ["seed 0: spread 14%"]
    # the note names the cells briefly; their reasons are rows of the timing conditions table
    assert "its interval still holds: a and b (each one's" in C.unstable_note(["a", "b"])
    assert C.named_cells(["a"]) == "a" and C.named_cells(["a", "b", "c"]) == "a, b and c"
    assert C.named_cells(["a", "b", "c", "d", "e", "a"]) == "a, b, c and 2 more"


def test_own_interval_emulated_header_and_notes():
    frame = pd.DataFrame({"lo": [1.0], "hi": [2.0]})
    assert C.own_interval(frame, ("lo", "hi")) == (1.0, 2.0)
    assert C.own_interval(frame.assign(hi=[None]), ("lo", "hi")) is None
    assert C.own_interval(frame.iloc[0:0], ("lo", "hi")) is None
    rows = [
        {"precision_emulated": "no bf16", "env_cpu_model": "EPYC", "env_cpu_capability": "AVX2"}
    ]
    assert C.emulated_header("bf16", rows) == "bf16 (emulated)"
    assert C.emulated_header("O0", [{"precision_emulated": None}]) == "O0"
    assert "(EPYC, torch CPU capability AVX2)" in C.emulated_note(rows)
    limited = [{**rows[0], "env_cpu_isa_limits": "ATEN_CPU_CAPABILITY"}]
    assert "AVX2, capped by ATEN_CPU_CAPABILITY)" in C.emulated_note(limited)
    assert "unknown CPU, torch CPU capability unknown" in C.emulated_note(
        [{"precision_emulated": "x"}]
    )
    assert "the share be too low or too high" in C.interference_note("share")
    assert "the ceiling's timed steps ran" in C.interference_note("ceiling")
    assert "slower than the machine" in C.interference_note("cell")
