"""A small mutation run: does each module's test file notice when its code is changed?

Each mutant makes one change to a module: an operator swapped (``<`` for ``<=``, ``+`` for
``-``, ``and`` for ``or``), ``not x`` for ``x``, a numeric constant changed (``0.05`` ->
``0.1``, 0 <-> 1), a string constant emptied (``"x"`` -> ``""``, ``""`` -> ``"XX"``), a
statement replaced by ``pass``, or a call to ``any``/``all`` or ``min``/``max`` swapped for the
other. Beside those operator-sized slips, four kinds of intent that an audit of the report found
surviving (issue [4/5]): a mark dropped (a keyword argument, a dict entry, or the string added
to a text: ``f(x, driver=d)`` -> ``f(x)``, ``text + " (1/2)"`` -> ``text``), the first element
standing for all (``for x in xs`` and ``a in xs`` over ``list(xs)[:1]``), a rounding before a
comparison (``a < b`` -> ``round(a, 2) < b``), and an order swapped (``f(a, b)`` -> ``f(b, a)``,
``(a, b)`` -> ``(b, a)``); ``--kinds`` and ``--lines`` run only some. Docstrings, annotations
and f-string format specs are left alone. The module's tests run against each mutant in a copy
of ``scripts/``; a mutant that every test passes "survives". Prints a table per module (mutants,
killed, survived, timeouts, score) and each survivor with its line, so a reader can tell a
missing test from an equivalent mutant. Hand-rolled (``ast``, no dependency but pytest; coverage
if installed), and slow on purpose: a benchmark, not a test::

    PYTHONPATH=scripts python tests/mutate.py [--jobs 1] [--sample 200 --seed 0] \\
        [--survivors notes/mutants-stats.md] \\
        scripts/nettebench/report/stats.py=tests/test_stats.py,tests/test_compare.py
    [--select "not busy_process"]

Fast by default: the tests run in a process forked from one that already imported the heavy
libraries (torch, numpy, pandas, pytest), with ``-x -n 0 -p no:cacheprovider``, under a timeout
of five times the unmutated run's (a hang is a kill, counted apart). With coverage installed,
one unmutated run records which test executes which line; a mutant then runs only the tests
that execute its line (in file order), and a mutant on a line no test executes in-process
survives without a run ("uncovered"). Code that only runs in a child process (a launcher's
workers) is invisible to that: ``--all-tests`` runs every given test on every mutant instead.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
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
CALL_SWAPS = {"any": "all", "all": "any", "min": "max", "max": "min"}
ORDERING = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)  # comparisons a rounding can turn
ROUND_DIGITS = 2  # what a table prints: a verdict taken on the printed number
# statements whose deletion is not worth a run: definitions and imports (a NameError at import
# kills them all alike), and those that are already nothing
KEPT_STATEMENTS = (
    ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom,
    ast.Pass, ast.Global, ast.Nonlocal,
)  # fmt: skip
PRELOAD = ("numpy", "pandas", "torch", "torchvision", "matplotlib.pyplot", "yaml", "pytest")


def _constant(value):
    """A constant's mutant: 0 -> 1, 1 -> 0, other numbers doubled, a non-empty string
    emptied, an empty one "XX" (None: not mutated; booleans and bytes are not)."""
    if isinstance(value, str):
        return "" if value else "XX"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return {0: 1, 1: 0}.get(value, value * 2)


@dataclass
class Site:
    kind: str  # op, not, const, str, stmt, call; drop, first, round, swap (intent)
    line: int
    what: str
    lines: tuple[int, int] = (0, 0)  # the enclosing statement's first and last line
    col: int = 0  # where on the line (two sites of one kind on a line tell apart by it)


class Mutator(ast.NodeTransformer):
    """Every mutable spot of a module in visiting order; with ``target``, applies that one.

    One class both lists the sites (``target=None``) and applies one, so the two walks cannot
    drift apart: a site is counted where it is met, before its children.
    """

    def __init__(self, target: int | None = None):
        self.target, self.index = target, -1
        self.found: list[Site] = []
        self._statement: tuple[int, int] = (0, 0)

    def _site(self, kind: str, node: ast.AST, what: str) -> bool:
        self.index += 1
        self.found.append(Site(kind, node.lineno, what, self._statement, node.col_offset))
        return self.index == self.target

    # annotations are not code (``from __future__ import annotations``): never mutated
    def _without(self, node, name: str):
        saved = getattr(node, name)
        setattr(node, name, None)
        self.generic_visit(node)
        setattr(node, name, saved)
        return node

    def visit_arg(self, node):
        return self._without(node, "annotation")

    def visit_AnnAssign(self, node):
        return self._statement_site(node, lambda n: self._without(n, "annotation"))

    def visit_FunctionDef(self, node):
        return self._without(node, "returns")

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_FormattedValue(self, node):
        # ``{x:.1f}``: the format spec only formats; the value is code
        node.value = self.visit(node.value)
        return node

    def _statement_site(self, node, visit_children=None):
        outer = self._statement
        self._statement = (node.lineno, getattr(node, "end_lineno", None) or node.lineno)
        try:
            deletable = not isinstance(node, KEPT_STATEMENTS) and not (
                isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
            )
            if deletable:
                source = ast.unparse(node).split("\n")[0]
                if self._site("stmt", node, f"delete `{_short(source)}`"):
                    return ast.copy_location(ast.Pass(), node)
            return (visit_children or self.generic_visit)(node)
        finally:
            self._statement = outer

    def visit(self, node):
        if isinstance(node, ast.stmt) and not isinstance(node, ast.AnnAssign):
            method = getattr(self, "visit_" + node.__class__.__name__, None)
            return self._statement_site(node, method)
        return super().visit(node)

    def _swap(self, node, op):
        if type(op) in SWAPS:
            new = SWAPS[type(op)]
            if self._site("op", node, f"{type(op).__name__} -> {new.__name__}"):
                return new()
        return op

    def visit_Compare(self, node):
        node.ops = [self._swap(node, op) for op in node.ops]
        operands = [node.left, *node.comparators]
        if any(isinstance(op, ORDERING) for op in node.ops):
            for index, operand in enumerate(operands):
                if isinstance(operand, ast.Constant) or _counts(operand):
                    continue  # a count is whole: rounding it changes nothing
                what = f"round `{_short(ast.unparse(operand), 40)}` before comparing"
                if self._site("round", node, what):
                    operands[index] = _call("round", operand, ast.Constant(ROUND_DIGITS))
        for index, op in enumerate(node.ops):
            container = operands[index + 1]
            if isinstance(op, ast.In | ast.NotIn) and not isinstance(container, ast.Constant):
                what = f"only the first of `{_short(ast.unparse(container), 40)}`"
                if self._site("first", node, what):
                    operands[index + 1] = _first(container)
        node.left, node.comparators = operands[0], operands[1:]
        self.generic_visit(node)
        return node

    def visit_BinOp(self, node):
        node.op = self._swap(node, node.op)
        if isinstance(node.op, ast.Add) and _is_text(node.right):
            what = f"drop the mark `+ {_short(ast.unparse(node.right), 40)}`"
            if self._site("drop", node, what):
                return self.visit(node.left)
        self.generic_visit(node)
        return node

    def visit_For(self, node):
        self._first_of(node)
        self.generic_visit(node)
        return node

    def visit_comprehension(self, node):
        self._first_of(node)
        self.generic_visit(node)
        return node

    def _first_of(self, node):
        """``for x in xs`` over ``list(xs)[:1]``: the first element standing for all."""
        if isinstance(node.iter, ast.Constant):
            return
        what = f"only the first of `{_short(ast.unparse(node.iter), 40)}`"
        if self._site("first", node.iter, what):
            node.iter = _first(node.iter)

    def visit_Tuple(self, node):
        return self._swap_first_two(node)

    visit_List = visit_Tuple

    def _swap_first_two(self, node):
        """``(a, b, ...)`` -> ``(b, a, ...)`` where it is read: an order that matters (the order
        files are written in, a pair's sides)."""
        first = node.elts[:2]
        if (
            isinstance(node.ctx, ast.Load)
            and len(first) == 2
            and ast.dump(first[0]) != ast.dump(first[1])
            and self._site("swap", node, f"swap the first two of `{_short(ast.unparse(node), 40)}`")
        ):
            node.elts[0], node.elts[1] = first[1], first[0]
        self.generic_visit(node)
        return node

    def visit_Dict(self, node):
        for index, name in enumerate(node.keys):
            if isinstance(name, ast.Constant) and self._site(
                "drop", node, f"drop the entry {_short(repr(name.value), 40)}"
            ):
                del node.keys[index], node.values[index]
                break
        self.generic_visit(node)
        return node

    def visit_AugAssign(self, node):
        node.op = self._swap(node, node.op)
        self.generic_visit(node)
        return node

    def visit_BoolOp(self, node):
        node.op = self._swap(node, node.op)
        self.generic_visit(node)
        return node

    def visit_UnaryOp(self, node):
        if isinstance(node.op, ast.Not) and self._site("not", node, "not x -> x"):
            return self.visit(node.operand)
        self.generic_visit(node)
        return node

    def visit_Call(self, node):
        name = node.func.id if isinstance(node.func, ast.Name) else None
        if name in CALL_SWAPS and self._site("call", node, f"{name}() -> {CALL_SWAPS[name]}()"):
            node.func = ast.copy_location(ast.Name(CALL_SWAPS[name], ast.Load()), node.func)
        called = _short(ast.unparse(node.func), 30)
        for index, keyword in enumerate(node.keywords):
            if keyword.arg is not None and self._site(
                "drop", node, f"drop `{keyword.arg}=` from {called}()"
            ):
                del node.keywords[index]
                break
        positional = node.args[:2]
        if (
            len(positional) == 2
            and not any(isinstance(a, ast.Starred) for a in positional)
            and ast.dump(positional[0]) != ast.dump(positional[1])
            and self._site("swap", node, f"swap the first two arguments of {called}()")
        ):
            node.args[0], node.args[1] = positional[1], positional[0]
        self.generic_visit(node)
        return node

    def visit_Constant(self, node):
        new = _constant(node.value)
        if new is None:
            return node
        kind = "str" if isinstance(node.value, str) else "const"
        if self._site(kind, node, f"{_short(repr(node.value))} -> {new!r}"):
            return ast.copy_location(ast.Constant(new), node)
        return node


def _call(name: str, *args: ast.expr) -> ast.Call:
    """``name(*args)``, placed where its first argument is (a site needs a line)."""
    call = ast.Call(ast.Name(name, ast.Load()), list(args), [])
    return ast.fix_missing_locations(ast.copy_location(call, args[0]))


def _first(iterable: ast.expr) -> ast.expr:
    """``list(iterable)[:1]``."""
    found = ast.Subscript(_call("list", iterable), ast.Slice(None, ast.Constant(1)), ast.Load())
    return ast.fix_missing_locations(ast.copy_location(found, iterable))


def _counts(node: ast.expr) -> bool:
    """``len(x)``: an integer, which a rounding leaves as it is (an equivalent mutant)."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len"


def _is_text(node: ast.expr) -> bool:
    return isinstance(node, ast.JoinedStr) or (
        isinstance(node, ast.Constant) and isinstance(node.value, str)
    )


def _short(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


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
                body[0] = ast.copy_location(ast.Pass(), first)
    return tree


def sites(source: str) -> list[Site]:
    """The sites of a module's source, in the order :func:`mutant` numbers them."""
    walker = Mutator()
    walker.visit(_strip_docstrings(ast.parse(source)))
    return walker.found


def mutant(source: str, index: int | None) -> str:
    """The source with site ``index`` applied (None: unmutated, as the mutants are written)."""
    tree = Mutator(index).visit(_strip_docstrings(ast.parse(source)))
    return ast.unparse(ast.fix_missing_locations(tree))


def snapshot() -> Path:
    """The project's files as they are now (tracked and untracked, not ignored: the tests read
    the Snakefile, rules and configs too), so edits made during the run (which takes a while)
    change nothing in it."""
    base = Path(tempfile.mkdtemp(prefix="mutation-base-"))
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=ROOT, capture_output=True, check=True, text=True,
    ).stdout.split("\0")  # fmt: skip
    for name in filter(None, listed):
        if (ROOT / name).is_file():
            (base / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, base / name)
    return base


PYTEST = ["-x", "-q", "-n", "0", "-p", "no:cacheprovider", "-p", "no:randomly"]


class Runner:
    """Runs the given tests against a copy of ``scripts/`` (``code``), in a forked child of a
    process that already imported the heavy libraries, or in a fresh ``python -m pytest``."""

    def __init__(self, base: Path, code: Path, fork: bool):
        self.base, self.code, self.fork = base, code, fork and hasattr(os, "fork")
        os.environ["PYTHONPATH"] = str(code / "scripts")  # and the processes the tests start
        os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
        if self.fork:
            sys.dont_write_bytecode = True
            sys.path.insert(0, str(code / "scripts"))
            for name in PRELOAD:
                with contextlib.suppress(Exception):  # a library the tests may not need
                    __import__(name)

    def run(self, tests, select, timeout: float, record=None, log: Path | None = None) -> str:
        """The result: "passed", "failed" or "timeout". ``record``: (coverage data file,
        the module's path) to measure, one context per test."""
        arguments = [*PYTEST, *tests, *(["-k", select] if select else [])]
        if not self.fork:
            command = [sys.executable, "-m", "pytest", *arguments]
            try:
                done = subprocess.run(command, cwd=self.base, capture_output=True, timeout=timeout)
            except subprocess.TimeoutExpired:
                return "timeout"
            if log is not None:
                log.write_bytes(done.stdout + done.stderr)
            return "passed" if done.returncode == 0 else "failed"
        pid = os.fork()
        if pid == 0:  # the child: its own group, so a timeout ends what it started too
            code = 3
            try:
                os.setpgid(0, 0)
                os.chdir(self.base)
                null = os.open(log or os.devnull, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
                os.dup2(null, 1)
                os.dup2(null, 2)
                code = _pytest_in_process(arguments, record)
            finally:
                os._exit(code)
        deadline = time.monotonic() + timeout
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return "passed" if os.waitstatus_to_exitcode(status) == 0 else "failed"
            if time.monotonic() > deadline:
                for target in (-pid, pid):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(target, signal.SIGKILL)
                os.waitpid(pid, 0)
                return "timeout"
            time.sleep(0.02)


def _pytest_in_process(arguments: list[str], record) -> int:
    import pytest

    plugins = []
    if record is not None:
        import coverage

        # the processes a test starts measure too (coverage's .pth hook reads this config),
        # with the test's id as their context: the config takes it from the environment
        os.environ["COVERAGE_PROCESS_START"] = record
        cov = coverage.Coverage(config_file=record)
        cov.start()

        durations: dict[str, float] = {}

        class Contexts:
            @pytest.hookimpl(hookwrapper=True)
            def pytest_runtest_protocol(self, item, nextitem):
                os.environ["MUTATE_TEST"] = item.nodeid
                cov.switch_context(item.nodeid)
                started = time.monotonic()
                yield
                durations[item.nodeid] = time.monotonic() - started
                cov.switch_context("")
                os.environ["MUTATE_TEST"] = ""

        plugins.append(Contexts())
    code = int(pytest.main(arguments, plugins=plugins))
    if record is not None:
        cov.stop()
        cov.save()
        Path(record + ".times").write_text(json.dumps(durations), encoding="utf-8")
    return code


def tests_by_line(runner: Runner, module: Path, tests, select, timeout):
    """{line: {test ids}} from one unmutated run under coverage (the processes the tests
    start included), or None without coverage (or in ``--no-fork``)."""
    try:
        import coverage
    except ImportError:
        return None
    if not runner.fork:
        return None
    work = Path(tempfile.mkdtemp(prefix="mutation-coverage-"))
    config = work / "coveragerc"
    config.write_text(
        "[run]\nparallel = true\n"
        f"data_file = {work / 'data'}\ninclude = {module}\n"
        "context = ${MUTATE_TEST-}\n",
        encoding="utf-8",
    )
    try:
        if runner.run(tests, select, timeout, record=str(config)) != "passed":
            raise SystemExit(f"{module}: its tests fail under coverage (or time out)")
        combined = coverage.Coverage(config_file=str(config))
        combined.combine(data_paths=[str(work)])
        data = combined.get_data()
        # "" is the import (collection): a line run then may matter to every test
        by_line = {
            line: {c.split("|")[-1] if c.startswith("|") else c for c in contexts}
            for line, contexts in data.contexts_by_lineno(str(module)).items()
        }
        durations = json.loads(Path(str(config) + ".times").read_text(encoding="utf-8"))
        return by_line, durations
    finally:
        shutil.rmtree(work, ignore_errors=True)


@dataclass
class Outcome:
    module: str
    total: int = 0
    killed: int = 0
    timeouts: int = 0
    uncovered: int = 0
    survivors: list[tuple[Site, str]] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)

    @property
    def score(self) -> float:
        return self.killed / max(self.total, 1)


def mutation_run(
    runner, base, module, tests, select, sample, seed, all_tests, log=print, skip_control=False,
    kinds=None, only_lines=None,
):  # fmt: skip
    relative = module.resolve().relative_to(ROOT)
    source = (base / relative).read_text(encoding="utf-8")
    lines = source.splitlines()
    target = runner.code / relative
    found = sites(source)
    first, last = only_lines or (0, len(lines) + 1)
    chosen = [
        i for i, site in enumerate(found)
        if (not kinds or site.kind in kinds) and first <= site.line <= last
    ]  # fmt: skip
    if sample and sample < len(chosen):
        chosen = sorted(random.Random(seed).sample(chosen, sample))
    outcome = Outcome(str(relative), total=len(chosen))

    target.write_text(mutant(source, None), encoding="utf-8")
    started = time.monotonic()
    control = runner.code / "control.log"
    if not skip_control and runner.run(tests, select, 1800, log=control) != "passed":
        tail = control.read_text(errors="replace")[-3000:]
        raise SystemExit(f"{tail}\n{relative}: its tests fail on the unparsed, unmutated code")
    baseline = time.monotonic() - started
    timeout = max(5 * baseline, baseline + 10)
    # coverage on the source as written: the sites' lines are its lines (unparsing moves them)
    target.write_text(source, encoding="utf-8")
    started = time.monotonic()
    by_line, durations = None, {}
    if not all_tests:
        found_lines = tests_by_line(
            runner, target, tests, select, 1800 if skip_control else timeout * 2
        )
        by_line, durations = found_lines or (None, {})
    if skip_control:  # the covered run's time (slower than a plain one: a generous timeout)
        baseline = time.monotonic() - started
        timeout = max(5 * baseline, baseline + 10)
    log(
        f"{relative}: {len(found)} sites, {len(chosen)} run; unmutated tests "
        f"{baseline:.1f} s, timeout {timeout:.0f} s, "
        f"{'per-line tests' if by_line is not None else 'all tests'}"
    )
    try:
        for number, index in enumerate(chosen, 1):
            site = found[index]
            chosen_tests = tests
            if by_line is not None:
                first, last = site.lines
                ids = {t for line in range(first, last + 1) for t in by_line.get(line, ())}
                if not ids:
                    outcome.uncovered += 1
                    outcome.survivors.append((site, "uncovered"))
                    continue
                if "" not in ids:  # only the tests that run the line, in the files' order
                    chosen_tests = sorted(ids, key=lambda t: (_file_rank(t, tests), t))
            limit = timeout
            if chosen_tests is not tests and all(t in durations for t in chosen_tests):
                # the selected tests' own (covered, so slower) time, five times, and a start
                limit = min(timeout, 5 * sum(durations[t] for t in chosen_tests) + 20)
            target.write_text(mutant(source, index), encoding="utf-8")
            result = runner.run(chosen_tests, select, limit)
            if result == "passed":
                outcome.survivors.append((site, "survived"))
                log(f"  [{number}/{len(chosen)}] survived: {relative}:{site.line}: {site.what}")
            else:
                outcome.killed += 1
                outcome.timeouts += result == "timeout"
    finally:
        target.write_text(source, encoding="utf-8")
    outcome.lines = lines
    return outcome


def _file_rank(test_id: str, tests: list[str]) -> int:
    path = test_id.split("::")[0]
    return next((i for i, t in enumerate(tests) if t.split("::")[0] == path), len(tests))


def table(outcomes: list[Outcome]) -> str:
    head = "| module | mutants | killed | survived | uncovered | timeouts | score |"
    rows = [head, "|---|---:|---:|---:|---:|---:|---:|"]
    for o in outcomes:
        rows.append(
            f"| {o.module} | {o.total} | {o.killed} | {len(o.survivors)} | {o.uncovered} "
            f"| {o.timeouts} | {o.score:.0%} |"
        )
    return "\n".join(rows)


def survivors_markdown(outcomes: list[Outcome]) -> str:
    out = [
        "| module | line | mutation | how | source line | first guess |",
        "|---|---:|---|---|---|---|",
    ]
    for o in outcomes:
        for site, how in o.survivors:
            text = o.lines[site.line - 1].strip().replace("|", "\\|")
            what = site.what.replace("|", "\\|")
            place = f"{site.line}:{site.col}"
            out.append(f"| {o.module} | {place} | {what} | {how} | `{_short(text, 90)}` | |")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("targets", nargs="+", help="MODULE=TEST[,TEST...]")
    parser.add_argument("--jobs", type=int, default=1, help="only 1: mutants run one by one")
    parser.add_argument(
        "--select", help="pytest -k expression (leave out tests a loaded machine makes flaky)"
    )
    parser.add_argument("--sample", type=int, help="run N mutants per module, drawn by --seed")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--kinds",
        help="only these kinds of site, comma-separated (op,not,const,str,stmt,call,"
        "drop,first,round,swap)",
    )
    parser.add_argument("--lines", help="only sites on these lines: FIRST-LAST")
    parser.add_argument("--survivors", type=Path, help="write the survivors to this Markdown")
    parser.add_argument("--all-tests", action="store_true", help="no per-line test selection")
    parser.add_argument("--no-fork", action="store_true", help="a fresh pytest per mutant")
    parser.add_argument(
        "--skip-control",
        action="store_true",
        help="no run of the unparsed, unmutated module first (slow tests: the covered run times)",
    )
    args = parser.parse_args(argv)
    base = snapshot()
    code = Path(tempfile.mkdtemp(prefix="mutant-"))
    shutil.copytree(base / "scripts", code / "scripts")
    runner = Runner(base, code, fork=not args.no_fork)
    outcomes = []
    try:
        for target in args.targets:
            module, tests = target.split("=", 1)
            outcome = mutation_run(
                runner, base, Path(module), tests.split(","), args.select, args.sample,
                args.seed, args.all_tests, log=lambda text: print(text, flush=True),
                skip_control=args.skip_control,
                kinds=set(args.kinds.split(",")) if args.kinds else None,
                only_lines=tuple(int(n) for n in args.lines.split("-")) if args.lines else None,
            )  # fmt: skip
            outcomes.append(outcome)
            print(f"{module}: {outcome.killed}/{outcome.total} killed ({outcome.score:.0%})")
            if args.survivors:
                args.survivors.write_text(survivors_markdown(outcomes), encoding="utf-8")
        print(table(outcomes))
    finally:
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(code, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
