"""A small mutation run: does each module's test file notice when its code is changed?

For every comparison, arithmetic and boolean operator and every numeric constant in a module,
one mutant swaps it (``<`` for ``<=``, ``+`` for ``-``, ``and`` for ``or``, ``0.05`` for
``0.1``, ...); the module's tests run against each mutant in a copy of ``scripts/``, and a
mutant that every test passes "survives". Prints the score (killed / all) and each survivor
with its line, so a reader can tell a missing test from an equivalent mutant. Hand-rolled
(``ast``, no dependency) and slow on purpose: a benchmark, not a test::

    PYTHONPATH=scripts python tests/mutate.py [--jobs 2] \\
        scripts/nettebench/report/stats.py=tests/test_stats.py,tests/test_compare.py \\
        scripts/nettebench/records/conditions.py=tests/test_conditions.py
    [--select "not busy_process"]
"""

from __future__ import annotations

import argparse
import ast
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SWAPS = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
    ast.In: ast.NotIn, ast.NotIn: ast.In,
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult,
    ast.FloorDiv: ast.Div, ast.Pow: ast.Mult, ast.Mod: ast.FloorDiv,
    ast.And: ast.Or, ast.Or: ast.And,
}  # fmt: skip


def _constant(value):
    """A numeric constant's mutant: 0 -> 1, 1 -> 0, others doubled (None: not mutated)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return {0: 1, 1: 0}.get(value, value * 2)


class Sites(ast.NodeVisitor):
    """Every mutable spot of a module, in visiting order: (kind, line, description)."""

    def __init__(self):
        self.found: list[tuple[str, int, str]] = []

    def _op(self, node, op):
        if type(op) in SWAPS:
            new = SWAPS[type(op)].__name__
            self.found.append(("op", node.lineno, f"{type(op).__name__} -> {new}"))

    def visit_Compare(self, node):
        for op in node.ops:
            self._op(node, op)
        self.generic_visit(node)

    def visit_BinOp(self, node):
        self._op(node, node.op)
        self.generic_visit(node)

    def visit_AugAssign(self, node):
        self._op(node, node.op)
        self.generic_visit(node)

    def visit_BoolOp(self, node):
        self._op(node, node.op)
        self.generic_visit(node)

    def visit_UnaryOp(self, node):
        if isinstance(node.op, ast.Not):
            self.found.append(("not", node.lineno, "not x -> x"))
        self.generic_visit(node)

    def visit_Constant(self, node):
        new = _constant(node.value)
        if new is not None:
            self.found.append(("const", node.lineno, f"{node.value!r} -> {new!r}"))


class Mutate(ast.NodeTransformer):
    """Applies the ``target``-th site of :class:`Sites` (same visiting order)."""

    def __init__(self, target: int):
        self.target, self.index = target, -1

    def _hit(self) -> bool:
        self.index += 1
        return self.index == self.target

    def _swap(self, op):
        return SWAPS[type(op)]() if type(op) in SWAPS and self._hit() else op

    def visit_Compare(self, node):
        node.ops = [self._swap(op) for op in node.ops]
        self.generic_visit(node)
        return node

    def visit_BinOp(self, node):
        node.op = self._swap(node.op)
        self.generic_visit(node)
        return node

    def visit_AugAssign(self, node):
        node.op = self._swap(node.op)
        self.generic_visit(node)
        return node

    def visit_BoolOp(self, node):
        node.op = self._swap(node.op)
        self.generic_visit(node)
        return node

    def visit_UnaryOp(self, node):
        if isinstance(node.op, ast.Not) and self._hit():
            return self.visit(node.operand)
        self.generic_visit(node)
        return node

    def visit_Constant(self, node):
        new = _constant(node.value)
        if new is not None and self._hit():
            return ast.copy_location(ast.Constant(new), node)
        return node


def _strip_docstrings(tree: ast.Module) -> ast.Module:
    """Docstrings hold no code worth mutating (and their numbers are text)."""
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        value = first.value if isinstance(first, ast.Expr) else None
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            # the module's goes (``from __future__`` must stay first); a function keeps a body
            if isinstance(node, ast.Module) or len(body) > 1:
                del body[0]
            else:
                body[0] = ast.Pass()
    return tree


def snapshot() -> Path:
    """The project's code and tests as they are now, so edits made during the run (which
    takes a while) change nothing in it."""
    base = Path(tempfile.mkdtemp(prefix="mutation-base-"))
    for name in ("scripts", "tests"):
        shutil.copytree(ROOT / name, base / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", base / "pyproject.toml")
    return base


def run_tests(base: Path, code: Path, tests: list[str], select: str | None = None) -> bool:
    """True when ``base``'s tests pass against the package in ``code`` (the mutant survives)."""
    env = {**os.environ, "PYTHONPATH": str(code / "scripts"), "PYTHONDONTWRITEBYTECODE": "1"}
    # -n 0: one mutant's few test files in this process, not in workers (started per mutant).
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-n", "0", "-p", "no:cacheprovider"]
    command += tests
    command += ["-k", select] if select else []
    try:
        done = subprocess.run(command, cwd=base, env=env, capture_output=True, timeout=300)
    except subprocess.TimeoutExpired:
        return False  # a mutant that hangs the tests is caught
    return done.returncode == 0


def unparsed_passes(base: Path, module: Path, tests: list[str], select: str | None) -> bool:
    """The control: the module as the mutants are written (docstrings out, ``ast.unparse``)
    but unmutated must pass its tests, or every mutant would look killed."""
    relative = module.resolve().relative_to(ROOT)
    tree = _strip_docstrings(ast.parse((base / relative).read_text(encoding="utf-8")))
    with tempfile.TemporaryDirectory(prefix="mutant-") as tmp:
        shutil.copytree(base / "scripts", Path(tmp) / "scripts")
        (Path(tmp) / relative).write_text(ast.unparse(ast.fix_missing_locations(tree)))
        return run_tests(base, Path(tmp), tests, select)


def mutation_run(
    base: Path, module: Path, tests: list[str], jobs: int, select: str | None = None
) -> tuple[int, list[str]]:
    relative = module.resolve().relative_to(ROOT)
    source = (base / relative).read_text(encoding="utf-8")
    sites = Sites()
    sites.visit(_strip_docstrings(ast.parse(source)))

    def one(index: int) -> str | None:
        with tempfile.TemporaryDirectory(prefix="mutant-") as tmp:
            copy = Path(tmp)
            shutil.copytree(base / "scripts", copy / "scripts")
            tree = Mutate(index).visit(_strip_docstrings(ast.parse(source)))
            (copy / relative).write_text(ast.unparse(ast.fix_missing_locations(tree)))
            if run_tests(base, copy, tests, select):
                kind, line, what = sites.found[index]
                return f"{relative}:{line}: {what}"
        return None

    with ThreadPoolExecutor(jobs) as pool:
        survivors = [s for s in pool.map(one, range(len(sites.found))) if s]
    return len(sites.found), survivors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("targets", nargs="+", help="MODULE=TEST[,TEST...]")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument(
        "--select", help="pytest -k expression (leave out tests a loaded machine makes flaky)"
    )
    args = parser.parse_args()
    base = snapshot()
    for target in args.targets:
        module = target.split("=", 1)[0]
        if not unparsed_passes(base, Path(module), target.split("=", 1)[1].split(","), args.select):
            print(f"{module}: its tests fail on the unparsed, unmutated code", file=sys.stderr)
            return 1
        module, tests = target.split("=", 1)
        if not run_tests(base, base, tests.split(","), args.select):
            print(f"{module}: its tests fail on the unmutated code", file=sys.stderr)
            return 1
        total, survivors = mutation_run(
            base, Path(module), tests.split(","), args.jobs, args.select
        )
        killed = total - len(survivors)
        print(f"{module}: {killed}/{total} mutants killed ({killed / max(total, 1):.0%})")
        for line in survivors:
            print(f"  survived: {line}", flush=True)
    shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
