"""The code each group of rules runs: inputs of those rules, so an edit reruns exactly them.

Groups follow the package's folders: editing ``report/`` reruns the tables, figures and report;
editing ``training/`` or ``data/`` reruns the training cells (``data/store.py`` also rebuilds the
store); editing ``builds/build.py`` rebuilds the libraries. An entry is a folder (every module in
it, at any depth) or one module. ``tests/test_study.py`` follows each group's entry point through
its imports and fails when a module it reaches is in no entry of the group.

A rule's input is not the group's modules themselves but one manifest per group
(:func:`write_manifest`, ``.snakemake/nettebench/code/<group>.sha256``, beside Snakemake's own
metadata, so a dry run writes nothing under ``results/``): every module's sha256, rewritten at
parse time only when one of them changed. Snakemake sees a newer input with a new checksum and
reruns the group's jobs, exactly as with the modules listed, while a job's ``input:`` line in
the terminal names one file instead of fifty.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from nettebench.vocabulary.atomic import write_text_atomic

PACKAGE_DIR = Path(__file__).resolve().parent.parent

# What every group that reads or writes records runs: the ground floor, the parse-time core and
# the record files, and the package's one entry, ``python -m nettebench <group> ...``.
_CORE = ("vocabulary/", "study/", "records/", "__main__.py")
# What reads a prepared dataset: its description (dataset.json), not how it was fetched or made.
_DATASET = (
    "datasets/__init__.py",
    "datasets/info.py",
    "datasets/walk.py",  # the one walk of a tree's images (counts, store, pil loader)
)
# A training cell: the trainer, its input pipelines and models, the build it activates (not the
# build steps) and the dataset it reads.
_BUILD_USE = ("builds/__init__.py", "builds/activate.py")
_TRAINER = ("training/", "data/", "models/", *_BUILD_USE, *_DATASET, *_CORE)

# What every table and figure is built from: the records read into frames, shaped and formatted.
_REPORT = (
    "report/__init__.py",
    "report/collect.py",
    "report/grids.py",
    "report/format.py",
    "report/caveats.py",
    "report/setups.py",
    "report/stats.py",
    *_CORE,
)

CODE_GROUPS: dict[str, tuple[str, ...]] = {
    # Only the store's own modules of data/: editing a loader must not decode the dataset again.
    "store": (
        "data/__init__.py",
        "data/store.py",
        "data/store_build.py",
        *_DATASET,
        *_CORE,
    ),
    "train": _TRAINER,
    # A matrix cell's job trains it and measures its ceiling right after (benchmarks/cell_job)
    "matrix_train": (
        "benchmarks/__init__.py",
        "benchmarks/cell_job.py",
        "benchmarks/ceiling.py",
        *_TRAINER,
    ),
    "profile": ("profiling/", *_TRAINER),
    # An inference cell or accuracy job: its package, and the trainer's model, precision step
    # and validation pipeline it reuses.
    "inference": ("inference/", *_TRAINER),
    # Their tables (and the front page's sentence) and the latency-throughput figure, apart.
    "inference_tables": (*_REPORT, "report/tables/inference.py", "report/tables/energy.py"),
    "inference_figure": (*_REPORT, "report/inference_figure.py", "report/plotting.py"),
    # The tables (report/tables/) and the figures (report/figures.py, plotting.py) apart, so
    # editing plotting code reruns only the figures.
    "aggregate": (
        *_REPORT,
        "report/aggregate.py",
        "report/answers.py",
        "report/compare.py",
        "report/rerun.py",  # the rerun line under a withheld verdict (report/compare.py)
        "report/duplicates.py",
        "report/front_page.py",
        "report/tables/",
        "report/references.py",  # the published references' data (report/tables/references.py)
        "report/steps_export.py",  # steps.csv and the pyperf files, in the same job
    ),
    # The report's front page: the headline table and the throughput figure on one page.
    "front_page": (
        *_REPORT,
        "report/front_page.py",
        "report/answers.py",
        "report/compare.py",
        "report/rerun.py",
        "report/tables/energy.py",  # the energy sentence
    ),
    "figures": (
        *_REPORT,
        "report/figures.py",
        "report/facets.py",
        "report/plotting.py",
        "report/scaling_figure.py",  # and the scaling table's rows it draws
        "report/tables/scaling.py",
        "report/speedup_figure.py",  # and the speed-up it draws, the time table's own
        "report/compare.py",
        "report/rerun.py",
        "report/energy_figure.py",  # and the energy table's definitions it draws by
        "report/tables/energy.py",
    ),
    "profile_aggregate": (*_REPORT, "report/tables/kernels.py", "profiling/"),
    "profile_figures": (*_REPORT, "report/kernel_figure.py", "report/plotting.py", "profiling/"),
    # A library build depends on its own steps alone, so no other edit rebuilds a library.
    "builds": (
        "__main__.py",  # python -m nettebench builds clone|wheel|install
        "builds/build.py",
        "vocabulary/build_catalog.py",
        "vocabulary/atomic.py",
        "vocabulary/commands.py",
    ),
    # A package environment's install step and what it shares with the builds' steps.
    "environments": (
        "__main__.py",  # python -m nettebench builds environment
        "vocabulary/commands.py",
        "builds/packages.py",
        "builds/build.py",
        "vocabulary/build_catalog.py",
        "vocabulary/atomic.py",
    ),
}


def modules(group: str) -> list[str]:
    """Every module (relative to the package) the group's entries name, folders expanded."""
    found: set[str] = set()
    for entry in CODE_GROUPS[group]:
        path = PACKAGE_DIR / entry
        if entry.endswith("/"):
            found |= {str(p.relative_to(PACKAGE_DIR)) for p in path.rglob("*.py")}
        else:
            found.add(entry)
    return sorted(found)


def manifest(group: str) -> str:
    """The group's code as text: ``<sha256>  <module>`` per module (sha256sum's format, so
    ``sha256sum -c`` checks it from the package folder), sorted. It changes exactly when the
    content of a module of the group changes, or a module joins or leaves it."""
    lines = []
    for module in modules(group):
        digest = hashlib.sha256((PACKAGE_DIR / module).read_bytes()).hexdigest()
        lines.append(f"{digest}  {module}\n")
    return "".join(lines)


def write_manifest(group: str, path: str | os.PathLike[str]) -> bool:
    """Write the group's :func:`manifest` to ``path`` unless it already holds that text (so its
    mtime moves only when the code did); True when it wrote. All-or-nothing
    (:func:`~nettebench.vocabulary.atomic.write_text_atomic`): several Snakemake processes may
    parse the workflow at once."""
    path = Path(path)
    text = manifest(group)
    try:
        if path.read_text(encoding="utf-8") == text:
            return False
    except (FileNotFoundError, UnicodeDecodeError):
        pass
    write_text_atomic(path, text)
    return True
