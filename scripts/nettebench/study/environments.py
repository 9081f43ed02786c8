"""The config's ``environments:`` section as plans: pinned packages from the registry per cell.

Beside the torchvision and apex source builds (:mod:`nettebench.study.builds`), a study can make
package versions an axis without building anything: an environment names exact pins, which the
workflow installs from the registry once, with ``pip install --target``, into a prefix of its
own; a cell whose ``environment`` parameter names it puts that prefix first on its import path::

    environments:
      pillow11: {packages: [pillow==11.3.0]}
      pillow12: {packages: [pillow==12.3.0]}
      torch211: {packages: [torch==2.11.0, torchvision==0.26.0],
                 pip_args: [--index-url, https://download.pytorch.org/whl/cu130]}
    matrix:
      environment: [installed, pillow11, pillow12]

Every package must be pinned (``name==version``), so a cell's environment is the same wherever
and whenever it is installed. Planned while Snakemake parses, so it imports nothing heavy; the
install step is :mod:`nettebench.builds.packages`, putting an environment to use
:func:`nettebench.builds.activate.activate_environment`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nettebench.study.crossing import ConfigError
from nettebench.vocabulary.build_catalog import ENVIRONMENTS_ROOT, INSTALL_MANIFEST, canonical_name
from nettebench.vocabulary.cell import INSTALLED

# name[extras]==version, as pip writes an exact pin: the schema's `$defs/pin` checks a config's
# packages with the same expression (tests/test_config_file.py keeps the two equal); this parses.
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[A-Za-z0-9,._-]*\])?==([A-Za-z0-9.+!_-]+)$")


@dataclass(frozen=True)
class EnvironmentPlan:
    """One configured package environment: exact pins and extra pip arguments."""

    name: str
    packages: tuple[str, ...]  # the pins as written, e.g. ("pillow==11.3.0",)
    pip_args: tuple[str, ...] = ()

    @property
    def directory(self) -> str:
        return f"{ENVIRONMENTS_ROOT}/{self.name}"

    @property
    def prefix(self) -> str:
        return f"{self.directory}/prefix"

    @property
    def install_manifest(self) -> str:
        """The file a cell using this environment depends on."""
        return f"{self.directory}/{INSTALL_MANIFEST}"

    def pins(self) -> dict[str, str]:
        """Canonical distribution name -> the pinned version."""
        pins = {}
        for package in self.packages:
            match = _PIN.match(package)
            assert match, package  # checked by plan_environments
            pins[canonical_name(match.group(1))] = match.group(3)
        return pins


def plan_environments(section: Mapping[str, Any] | None) -> dict[str, EnvironmentPlan]:
    """The config's ``environments:`` section as plans, name -> plan, every value checked."""
    plans: dict[str, EnvironmentPlan] = {}
    # The schema checked each name and that every package is a pin (its `$defs/pin`); here
    # the rule across pins: one version per distribution.
    for name, spec in (section or {}).items():
        where = f"environments.{name}"
        name = str(name)
        packages = spec["packages"]
        seen: dict[str, str] = {}
        for package in packages:
            match = _PIN.match(str(package).strip())
            assert match, package  # the schema's `$defs/pin`
            key = canonical_name(match.group(1))
            if key in seen:
                raise ConfigError(
                    f"{where}.packages: {key} is pinned twice ({seen[key]}, {package})"
                )
            seen[key] = str(package)
        plans[name] = EnvironmentPlan(
            name=name,
            packages=tuple(str(p).strip() for p in packages),
            pip_args=tuple(str(a) for a in spec.get("pip_args") or ()),
        )
    return plans


def environment_names(plans: Mapping[str, EnvironmentPlan]) -> list[str]:
    """Values a cell's ``environment`` parameter may take: ``installed`` and the names."""
    return [INSTALLED, *plans]
