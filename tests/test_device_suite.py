"""The device command (tests/device/run.py) on the CPU: its ``--smoke`` path writes its table
after every case, leaves at most 7 files under --out, records a crash or a reader's failure as
that case's, and stops a case at the deadline with every process of its group gone."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "device"))
import run  # noqa: E402 - tests/device/run.py

CELL = "resnet18-O1-cached-10ep"


def _python(code: str, *args: str) -> list[str]:
    return [sys.executable, "-c", code, *args]


def test_the_plan_fits_seven_minutes_goal_cells_first():
    assert run.planned_s() <= run.PLAN_S
    names = [case.name for case in run.CASES]
    assert len(set(names)) == len(names)
    assert names[:4] == ["data", "store", CELL, "resnet50-O1-cached-10ep"]
    assert not any("pil" in name and "10ep" in name for name in names)


def test_smoke_writes_the_table_after_every_case(tmp_path, monkeypatch):
    out, work = tmp_path / "out", tmp_path / "work"
    crash = run.Case("crash", 1, lambda s: [_python("raise SystemExit(3)")])
    monkeypatch.setattr(run, "CASES", [*run.CASES, crash])
    seen = []
    write = run.write

    def checked(suite, header):
        write(suite, header)
        lines = (out / "table.md").read_text().splitlines()
        seen.append((len(suite.rows), sum(line.startswith("| ") for line in lines) - 1))

    monkeypatch.setattr(run, "write", checked)
    only = ["data", "store", CELL, "crash"]
    assert run.main(["--smoke", "--out", str(out), "--work", str(work), "--only", *only]) == 0
    assert seen == [(n, n) for n in range(1, 5)]  # after every case, every row so far
    rows = [json.loads(line) for line in (out / "cases.jsonl").read_text().splitlines()]
    assert [r["status"] for r in rows] == ["ok", "ok", "ok", "failed (exit 3)"]
    assert len([p for p in out.rglob("*") if p.is_file()]) <= 7
    cell = rows[2]
    assert cell["result"] == "ok" and cell["wall_s"] > 0 and cell["goal"].startswith("n/a")
    phases = cell["startup"]["before_first_step"]  # the trainer's own phase marks
    assert {"imports", "key", "device_probe", "model", "store", "other"} <= set(phases)
    assert min(phases.values()) >= 0
    assert sum(phases.values()) == pytest.approx(cell["to_first_step_s"], abs=0.01)
    assert set(cell["startup"]["after_last_step"]) >= {"environment", "other"}


def _suite(tmp_path, seconds: float) -> run.Suite:
    (tmp_path / "logs").mkdir()
    env = {**os.environ}
    return run.Suite(run.SMOKE, tmp_path, tmp_path, time.monotonic() + seconds, True, env)


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


def test_a_case_past_the_deadline_is_stopped_with_its_children(tmp_path):
    suite = _suite(tmp_path, 1.5)
    code = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "open(sys.argv[1], 'w').write(str(child.pid))\n"
        "time.sleep(60)\n"
    )
    hang = run.Case("hang", 1, lambda s: [_python(code, str(tmp_path / "pid"))], smoke_s=60)
    row = run.run_case(suite, hang)
    assert row["status"] == "timeout" and "deadline" in row["note"]
    assert row["seconds"] < 10
    assert _gone(int((tmp_path / "pid").read_text()))
    late = run.run_case(suite, run.Case("late", 1, lambda s: [_python("pass")]))
    assert late["status"] == "not run"


@pytest.mark.parametrize("read", [lambda s: 1 / 0, lambda s: run.read_json(Path("/nonexistent"))])
def test_a_failed_read_is_that_cases_failure(tmp_path, read):
    row = run.run_case(_suite(tmp_path, 30), run.Case("x", 1, lambda s: [_python("")], read))
    assert row["status"] in ("failed (reading results)", "ok")
    assert ("ZeroDivisionError" in row.get("note", "")) == (row["status"] != "ok")
