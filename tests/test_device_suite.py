"""The device command (tests/device/run.py) on the CPU: its ``--smoke`` path writes its table
after every case, leaves at most 7 files under --out, records a crash or a reader's failure as
that case's, and stops a case at the deadline with every process of its group gone; the plan's
order and each case's command (warm-up first, profiles on the store, apex on its own cases'
path only, 2 processes through torchrun), ``--keep``, and the exit status."""

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
    assert run.planned_s() <= run.PLAN_S == 420 and run.DEADLINE_S <= 540  # issue 46, item 4
    names = [case.name for case in run.CASES]
    assert len(set(names)) == len(names)
    assert names[:5] == ["data", "store", "warm-up", CELL, "resnet50-O1-cached-10ep"]
    assert not any("pil" in name and "10ep" in name for name in names)


def test_smoke_writes_the_table_after_every_case(tmp_path, monkeypatch):
    """Real data and store cases, a goal cell that reads back measured numbers, a crash. The
    real goal cell's record is checked in tests/test_device_image_imports.py, whose smoke run
    trains it with the H200's absent modules blocked."""
    out, work = tmp_path / "out", tmp_path / "work"
    measured = {"result": "ok", "wall_s": 1.0, "train_img_s": 10.0}
    goal = run.Case(CELL, 1, lambda s: [_python("")], lambda s: measured, needs=("store",))
    crash = run.Case("crash", 1, lambda s: [_python("raise SystemExit(3)")])
    monkeypatch.setattr(run, "CASES", [*run.CASES[:2], goal, crash])
    seen = []
    write = run.write

    def checked(suite, header):
        write(suite, header)
        lines = (out / "table.md").read_text().splitlines()
        seen.append((len(suite.rows), sum(line.startswith("| ") for line in lines) - 1))

    monkeypatch.setattr(run, "write", checked)
    only = ["data", "store", CELL, "crash"]
    # the goal row was measured, another case failed: 2
    assert run.main(["--smoke", "--out", str(out), "--work", str(work), "--only", *only]) == 2
    assert seen == [(n, n) for n in range(1, 5)]  # after every case, every row so far
    rows = [json.loads(line) for line in (out / "cases.jsonl").read_text().splitlines()]
    assert [r["status"] for r in rows] == ["ok", "ok", "ok", "failed (exit 3)"]
    assert len([p for p in out.rglob("*") if p.is_file()]) <= 7


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


def _commands(name: str, suite: run.Suite) -> list[list[str]]:
    return next(case for case in run.CASES if case.name == name).commands(suite)


def _option(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def test_the_warm_up_runs_the_goal_cells_command_for_a_few_steps_before_them(tmp_path):
    """The first process to load torch, CUDA and cuDNN on a cold machine is the warm-up, a
    few steps of the resnet50 goal cell's own command (same module, loader and store)."""
    names = [case.name for case in run.CASES]
    assert names.index("warm-up") < min(names.index(goal) for goal in run.GOAL_CASES)
    for sizes in (run.GPU, run.SMOKE):
        (tmp_path / sizes.device).mkdir()
        suite = _suite(tmp_path / sizes.device, 30)
        suite.sizes, suite.smoke = sizes, sizes is run.SMOKE
        [warm] = _commands("warm-up", suite)
        [goal] = _commands("resnet50-O1-cached-10ep", suite)
        assert warm[:5] == goal[:5]  # python -m nettebench benchmarks cell-job
        for option in ("--model", "--precision", "--loader", "--store", "--batch-size"):
            assert _option(warm, option) == _option(goal, option)
        assert _option(warm, "--epochs") == "1" and _option(warm, "--max-steps") == "3"


def test_the_profiles_time_the_cached_loader_from_the_store(tmp_path):
    suite = _suite(tmp_path, 30)
    for name in ("profile-O0", "profile-O3"):
        [command] = _commands(name, suite)
        assert _option(command, "--loader") == "cached"
        assert _option(command, "--store") == str(suite.store)
        assert "store" in next(c for c in run.CASES if c.name == name).needs


def test_apex_is_on_the_path_of_the_apex_cases_only(tmp_path, monkeypatch):
    """Each command writes the PYTHONPATH it was started with: the apex site is on it for
    apex-O1 and not for the case after it."""
    seen = tmp_path / "paths.txt"
    code = "import os, sys; open(sys.argv[1], 'a').write(os.environ['PYTHONPATH'] + chr(10))"
    monkeypatch.setattr(run, "python", lambda *args: [sys.executable, "-c", code, str(seen)])
    suite = _suite(tmp_path, 60)
    suite.env["PYTHONPATH"] = "scripts"
    suite.rows = [{"case": n, "status": "ok"} for n in ("data", "store", "apex-wheel")]
    (tmp_path / "apex-site").mkdir()
    for name in ("apex-O1", "resnet18-O1-streamed", "apex-O2"):
        run.run_case(suite, next(case for case in run.CASES if case.name == name))
    site = str(tmp_path / "apex-site")
    assert [site in line.split(os.pathsep) for line in seen.read_text().splitlines()] == [
        True, False, True
    ]  # fmt: skip
    assert suite.env["PYTHONPATH"] == "scripts"


def test_the_data_parallel_case_starts_two_processes_through_torchrun(tmp_path, monkeypatch):
    suite = _suite(tmp_path, 30)
    suite.sizes, suite.smoke = run.GPU, False
    for gpus, device in ((1, "cpu"), (2, "cuda")):  # NCCL refuses two ranks on one GPU
        monkeypatch.setattr(run, "gpu_count", lambda gpus=gpus: gpus)
        [command] = _commands("dp-2proc", suite)
        assert _option(command, "--processes") == "2" and _option(command, "--device") == device
    # the reader: torchrun's command line and one store line per process, in the case's log
    folder = suite.cell_dir("dp-2proc")
    folder.mkdir(parents=True)
    (folder / "metrics.json").write_text(json.dumps({"status": "ok", "device": {"type": "cpu"}}))
    log = tmp_path / "logs" / "dp-2proc.log"
    torchrun = "data-parallel: torchrun --nnodes=1 --nproc-per-node=2 -m cell_job\n"
    store = "cached store: resident (cpu)\n"
    log.write_text(torchrun + store * 2)
    assert run.dp_numbers(suite)["goal"] == "2 processes through torchrun (gloo, cpu) met"
    log.write_text(torchrun + store)
    assert run.dp_numbers(suite)["goal"].endswith("MISSED")
    log.write_text(store * 2)
    assert run.dp_numbers(suite)["goal"].endswith("MISSED")


def test_keep_reuses_an_earlier_runs_data_and_store(tmp_path, monkeypatch):
    """``--only`` a case that needs the store, with ``--keep``: it runs on the store the
    earlier run left (its preparation not run again); without ``--keep`` it is not run."""
    made = tmp_path / "made.txt"
    note = "import sys; open(sys.argv[1], 'a').write(sys.argv[2] + chr(10))"

    def case(name, *needs):
        return run.Case(name, 1, lambda s: [_python(note, str(made), name)], needs=needs)

    monkeypatch.setattr(run, "CASES", [case("data"), case("store", "data"), case("cell", "store")])
    out, work = tmp_path / "out", tmp_path / "work"
    args = ["--smoke", "--out", str(out), "--work", str(work)]
    assert run.main([*args, "--only", "data", "store"]) == 0
    (work / "store").mkdir()
    (work / "store" / "frames.bin").write_text("decoded")
    assert run.main([*args, "--keep", "--only", "cell"]) == 0
    rows = [json.loads(line) for line in (out / "cases.jsonl").read_text().splitlines()]
    assert [(r["case"], r["status"]) for r in rows] == [("cell", "ok")]
    assert made.read_text().split() == ["data", "store", "cell"]  # nothing prepared again
    assert (work / "store" / "frames.bin").read_text() == "decoded"
    assert run.main([*args, "--only", "cell"]) == 2  # a fresh work folder: needs store ok
    rows = [json.loads(line) for line in (out / "cases.jsonl").read_text().splitlines()]
    assert rows[0]["status"] == "not run" and not (work / "store").exists()


def test_the_exit_status_says_whether_the_goal_rows_were_measured(tmp_path, monkeypatch):
    def goal(name, ok):
        def read(s):
            return {"result": "ok", "wall_s": 1.0, "train_img_s": 10.0} if ok else {}

        return run.Case(name, 1, lambda s: [_python(f"raise SystemExit({0 if ok else 1})")], read)

    other = run.Case("other", 1, lambda s: [_python("")], lambda s: {"result": "ok/unsupported"})
    broken = run.Case("broken", 1, lambda s: [_python("raise SystemExit(4)")])
    args = ["--smoke", "--out", str(tmp_path / "out"), "--work", str(tmp_path / "work")]
    for cases, code in (
        ([goal(run.GOAL_CASES[0], True), goal(run.GOAL_CASES[1], True), other], 0),
        ([goal(run.GOAL_CASES[0], False), goal(run.GOAL_CASES[1], True), other], 1),
        ([goal(run.GOAL_CASES[0], True), goal(run.GOAL_CASES[1], True), broken], 2),
        ([goal(run.GOAL_CASES[0], False), goal(run.GOAL_CASES[1], False)], 1),  # every case failed
    ):
        monkeypatch.setattr(run, "CASES", cases)
        assert run.main(args) == code
