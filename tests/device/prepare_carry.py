"""Prepare what the device command (tests/device/run.py) carries to the GPU machine, which
reaches no network: run it here, then carry ``.vendor``.

``.vendor/`` gets NVIDIA apex 25.05 (../shared/vendor/apex-25.05-git.tar.gz, the last release
with apex.amp) as the Python-only wheel built from it; run.py's ``apex-wheel`` case installs it
into a folder of its own for the apex O1-O3 cells (their table rows say which kernels apex had:
``python``, its fallback, unless the machine's image has amp_C). The folder goes into this
checkout's git exclude file (it never belongs in a commit). At the end it prints the device
tool's ``carry`` list and the command.

    python3 tests/device/prepare_carry.py
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VENDORED_APEX = REPO.parent / "shared" / "vendor" / "apex-25.05-git.tar.gz"
COMMAND = (
    "set -o pipefail; PYTHONPATH=scripts python3 tests/device/run.py --out $OUT 2>&1 "
    "| tee $OUT/run.log"
)


def vendor_apex(dest: Path) -> Path:
    """apex's Python-only wheel built from the vendored source (a few seconds: no extensions)."""
    if not VENDORED_APEX.is_file():
        raise SystemExit(f"the vendored apex is not here: {VENDORED_APEX}")
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        with tarfile.open(VENDORED_APEX) as archive:
            archive.extractall(work, filter="data")
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps",
             "-w", str(dest), f"{work}/apex"],
            check=True,
        )  # fmt: skip
    return max(dest.glob("apex-*.whl"), key=lambda path: path.stat().st_mtime)


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


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__).parse_args(argv)
    if shutil.which("git"):
        exclude("/.vendor/")
    wheel = vendor_apex(REPO / ".vendor")
    print(f"{wheel.relative_to(REPO)}: {wheel.stat().st_size / 2**20:.1f} MiB")
    print('carry: [".vendor"]  timeout_s: 590')
    print(f"command: {COMMAND}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
