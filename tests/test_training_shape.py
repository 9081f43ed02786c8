"""The trainer's shape (issue 32): no function in ``training/`` takes more than 8 parameters or
spans more than 80 lines, and data parallelism reaches the trainer as one object.

Parameters are counted as a caller passes them: positional, keyword-only, ``*args`` and
``**kwargs`` each one; a method's ``self`` or ``cls`` is not passed, so not counted. Lines run
from the ``def`` to the last line of the body, docstring included.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import nettebench.training

TRAINING = Path(nettebench.training.__file__).parent
MAX_PARAMETERS = 8
MAX_LINES = 80


def parameter_count(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    args = node.args
    names = [*args.posonlyargs, *args.args]
    receiver = bool(names) and names[0].arg in ("self", "cls")
    count = len(names) + len(args.kwonlyargs) + bool(args.vararg) + bool(args.kwarg)
    return count - receiver


def too_big(path: Path) -> list[str]:
    """``file:line name: N parameters, M lines`` of each function over either bound."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        count, lines = parameter_count(node), node.end_lineno - node.lineno + 1
        if count > MAX_PARAMETERS or lines > MAX_LINES:
            found.append(
                f"{path.name}:{node.lineno} {node.name}: {count} parameters, {lines} lines"
            )
    return found


@pytest.mark.parametrize("path", sorted(TRAINING.glob("*.py")), ids=lambda p: p.name)
def test_no_training_function_takes_more_than_8_parameters_or_spans_more_than_80_lines(path):
    assert too_big(path) == []


def test_the_rule_counts_what_a_caller_passes(tmp_path):
    source = tmp_path / "sample.py"
    source.write_text(
        "def nine(a, b, c, d, e, f, g, *rest, key=1):\n    pass\n\n\n"
        "class A:\n    def method(self, a, b, c, d, e, f, g, h):\n        pass\n\n\n"
        "def long():\n" + "    x = 1\n" * 80
    )
    assert too_big(source) == [
        "sample.py:1 nine: 9 parameters, 2 lines",
        "sample.py:10 long: 0 parameters, 81 lines",
    ]


def test_the_trainer_reaches_data_parallelism_only_through_its_object():
    """cli.py and fit.py call no function of the ``distributed`` module: only the
    ``DataParallel`` they hold (``DataParallel.from_env()``)."""
    for name in ("cli.py", "fit.py"):
        tree = ast.parse((TRAINING / name).read_text(encoding="utf-8"))
        calls = {
            node.func.attr
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "distributed"
        }
        assert calls == set(), (name, calls)
