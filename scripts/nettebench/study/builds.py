"""The config's ``builds:`` section as plans: which library builds a study names, and where.

The study compared library versions and built torchvision (and apex) from source. A cell
parameter per library (``torchvision``, ``apex``; see
:data:`nettebench.vocabulary.cell.LIBRARY_PARAMETERS`) names ``installed`` (the environment's own,
the default) or a build of this section::

    builds:
      torchvision:
        v0.29.1: {ref: v0.29.1}                     # the official repository at a tag
        mine: {repo: /src/vision, ref: my-branch}  # any URL or local clone, any ref

Planned while Snakemake parses the config, so it imports nothing heavy; the steps that clone,
build and install are :mod:`nettebench.builds.build`, putting a build to use is
:mod:`nettebench.builds.activate`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nettebench.study.crossing import ConfigError
from nettebench.vocabulary.build_catalog import BUILDS_ROOT, INSTALL_MANIFEST, LIBRARIES, is_url
from nettebench.vocabulary.cell import INSTALLED, LIBRARY_PARAMETERS

assert tuple(LIBRARIES) == LIBRARY_PARAMETERS


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
    # The schema checked each key (libraries, names, a ref); here what is on disk and the
    # options one library has.
    for library, builds in (section or {}).items():
        for name, spec in (builds or {}).items():
            where = f"builds.{library}.{name}"
            name = str(name)
            spec = dict(spec)
            repo = str(spec.get("repo") or LIBRARIES[library].repo)
            if not is_url(repo):
                path = Path(repo).expanduser()
                if not path.is_dir():
                    raise ConfigError(
                        f"{where}.repo: {repo!r} is neither a URL nor an existing directory "
                        "(a local git clone)"
                    )
                repo = str(path.resolve())
            extensions = ()
            if spec.get("extensions"):
                extensions = LIBRARIES[library].extension_args
                if not extensions:
                    raise ConfigError(
                        f"{where}.extensions: {library} has no optional extensions to build; "
                        "its build options are environment variables (`env:`)"
                    )
            plans[library][name] = BuildPlan(
                library=library,
                name=name,
                repo=repo,
                ref=str(spec["ref"]),
                env=tuple(sorted((str(k), str(v)) for k, v in (spec.get("env") or {}).items())),
                pip_args=(*extensions, *(str(a) for a in spec.get("pip_args") or ())),
            )
    return plans


def build_names(plans: Mapping[str, Mapping[str, BuildPlan]]) -> dict[str, list[str]]:
    """Values each library parameter of a cell may take: ``installed`` and the build names."""
    return {library: [INSTALLED, *plans.get(library, {})] for library in LIBRARIES}
