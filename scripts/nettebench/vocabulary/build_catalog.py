"""The libraries that can be built from source, and the files a build leaves behind.

Kept apart from :mod:`nettebench.builds.activate` (config plans, activation in the trainer) so that
the build steps (:mod:`nettebench.builds.build`) depend on this file alone: the build rules list
their code as inputs, and an edit to the cell table or the config checks must not rebuild every
library.

Imports nothing from the package and nothing heavy.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

BUILD_MANIFEST = "nettebench-build.json"  # inside an installed prefix: what it was built from
SOURCE_MANIFEST = "source.json"  # the clone: repository, ref and the commit it resolved to
WHEEL_MANIFEST = "wheel.json"  # the wheel: file, sha256, commit, torch it was built against
INSTALL_MANIFEST = "install.json"  # the install: the prefix's BUILD_MANIFEST, outside it
# Inside a package environment's prefix (config `environments:`): what pip installed there.
ENVIRONMENT_MANIFEST = "nettebench-environment.json"
# Where the workflow installs them, relative to its working directory (results/builds/<library>/
# <build>/, results/environments/<name>/): the plans (nettebench.study) and activation agree.
BUILDS_ROOT = "results/builds"
ENVIRONMENTS_ROOT = "results/environments"
_URL = re.compile(r"^[a-z][a-z0-9+.-]*://|^[^/\s]+@[^/\s]+:")  # scheme://... or user@host:path


@dataclass(frozen=True)
class Library:
    """A library that can be built from source: its import name and its official repository."""

    name: str  # the cell parameter and the key under `builds:`
    package: str  # the import package its wheel must provide
    repo: str  # default repository
    # Build environment every build of it gets (a build's own `env:` adds to and overrides it).
    env: Mapping[str, str] = field(default_factory=dict)
    # `pip wheel` arguments of a build with `extensions: true` (empty: the library has none)
    extension_args: tuple[str, ...] = ()


# apex's setup.py reads these from its argv; pip hands them over as build options (apex's README).
APEX_EXTENSION_ARGS = (
    "--config-settings=--build-option=--cpp_ext",
    "--config-settings=--build-option=--cuda_ext",
)

LIBRARIES = {
    "torchvision": Library("torchvision", "torchvision", "https://github.com/pytorch/vision"),
    # Without options apex's setup.py builds the Python-only package, which needs no CUDA
    # toolkit, and whose loss scaler then falls back to a host sync per parameter per step;
    # `extensions: true` builds its C++/CUDA extensions (amp_C's fused kernels, as the study's
    # apex had), which needs nvcc matching torch's CUDA (see the README).
    "apex": Library(
        "apex", "apex", "https://github.com/NVIDIA/apex", extension_args=APEX_EXTENSION_ARGS
    ),
}


def canonical_name(name: str) -> str:
    """A distribution name as the registry compares them (PEP 503): ``Pillow`` -> ``pillow``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def is_url(repo: str) -> bool:
    """Whether a build's repository is remote (a URL or ``user@host:path``), not a local path."""
    return bool(_URL.match(repo))
