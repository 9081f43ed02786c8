"""Which lock the environment was installed from: a record's ``environment.lock``.

`make` installs the environment from a lock (envs/lock-py311.txt, envs/lock-py312.txt: every
package pinned, with its hashes) and leaves a copy of what it installed from in the environment,
``<sys.prefix>/nettebench-lock.txt``. A record names that file by its sha256
(``sha256:1a2b3c4d5e6f7a8b``), so the report can say when two machines ran different locks
(report/tables/machines.py); where an installed package no longer is the version the lock pins
(upgraded by hand after the set-up), the name says which (``..., not as locked: numpy 2.1.0``).
``none`` where the environment was not installed from a lock: a rule's conda environment, a
site's own stack.

Standard library and packaging: imported by the jobs.
"""

from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path

from packaging.markers import Marker

from nettebench.vocabulary.build_catalog import canonical_name

INSTALLED_LOCK = "nettebench-lock.txt"  # in the environment's prefix (the Makefile writes it)
NONE = "none"
DIGEST_CHARS = 16  # of the sha256's hex digits: enough to tell locks apart, short in a table
NAMED_DIFFERENCES = 3  # packages named where the installed ones are not as locked
# A lock's requirement line: ``name==version``, maybe ``; marker``, maybe `` \`` (hashes follow)
PIN = re.compile(r"^([A-Za-z0-9][\w.-]*)==([^\s;\\]+)\s*(?:;\s*([^\\]+?))?\s*\\?\s*$")


def pins(lock: str) -> dict[str, str]:
    """The lock's ``name==version`` requirements that apply here (their markers, if any, true
    for this interpreter): canonical name -> version."""
    found = {}
    for line in lock.splitlines():
        pin = PIN.match(line)
        if pin and (pin.group(3) is None or Marker(pin.group(3)).evaluate()):
            found[canonical_name(pin.group(1))] = pin.group(2)
    return found


def installed_versions() -> dict[str, str]:
    """Every distribution on this interpreter's path, from its ``<name>-<version>.dist-info``
    folder's name (the first on the path wins, as in an import): canonical name -> version.
    Folder names, not each METADATA file: a tenth of the time, in every job's record."""
    found: dict[str, str] = {}
    for entry in sys.path:
        for info in sorted(Path(entry or ".").glob("*.dist-info")):
            name, _, version = info.name.removesuffix(".dist-info").partition("-")
            found.setdefault(canonical_name(name), version)
    return found


def differences(locked: dict[str, str], installed: dict[str, str]) -> list[str]:
    """``name version`` (or ``name absent``) for each pin the installed packages do not meet; a
    local label (``2.14.1+cu130``) meets its release's pin, as pip's ``==`` has it."""
    return [
        f"{name} {installed.get(name, 'absent')}"
        for name, version in sorted(locked.items())
        if installed.get(name, "").partition("+")[0] != version.partition("+")[0]
        or ("+" in version and installed[name] != version)
    ]


def identity(prefix: str | Path | None = None) -> str:
    """The lock this environment (``prefix``: this interpreter's by default) was installed from,
    as a record names it (see the module docstring)."""
    path = Path(sys.prefix if prefix is None else prefix) / INSTALLED_LOCK
    try:
        data = path.read_bytes()
    except OSError:
        return NONE
    name = f"sha256:{hashlib.sha256(data).hexdigest()[:DIGEST_CHARS]}"
    differ = differences(pins(data.decode("utf-8", "replace")), installed_versions())
    if not differ:
        return name
    more = len(differ) - NAMED_DIFFERENCES
    return f"{name}, not as locked: {', '.join(differ[:NAMED_DIFFERENCES])}" + (
        f" and {more} more" if more > 0 else ""
    )
