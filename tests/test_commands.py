"""Every command the README shows: a --help a user can read (no reST markup, the allowed values
of every choice, the defaults, examples on their own lines) and bad values that end in one line.

Through each command's real entry point (its ``main``); the list of commands is read from the
README itself, so a command it starts to show is checked too.
"""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
# Every `python -m nettebench...` the README shows (and the trainer's extension, cell_job).
COMMANDS = sorted(
    set(re.findall(r"python -m (nettebench[\w.]*)", README.read_text()))
    | {"nettebench.benchmarks.cell_job"}
)


def entry_point(name: str):
    """The ``main(argv)`` that ``python -m name`` runs: the module's own, or for a package
    run through its ``__main__``, its ``cli`` module's."""
    module = importlib.import_module(name)
    if hasattr(module, "main"):
        return module.main
    return importlib.import_module(f"{name}.cli").main


# Commands that take a cell: their precision, device and loader list the allowed values.
CELL_COMMANDS = ("nettebench.training", "nettebench.benchmarks.ceiling", "nettebench.profiling")
_MARKUP = re.compile(r"``|:(class|func|mod|meth|attr):`")


def help_text(name: str, capsys) -> str:
    with pytest.raises(SystemExit) as stopped:
        entry_point(name)(["--help"])
    assert stopped.value.code == 0
    return capsys.readouterr().out


def test_the_readmes_commands_are_found():
    assert "nettebench.training" in COMMANDS and len(COMMANDS) >= 8
    for name in COMMANDS:
        assert callable(entry_point(name)), name


@pytest.mark.parametrize("name", COMMANDS)
def test_help_has_no_markup(name, capsys):
    text = help_text(name, capsys)
    assert not _MARKUP.search(text), _MARKUP.search(text)
    assert text.startswith("usage: python -m " + name)


@pytest.mark.parametrize("name", CELL_COMMANDS)
def test_help_lists_allowed_values_and_defaults(name, capsys):
    text = help_text(name, capsys)
    assert "--precision {O0,tf32,O1,O2,O3,bf16,fp32}" in text
    assert "--device {auto,cpu,cuda}" in text and "--loader {pil,cached}" in text
    assert re.search(r"--warmup-steps WARMUP_STEPS\s+.*\(default: \d+\)", text)
    assert re.search(r"training epochs \(default: 10\)", text)
    assert "(default: false)" in text and "(default: False)" not in text


def test_the_ceilings_example_is_a_command_on_its_own_lines(capsys):
    text = help_text("nettebench.benchmarks.ceiling", capsys)
    assert re.search(r"\n    python -m nettebench\.benchmarks\.ceiling .* \\\n        --out", text)
    assert re.search(r"--steps STEPS\s+timed steps \(default: 30\)", text)


BAD_VALUES = [
    ("nettebench.training", ["--precision", "o1"], "argument --precision: invalid choice: 'o1'"),
    ("nettebench.training", ["--model", "resnt18"], "did you mean resnet18"),
    ("nettebench.benchmarks.ceiling", ["--model", "resnt18"], "unknown model 'resnt18'"),
    ("nettebench.benchmarks.ceiling", ["--epochs", "0"], "--epochs must be an integer >= 1"),
    ("nettebench.benchmarks.ceiling", ["--lr", "0"], "--lr must be a number > 0, or none"),
    ("nettebench.profiling", ["--loader", "fast"], "argument --loader: invalid choice"),
    ("nettebench.benchmarks.cell_job", ["--device", "gpu"], "argument --device: invalid choice"),
]


@pytest.mark.parametrize(("name", "argv", "expected"), BAD_VALUES, ids=lambda v: str(v)[:24])
def test_a_bad_value_ends_in_one_line(name, argv, expected, tmp_path):
    """The real command, as a user types it: its whole output is the one line."""
    required = ["--data", str(tmp_path), "--out-dir", str(tmp_path), "--ceiling", "c.json"]
    if name == "nettebench.benchmarks.ceiling":
        required = ["--out", str(tmp_path / "c.json")]
    result = subprocess.run(
        [sys.executable, "-m", name, *required, *argv],
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = (result.stdout + result.stderr).strip()
    assert result.returncode != 0
    assert "Traceback" not in output and "usage:" not in output, output
    assert len(output.splitlines()) == 1 and expected in output, output
