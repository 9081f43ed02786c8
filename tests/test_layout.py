"""The package's boundaries, as its subpackage docstrings write them, kept by tests.

- The parse-time core (``study/`` and what it imports) never imports torch, torchvision, pandas,
  numpy, PIL or matplotlib: Snakemake imports it while it parses the workflow.
- The commands that run a cell put the cell's library build first on the import path before
  anything imports torchvision or apex, so importing them imports neither.
- The report's commands import no torch: the report runs on any login node, in an environment
  without it (envs/report.yaml).
- Imports run one way: the subpackages stand on the floors ``nettebench/__init__.py`` lists,
  bottom to top; a module imports only modules of its own floor or of a floor below, and the
  ground floor imports nothing of the package (the standard library only).
- Every subpackage says in its docstring what it owns and what it may import.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from nettebench.study.code_groups import PACKAGE_DIR
from nettebench.vocabulary.commands import COMMANDS

HEAVY = ("torch", "torchvision", "pandas", "numpy", "PIL", "matplotlib", "seaborn")
# What Snakemake imports while it parses (rules/common.smk) and the leaves they reach.
PARSE_TIME = (
    "nettebench.study.workflow",
    "nettebench.study.code_groups",
    "nettebench.study.config_file",
    "nettebench.study.schema",
    "nettebench.study.job_signals",
    "nettebench.study.failures",
    "nettebench.study.resources",
    "nettebench.study.stored",
    "nettebench.study.inference_cells",
    "nettebench.study.replicates",
    "nettebench.study.terminal_answer",
    "nettebench.vocabulary.outputs",
    "nettebench.vocabulary.dataset_catalog",
    "nettebench.vocabulary.build_catalog",
    "nettebench.profiling.plan",
)
CELL_COMMANDS = (
    "nettebench.training.cli",
    "nettebench.benchmarks.ceiling",
    "nettebench.profiling.cli",
)


def _loaded_after_import(modules: tuple[str, ...], watch: tuple[str, ...]) -> list[str]:
    code = (
        "import sys\n"
        + "".join(f"import {name}\n" for name in modules)
        + f"print(sorted(set({watch!r}) & set(sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return eval(done.stdout)  # a list literal printed by the child


def test_parse_time_modules_import_nothing_heavy():
    assert _loaded_after_import(PARSE_TIME, HEAVY) == []


def _workflow_imports() -> set[str]:
    """Every nettebench module the Snakefile and rules/*.smk import (a ``from package import
    name`` counts ``package.name`` when that is a module)."""
    found = set()
    root = PACKAGE_DIR.parent.parent
    for path in [root / "Snakefile", *sorted((root / "rules").glob("*.smk"))]:
        for line in path.read_text().splitlines():
            words = line.split()
            if len(words) >= 4 and words[0] == "from" and words[1].startswith("nettebench"):
                names = " ".join(words[3:]).replace(",", " ").split()
                names = [n for n in names if n not in ("as", "(", ")")]
                found.add(words[1])
                base = PACKAGE_DIR.parent.joinpath(*words[1].split("."))
                found |= {f"{words[1]}.{n}" for n in names if (base / f"{n}.py").exists()}
    return found - {"nettebench.study", "nettebench.vocabulary"}


def test_the_parse_time_list_holds_every_module_the_workflow_imports():
    """So a module the rules import (study/job_signals.py, study/config_file.py) cannot start
    importing numpy unseen: it is in PARSE_TIME, which the test above imports."""
    assert {"nettebench.study.job_signals", "nettebench.study.config_file"} <= _workflow_imports()
    assert _workflow_imports() <= set(PARSE_TIME)


@pytest.mark.parametrize("command", CELL_COMMANDS)
def test_cell_commands_import_no_library_a_build_could_replace(command):
    assert _loaded_after_import((command,), ("torchvision", "apex", "efficientnet_pytorch")) == []


def test_the_report_commands_import_no_torch():
    """Their readers take the environment's keys from records/environment.py, whose torch
    imports stay inside the functions that collect them."""
    commands = tuple(f"nettebench.report.{module}" for module, _ in COMMANDS["report"].values())
    assert _loaded_after_import(commands, ("torch", "torchvision")) == []


def floors() -> list[list[str]]:
    """The floors, bottom to top, as the package docstring lists them (``1. vocabulary``)."""
    doc = ast.get_docstring(ast.parse((PACKAGE_DIR / "__init__.py").read_text())) or ""
    listed = [line.split(".", 1) for line in doc.splitlines() if line[:1].isdigit()]
    return [[room.strip() for room in rooms.split(",")] for _, rooms in listed]


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every module or package ``path`` imports (anywhere in it), relative imports resolved."""
    here = _module_name(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                above = package[: len(package) - node.level + 1]
                base = ".".join(above + ([base] if base else []))
            found |= {f"{base}.{alias.name}" for alias in node.names} | {base}
    return found


def _room(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "nettebench" and len(parts) > 1 else None


def test_the_floors_hold_every_subpackage_once():
    listed = [room for floor in floors() for room in floor]
    rooms = sorted(init.parent.name for init in PACKAGE_DIR.glob("*/__init__.py"))
    assert sorted(listed) == rooms
    assert floors()[0] == ["vocabulary"]


def test_a_module_imports_only_its_own_floor_or_below():
    level = {room: n for n, floor in enumerate(floors()) for room in floor}
    upward = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        here = _room(_module_name(path))
        for name in sorted(_imports(path)):
            there = _room(name)
            if here in level and there in level and level[there] > level[here]:
                upward.append(f"{path.relative_to(PACKAGE_DIR)} imports {name}")
    assert not upward, "imports that run up a floor:\n" + "\n".join(upward)


def test_the_ground_floor_imports_the_standard_library_only():
    for path in sorted((PACKAGE_DIR / "vocabulary").glob("*.py")):
        for name in _imports(path):
            top = name.split(".")[0]
            ok = top in sys.stdlib_module_names or name.startswith("nettebench.vocabulary")
            assert ok, f"vocabulary/{path.name} imports {name}"


def test_every_subpackage_says_what_it_owns_and_may_import():
    for init in sorted(PACKAGE_DIR.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert len(doc.split()) >= 25, f"{init.parent.name}/__init__.py: no docstring to speak of"
        assert "import" in doc, f"{init.parent.name}/__init__.py does not say what it may import"


def test_no_module_is_far_over_400_lines():
    long = {
        str(path.relative_to(PACKAGE_DIR)): n
        for path in PACKAGE_DIR.rglob("*.py")
        if (n := len(path.read_text().splitlines())) > 450
    }
    assert not long, f"split these along their seams: {long}"


def _module_graph() -> dict[str, set[str]]:
    """module -> the package's modules it imports (at the top or inside a function)."""
    modules = {_module_name(path): path for path in PACKAGE_DIR.rglob("*.py")}
    return {
        name: {other for other in _imports(path) if other in modules and other != name}
        for name, path in modules.items()
        if not path.name.startswith("__")
    }


def test_no_module_imports_itself_through_others():
    """An import cycle (training: checkpoint -> startup -> outcome -> checkpoint, once) makes
    the order of imports matter; every cycle found is listed, shortest first."""
    graph = _module_graph()
    cycles = []
    for start in sorted(graph):
        paths, seen = [[start]], {start}
        while paths:  # breadth first: the shortest way back to start
            path = paths.pop(0)
            for nxt in sorted(graph.get(path[-1], ())):
                if nxt == start:
                    cycles.append(" -> ".join([*path, start]))
                    paths = []
                    break
                if nxt not in seen:
                    seen.add(nxt)
                    paths.append([*path, nxt])
    assert cycles == []


def test_table_and_figure_modules_only_render():
    """A module of report/tables/ or report/figures/ renders frames: it defines no command
    (``main``), imports no json and opens, reads or parses no file. Records are read in
    report/frames/ alone, the aggregate's CSVs by the figures' command."""
    reading = {"open", "read_text", "read_bytes", "read_csv", "read_json", "load", "loads"}
    found = []
    folders = [PACKAGE_DIR / "report" / folder for folder in ("tables", "figures")]
    for path in sorted(path for folder in folders for path in folder.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name == "main":
                found.append(f"{path.name}: def main")
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                if "json" in names:
                    found.append(f"{path.name}: imports json")
            if isinstance(node, ast.Call):
                name = getattr(node.func, "attr", getattr(node.func, "id", ""))
                if name in reading:
                    found.append(f"{path.name}:{node.lineno}: calls {name}")
    assert found == []
