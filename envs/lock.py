"""The locks of the tested stack: every package `make` installs, pinned, with its hashes.

    python3 envs/lock.py compile --uv .venv/bin/uv      # `make lock`: refresh the locks
    .venv/bin/python envs/lock.py without-torch LOCK    # `make TORCH_INDEX=...`: see below

One lock per Python (envs/lock-py311.txt, envs/lock-py312.txt: CPython on Linux x86-64,
manylinux_2_28), compiled by uv from pyproject.toml's dependencies and its extras ``gpu``,
``workflow``, ``report`` and ``dev`` (what the quick start and the suite need), and an add-on
per Python for the ``slurm`` extra (envs/lock-py311-slurm.txt: only what it adds, at versions
compiled together with the lock's). A refresh keeps every pin the lock already has where
pyproject.toml still allows it (uv reads the old file as its preferences); ``--upgrade`` moves
every package to its newest allowed release. Each lock's header records a digest of the
pyproject.toml fields it was compiled from (:func:`inputs_digest`), so a test fails when the
two disagree (tests/test_lock.py).

``without-torch`` is the lock less what a CPU-only torch does not need: torch and torchvision
themselves (installed by the Makefile from ``TORCH_INDEX``, at the lock's versions) and the
packages the lock has only because torch's default wheel requires them (CUDA's libraries,
triton) where the torch installed in this environment (the running Python's) does not.
Standard library only: it runs before anything is installed.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.metadata
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHONS = ("3.11", "3.12")
PLATFORM = "x86_64-manylinux_2_28"
EXTRAS = ("gpu", "workflow", "report", "dev")  # `make`: every role but slurm
ADD_ONS = {"slurm": ("slurm",)}  # envs/lock-pyXY-<name>.txt: what these extras add
INPUTS_LINE = "# inputs: sha256 {digest} of pyproject.toml's requires-python and dependencies"
INPUTS = re.compile(r"^# inputs: sha256 ([0-9a-f]{64}) ", re.M)
TORCH = ("torch", "torchvision")


def lock_path(python: str, add_on: str | None = None) -> Path:
    """envs/lock-py311.txt for ``3.11``; envs/lock-py311-slurm.txt for its slurm add-on."""
    suffix = f"-{add_on}" if add_on else ""
    return ROOT / "envs" / f"lock-py{python.replace('.', '')}{suffix}.txt"


def inputs_digest(pyproject: str) -> str:
    """The sha256 of what a lock is compiled from: pyproject.toml's ``requires-python``,
    ``dependencies`` and ``optional-dependencies`` (as JSON, keys sorted), so a comment or a
    tool's setting changed there leaves the lock current."""
    project = tomllib.loads(pyproject)["project"]
    fields = {k: project.get(k) for k in ("requires-python", "dependencies")}
    fields["optional-dependencies"] = project.get("optional-dependencies", {})
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()


def recorded_digest(lock: str) -> str | None:
    """The inputs digest a lock's header records (None: none recorded)."""
    found = INPUTS.search(lock)
    return found.group(1) if found else None


def normalize(name: str) -> str:
    """A distribution's name as PEP 503 compares it."""
    return re.sub(r"[-_.]+", "-", name).lower()


def blocks(lock: str) -> list[tuple[str, str, list[str]]]:
    """Each requirement of a lock: (normalized name, its text with hashes and comments, the
    names uv's ``# via`` lines give)."""
    found: list[tuple[str, str, list[str]]] = []
    for chunk in re.split(r"\n(?=[A-Za-z0-9])", lock):
        head = chunk.split("==", 1)[0]
        if chunk.startswith("#") or "==" not in chunk or " " in head:
            continue
        # "# via torch", or "# via" then "#   torch" lines; "nettebench (pyproject.toml)"
        via = re.findall(r"^\s+#(?:\s+via)?\s+([A-Za-z0-9][\w.-]*)(?: \(.*\))?\s*$", chunk, re.M)
        via = [normalize(v) for v in via if v != "via"]
        found.append((normalize(head), chunk.rstrip("\n"), via))
    return found


def _compile(uv: str, python: str, extras: tuple[str, ...], out: Path, upgrade: bool) -> None:
    command = [uv, "pip", "compile", "pyproject.toml", "--generate-hashes", "--quiet"]
    command += ["--python-version", python, "--python-platform", PLATFORM, "--no-header"]
    command += [arg for extra in extras for arg in ("--extra", extra)]
    command += ["--output-file", str(out), *(["--upgrade"] if upgrade else [])]
    subprocess.run(command, cwd=ROOT, check=True)


def _header(python: str, what: str, digest: str) -> str:
    return (
        f"# The tested stack for CPython {python} on Linux x86-64 ({PLATFORM}): {what}.\n"
        "# Made by `make lock` (envs/lock.py, uv); installed by `make` with pip --require-hashes.\n"
        f"{INPUTS_LINE.format(digest=digest)}\n"
    )


def compile_locks(uv: str, upgrade: bool = False) -> list[Path]:
    """Writes every lock (see the module docstring) and returns their paths."""
    digest = inputs_digest((ROOT / "pyproject.toml").read_text())
    written = []
    for python in PYTHONS:
        path = lock_path(python)
        # uv keeps the pins of the file it writes to (the old lock) where it can
        _compile(uv, python, EXTRAS, path, upgrade)
        what = f"pyproject.toml with the extras {', '.join(EXTRAS)}"
        path.write_text(_header(python, what, digest) + path.read_text())
        written.append(path)
        base = {name for name, _, _ in blocks(path.read_text())}
        for add_on, extras in ADD_ONS.items():
            full = path.with_name(f".{path.stem}-{add_on}-full.txt")
            full.write_text(path.read_text())  # the lock's pins first: the add-on agrees with them
            try:
                _compile(uv, python, (*EXTRAS, *extras), full, upgrade=False)
                added = [text for name, text, _ in blocks(full.read_text()) if name not in base]
            finally:
                full.unlink(missing_ok=True)
            what = f"what the extra {', '.join(extras)} adds to {path.name} (install both)"
            target = lock_path(python, add_on)
            target.write_text(_header(python, what, digest) + "\n".join(added) + "\n")
            written.append(target)
    return written


def installed_torch_requires() -> list[str]:
    """What the torch and torchvision installed here require (their Requires-Dist)."""
    requires: list[str] = []
    for name in TORCH:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            requires += importlib.metadata.requires(name) or []
    return requires


def without_torch(lock: str, torch_requires: list[str]) -> str:
    """The lock less torch, torchvision and what only they need, unless ``torch_requires`` (the
    installed torch's and torchvision's Requires-Dist) names it (see the module docstring)."""
    needed = {normalize(re.split(r"[\s;<>=!~\[(]", r, maxsplit=1)[0]) for r in torch_requires}
    entries = blocks(lock)
    dropped = set(TORCH)
    changed = True
    while changed:  # what only dropped packages need, unless the installed torch needs it
        changed = False
        for name, _, via in entries:
            if name not in dropped and name not in needed and via and set(via) <= dropped:
                dropped.add(name)
                changed = True
    kept = [text for name, text, _ in entries if name not in dropped]
    header = "".join(line + "\n" for line in lock.splitlines() if line.startswith("# "))[:2000]
    note = f"# less {', '.join(sorted(dropped))}: torch and torchvision from TORCH_INDEX\n"
    return header + note + "\n".join(kept) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    compile_ = commands.add_parser("compile", help="refresh the locks (make lock)")
    compile_.add_argument("--uv", default="uv", help="the uv to compile with")
    compile_.add_argument("--upgrade", action="store_true", help="newest allowed releases")
    cpu = commands.add_parser("without-torch", help="the lock less torch's own (TORCH_INDEX)")
    cpu.add_argument("lock", type=Path)
    args = parser.parse_args(argv)
    if args.command == "compile":
        for path in compile_locks(args.uv, args.upgrade):
            print(f"lock: {path.relative_to(ROOT)}")
    else:
        sys.stdout.write(without_torch(args.lock.read_text(), installed_torch_requires()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
