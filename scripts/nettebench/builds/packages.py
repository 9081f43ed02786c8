"""Install a package environment: exact pins from the registry into a prefix of its own.

The ``environment_install`` rule's command, for the config's ``environments:``
(:mod:`nettebench.study.environments`)::

    python -m nettebench builds environment --name pillow11 --prefix PREFIX \\
        --manifest install.json [--pip-arg ARG ...] -- pillow==11.3.0

runs ``pip install --target`` into a temporary folder beside the prefix (with the packages'
dependencies, as the registry resolves them), checks that every pin was installed at its version,
writes :data:`nettebench.vocabulary.build_catalog.ENVIRONMENT_MANIFEST` into it (the pins, every
distribution installed and its version, the top-level modules they provide, the Python it was
installed for) and renames it into place, so a failed or killed install leaves nothing. A cell
whose ``environment`` names it puts the prefix first on its import path
(:func:`nettebench.builds.activate.activate_environment`).

Imports nothing heavy: pip runs as a subprocess.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import platform
import shutil
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from nettebench.builds.build import BuildError, _fresh_tmp, _Log, _replace, tail
from nettebench.vocabulary import commands
from nettebench.vocabulary.atomic import write_text_atomic
from nettebench.vocabulary.build_catalog import ENVIRONMENT_MANIFEST, canonical_name

_NETWORK_SIGNS = (
    "could not find a version that satisfies",
    "no matching distribution found",
    "connection",
    "temporary failure in name resolution",
)


def python_tag() -> str:
    """``3.11``: compiled packages in a prefix work only for the Python they were installed by."""
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def pin_accepts(pinned: str, installed: str | None) -> bool:
    """Whether ``installed`` satisfies the pin ``==pinned`` as pip judges it (PEP 440, through
    ``packaging.specifiers``): ``==2.13.0`` accepts ``2.13.0+cpu`` (a local version label is
    ignored unless the pin names one) and ``2.13``; ``==2.13.0+cpu`` does not accept
    ``2.13.0``. A version PEP 440 cannot parse must equal the pin as written."""
    if installed is None:
        return False
    try:
        return SpecifierSet(f"=={pinned}").contains(Version(installed), prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return installed == pinned


def unmet_pins(pins: dict[str, str], installed: dict[str, str]) -> dict[str, tuple[str, Any]]:
    """``{distribution: (pinned, installed or None)}`` for every pin pip did not meet."""
    return {
        dist: (version, installed.get(dist))
        for dist, version in pins.items()
        if not pin_accepts(version, installed.get(dist))
    }


def install(
    name: str,
    packages: Sequence[str],
    prefix: Path,
    manifest: Path,
    log: _Log,
    *,
    pip_args: Sequence[str] = (),
) -> dict[str, Any]:
    """Install ``packages`` (exact pins) into ``prefix``; write and return the manifest."""
    prefix, manifest = Path(prefix), Path(manifest)
    pins = {}
    for package in packages:
        requirement, sep, version = package.partition("==")
        if not sep:
            raise BuildError(f"environment {name}: {package!r} is not pinned (name==version)")
        pins[canonical_name(requirement.split("[")[0])] = version
    tmp = _fresh_tmp(prefix)
    started = time.perf_counter()
    try:
        result = log.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--no-input",
                "--disable-pip-version-check",
                "--no-warn-script-location",
                "--target",
                tmp,
                *pip_args,
                *packages,
            ]
        )
        if result.returncode:
            hint = ""
            if any(sign in result.stdout.lower() for sign in _NETWORK_SIGNS):
                hint = (
                    "\nThe registry did not offer these versions for this Python "
                    f"({python_tag()}, {platform.machine()}) or could not be reached; check the "
                    "pins (`pip download --no-deps <pin>` shows what the registry has) or the "
                    "network, or add an index with `pip_args: [--index-url, URL]`."
                )
            raise BuildError(
                f"installing environment {name} ({' '.join(packages)}) failed:\n"
                f"{tail(result.stdout)}{hint}"
            )
        installed = {
            canonical_name(dist.metadata["Name"]): dist.version
            for dist in importlib.metadata.distributions(path=[str(tmp)])
        }
        wrong = unmet_pins(pins, installed)
        if wrong:
            found = ", ".join(
                f"{d} {got or 'missing'} (pinned {want})" for d, (want, got) in wrong.items()
            )
            raise BuildError(
                f"environment {name}: pip did not install the pinned versions: {found}"
            )
        record = {
            "environment": name,
            "packages": list(packages),
            "pins": pins,
            "pip_args": list(pip_args),
            "installed": dict(sorted(installed.items())),
            "modules": top_level_modules(tmp),
            "python": python_tag(),
            "python_version": platform.python_version(),
            "machine": platform.machine(),
            "pip": _pip_version(),
            "install_s": round(time.perf_counter() - started, 3),
            "installed_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        (tmp / ENVIRONMENT_MANIFEST).write_text(
            json.dumps(record, indent=2) + "\n", encoding="utf-8"
        )
        _replace(tmp, prefix)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    write_text_atomic(manifest, json.dumps(record, indent=2) + "\n")
    versions = ", ".join(f"{d} {v}" for d, v in record["installed"].items())
    log.note(f"installed environment {name} into {prefix}: {versions}")
    return record


def top_level_modules(prefix: Path) -> list[str]:
    """The importable top-level names a prefix provides (``PIL`` for pillow): what must not be
    imported from elsewhere before the prefix is put on the path."""
    names = set()
    for entry in Path(prefix).iterdir():
        if entry.name.endswith((".dist-info", ".egg-info", ".data")) or entry.name in ("bin",):
            continue
        if entry.name.startswith(".") or entry.name == "__pycache__":
            continue
        if entry.is_dir() and ((entry / "__init__.py").exists() or any(entry.glob("*.py"))):
            names.add(entry.name)
        elif entry.suffix in (".py", ".so", ".pyd"):
            names.add(entry.name.split(".")[0])
    return sorted(names)


def _pip_version() -> str | None:
    try:
        return importlib.metadata.version("pip")
    except importlib.metadata.PackageNotFoundError:
        return None


def build_parser() -> argparse.ArgumentParser:
    parser = commands.Parser(
        prog="python -m nettebench builds environment",
        description="Install pinned packages from the registry into a prefix of their own.",
    )
    parser.add_argument("--name", required=True, help="the environment's name in the config")
    parser.add_argument("--prefix", required=True, type=Path, help="folder to install into")
    parser.add_argument("--manifest", required=True, type=Path, help="install.json to write")
    parser.add_argument(
        "--pip-arg", action="append", default=[], help="extra `pip install` argument (repeatable)"
    )
    parser.add_argument("--log", type=Path, default=None, help="append pip's output here")
    parser.add_argument("packages", nargs="+", metavar="PIN", help="name==version")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return commands.run(build_parser(), _install, argv, errors=(BuildError,))


def _install(args: argparse.Namespace) -> Iterator[str]:
    """The environment's line; a failure's line goes to its log too."""
    log = _Log(args.log)
    try:
        record = install(
            args.name, args.packages, args.prefix, args.manifest, log, pip_args=args.pip_arg
        )
    except BuildError as error:
        log.note(f"{commands.ERROR}{error}")
        raise
    versions = ", ".join(f"{d} {v}" for d, v in record["installed"].items())
    yield f"environment {args.name}: {versions} in {record['install_s']} s"


if __name__ == "__main__":  # run as python -m nettebench builds environment
    sys.exit(commands.moved(__spec__.name))
