"""A command imports with the garbage collector paused, works with it on, and ends without
Python's teardown but with everything its exit does that anyone sees
(nettebench/vocabulary/command_start.py); a library import never touches it."""

from __future__ import annotations

import ast
import gc
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nettebench.vocabulary import command_start
from tests.workflow_helpers import copy_workflow

PACKAGE_DIR = Path(command_start.__file__).resolve().parent.parent

# Printed at exit by every Python process of a test below: is the collector on, and did
# anything freeze the imports' objects?
PROBE = """\
import atexit, gc, sys
atexit.register(lambda: print(f"collector={gc.isenabled()} frozen={gc.get_freeze_count() > 0}",
                              file=sys.__stderr__))
"""


@pytest.fixture
def frozen_before(monkeypatch):
    """How many objects were frozen before the test (the worker freezes what collection
    imported: tests/conftest.py); the collector is back on afterwards, and what the test froze
    is unfrozen only if nothing was frozen before."""
    monkeypatch.setattr(command_start, "_paused", False)
    monkeypatch.setattr(command_start, "_started_as_command", False)  # run() would end pytest
    before = gc.get_freeze_count()
    yield before
    if before == 0:
        gc.unfreeze()
    gc.enable()


def test_only_a_python_dash_m_start_pauses_and_resume_freezes(frozen_before):
    for argv in (["-c"], ["/usr/bin/snakemake", "-n"], ["pytest"], []):
        assert not command_start.pause_while_importing(argv) and gc.isenabled()
    command_start.resume()  # nothing was paused: nothing changes
    assert gc.get_freeze_count() == frozen_before

    assert command_start.pause_while_importing(["-m", "--data", "x"])
    assert not gc.isenabled()
    made_while_importing = [[] for _ in range(3)]  # containers: the collector tracks them
    command_start.resume()  # run()'s first step; run() itself ends its process (tests below)
    frozen = gc.get_freeze_count()
    assert gc.isenabled() and frozen >= frozen_before + len(made_while_importing)
    command_start.resume()  # a second resume does nothing
    assert gc.get_freeze_count() == frozen


def test_a_collector_turned_off_by_someone_else_stays_off(frozen_before):
    gc.disable()
    assert not command_start.pause_while_importing(["-m"])
    command_start.resume()
    assert not gc.isenabled()


# A command's life in miniature: started as ``python -m`` (the flag nettebench/__init__.py sets
# then), it leaves a non-daemon thread writing a file, an atexit handler, output without a
# newline, and an object whose teardown would say so; it ends with status 3.
ENDING = """\
import atexit, os, sys, threading, time
from nettebench.vocabulary import command_start
if sys.argv[1] == "command":
    command_start.pause_while_importing(["-m"])

class SaysItsTeardown:
    def __del__(self):
        os.write(2, b"teardown ran\\n")

KEPT = SaysItsTeardown()

def write_late():
    time.sleep(0.3)
    with open("late.txt", "w") as handle:
        handle.write("written")

def main():
    threading.Thread(target=write_late).start()
    atexit.register(lambda: print("atexit ran", file=sys.stderr))
    print("no newline", end="")
    return 3

command_start.run(main)
"""


@pytest.mark.parametrize("start", ["command", "library"])
def test_a_command_ends_with_its_status_threads_atexit_and_output_but_no_teardown(tmp_path, start):
    (tmp_path / "ending.py").write_text(ENDING)
    env = {**os.environ, "PYTHONPATH": str(PACKAGE_DIR.parent)}
    env.pop("PYTHONUNBUFFERED", None)  # buffered output (the default), which os._exit alone loses
    done = subprocess.run(
        [sys.executable, "ending.py", start], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert done.returncode == 3, done.stderr
    assert done.stdout == "no newline"  # flushed into the pipe
    assert (tmp_path / "late.txt").read_text() == "written"  # the thread was waited for
    assert "atexit ran" in done.stderr
    # only the command skips the teardown; a process started otherwise ends as Python ends it
    assert ("teardown ran" in done.stderr) == (start == "library"), done.stderr


def test_a_command_run_by_a_profiler_ends_as_python_ends_it(tmp_path):
    """``python -m cProfile -m nettebench...`` writes its profile after the command returns: a
    command ending its own process would lose it."""
    env = {**os.environ, "PYTHONPATH": str(PACKAGE_DIR.parent)}
    command = [sys.executable, "-m", "cProfile", "-o", "out.prof", "-m", "nettebench.benchmarks"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert "usage: python -m nettebench.benchmarks" in done.stderr  # the command ran (status 2,
    assert (tmp_path / "out.prof").stat().st_size > 0  # which cProfile swallows) and so did its end


def run_probed(tmp_path, *args):
    (tmp_path / "sitecustomize.py").write_text(PROBE)
    env_path = f"{tmp_path}:{PACKAGE_DIR.parent}"
    done = subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": env_path},
        cwd=tmp_path,
    )
    return done.returncode, done.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize(
    "command",
    [
        ["-m", "nettebench.report", "tables", "--help"],  # a dispatcher's command
        ["-m", "nettebench.benchmarks.ceiling", "--help"],  # a module run as a command
        ["-m", "nettebench.training", "--help"],  # a package's __main__
    ],
    ids=["dispatcher", "module", "package"],
)
def test_a_command_works_with_the_collector_on_and_its_imports_frozen(tmp_path, command):
    returncode, last = run_probed(tmp_path, *command)
    assert returncode == 0
    assert last == "collector=True frozen=True"


def test_importing_the_package_as_a_library_leaves_the_collector_alone(tmp_path):
    code = "import nettebench.vocabulary.commands, nettebench.study"
    assert run_probed(tmp_path, "-c", code) == (0, "collector=True frozen=False")


def test_a_snakemake_run_freezes_what_snakemake_imported(tmp_path):
    """The Snakefile's first step, which Snakemake's process cannot take for itself (its imports
    are done before any workflow code runs)."""
    work = copy_workflow(tmp_path / "work")
    returncode, last = run_probed(
        work, "-m", "snakemake", "-n", "--workflow-profile", "profiles/quickstart"
    )
    assert returncode == 0
    assert last == "collector=True frozen=True"


def _entries():
    """Every way the package starts a command: its ``__main__.py`` files and the modules with an
    ``if __name__ == "__main__":`` block."""
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        tree = ast.parse(path.read_text())
        if path.name == "__main__.py":
            yield path, tree.body
        for node in tree.body:
            if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
                yield path, node.body


def test_every_command_entry_resumes_the_collector_and_ends_through_command_start():
    """A command that did not resume would work its whole life with the collector off; one that
    ended through ``sys.exit`` would pay for Python's teardown."""
    entries = list(_entries())
    assert len(entries) >= 15
    for path, body in entries:
        calls = {
            ast.unparse(n.func) for stmt in body for n in ast.walk(stmt) if isinstance(n, ast.Call)
        }
        # commands.main resumes once it has imported the command's module
        assert calls & {"command_start.run", "main"}, path
        if "main" in calls and "command_start.run" not in calls:
            text = path.read_text()
            assert "from nettebench.vocabulary.commands import main" in text, path
            assert "command_start.end" in calls, path
        assert "sys.exit" not in calls, path
    dispatcher = ast.unparse(ast.parse((PACKAGE_DIR / "vocabulary" / "commands.py").read_text()))
    assert "command_start.resume()" in dispatcher
