"""The study object the workflow reads: dataset plans, cell lookups, and code groups that are
complete (editing any module a rule runs must rerun that rule)."""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import pytest

from nettebench.study import code_groups
from nettebench.study import workflow as study_module
from nettebench.study.code_groups import GROUP_COMMANDS, PACKAGE_DIR, command_module, modules
from nettebench.study.crossing import ConfigError
from nettebench.study.workflow import Study, plan_dataset
from nettebench.vocabulary.commands import SINGLE
from tests.workflow_helpers import REPO


def _imports(path: Path) -> set[str]:
    """nettebench modules a file imports, at any depth of the file (functions included)."""
    tree = ast.parse(path.read_text())
    package = ".".join(path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts[:-1])
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("nettebench")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            if not base.startswith("nettebench"):
                continue
            found.add(base)
            found |= {f"{base}.{a.name}" for a in node.names}
    return found


def _module_file(name: str) -> Path | None:
    parts = name.split(".")[1:]
    if not parts:
        return PACKAGE_DIR / "__init__.py"
    relative = Path(*parts)
    for candidate in (relative.with_suffix(".py"), relative / "__init__.py"):
        if (PACKAGE_DIR / candidate).is_file():
            return PACKAGE_DIR / candidate
    return None


def _closure(entry: str) -> set[str]:
    todo, seen = [PACKAGE_DIR / entry], set()
    while todo:
        path = todo.pop()
        relative = str(path.relative_to(PACKAGE_DIR))
        if relative in seen:
            continue
        seen.add(relative)
        for name in _imports(path):
            module = _module_file(name)
            if module is not None:
                todo.append(module)
    seen.discard("__init__.py")
    return seen


@pytest.mark.parametrize("group", sorted(GROUP_COMMANDS))
def test_code_groups_cover_every_module_their_commands_import(group):
    """The group's modules (read with a regex, at parse time) hold everything a full ast
    reading of its commands' imports reaches: the fast reading misses nothing."""
    reached = set().union(*(_closure(command_module(c)) for c in GROUP_COMMANDS[group]))
    missing = reached - set(modules(group))
    assert not missing, f"code_groups.modules({group!r}) misses {sorted(missing)}"


def test_each_rules_code_group_names_the_commands_its_shell_runs():
    """A rule with ``code("<group>")`` runs only commands of that group (rules/*.smk), so the
    group's code is the code the rule runs; the training rules' command is a function
    (``cell_job``) whose two forms the group ``matrix_train`` holds."""
    rules = "\n".join(p.read_text() for p in sorted((REPO / "rules").glob("*.smk")))
    rules = re.sub(r"(?m)^\s*#.*$", "", rules)  # comments name commands they do not run
    checked = 0
    for block in re.split(r"\n(?=rule |use rule )", rules):
        group = re.search(r'code\("(\w+)"\)', block)
        if group is None:
            continue
        for words in re.findall(r"python -m nettebench ([a-z][a-z-]*(?: [a-z][a-z-]*)?)", block):
            command = " ".join(w for w in words.split() if not w.startswith("-"))
            if command.split()[0] in SINGLE:
                command = command.split()[0]
            assert command in GROUP_COMMANDS[group[1]], (group[1], command)
            checked += 1
    assert checked >= 12
    assert set(GROUP_COMMANDS["matrix_train"]) == {"benchmarks cell-job", "training"}


@pytest.mark.parametrize(
    ("group", "registry", "frames"),
    [
        ("aggregate", "TABLES", {"runs", "epochs", "compared"}),
        ("figures", "FIGURES", {"runs", "epochs"}),
    ],
)
def test_every_registered_output_is_a_function_of_the_frames_and_in_its_groups_code(
    group, registry, frames
):
    """outputs.TABLES and outputs.FIGURES name each table's and figure's function; its command
    imports it by name, so its module is in the command's code group all the same, and it
    takes the runs frame and no frame its command does not have."""
    import importlib
    import inspect

    from nettebench.vocabulary import outputs

    for name, target in getattr(outputs, registry).items():
        module, _, function = target.partition(":")
        assert f"report/{module.replace('.', '/')}.py" in modules(group), name
        render = getattr(importlib.import_module(f"nettebench.report.{module}"), function)
        parameters = inspect.signature(render).parameters
        assert "runs" in parameters and set(parameters) <= frames, name


def test_code_groups_are_computed_from_imports_not_kept_by_hand(tmp_path, monkeypatch):
    """A module a command starts to import joins its group with no list to edit."""
    package = tmp_path / "nettebench"
    shutil.copytree(PACKAGE_DIR, package, ignore=shutil.ignore_patterns("__pycache__"))
    (package / "report" / "new_helper.py").write_text("X = 1\n")
    command = package / "report" / "draw.py"  # the figures' command
    command.write_text(
        command.read_text() + "\n\ndef _late():\n    from nettebench.report import new_helper\n"
    )
    monkeypatch.setattr(code_groups, "PACKAGE_DIR", package)
    assert "report/new_helper.py" in code_groups.modules("figures")
    assert "report/new_helper.py" not in code_groups.modules("aggregate")


def test_dataset_plans(tmp_path):
    assert plan_dataset("imagenette2-320", None).how == "download"
    assert plan_dataset("imagenette2-320", None).md5 == "1f1f74f133caff120e575856659b87a2"
    archive = tmp_path / "copy.tgz"
    archive.write_bytes(b"x")
    local = plan_dataset("imagenette2-320", {"source": str(archive)})
    assert (local.how, local.md5, local.record_kind) == ("archive", local.md5, "archive")
    assert local.md5 == "1f1f74f133caff120e575856659b87a2"  # a copy still verifies
    assert plan_dataset("mine", {"source": str(tmp_path)}).how == "directory"
    assert plan_dataset("mine", {"source": "file:///x.tgz"}).how == "download"
    assert plan_dataset("s", {"synthetic": {"size": 8}}).how == "synthetic"
    with pytest.raises(ConfigError, match="neither an existing file or directory"):
        plan_dataset("mine", {"source": str(tmp_path / "absent.tgz")})


def test_cells_are_looked_up_by_path_and_args_hold_only_the_identity():
    config = {
        "datasets": {"s": {"synthetic": {}}},
        "matrix": {"model": "resnet18", "workers": [4, 2]},
    }
    study = Study.from_config(config)
    paths = sorted(study.cells["matrix"])
    assert paths == [
        "s/model~resnet18/precision~O0/batch~256/epochs~10/seed~0",
        "s/model~resnet18/precision~O0/batch~256/epochs~10/seed~0/workers~2",
    ]
    dataset, rest = paths[1].split("/", 1)
    assert study.cell_args("matrix", dataset, rest).endswith("--seed 0 --workers 2")
    with pytest.raises(ConfigError, match="not a cell of this study"):
        study.cell("matrix", dataset, "model~vgg19/precision~O0/batch~1/epochs~1/seed~0")
    assert study_module.KIND_ROOTS["matrix"] == "results/runs"


def test_parsing_the_workflow_imports_nothing_heavy():
    """The Snakefile imports nettebench.study.workflow at parse time: a dry run must not pay for
    torch."""
    import subprocess
    import sys

    code = (
        "import sys, nettebench.study.workflow\n"
        "heavy = {'torch', 'torchvision', 'pandas', 'matplotlib', 'seaborn', 'numpy', 'PIL'}\n"
        "print(sorted(heavy & set(sys.modules)))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "[]", result.stdout + result.stderr


def test_a_machine_label_goes_into_every_cell_and_its_path():
    config = {
        "datasets": {"s": {"synthetic": {}}},
        "matrix": {"precision": ["O0", "O1"], "include": [{"model": "resnet50"}]},
        "cpu_baseline": {"epochs": 1},
        "machine": "t4",
    }
    study = Study.from_config(config)
    cells = [c for kind in study.cells.values() for c in kind.values()]
    assert len(cells) == 5 and {c.machine for c in cells} == {"t4"}
    assert all(path.endswith("/machine~t4") for kind in study.cells.values() for path in kind)
    unlabelled = Study.from_config({**config, "machine": None})
    assert not any("machine" in path for path in unlabelled.cells["matrix"])
    # `--config machine=100` arrives as a number
    assert Study.from_config({**config, "machine": 100}).machine == "100"
    # the schema's sentence, read whole (it names the key and what a label may hold)
    with pytest.raises(ConfigError) as refused:
        Study.from_config({**config, "machine": "my box"})
    assert str(refused.value) == (
        "machine: 'my box' is not allowed; allowed: a label of letters, digits and . _ + - "
        "(it is part of result paths), e.g. t4 or null"
    )


def test_package_environments_are_planned_and_cells_depend_on_their_install(tmp_path):
    config = {
        "datasets": {"s": {"synthetic": {}}},
        "environments": {"pillow11": {"packages": ["Pillow==11.3.0"], "pip_args": ["--no-cache"]}},
        "matrix": {"environment": ["installed", "pillow11"]},
    }
    study = Study.from_config(config)
    plan = study.environment("pillow11")
    assert plan.pins() == {"pillow": "11.3.0"} and plan.pip_args == ("--no-cache",)
    assert plan.install_manifest == "results/environments/pillow11/install.json"
    dataset, rest = next(p for p in study.cells["matrix"] if "environment" in p).split("/", 1)
    assert study.cell_builds("matrix", dataset, rest) == [plan.install_manifest]
    # the schema's sentences (each names the key and what is allowed), then the rule across pins
    with pytest.raises(
        ConfigError,
        match=r"^environments\.p\.packages\[0\]: 'pillow>=11' is not "
        r"allowed; allowed: an exact pin name==version \(e\.g\. pillow==11\.3\.0\)",
    ):
        Study.from_config({**config, "environments": {"p": {"packages": ["pillow>=11"]}}})
    with pytest.raises(
        ConfigError,
        match=r"^environments: 'installed' is not allowed; allowed: a "
        r"name of letters, digits and \. _ \+ - other than 'installed'",
    ):
        Study.from_config({**config, "environments": {"installed": {"packages": ["a==1"]}}})
    with pytest.raises(ConfigError, match=r"^environments\.p\.packages: a is pinned twice"):
        Study.from_config({**config, "environments": {"p": {"packages": ["a==1", "A==2"]}}})


def test_merged_result_trees_are_aggregated_with_the_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    other = tmp_path / "from-a100" / "results"
    cell = other / "runs" / "s" / "model~resnet18" / "machine~a100"
    cell.mkdir(parents=True)
    (cell / "metrics.json").write_text("{}")
    (cell / "ceiling.json").write_text("{}")
    profile = other / "profiles" / "s" / "x"
    profile.mkdir(parents=True)
    (profile / "profile.json").write_text("{}")
    config = {
        "datasets": {"s": {"synthetic": {}}},
        "matrix": {"epochs": 1},
        "merge_results": [str(other)],
    }
    study = Study.from_config(config)
    inputs = study.aggregate_inputs()
    assert inputs["metrics"][-1] == str(cell / "metrics.json")
    assert inputs["metrics"][0].startswith("results/runs/s/")  # this run's own cells first
    assert inputs["ceilings"][-1] == str(cell / "ceiling.json")
    assert study.merged_files("profiles/**/profile.json") == [str(profile / "profile.json")]
    only = Study.from_config({**config, "aggregate_only": True}).aggregate_inputs()
    assert only["metrics"] == [str(cell / "metrics.json")]  # nothing local on disk yet
    with pytest.raises(ConfigError, match=r"merge_results\[0\]: .* is not a directory"):
        Study.from_config({**config, "merge_results": [str(tmp_path / "absent")]})
    with pytest.raises(ConfigError, match="has no runs/ or cpu/ folder"):
        Study.from_config({**config, "merge_results": [str(tmp_path)]})


def test_a_groups_manifest_changes_exactly_with_its_code(tmp_path, monkeypatch):
    """The one input by which a rule depends on its code: rewritten (new mtime) only when a
    module of the group changed, so Snakemake reruns that group's jobs and no other."""
    package = tmp_path / "nettebench"
    for group in ("figures", "aggregate"):
        for module in modules(group):
            target = package / module
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes((PACKAGE_DIR / module).read_bytes())
    monkeypatch.setattr(code_groups, "PACKAGE_DIR", package)
    figures, aggregate = tmp_path / "code" / "figures.sha256", tmp_path / "code" / "agg.sha256"
    assert code_groups.write_manifest("figures", figures)
    assert code_groups.write_manifest("aggregate", aggregate)
    before = figures.read_text()
    lines = before.splitlines()
    assert [line.split("  ")[1] for line in lines] == modules("figures")
    assert all(len(line.split("  ")[0]) == 64 for line in lines)
    stamps = (figures.stat().st_mtime_ns, aggregate.stat().st_mtime_ns)
    assert not code_groups.write_manifest("figures", figures)  # unchanged code: left alone
    with open(package / "report" / "figures" / "plotting.py", "a") as handle:
        handle.write("\n# edited\n")
    assert code_groups.write_manifest("figures", figures)
    assert not code_groups.write_manifest("aggregate", aggregate)  # plotting.py is not its code
    changed = [line for line in figures.read_text().splitlines() if line not in lines]
    assert [line.split("  ")[1] for line in changed] == ["report/figures/plotting.py"]
    assert aggregate.stat().st_mtime_ns == stamps[1]
