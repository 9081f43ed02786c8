"""Putting a library build to use: the build a cell names goes first on the import path.

The workflow clones, builds (a wheel, against the installed torch) and installs every build a cell
uses once, under ``results/builds/<library>/<build>/`` (``rules/builds.smk``,
:mod:`nettebench.builds.build`; the config's plans: :mod:`nettebench.study.builds`). The trainer,
the ceiling bench and the profiler call :func:`activate` with their cell, which puts the build's
prefix first on the import path. So a cell runs against the build it names with or without
Snakemake, and the cell rules' shell commands (which Snakemake's code trigger compares) stay as
they were: cells at ``installed`` stay up to date.

Must run before torch's libraries are imported, so it imports nothing heavy itself.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from nettebench.vocabulary.build_catalog import (
    BUILD_MANIFEST,
    BUILDS_ROOT,
    ENVIRONMENT_MANIFEST,
    ENVIRONMENTS_ROOT,
    INSTALL_MANIFEST,
    LIBRARIES,
)
from nettebench.vocabulary.cell import INSTALLED, LIBRARY_PARAMETERS

BUILDS_DIR_ENV = "NETTEBENCH_BUILDS_DIR"  # where a trainer run outside Snakemake finds them
# Where a cell run outside Snakemake finds the package environments (config `environments:`).
ENVIRONMENTS_DIR_ENV = "NETTEBENCH_ENVIRONMENTS_DIR"
# Set in a cell command that restarted itself with an environment's prefix on PYTHONPATH.
_RESTARTED_ENV = "NETTEBENCH_ENVIRONMENT_RESTARTED"
# The commands that run a cell (``python -m nettebench <group> [<command>]``, their words after
# ``-m``): they may restart themselves so that an environment pinning a package they had
# imported already (torch, numpy) comes first.
CELL_COMMANDS = (
    ("nettebench", "training"),
    ("nettebench", "benchmarks", "ceiling"),
    ("nettebench", "benchmarks", "cell-job"),
    ("nettebench", "profiling"),
)


class LibraryError(RuntimeError):
    """A cell's library build cannot be used here; the message says what to do."""


def add_builds_dir_option(parser) -> None:
    """``--builds-dir``, for the commands that run a cell (trainer, bench)."""
    parser.add_argument(
        "--builds-dir",
        default=None,
        help=f"installed library builds, for cells naming one (default: ${BUILDS_DIR_ENV} "
        f"or {BUILDS_ROOT})",
    )


def builds_root(builds_dir: str | os.PathLike | None = None) -> Path:
    """Where installed builds are: the argument, $NETTEBENCH_BUILDS_DIR, or results/builds."""
    return Path(builds_dir or os.environ.get(BUILDS_DIR_ENV) or BUILDS_ROOT).resolve()


def prefix_dir(root: Path, library: str, build: str) -> Path:
    return root / library / build / "prefix"


def activate(cell: Any, builds_dir: str | os.PathLike | None = None) -> dict[str, dict]:
    """Put every build ``cell`` names first on ``sys.path`` (and on ``PYTHONPATH``, for child
    processes); returns library -> the build's manifest. Must run before the library is
    imported: a library already imported from elsewhere is an error, never silently used.
    """
    active = {}
    # The package environment first, so that a source build the cell names goes before it.
    environment = activate_environment(cell)
    if environment is not None:
        active["environment"] = environment
    for library in LIBRARY_PARAMETERS:
        build = getattr(cell, library, INSTALLED)
        if build == INSTALLED:
            continue
        root = builds_root(builds_dir)
        prefix = prefix_dir(root, library, build)
        manifest = read_build_manifest(prefix)
        if manifest is None:
            raise LibraryError(
                f"{library} build {build!r} is not installed at {prefix}. The workflow builds it "
                f"for cells that name it (builds.{library}.{build} in the config; by hand: "
                f"`snakemake {BUILDS_ROOT}/{library}/{build}/{INSTALL_MANIFEST}`); outside the "
                f"workflow, point ${BUILDS_DIR_ENV} at the folder holding {library}/{build}/"
            )
        _check_torch(manifest, library, build)
        package = LIBRARIES[library].package
        loaded = sys.modules.get(package)
        if loaded is not None and not _inside(loaded, prefix):
            raise LibraryError(
                f"{package} was already imported from {getattr(loaded, '__file__', '?')} before "
                f"the {library} build {build!r} could be put first on the path; activate builds "
                "before importing the libraries (a new process per cell)"
            )
        if str(prefix) not in sys.path:
            sys.path.insert(0, str(prefix))
            paths = os.environ.get("PYTHONPATH")
            os.environ["PYTHONPATH"] = str(prefix) + (os.pathsep + paths if paths else "")
        active[library] = manifest
    return active


def environments_root(environments_dir: str | os.PathLike | None = None) -> Path:
    """Where package environments are: the argument, $NETTEBENCH_ENVIRONMENTS_DIR, or
    results/environments."""
    return Path(
        environments_dir or os.environ.get(ENVIRONMENTS_DIR_ENV) or ENVIRONMENTS_ROOT
    ).resolve()


def activate_environment(
    cell: Any, environments_dir: str | os.PathLike | None = None
) -> dict[str, Any] | None:
    """Put the prefix of the package environment ``cell`` names first on ``sys.path`` (and
    ``PYTHONPATH``); returns its manifest (None for ``installed``).

    A package of the environment that this process imported already from elsewhere (a cell
    command imports torch, and torch numpy, before it reads its options) cannot be replaced in
    place: a cell command then restarts itself once with the prefix on ``PYTHONPATH``, so the
    environment's copy is the one imported; anywhere else that is an error.
    """
    name = getattr(cell, "environment", INSTALLED)
    if name == INSTALLED:
        return None
    prefix = environments_root(environments_dir) / name / "prefix"
    manifest = read_environment_manifest(prefix)
    if manifest is None:
        raise LibraryError(
            f"package environment {name!r} is not installed at {prefix}. The workflow installs "
            f"it for cells that name it (environments.{name} in the config; by hand: "
            f"`snakemake {ENVIRONMENTS_ROOT}/{name}/{INSTALL_MANIFEST}`); outside the "
            f"workflow, point ${ENVIRONMENTS_DIR_ENV} at the folder holding {name}/"
        )
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    if manifest.get("python") and manifest["python"] != here:
        raise LibraryError(
            f"package environment {name!r} was installed for Python {manifest['python']}, but "
            f"this is Python {here}; reinstall it (`snakemake --forcerun environment_install`)"
        )
    _put_first(prefix)
    stale = {
        module: getattr(sys.modules[module], "__file__", None) or "?"
        for module in manifest.get("modules", [])
        if module in sys.modules and not _inside(sys.modules[module], prefix)
    }
    if stale:
        _restart_or_fail(name, prefix, stale)
    return manifest


def _restart_or_fail(name: str, prefix: Path, stale: Mapping[str, str]) -> None:
    """Restart a cell command with the prefix on PYTHONPATH (once), or explain the problem."""
    command = _cell_command()
    where = ", ".join(f"{m} from {path}" for m, path in sorted(stale.items()))
    if command is None or os.environ.get(_RESTARTED_ENV) == name:
        raise LibraryError(
            f"package environment {name!r} provides modules already imported from elsewhere "
            f"({where}); start the process with PYTHONPATH={prefix}, or run the cell through "
            "its command (python -m nettebench training ...), which restarts itself so"
        )
    print(
        f"environment {name}: restarting with {prefix} first on the path (had imported {where})",
        file=sys.stderr,
        flush=True,
    )
    env = {**os.environ, _RESTARTED_ENV: name}
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)


def _cell_command() -> str | None:
    """The cell command this process runs as (``python -m nettebench benchmarks cell-job ...``,
    also each process torchrun starts for a data-parallel cell), if any: its words after
    ``-m``."""
    argv = list(getattr(sys, "orig_argv", []))
    if "-m" in argv[:-1]:
        at = argv.index("-m") + 1
        for words in CELL_COMMANDS:
            if tuple(argv[at : at + len(words)]) == words:
                return " ".join(words)
    return None


def _put_first(prefix: Path) -> None:
    if str(prefix) not in sys.path:
        sys.path.insert(0, str(prefix))
    paths = os.environ.get("PYTHONPATH", "")
    if str(prefix) not in paths.split(os.pathsep):
        os.environ["PYTHONPATH"] = str(prefix) + (os.pathsep + paths if paths else "")


def read_environment_manifest(prefix: Path) -> dict[str, Any] | None:
    """The manifest a package environment's install wrote into its prefix, or None."""
    try:
        return json.loads((Path(prefix) / ENVIRONMENT_MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def active_environment() -> dict[str, Any] | None:
    """The manifest of the package environment whose prefix is on ``sys.path`` (None: none)."""
    for place in sys.path:
        if place:
            manifest = read_environment_manifest(Path(place))
            if manifest is not None:
                return manifest
    return None


def read_build_manifest(prefix: Path) -> dict[str, Any] | None:
    """The manifest an install wrote into its prefix, or None when there is none."""
    try:
        return json.loads((Path(prefix) / BUILD_MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def find_build(package: str) -> dict[str, Any] | None:
    """The manifest of the installed build ``import package`` resolves to (None: no build).

    Looks where the import system finds the package, without importing it: its folder's parent
    is the install prefix, which holds the manifest.
    """
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    places = list(spec.submodule_search_locations or ())
    if spec.origin and not places:
        places = [os.path.dirname(spec.origin)]
    for place in places:
        manifest = read_build_manifest(Path(place).parent)
        if manifest is not None:
            return manifest
    return None


def _check_torch(manifest: Mapping[str, Any], library: str, build: str) -> None:
    """A build is compiled against one torch; another torch would fail obscurely at import."""
    built_with = manifest.get("torch")
    try:
        here = version("torch")
    except PackageNotFoundError:
        here = None
    if built_with and here and built_with != here:
        raise LibraryError(
            f"{library} build {build!r} was built against torch {built_with}, but this "
            f"environment has torch {here}; rebuild it (`snakemake --forcerun library_build`)"
        )


def _inside(module: Any, prefix: Path) -> bool:
    path = getattr(module, "__file__", None)
    return path is not None and Path(path).resolve().is_relative_to(prefix)
