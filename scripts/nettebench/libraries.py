"""Library versions as a matrix axis: the source builds a config names, and putting one to use.

The study compared library versions (PyTorch 1.0.1 against 1.1.0) and built torchvision from
source to get newer models; it also built NVIDIA apex from source. Here a cell parameter per
library (``torchvision``, ``apex``; see :data:`nettebench.cell.LIBRARY_PARAMETERS`) says which copy
a cell runs against: ``installed`` (the environment's own, the default) or the name of a build in
the config's ``builds:`` section::

    builds:
      torchvision:
        v0.29.1: {ref: v0.29.1}                     # the official repository at a tag
        mine: {repo: /src/vision, ref: my-branch}  # any URL or local clone, any ref

The workflow clones, builds (a wheel, against the installed torch) and installs every build a cell
uses once, under ``results/builds/<library>/<build>/`` (``rules/builds.smk``,
:mod:`nettebench.library_build`). The trainer and the ceiling bench call :func:`activate` with
their cell, which puts the build's prefix first on the import path. So a cell runs against the
build it names with or without Snakemake, and the cell rules' shell commands (which Snakemake's
code trigger compares) stay as they were: cells at ``installed`` stay up to date.

Imports nothing heavy: the workflow plans builds while it parses the config.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nettebench.cell import INSTALLED, LIBRARY_PARAMETERS
from nettebench.grid import ConfigError
from nettebench.library_catalog import (
    BUILD_MANIFEST,
    INSTALL_MANIFEST,
    LIBRARIES,
    is_url,
)

BUILDS_ROOT = "results/builds"  # relative to the workflow's working directory
BUILDS_DIR_ENV = "NETTEBENCH_BUILDS_DIR"  # where a trainer run outside Snakemake finds them
_SAFE_NAME = re.compile(r"^[A-Za-z0-9._+-]+$")
assert tuple(LIBRARIES) == LIBRARY_PARAMETERS


class LibraryError(RuntimeError):
    """A cell's library build cannot be used here; the message says what to do."""


@dataclass(frozen=True)
class BuildPlan:
    """One configured build: a library at a ref of a repository, and how to build it."""

    library: str
    name: str
    repo: str  # a URL, or an absolute path to a local clone
    ref: str  # branch, tag or commit
    env: tuple[tuple[str, str], ...] = ()  # build environment, sorted
    pip_args: tuple[str, ...] = ()  # extra `pip wheel` arguments

    @property
    def directory(self) -> str:
        return f"{BUILDS_ROOT}/{self.library}/{self.name}"

    @property
    def install_manifest(self) -> str:
        """The file a cell using this build depends on."""
        return f"{self.directory}/{INSTALL_MANIFEST}"

    @property
    def remote(self) -> bool:
        return is_url(self.repo)

    def build_env(self) -> dict[str, str]:
        return {**LIBRARIES[self.library].env, **dict(self.env)}


def plan_builds(section: Mapping[str, Any] | None) -> dict[str, dict[str, BuildPlan]]:
    """The config's ``builds:`` section as plans, library -> build name -> plan.

    A repository that is no URL must be an existing directory (a local clone); it is made
    absolute, so the clone works from wherever the rule runs.
    """
    plans: dict[str, dict[str, BuildPlan]] = {name: {} for name in LIBRARIES}
    for library, builds in (section or {}).items():
        if library not in LIBRARIES:
            raise ConfigError(
                f"builds.{library}: unknown library; builds can be made of {', '.join(LIBRARIES)}"
            )
        for name, spec in (builds or {}).items():
            where = f"builds.{library}.{name}"
            name = str(name)
            if name == INSTALLED or not _SAFE_NAME.match(name):
                raise ConfigError(
                    f"{where}: a build's name is part of result paths and must not be "
                    f"{INSTALLED!r}; use letters, digits and . _ + -"
                )
            spec = dict(spec or {})
            if not spec.get("ref"):
                raise ConfigError(f"{where}.ref is missing: give a branch, tag or commit")
            repo = str(spec.get("repo") or LIBRARIES[library].repo)
            if not is_url(repo):
                path = Path(repo).expanduser()
                if not path.is_dir():
                    raise ConfigError(
                        f"{where}.repo: {repo!r} is neither a URL nor an existing directory "
                        "(a local git clone)"
                    )
                repo = str(path.resolve())
            plans[library][name] = BuildPlan(
                library=library,
                name=name,
                repo=repo,
                ref=str(spec["ref"]),
                env=tuple(sorted((str(k), str(v)) for k, v in (spec.get("env") or {}).items())),
                pip_args=tuple(str(a) for a in spec.get("pip_args") or ()),
            )
    return plans


def build_names(plans: Mapping[str, Mapping[str, BuildPlan]]) -> dict[str, list[str]]:
    """Values each library parameter of a cell may take: ``installed`` and the build names."""
    return {library: [INSTALLED, *plans.get(library, {})] for library in LIBRARIES}


# ---------------------------------------------------------------------------------- at run time


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
    import importlib.util

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
    from importlib.metadata import PackageNotFoundError, version

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
