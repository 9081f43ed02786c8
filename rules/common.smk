# Every helper of the workflow: config validation, the table of cells, input functions and
# wildcard constraints. Rule files hold rules only.
import os
import shlex
import sys
from pathlib import Path

from snakemake.utils import validate
from snakemake_interface_executor_plugins.settings import DeploymentMethod

# The rules run the package's code from this checkout (the same files the rules list as inputs,
# so their rerun triggers are honest), also inside conda environments that do not install it.
# Without conda, `python` in a rule is the interpreter running Snakemake, so an unactivated
# virtual environment works too; under --sdm conda it is the rule's environment's own.
SCRIPTS_DIR = Path(workflow.basedir) / "scripts"
if str(SCRIPTS_DIR) not in sys.path:
    sys.path.insert(0, str(SCRIPTS_DIR))

if DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method:
    _INTERPRETER_PATH = ""
else:
    _INTERPRETER_PATH = (
        f"export PATH={shlex.quote(os.path.dirname(sys.executable))}:$PATH; "
    )
shell.prefix(
    "set -euo pipefail; "
    + _INTERPRETER_PATH
    + f"export PYTHONPATH={shlex.quote(str(SCRIPTS_DIR))}"
    + "${{PYTHONPATH:+:$PYTHONPATH}}; "
)

from nettebench import records
from nettebench.study import (
    CODE_GROUPS,
    KIND_ROOTS,
    PACKAGE_DIR,
    Study,
    check_top_level,
)

check_top_level(config)
validate(config, schema="../schemas/config.schema.yaml")
STUDY = Study.from_config(config)

TABLES = records.TABLE_NAMES
FIGURES = records.FIGURE_NAMES


wildcard_constraints:
    dataset=r"[^/]+",
    cell=r"model~[^ ]+",


def code(group):
    """The package modules a group of rules runs: inputs, so edits rerun exactly those rules."""
    return [str(PACKAGE_DIR / module) for module in CODE_GROUPS[group]]


def final_outputs():
    """Every cell's metrics and ceiling (unless only aggregating), the tables, the figures."""
    cells = (
        [] if STUDY.aggregate_only else STUDY.metrics_files() + STUDY.ceiling_files()
    )
    tables = [
        f"results/tables/{name}.{ext}" for name in TABLES for ext in ("md", "html")
    ]
    figures = [
        f"results/figures/{name}.{ext}" for name in FIGURES for ext in ("png", "svg")
    ]
    return (
        cells
        + ["results/tables/runs.csv", "results/tables/runs.html"]
        + tables
        + figures
    )


def dataset_archive(wildcards):
    """A local .tgz is extracted where it lies; everything else is downloaded first."""
    plan = STUDY.plan(wildcards.dataset)
    return (
        plan.archive
        if plan.how == "archive"
        else f"results/downloads/{wildcards.dataset}.tgz"
    )


def checksum_args(plan):
    """--size/--md5/--sha256 options for the checksums known for a dataset."""
    args = []
    for key in ("size", "md5", "sha256"):
        value = getattr(plan, key)
        if value is not None:
            args.append(f"--{key} {value}")
    return " ".join(args)


def synthetic_args(wildcards):
    spec = STUDY.plan(wildcards.dataset).synthetic
    return " ".join(
        f"--{key.replace('_', '-')} {value}" for key, value in sorted(spec.items())
    )


def cell_args(kind):
    """Input function: the trainer's arguments for the cell the wildcards point at."""

    def args(wildcards):
        return STUDY.cell_args(kind, wildcards.dataset, wildcards.cell)

    return args


def cell_dir(wildcards, output):
    return os.path.dirname(output.metrics)


def cell_store(kind):
    """Input function: the decoded store a `loader: cached` cell reads (none for `pil`)."""

    def store(wildcards):
        cell = STUDY.cell(kind, wildcards.dataset, wildcards.cell)
        if cell.loader != "cached":
            return []
        return f"results/data/{wildcards.dataset}/store/res~{cell.store_resolution()}/store.json"

    return store


def store_option(wildcards, input):
    """--store for cached cells; derived from the input, so it is no rerun trigger of its own
    (pil cells, which have no store, keep their parameters as they were)."""
    return f"--store {os.path.dirname(input.store)}" if input.store else ""


# -- library builds (rules/builds.smk) ------------------------------------------------------

from nettebench import libraries


wildcard_constraints:
    library="|".join(libraries.LIBRARIES),
    build=r"[^/]+",


def cell_builds(kind):
    """Input function: the installed library builds a cell names (none for `installed`), so
    they are built first and a rebuilt library reruns the cells that use it."""

    def builds(wildcards):
        return STUDY.cell_builds(kind, wildcards.dataset, wildcards.cell)

    return builds


def build_param(key):
    """Params function: one setting (repo, ref) of the build the wildcards point at."""

    def param(wildcards):
        return getattr(STUDY.build(wildcards.library, wildcards.build), key)

    return param


def build_options(wildcards):
    """The build's own environment and pip arguments as library_build options."""
    plan = STUDY.build(wildcards.library, wildcards.build)
    options = [f"--env={key}={value}" for key, value in plan.env]
    options += [f"--pip-arg={arg}" for arg in plan.pip_args]
    return shlex.join(options)
