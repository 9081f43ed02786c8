"""Prepare what the device command (tests/device/run.py) carries to the GPU machine, which
reaches no network: run it here, with any Python 3.11+ (the project's own virtual environment;
nothing beyond the standard library: no torch, pip, setuptools or wheel), then carry ``.vendor``.

``.vendor/`` gets NVIDIA apex 25.05 (../shared/vendor/apex-25.05-git.tar.gz, the last release
with apex.amp) as its Python-only wheel. That wheel holds what apex's ``setup.py`` puts in one
when no extension is built: the ``.py`` files of every package ``find_packages`` finds (a
folder with an ``__init__.py`` under a package, the excluded top-level names left out) and the
licence; it is written here as a zip with its ``.dist-info`` (PEP 427), because apex's
``setup.py`` imports torch before it decides anything. run.py's ``apex-wheel`` case installs
it into a folder of its own for the apex O1-O3 cells (their rows say which kernels apex had:
``python``, its fallback, unless the machine's image has amp_C).

A plain clone has no ``../shared/vendor``: then nothing is built, it says so, and the device
run's apex cases come back ``skipped`` (the rest of the run needs no carry). Nothing else
travels: every device job imports only what the H200's image holds (torch, torchvision, numpy,
pillow, pyyaml, ...; ../shared/DEVICE.md), which the device twin (tests/device/twin.sh)
checks. The folder goes into this checkout's git exclude file (it never belongs in a commit).
At the end it prints what it carries, its size (the device tool carries at most 64 MiB), the
device tool's ``carry`` list and timeout, and the command.

    python3 tests/device/prepare_carry.py
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path, PurePosixPath

REPO = Path(__file__).resolve().parents[2]
VENDORED_APEX = REPO.parent / "shared" / "vendor" / "apex-25.05-git.tar.gz"
CARRY = ".vendor"
CARRY_LIMIT = 64 * 2**20  # what the device tool carries, in all
COMMAND = (
    "set -o pipefail; PYTHONPATH=scripts python3 tests/device/run.py --out $OUT 2>&1 "
    "| tee $OUT/run.log"
)
# run.py stops every case by its 420 s deadline; its last case's kill grace and the last write
# of its table fit in the minute beyond it
TIMEOUT_S = 480
# apex 25.05's setup.py: name, version, install_requires, summary, find_packages' exclude
APEX_NAME, APEX_VERSION = "apex", "0.1"
APEX_REQUIRES = ("packaging>20.6",)
APEX_SUMMARY = "PyTorch Extensions written by NVIDIA"
APEX_EXCLUDE = {"build", "csrc", "include", "tests", "dist", "docs", "examples", "apex.egg-info"}


def package_files(names: list[str], top: str) -> dict[str, str]:
    """Wheel path -> tar member for the ``.py`` files of every package under ``top`` (a tar
    folder), found as setuptools' ``find_packages`` finds them: a folder is a package when it
    holds an ``__init__.py`` and so do the folders above it; excluded names are left out."""
    files = {name[len(top) :]: name for name in names if name.startswith(top)}
    inits = {str(PurePosixPath(path).parent) for path in files if path.endswith("/__init__.py")}

    def is_package(folder: PurePosixPath) -> bool:
        parts = folder.parts
        return all("/".join(parts[: i + 1]) in inits for i in range(len(parts)))

    found = {}
    for path, member in files.items():
        folder = PurePosixPath(path).parent
        wanted = path.endswith(".py") and folder.parts and is_package(folder)
        if wanted and ".".join(folder.parts) not in APEX_EXCLUDE:
            found[path] = member
    return found


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def vendor_apex(dest: Path, source: Path = VENDORED_APEX) -> Path:
    """apex's Python-only wheel from the vendored source tarball, with the standard library."""
    if not source.is_file():
        raise SystemExit(f"the vendored apex is not here: {source}")
    dest.mkdir(parents=True, exist_ok=True)
    info = f"{APEX_NAME}-{APEX_VERSION}.dist-info"
    wheel = dest / f"{APEX_NAME}-{APEX_VERSION}-py3-none-any.whl"
    with tarfile.open(source) as archive:
        members = {m.name: m for m in archive.getmembers() if m.isfile()}
        contents = {
            path: archive.extractfile(members[name]).read()
            for path, name in sorted(package_files(list(members), "apex/").items())
        }
        contents[f"{info}/licenses/LICENSE"] = archive.extractfile(members["apex/LICENSE"]).read()
    metadata = [
        "Metadata-Version: 2.1", f"Name: {APEX_NAME}", f"Version: {APEX_VERSION}",
        f"Summary: {APEX_SUMMARY}", "License-File: LICENSE",
        *(f"Requires-Dist: {r}" for r in APEX_REQUIRES),
    ]  # fmt: skip
    contents[f"{info}/METADATA"] = ("\n".join(metadata) + "\n\n").encode()
    contents[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: nettebench prepare_carry\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n\n"
    )
    contents[f"{info}/top_level.txt"] = f"{APEX_NAME}\n".encode()
    record = [_record_line(path, data) for path, data in contents.items()]
    contents[f"{info}/RECORD"] = ("\n".join([*record, f"{info}/RECORD,,"]) + "\n").encode()
    partial = wheel.with_name(f".{wheel.name}.part")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, data in contents.items():
            entry = zipfile.ZipInfo(path, date_time=(2025, 5, 1, 0, 0, 0))
            entry.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(entry, data)
    partial.replace(wheel)
    return wheel


def exclude(*paths: str) -> None:
    common = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--git-common-dir"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    exclude_file = (REPO / common).resolve() / "info" / "exclude"
    exclude_file.parent.mkdir(parents=True, exist_ok=True)
    lines = exclude_file.read_text().splitlines() if exclude_file.exists() else []
    with open(exclude_file, "a") as handle:
        for path in paths:
            if path not in lines:
                handle.write(path + "\n")


def carried(folder: Path) -> list[tuple[Path, int]]:
    return [(p, p.stat().st_size) for p in sorted(folder.rglob("*")) if p.is_file()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dest", default=str(REPO / CARRY), help="where the carry goes")
    args = parser.parse_args(argv)
    dest = Path(args.dest)
    if dest == REPO / CARRY and shutil.which("git"):
        exclude(f"/{CARRY}/")
    if VENDORED_APEX.is_file():
        vendor_apex(dest)
    else:
        print(f"no vendored apex at {VENDORED_APEX}: no apex wheel to carry, so the device "
              "run's apex cases will be skipped")  # fmt: skip
    files = carried(dest) if dest.is_dir() else []
    total = sum(size for _, size in files)
    print(f"carry {dest}: {len(files)} file(s), {total / 2**20:.2f} MiB in all "
          f"(the device tool carries at most {CARRY_LIMIT / 2**20:.0f} MiB)")  # fmt: skip
    for path, size in files:
        print(f"  {path.relative_to(dest)}: {size / 2**20:.2f} MiB")
    if total > CARRY_LIMIT:
        raise SystemExit(f"{dest} holds {total / 2**20:.1f} MiB, more than the device carries")
    listed = f'"{CARRY}"' if files else ""
    print(f"carry: [{listed}]  timeout_s: {TIMEOUT_S}")
    print(f"command: {COMMAND}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
