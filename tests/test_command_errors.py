"""Every command ends the same two ways on an error the user can act on, because every command's
``main()`` goes through :func:`nettebench.vocabulary.commands.run`: a command line its parser
refuses is one line, ``<prog>: error: ...; see --help``, exit status 2; an error the job raises
is one line, ``error: ...``, exit status 1, the line the workflow's summary of a failed job
finds (:mod:`nettebench.study.failures`).

The package's source is read (ast) for every ``def main(``; the few that do not call ``run``
themselves are listed below with the reason. Then ``run`` itself, every command's refused
command line (in this process), and a few commands started as a user starts them.
"""

from __future__ import annotations

import argparse
import ast
import io
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from nettebench.study import failures
from nettebench.vocabulary import commands
from nettebench.vocabulary.commands import COMMANDS, SINGLE, top_level

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "scripts" / "nettebench"

# main()s that do not call run themselves, and why.
NOT_THROUGH_RUN = {
    "vocabulary/commands.py": "the group's dispatcher: it runs the named command's main(), each "
    "of which is checked here",
    "benchmarks/cell_job.py": "the trainer's main() (training/cli.py, through run) with the cell "
    "job's parser and hook",
}


def mains() -> dict[str, ast.FunctionDef]:
    """Every module-level ``def main`` of the package, by its file under scripts/nettebench."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef) and node.name == "main":
                found[path.relative_to(PACKAGE).as_posix()] = node
    return found


def _calls(function: ast.FunctionDef) -> set[str]:
    """The names a function's body calls: ``run`` for ``run(...)`` and ``commands.run(...)``."""
    names = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Call):
            func = node.func
            names.add(func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", ""))
    return names


def test_the_walk_finds_the_main_of_every_command_in_the_table():
    """The premise: the commands the table names are among the mains the source walk finds."""
    named = {
        f"{group}/{module.replace('.', '/')}.py"
        for group, table in COMMANDS.items()
        for module in {module for module, _ in table.values()}
    } | {f"{module.replace('.', '/')}.py" for module, _ in SINGLE.values()}
    assert len(named) > 20 and named <= set(mains()), sorted(named - set(mains()))


def test_every_main_goes_through_run():
    """Each ``def main(`` calls ``commands.run`` and parses nothing itself (no ``parse_args``,
    the parse is run's), but the few listed with their reason; a listed one that calls run now
    leaves the list."""
    found = mains()
    wrong = []
    for name, function in found.items():
        called = _calls(function)
        if name in NOT_THROUGH_RUN:
            if "run" in called:
                wrong.append(f"{name}: calls run now, take it off NOT_THROUGH_RUN")
        elif "run" not in called or "parse_args" in called:
            wrong.append(f"{name}:{function.lineno}: main() parses or reports by itself")
    assert not wrong, wrong
    assert set(NOT_THROUGH_RUN) <= set(found), set(NOT_THROUGH_RUN) - set(found)


# ------------------------------------------------------------------------------------------ run


def _parser() -> commands.Parser:
    parser = commands.Parser(prog="python -m nettebench demo")
    parser.add_argument("--count", type=int, required=True)
    return parser


def test_a_refused_command_line_is_one_line_and_exit_status_2(capsys):
    with pytest.raises(SystemExit) as stopped:
        commands.run(_parser(), lambda args: (), ["--count", "two"])
    captured = capsys.readouterr()
    assert stopped.value.code == commands.USAGE == 2 and captured.out == ""
    assert captured.err == (
        "python -m nettebench demo: error: argument --count: invalid int value: 'two'; see --help\n"
    )
    with pytest.raises(SystemExit) as stopped:  # no abbreviation: --cou is not --count
        commands.run(_parser(), lambda args: (), ["--cou", "2"])
    assert stopped.value.code == 2
    assert capsys.readouterr().err.startswith("python -m nettebench demo: error: ")


def test_an_error_the_user_can_act_on_is_one_line_and_exit_status_1(capsys, tmp_path):
    def job(args):
        yield f"counted {args.count}"
        raise FileNotFoundError(f"{tmp_path / 'runs.csv'}: no such file")

    status = commands.run(_parser(), job, ["--count", "2"], errors=(OSError,), stream=sys.stdout)
    captured = capsys.readouterr()
    assert status == commands.FAILED == 1
    assert captured.out == "counted 2\n"
    assert captured.err == f"error: {tmp_path / 'runs.csv'}: no such file\n"
    # the line the workflow's summary of a failed job prints, found in the job's log
    log = tmp_path / "job.log"
    log.write_text("some progress\n" + captured.err)
    assert failures.first_error(log) == f"{tmp_path / 'runs.csv'}: no such file"


def test_an_error_not_named_is_a_bug_and_keeps_its_traceback():
    def job(args):
        raise KeyError("count")

    with pytest.raises(KeyError):
        commands.run(_parser(), job, ["--count", "2"], errors=(OSError,))


def test_describe_gives_the_errors_line(capsys):
    def job(args):
        raise ValueError("Caught ValueError in a worker\nthe file x.jpg")

    status = commands.run(
        _parser(), job, ["--count", "1"], errors=(ValueError,),
        describe=lambda error: str(error).splitlines()[-1],
    )  # fmt: skip
    assert status == 1 and capsys.readouterr().err == "error: the file x.jpg\n"


def test_lines_are_printed_as_they_come_and_a_generator_returns_its_status():
    stream = io.StringIO()
    seen_before_second = []

    def job(args):
        yield "first"
        seen_before_second.append(stream.getvalue())
        yield "second"
        return 3

    assert commands.run(_parser(), job, ["--count", "1"], stream=stream) == 3
    assert seen_before_second == ["first\n"] and stream.getvalue() == "first\nsecond\n"
    stream = io.StringIO()
    assert commands.run(_parser(), lambda args: ["a", "b"], ["--count", "1"], stream=stream) == 0
    assert stream.getvalue() == "a\nb\n"
    assert commands.run(_parser(), lambda args: 5, ["--count", "1"], stream=stream) == 5
    assert commands.run(_parser(), lambda args: None, ["--count", "1"], stream=stream) == 0


def test_a_parser_without_one_line_errors_is_refused():
    plain = argparse.ArgumentParser(prog="plain", allow_abbrev=False)
    with pytest.raises(TypeError, match="plain: a command's parser is a"):
        commands.run(plain, lambda args: (), [])


# --------------------------------------------------------------- every command, refused in-process

WORDS = sorted(
    [(group,) for group in SINGLE]
    + [(group, command) for group, table in COMMANDS.items() for command in table]
)


@pytest.mark.parametrize("words", WORDS, ids=" ".join)
def test_every_commands_refused_command_line_is_one_line_and_exit_status_2(words, capsys):
    """Each command of the table with an option no command has: exit status 2, nothing on
    standard output, one line on standard error naming the command."""
    with pytest.raises(SystemExit) as stopped:
        top_level([*words, "--no-such-option"])
    captured = capsys.readouterr()
    assert stopped.value.code == 2 and captured.out == "", captured.out
    [line] = captured.err.splitlines()
    assert line.startswith(f"python -m nettebench {' '.join(words)}: error: "), line
    assert line.endswith("; see --help"), line


def test_the_trainer_interrupted_before_its_cell_keeps_its_line_and_exit_status(capsys):
    """A signal while the command line is parsed (the trainer's StopOnSignal raises at once
    there) passes through run: the trainer's own line, exit status 128 + SIGTERM, what a
    scheduler's requeue reads."""
    from nettebench.study.cell_options import CommandParser
    from nettebench.training import cli

    class SignalledParser(CommandParser):
        def parse_args(self, *args, **kwargs):
            os.kill(os.getpid(), signal.SIGTERM)
            return super().parse_args(*args, **kwargs)

    parser = SignalledParser(prog="python -m nettebench training")
    status = cli.main(["--data", "d", "--out-dir", "o"], parser=parser)
    assert status == 128 + signal.SIGTERM
    assert capsys.readouterr().err == "interrupted by SIGTERM before the cell started\n"


def test_the_trainers_error_is_one_line_and_exit_status_1(tmp_path, capsys):
    from nettebench.training import cli

    missing = tmp_path / "no-dataset"
    assert cli.main(["--data", str(missing), "--out-dir", str(tmp_path / "cell")]) == 1
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("error: dataset path ") and str(missing) in line


# ------------------------------------------------------------- a few, started as a user starts them

STARTED = [
    (["study", "config", "--replace-workflow-config", "{tmp}/none.yaml"], 1,
     "error: {tmp}/none.yaml does not exist (in {tmp}/none.yaml)"),
    (["report", "rerun", "--runs", "{tmp}/runs.csv"], 1,
     "error: {tmp}/runs.csv: no such file (run the tables job first)"),
    (["datasets", "local", "--source", "{tmp}/none", "--out-dir", "{tmp}/d", "--name", "n"], 1,
     "error: dataset folder {tmp}/none does not exist"),
    (["datasets", "fetch", "--url", "{tmp}/a.tgz"], 2,
     "python -m nettebench datasets fetch: error: the following arguments are required: --out; "
     "see --help"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "status", "start"), STARTED, ids=[" ".join(argv[:2]) for argv, _, _ in STARTED]
)
def test_a_command_started_as_a_user_starts_it_ends_in_its_one_line(argv, status, start, tmp_path):
    """Torch-free commands (fast), each in a process of its own: the exit status, nothing on
    standard output, and the one line on standard error."""
    done = subprocess.run(
        [sys.executable, "-m", "nettebench", *(a.format(tmp=tmp_path) for a in argv)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT / "scripts")},
    )  # fmt: skip
    assert done.returncode == status and done.stdout == "", done.stdout + done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith(start.format(tmp=tmp_path)), line
