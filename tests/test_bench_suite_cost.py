"""The suite-cost benchmark's notes (tests/bench_suite_cost.py): every Python process notes its
command line at start and its CPU seconds, test and dynamo at exit; the tables are read from them.
Real fresh Pythons with the benchmark's ``sitecustomize`` on the path (no torch: a fraction of a
second each)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests import bench_suite_cost as B

BURN = "import time\nend = time.process_time() + 0.2\nwhile time.process_time() < end: pass\n"
FORK = "import os, sys\npid = os.fork()\nif pid == 0:\n    sys.exit(0)\nos.waitpid(pid, 0)\n"


def noted_env(tmp_path, test: str = "") -> dict[str, str]:
    """The environment bench_suite_cost.record gives the suite, and the test pytest would name."""
    return {**B.noting_environment(tmp_path), "PYTEST_CURRENT_TEST": test}


def test_a_process_notes_its_command_line_and_at_exit_its_cpu_and_its_test(tmp_path):
    env = noted_env(tmp_path, "tests/test_example.py::test_one (call)")
    subprocess.run([sys.executable, "-c", BURN], env=env, check=True)
    ((kind, record),) = B.read_exits(tmp_path / "processes")
    assert kind.startswith("python"), kind
    # its own CPU: at least the 0.2 s it burned, and not a whole second more
    assert 0.2 <= record["cpu_s"] < 1.2, record
    assert record["test"] == "tests/test_example.py"
    assert record["dynamo"] is False


def test_a_fork_that_exits_through_python_notes_nothing(tmp_path):
    subprocess.run([sys.executable, "-c", FORK], env=noted_env(tmp_path), check=True)
    notes = sorted(path.name for path in (tmp_path / "processes").iterdir())
    # the parent noted its command line and its exit; the fork (same atexit hook) neither
    assert len(notes) == 2 and notes[1] == notes[0] + ".exit", notes
    assert json.loads((tmp_path / "processes" / notes[1]).read_text())["test"] == ""


def test_the_tables_count_processes_and_cpu_by_kind_and_by_test_file():
    exits = [
        ("snakemake", {"cpu_s": 1.5, "test": "tests/test_a.py", "dynamo": False}),
        ("snakemake", {"cpu_s": 1.0, "test": "tests/test_b.py", "dynamo": False}),
        ("nettebench.training", {"cpu_s": 3.0, "test": "tests/test_a.py", "dynamo": True}),
        ("xdist worker (in-process tests)", {"cpu_s": 9.0, "test": "", "dynamo": False}),
    ]
    table = B.exits_report(exits, busy_cpu_s=20.0).splitlines()
    assert table[0] == "4 processes noted their exit: 14 CPU-s of the 20 the CPUs were busy for"
    kinds = [line.split() for line in table[2:5]]
    assert kinds[0][:4] == ["9.0", "1", "9.00", "0"]
    assert kinds[1] == ["3.0", "1", "3.00", "1", "nettebench.training"]
    assert kinds[2] == ["2.5", "2", "1.25", "0", "snakemake"]
    files = table[6:]
    assert files[0].startswith("   9.0  (no test")
    assert files[1] == "   4.5  tests/test_a.py: nettebench.training 3, snakemake 2"
    assert files[2] == "   1.0  tests/test_b.py: snakemake 1"
