"""The device command (tests/device/run.py) on the CPU: its plan fits the device (at most 330 s,
every case stopped by 420 s, the call and a rerun's start inside the 15 minutes of device time)
and begins with the GPU user's check (``python -m nettebench check``: the same case objects);
its ``--smoke`` path writes its table after every case, leaves at most 7 files under --out,
records a crash or a reader's failure as that case's, stops a case at its own limit and every
case at the deadline with every process of its group gone; each case's command (warm-up
first, profiles on the store, apex on its own cases' path only, one inference process per
precision, 2 processes through torchrun), ``--keep``, and the exit status."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nettebench.check import cases, runner

sys.path.insert(0, str(Path(__file__).parent / "device"))
import prepare_carry  # noqa: E402 - tests/device/prepare_carry.py
import run  # noqa: E402 - tests/device/run.py

CELL = "resnet18-O1-cached-10ep"
DEVICE_TIME_S, MACHINE_START_S, LEAST_START_S = 15 * 60, 2 * 60, 4 * 60  # device README


def _python(code: str, *args: str) -> list[str]:
    return [sys.executable, "-c", code, *args]


def test_the_plan_fits_the_device_goal_cells_first():
    """Issue 56, item 8: the estimates sum to at most 330 s, every case stops by 420 s, and the
    call (its timeout) after a machine's start leaves the 4 minutes a second start needs."""
    assert sum(case.estimate_s for case in run.CASES) <= run.PLAN_S == 330
    assert run.planned_s() == sum(case.estimate_s for case in run.CASES)
    assert run.DEADLINE_S <= 420
    assert run.DEADLINE_S + runner.KILL_GRACE_S + 30 <= prepare_carry.TIMEOUT_S <= 600
    assert MACHINE_START_S + prepare_carry.TIMEOUT_S + LEAST_START_S <= DEVICE_TIME_S
    names = [case.name for case in run.CASES]
    assert len(set(names)) == len(names)
    assert names[:6] == ["stack", "data", "store", "warm-up", CELL, "resnet50-O1-cached-10ep"]
    assert not any("pil" in name and "10ep" in name for name in names)


def test_the_device_run_is_the_check_then_the_developers_cases():
    """One definition: the check's own case objects (apex's with the carried wheel as a
    prerequisite), in the check's order, before every extra case."""
    device = [case for case in run.CASES if case.name != "apex-wheel"]
    check = device[: len(cases.CASES)]
    assert [c.name for c in check] == [c.name for c in cases.CASES]
    for mine, theirs in zip(check, cases.CASES, strict=True):
        if mine.name.startswith("apex-"):
            assert mine.needs == (*theirs.needs, "apex-wheel") and mine.skip is theirs.skip
        else:
            assert mine is theirs
    assert device[len(cases.CASES) :] == run.EXTRAS
    names = [case.name for case in run.CASES]
    assert names.index("apex-wheel") == names.index("apex-O1") - 1


def test_inference_runs_one_process_per_precision(tmp_path):
    suite = _suite(tmp_path, 30)
    suite.sizes, suite.smoke = run.GPU, False
    found = {}
    for case in run.CASES:
        if case.name.startswith("inference-"):
            [command] = case.commands(suite)  # one process
            found[_option(command, "--precision")] = command
    assert sorted(found) == sorted(["O1", "fp32", "tf32", "O3", "bf16"])
    batches = {p: command[command.index("--batch-sizes") + 1 :] for p, command in found.items()}
    assert batches["O1"][:4] == ["1", "8", "64", "256"] and batches["bf16"][:2] == ["256", "--data"]


def test_smoke_writes_the_table_after_every_case(tmp_path, monkeypatch):
    """Real data and store cases, a goal cell that reads back measured numbers, a crash. The
    real goal cell's record is checked in tests/test_device_image_imports.py, whose smoke run
    trains it with the H200's absent modules blocked."""
    out, work = tmp_path / "out", tmp_path / "work"
    measured = {"result": "ok", "wall_s": 1.0, "train_img_s": 10.0}
    goal = run.Case(CELL, 1, lambda s: [_python("")], lambda s: measured, needs=("store",))
    crash = run.Case("crash", 1, lambda s: [_python("raise SystemExit(3)")])
    data, store = (next(c for c in run.CASES if c.name == n) for n in ("data", "store"))
    monkeypatch.setattr(run, "CASES", [data, store, goal, crash])
    seen = []
    write = runner.write

    def checked(suite, header):
        write(suite, header)
        lines = (out / "table.md").read_text().splitlines()
        seen.append((len(suite.rows), sum(line.startswith("| ") for line in lines) - 1))

    monkeypatch.setattr(runner, "write", checked)
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
    suite = _suite(tmp_path, 3.0)  # time for the case to start its child on a loaded machine
    code = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "open(sys.argv[1], 'w').write(str(child.pid))\n"
        "time.sleep(60)\n"
    )
    hang = run.Case("hang", 1, lambda s: [_python(code, str(tmp_path / "pid"))], smoke_s=60)
    row = runner.run_case(suite, hang)
    assert row["status"] == "timeout" and "deadline" in row["note"]
    assert row["seconds"] < 10
    assert _gone(int((tmp_path / "pid").read_text()))
    late = runner.run_case(suite, run.Case("late", 1, lambda s: [_python("pass")]))
    assert late["status"] == "not run"


HANG = (
    "import subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
    "open(sys.argv[1], 'w').write(str(child.pid))\n"
    "time.sleep(60)\n"
)


def test_a_case_past_its_own_limit_is_stopped_and_the_next_runs(tmp_path):
    """A case's own limit, well before the deadline: its group is gone, the row says which
    limit, and the case after it runs."""
    suite = _suite(tmp_path, 120)
    # 3 s: time for the case to start its child on a loaded machine
    hang = run.Case("hang", 1, lambda s: [_python(HANG, str(tmp_path / "pid"))], smoke_s=3.0)
    started = time.monotonic()
    row = runner.run_case(suite, hang)
    assert row["status"] == "timeout" and row["note"] == "stopped at the case limit 3 s"
    assert 3.0 <= row["seconds"] < 3.0 + runner.KILL_GRACE_S + 2
    assert time.monotonic() - started < 12 and row["limit_s"] == 3.0
    assert _gone(int((tmp_path / "pid").read_text()))
    after = runner.run_case(suite, run.Case("after", 1, lambda s: [_python("pass")]))
    assert after["status"] == "ok"


def test_a_cases_limit_on_the_device_is_twice_its_estimate_at_least_20_s_more(tmp_path):
    suite = _suite(tmp_path, 30)
    suite.smoke, suite.slack = False, run.SLACK
    limits = {est: run.Case("x", est, lambda s: []).limit_s(suite) for est in (3, 9, 20, 40)}
    assert limits == {3: 23, 9: 29, 20: 40, 40: 80}


@pytest.mark.parametrize("read", [lambda s: 1 / 0, lambda s: run.read_json(Path("/nonexistent"))])
def test_a_failed_read_is_that_cases_failure(tmp_path, read):
    row = runner.run_case(_suite(tmp_path, 30), run.Case("x", 1, lambda s: [_python("")], read))
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
    assert names.index("warm-up") < min(names.index(goal) for goal in cases.GOAL_CASES)
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
    monkeypatch.setattr(cases, "python", lambda *args: [sys.executable, "-c", code, str(seen)])
    suite = _suite(tmp_path, 60)
    suite.env["PYTHONPATH"] = "scripts"
    suite.rows = [{"case": n, "status": "ok"} for n in ("data", "store", "apex-wheel")]
    site = tmp_path / "apex-site"
    suite.apex_paths = (site,)
    (site / "apex" / "amp").mkdir(parents=True)  # NVIDIA's apex (it has apex.amp)
    for name in ("apex-O1", "resnet18-O1-streamed", "apex-O2"):
        runner.run_case(suite, next(case for case in run.CASES if case.name == name))
    assert [str(site) in line.split(os.pathsep) for line in seen.read_text().splitlines()] == [
        True, False, True
    ]  # fmt: skip
    assert suite.env["PYTHONPATH"] == "scripts"


def test_without_apex_its_cases_are_skipped_and_that_is_a_result(tmp_path):
    """No carried wheel, no apex installed: apex-O1 is ``skipped``, not run, and a run whose
    only other rows are ok exits 0."""
    suite = _suite(tmp_path, 60)
    suite.apex_paths = (tmp_path / "apex-site",)  # nothing installed there
    suite.rows = [{"case": n, "status": "ok"} for n in ("data", "store")]
    apex = next(case for case in cases.CASES if case.name == "apex-O1")
    row = runner.run_case(suite, apex)
    assert row["status"] == "skipped" and "apex is not installed" in row["note"]
    assert runner.verdict([*suite.rows, row])[0] == 0


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
    skipped = run.Case("skipped", 1, lambda s: [], skip=lambda s: "not on this machine")
    broken = run.Case("broken", 1, lambda s: [_python("raise SystemExit(4)")])
    args = ["--smoke", "--out", str(tmp_path / "out"), "--work", str(tmp_path / "work")]
    first, second = cases.GOAL_CASES
    for plan, code in (
        ([goal(first, True), goal(second, True), other, skipped], 0),
        ([goal(first, False), goal(second, True), other], 1),
        ([goal(first, True), goal(second, True), broken], 2),
        ([goal(first, False), goal(second, False)], 1),  # every case failed
    ):
        monkeypatch.setattr(run, "CASES", plan)
        assert run.main(args) == code


def test_one_inference_process_measures_each_batch_size_to_its_own_record(tmp_path):
    """tests/device/inference_sweep.py, as the fp32 case starts it at the smoke's sizes but at
    two batch sizes: one record each, of its batch size, measured."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "scripts")}
    suite = _suite(tmp_path, 120)
    [make] = next(case for case in run.CASES if case.name == "data").commands(suite)
    subprocess.run(make, check=True, env=env, capture_output=True, timeout=300)
    [command] = run.inference("fp32", lambda z: (1, 2))(suite)
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    folder = suite.cell_dir("inference-fp32")
    records = {p.name: json.loads(p.read_text()) for p in folder.glob("*.json")}
    assert sorted(records) == ["fp32-batch1.json", "fp32-batch2.json"]
    for name, record in records.items():
        assert record["status"] == "ok" and record["cell"]["precision"] == "fp32"
        assert f"batch{record['cell']['batch_size']}.json" in name
        assert record["offline"]["img_s"] > 0
    assert (
        records["fp32-batch1.json"]["single_stream"]
        and not records["fp32-batch2.json"]["single_stream"]
    )  # SingleStream at batch 1 only
    row = run.inference_numbers("fp32")(suite)
    assert row["result"] == "ok" and row["note"].startswith("fp32-batch1 ")
