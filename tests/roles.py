"""pyproject.toml's dependencies by role, and what each role installs in this environment.

A role is the base install (the jobs') with some extras; what it installs is the closure of its
requirements over the installed distributions' own ``Requires-Dist`` (markers evaluated here,
an extra a requirement names followed). The modules outside a role are the top-level modules of
every other installed distribution: a process that imports one of them would fail where only
that role is installed (tests/test_device_image_imports.py blocks them).
"""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
NAME = canonicalize_name(PROJECT["name"])
JOBS = ("gpu",)  # the jobs' role: the base install, with NVML where there is a GPU
# What issue 59 names of the workflow's and the report's, that no job may import.
WORKFLOW_AND_REPORT = ("snakemake", "jsonschema", "pandas", "matplotlib", "seaborn", "scipy")


def requirements(extras: tuple[str, ...], project: dict | None = None) -> list[Requirement]:
    """The base install's requirements and ``extras``' (the project's own extras that another
    names, ``nettebench[workflow]``, expanded)."""
    project = PROJECT if project is None else project
    wanted = [Requirement(text) for text in project["dependencies"]]
    todo, seen = list(extras), set()
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for text in project.get("optional-dependencies", {}).get(extra, []):
            requirement = Requirement(text)
            if canonicalize_name(requirement.name) == NAME:
                todo += sorted(requirement.extras)
            else:
                wanted.append(requirement)
    return wanted


def closure(wanted: list[Requirement]) -> set[str]:
    """The installed distributions ``wanted`` pulls in, itself included (canonical names)."""
    found: set[str] = set()
    todo = [(requirement, "") for requirement in wanted]
    while todo:
        requirement, extra = todo.pop()
        if requirement.marker and not requirement.marker.evaluate({"extra": extra}):
            continue
        name = canonicalize_name(requirement.name)
        key = name + "".join(f"[{e}]" for e in sorted(requirement.extras))
        if key in found:
            continue
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue  # not installed here: nothing of it to import
        found |= {name, key}
        for text in requires:
            todo += [(Requirement(text), e) for e in ("", *sorted(requirement.extras))]
    return {name for name in found if "[" not in name}


def modules_outside(role: set[str]) -> list[str]:
    """Top-level modules of the installed distributions outside ``role`` (and not the project's
    own): a module several distributions share (a namespace) only where none is in ``role``."""
    outside = []
    for module, dists in importlib.metadata.packages_distributions().items():
        names = {canonicalize_name(d) for d in dists}
        if not names & (role | {NAME}) and module.isidentifier():
            outside.append(module)
    return sorted(outside)
