"""report.caveats on plain dictionaries: each column of one cell and each mark of a table cell,
worked out by hand from records built here (tests/test_caveats.py runs them end to end)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from nettebench.report import caveats as C
from nettebench.report import format as T


def quiet(**more):
    return {"interference": False, "interference_reasons": [], **more}


def record(train=1000.0, low=950.0, conditions=None, anomalies=(), precision="O0", **more):
    summary = {"train_img_s": train, "train_img_s_low": low, "anomalies": list(anomalies)}
    return {
        "status": "ok",
        "conditions": conditions,
        "summary": summary,
        "device": {"type": "cpu"},
        "environment": {"bf16_native": False},
        "cell": {"precision": precision},
        **more,
    }


def ceiling(img_s=500.0, p10_ms=100.0, batch=64, conditions=None, **more):
    # fast end: 64 images / 0.1 s = 640 img/s
    found = {"status": "ok", "img_s": img_s, "step_ms_p10": p10_ms, "batch_size": batch}
    return {**found, "conditions": conditions, **more}


def test_every_column_of_a_cell_timed_under_interference():
    busy = {
        "interference": True,
        "interference_reasons": ["other processes", "steal"],
        "other_cpu_share": 0.3,
        "steal_share": 0.01,
        "gpu_other_util": 5,
        "started_at": 100.0,
        "ended_at": 200.0,
    }
    ceiling_found = quiet(other_cpu_share=0.02, started_at=300.0, ended_at=400.0)
    anomalies = ["first epoch 1.4x faster than the rest", "loss is nan"]
    row = C.caveat_columns(
        record(conditions=busy, anomalies=anomalies, precision="bf16"),
        ceiling(conditions=ceiling_found, context="cell job"),
    )
    assert set(row) == set(C.CAVEAT_COLUMNS)
    assert row["interference"] is True and row["interference_reasons"] == "other processes; steal"
    assert (row["other_cpu_share"], row["steal_share"], row["gpu_other_util"]) == (0.3, 0.01, 5)
    assert (row["timed_from"], row["timed_to"]) == (100.0, 200.0)
    assert row["ceiling_context"] == "cell job" and row["ceiling_interference"] is False
    assert row["ceiling_interference_reasons"] is None  # no reasons: empty, not ""
    assert row["ceiling_other_cpu_share"] == 0.02
    assert (row["ceiling_timed_from"], row["ceiling_timed_to"]) == (300.0, 400.0)
    assert row["ceiling_fast_img_s"] == pytest.approx(640.0)
    # 950 img/s at the slow end, above 640: beyond both spreads, but timed under interference
    assert row["above_ceiling"] is False
    assert row["ceiling_exceeded"] == (
        "trained at 1,000 img/s (its interval from 950), above its ceiling (500 img/s, fast end "
        "640), but the cell or its ceiling was timed under interference: the load changed "
        "between the two, so the share is noise, not an impossibility"
    )
    assert row["implausible"] == "loss is nan"  # the first epoch's speed is variation
    assert "without native bf16" in row["precision_emulated"]


GPU = {"type": "cuda"}  # a CPU ceiling is an estimate and withholds nothing (test_caveats.py)


def test_a_quiet_cell_beyond_its_ceiling_is_impossible_with_its_reason():
    row = C.caveat_columns(
        record(conditions=quiet(), anomalies=["loss is nan"], device=GPU),
        ceiling(conditions=quiet()),
    )
    assert row["interference"] is False and row["ceiling_interference"] is False
    assert row["above_ceiling"] is True and row["ceiling_exceeded"] is None
    first, second = row["implausible"].split("; ", 1)
    assert first == "loss is nan"
    assert second.startswith("trained at 1,000 img/s (its interval from 950), above its own")
    assert "(500 img/s, 640 at the fast end" in second
    assert "_reason" not in row and row["precision_emulated"] is None


def test_interference_on_the_ceiling_alone_explains_it_too():
    busy = {"interference": True, "interference_reasons": ["steal"]}
    row = C.caveat_columns(record(conditions=quiet()), ceiling(conditions=busy))
    assert row["above_ceiling"] is False and row["implausible"] is None
    assert row["ceiling_interference_reasons"] == "steal"
    assert (
        "trained at 1,000 img/s (its interval from 950), above its ceiling (500"
        in (row["ceiling_exceeded"])
    )


def test_a_record_without_conditions_or_ceiling_has_nothing_to_say():
    row = C.caveat_columns({"status": "ok", "summary": {}}, None)
    assert set(row) == set(C.CAVEAT_COLUMNS)
    assert all(value is None for value in row.values()), row


def test_above_the_ceilings_median_within_its_noise_keeps_its_figure():
    # median 1000, fast end 64 / 0.05 s = 1280: 1100 (from 1050) is above one, below the other
    assert C.ceiling_verdict(record(), record()["summary"], None) == {}  # no ceiling
    summary = {"train_img_s": 1100.0, "train_img_s_low": 1050.0}
    found = C.ceiling_verdict(record(), summary, ceiling(img_s=1000.0, p10_ms=50.0))
    assert found["above_ceiling"] is False and "_reason" not in found
    assert found["ceiling_exceeded"].startswith(
        "trained at 1,100 img/s (its interval from 1,050), above its ceiling's median 1,000"
    )
    assert found["ceiling_exceeded"] == (
        "trained at 1,100 img/s (its interval from 1,050), above its ceiling's median 1,000 but "
        "within both spreads (the ceiling's fast end is 1,280): noise, the share is over 100 % "
        "by no more than the two vary"
    )
    below = C.ceiling_verdict(record(), {"train_img_s": 900.0}, ceiling(img_s=1000.0, p10_ms=50))
    assert below == {"ceiling_fast_img_s": 1280.0, "above_ceiling": False}


def test_a_cell_at_exactly_its_ceilings_median_is_not_above_it():
    summary = {"train_img_s": 1000.0, "train_img_s_low": 990.0}
    found = C.ceiling_verdict(record(), summary, ceiling(img_s=1000.0, p10_ms=50.0))
    assert found == {"ceiling_fast_img_s": 1280.0, "above_ceiling": False}


def test_the_slow_end_is_the_lower_of_the_median_and_its_interval():
    # fast end 135 / 0.1 s = 1350: the median 1300 is below it, a (bad) low end of 1400 above
    summary = {"train_img_s": 1300.0, "train_img_s_low": 1400.0}
    found = C.ceiling_verdict(record(), summary, ceiling(img_s=1000.0, batch=135))
    assert found["above_ceiling"] is False
    # without an interval the median itself is the slow end
    gpu_cell = record(device=GPU)
    found = C.ceiling_verdict(gpu_cell, {"train_img_s": 1400.0}, ceiling(img_s=1000.0, batch=135))
    assert found["above_ceiling"] is True and "interval" not in found["_reason"]
    assert found["_reason"].startswith("trained at 1,400 img/s, above its own")


def test_a_ceiling_without_a_median_uses_its_fast_end_as_the_median():
    bare = {"status": "ok", "step_ms_p10": 100.0, "batch_size": 64}  # fast end 640
    assert C.ceiling_verdict(record(), {"train_img_s": 600.0}, bare) == {
        "ceiling_fast_img_s": 640.0,
        "above_ceiling": False,
    }


def test_no_verdict_for_a_failed_cell_or_one_without_a_rate():
    assert C.ceiling_verdict(record(status="oom"), {"train_img_s": 9e9}, ceiling()) == {}
    assert C.ceiling_verdict(record(), {}, ceiling()) == {}


def test_the_ceilings_fast_end():
    assert C.ceiling_fast_end(None) is None
    assert C.ceiling_fast_end(ceiling(status="failed")) is None
    assert C.ceiling_fast_end(ceiling(p10_ms=200.0, batch=32)) == pytest.approx(160.0)
    # without a p10 (or a batch): its median
    assert C.ceiling_fast_end(ceiling(img_s=700.0, p10_ms=None)) == 700.0
    assert C.ceiling_fast_end(ceiling(img_s=700.0, p10_ms=0)) == 700.0
    assert C.ceiling_fast_end(ceiling(img_s=700.0, batch=None)) == 700.0
    assert C.ceiling_fast_end(ceiling(img_s="nan", batch=None)) is None
    assert C.ceiling_fast_end(ceiling(img_s="inf", batch=None)) is None
    assert C.ceiling_fast_end(ceiling(img_s="fast", batch=None)) is None
    assert C.ceiling_fast_end(ceiling(p10_ms="100", batch="64")) == pytest.approx(640.0)


def test_a_bf16_cell_is_emulated_only_on_a_cpu_with_a_known_precision():
    gpu = record(precision="bf16") | {"device": {"type": "cuda"}}
    assert C.caveat_columns(gpu, None)["precision_emulated"] is None
    unknown = record(precision="int8")
    assert C.caveat_columns(unknown, None)["precision_emulated"] is None
    no_device = record(precision="bf16") | {"device": {}}
    assert C.caveat_columns(no_device, None)["precision_emulated"] is None
    native = record(precision="bf16") | {"environment": {"bf16_native": True}}
    assert C.caveat_columns(native, None)["precision_emulated"] is None


def test_flags_as_runs_csv_writes_them():
    for value in (True, "True", " true ", "1", 1, 2.0):
        assert T.as_bool(value) is True, value
    for value in (False, "False", "0", "", "no", 0, 0.0, math.nan, None, pd.NA):
        assert T.as_bool(value) is False, value


def test_texts_as_runs_csv_writes_them():
    assert C.text_of(None) is None and C.text_of(math.nan) is None and C.text_of("  ") is None
    assert C.text_of(pd.NA) is None and C.text_of(" why ") == "why" and C.text_of(3) == "3"


def test_a_table_cells_marks():
    quiet_seed = {"interference": False, "ceiling_interference": "False", "above_ceiling": ""}
    above = {"above_ceiling": "True"}
    busy_ceiling = {"ceiling_interference": True}
    assert C.cell_caveat([quiet_seed], "share") == (False, "")
    assert C.cell_caveat([quiet_seed, above], "share") == (True, "")
    assert C.cell_caveat([above], "cell") == (False, "")  # only a share is withheld
    assert C.cell_caveat([quiet_seed, busy_ceiling], "ceiling") == (False, C.INTERFERENCE_MARK)
    assert C.cell_caveat([busy_ceiling], "cell") == (False, "")  # not the cell's own timing
    assert C.cell_caveat([busy_ceiling], "share") == (False, C.INTERFERENCE_MARK)
    assert C.cell_caveat([{"interference": "1"}], "cell") == (False, C.INTERFERENCE_MARK)
    assert C.cell_caveat([{"interference": True}], "share") == (False, C.INTERFERENCE_MARK)
    assert C.cell_caveat([{"interference": True}], "ceiling") == (False, "")


def test_within_the_noise_needs_a_seeds_text():
    assert C.exceeded([{"ceiling_exceeded": math.nan}, {"ceiling_exceeded": "noise"}])
    assert not C.exceeded([{"ceiling_exceeded": math.nan}, {"ceiling_exceeded": " "}, {}])


def test_a_one_seed_cells_own_interval():
    columns = ("low", "high")
    assert C.own_interval(pd.DataFrame({"low": [1.0], "high": [3.0]}), columns) == (1.0, 3.0)
    assert C.own_interval(pd.DataFrame({"low": [1.0]}), columns) is None
    assert C.own_interval(pd.DataFrame({"low": [math.nan], "high": [3.0]}), columns) is None
    assert C.own_interval(pd.DataFrame({"low": [1.0], "high": [None]}), columns) is None
    assert C.own_interval(pd.DataFrame({"low": [], "high": []}), columns) is None


def test_unstable_reasons_say_which_seed_when_there_are_several():
    one = [{"seed": 0, "unstable": "cv 12 %"}]
    assert C.unstable_reasons(one) == ["cv 12 %"]
    several = [{"seed": 0, "unstable": "cv 12 %"}, {"seed": 1, "unstable": math.nan}]
    several.append({"seed": 2, "unstable": "cv 20 %"})
    assert C.unstable_reasons(several) == ["seed 0: cv 12 %", "seed 2: cv 20 %"]
    # the note names the cells; each seed's reason is its row of the timing conditions table
    note = C.unstable_note(["resnet18 O0", "resnet18 O1"])
    assert note.startswith(f"{C.UNSTABLE_MARK} unstable: ")
    assert "holds: resnet18 O0 and resnet18 O1 (each one's spread and cause: the timing" in note


def test_a_column_is_emulated_when_any_cell_below_it_is():
    assert C.emulated_header("bf16", [{}, {"precision_emulated": "why"}]) == "bf16 (emulated)"
    assert C.emulated_header("bf16", [{"precision_emulated": math.nan}]) == "bf16"


def test_the_interference_note_says_what_was_timed():
    cell, ceiling_note, share = (C.interference_note(s) for s in ("cell", "ceiling", "share"))
    assert "while the cell's epochs ran" in cell and "slower than the machine" in cell
    assert "while the ceiling's timed steps ran" in ceiling_note
    assert "epochs or its ceiling's timed steps ran" in share
    assert "too low or too high" in share and "too low or too high" not in cell
    assert all(n.startswith(f"{C.INTERFERENCE_MARK} timed under") for n in (cell, share))


def test_the_emulated_note_names_each_cpu_once():
    rows = [
        {"precision_emulated": "why", "env_cpu_model": "Xeon", "env_cpu_capability": "AVX2"},
        {"precision_emulated": "why", "env_cpu_model": "Xeon", "env_cpu_capability": "AVX2"},
        {"precision_emulated": "why", "env_cpu_isa_limits": "ONEDNN_MAX_CPU_ISA=AVX2"},
        {"precision_emulated": None, "env_cpu_model": "EPYC"},
    ]
    note = C.emulated_note(rows)
    assert note.startswith(f"{C.EMULATED_LABEL}: no native bf16 arithmetic on this CPU (")
    inside = note.split("this CPU (", 1)[1].split("): torch", 1)[0]
    assert inside.split("; ") == [
        "Xeon, torch CPU capability AVX2",
        "unknown CPU, torch CPU capability unknown, capped by ONEDNN_MAX_CPU_ISA=AVX2",
    ]
    assert "EPYC" not in note


def test_reasons_come_back_as_lists():
    assert C.reasons_of(None) == [] and C.reasons_of(math.nan) == [] and C.reasons_of("") == []
    assert C.reasons_of("a; b") == ["a", "b"]
    assert C.reasons_of("; a") == ["a"]
    assert C.reasons_of('["x; y", 3]') == ["x; y", "3"]  # older records: a JSON list
    assert C.reasons_of("[not json; b") == ["[not json", "b"]
    assert C.reasons_of("42") == ["42"]  # a bare number is one reason, not JSON to read


def test_every_note_points_the_reader_at_columns_runs_csv_has():
    import re

    notes = [
        C.WITHIN_NOISE_NOTE,
        C.IMPOSSIBLE_NOTE,
        *(C.interference_note(s) for s in C.SUBJECTS),
    ]
    for note in notes:
        named = re.findall(r"`(\w+)`", note)  # what the reader is sent to look up
        assert named, note
        assert set(named) <= set(C.CAVEAT_COLUMNS), note
    assert C.WITHIN_NOISE_NOTE.startswith(f"{C.WITHIN_NOISE_MARK} above 100 % within the noise")
