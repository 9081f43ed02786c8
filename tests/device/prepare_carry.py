"""Prepare what tests/device/pipeline_goals.py needs on the GPU machine, which reaches no network:
run it here, where pip reaches the registry, then carry the two folders it fills.

- ``.whl/``: Snakemake and everything it imports, as wheels for that machine's Python (3.12,
  x86-64 manylinux; --python-version to change it). Compiled ones come from the registry built
  for it; the few published only as source (connection_pool, ...) are built here into pure-Python
  wheels. The whole closure is carried, not only what the machine's image lacks, so Snakemake's
  version pins hold whatever that image has.
- ``.vendor/``: NVIDIA apex 25.05 (../shared/vendor/apex-25.05-git.tar.gz, the last release
  with apex.amp) and its Python-only wheel built from it, for when the machine has no git.

Both folders go into this checkout's git exclude file (they never belong in a commit). At the end
it prints the device tool's ``carry`` list and the command. ``--check`` builds the same closure
for this machine's Python into a fresh virtual environment with nothing else in it and runs
``snakemake --version`` and a dry run of the workflow there: a wheel missing from the closure
fails that check here instead of on the device.

    python3 tests/device/prepare_carry.py          # fills .whl/ and .vendor/, prints the call
    python3 tests/device/prepare_carry.py --check  # checks all that in temporary folders
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VENDORED_APEX = REPO.parent / "shared" / "vendor" / "apex-25.05-git.tar.gz"
SNAKEMAKE = re.search(r"^snakemake==\S+", (REPO / "envs/constraints.txt").read_text(), re.M)[0]
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "any")
_MISSING = re.compile(r"No matching distribution found for ([A-Za-z0-9_.\-]+)")


def pip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, "-m", "pip", *args], capture_output=True, text=True, check=False
    )
    if check and result.returncode:
        raise SystemExit(f"pip {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return result


def download_closure(dest: Path, python_version: str | None) -> list[str]:
    """Every wheel Snakemake needs into ``dest``, for ``python_version`` (None: this Python).

    Returns the packages that had to be built here from source (published without wheels)."""
    dest.mkdir(parents=True, exist_ok=True)
    target: list[str] = []
    if python_version:
        abi = "cp" + python_version.replace(".", "")
        target = ["--python-version", python_version, "--implementation", "cp"]
        target += ["--abi", abi, "--abi", "abi3", "--abi", "none"]
        for platform in PLATFORMS:
            target += ["--platform", platform]
    built = []
    with tempfile.TemporaryDirectory() as sources:
        for _ in range(20):  # one more source-only package per round
            result = pip(
                "download", "-q", "--only-binary=:all:", *target, "--find-links", str(dest),
                "-d", str(dest), SNAKEMAKE, check=False,
            )  # fmt: skip
            if result.returncode == 0:
                return built
            missing = _MISSING.search(result.stdout + result.stderr)
            if not missing:
                raise SystemExit(f"pip download failed:\n{result.stdout}\n{result.stderr}")
            name = missing.group(1)
            pip("download", "-q", "--no-deps", "--no-binary=:all:", "-d", sources, name)
            sdist = max(Path(sources).iterdir(), key=lambda path: path.stat().st_mtime)
            pip("wheel", "-q", "--no-deps", "-w", str(dest), str(sdist))
            wheel = max(dest.glob("*.whl"), key=lambda path: path.stat().st_mtime)
            if not wheel.name.endswith("-none-any.whl"):
                raise SystemExit(f"{name} has no wheel for the target and is not pure Python")
            built.append(wheel.name)
    raise SystemExit("gave up after 20 source-only packages")


def vendor_apex(dest: Path) -> None:
    """The vendored apex source and its Python-only wheel (a few seconds: no extensions)."""
    if not VENDORED_APEX.is_file():
        raise SystemExit(f"the vendored apex is not here: {VENDORED_APEX}")
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(VENDORED_APEX, dest / VENDORED_APEX.name)
    with tempfile.TemporaryDirectory() as work:
        with tarfile.open(VENDORED_APEX) as archive:
            archive.extractall(work, filter="data")
        pip("wheel", "-q", "--no-build-isolation", "--no-deps", "-w", str(dest), f"{work}/apex")


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


def check_closure() -> None:
    """The closure for this Python, alone in a fresh venv: snakemake runs and plans the workflow."""
    sys.path.insert(0, str(REPO))
    from tests.workflow_helpers import copy_workflow

    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        built = download_closure(work / "wheels", None)
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", work / "venv"], check=True)
        pip("install", "-q", "--no-index", "--no-deps", "--target", str(work / "site"),
            *map(str, (work / "wheels").glob("*.whl")))  # fmt: skip
        python = str(work / "venv" / "bin" / "python")
        env = {"PYTHONPATH": str(work / "site"), "PATH": "/usr/bin:/bin", "HOME": str(work)}
        version = subprocess.run(
            [python, "-m", "snakemake", "--version"], env=env, capture_output=True, text=True
        )
        workflow = copy_workflow(work / "wf")
        (workflow / "study.yaml").write_text(
            "datasets: {tiny: {synthetic: {size: 16}}}\nmatrix: {epochs: 1}\n"
        )
        dry = subprocess.run(
            [python, "-m", "snakemake", "-n", "--cores", "1", "--configfile", "study.yaml",
             "--replace-workflow-config"],
            cwd=workflow, env=env, capture_output=True, text=True,
        )  # fmt: skip
        wheels = len(list((work / "wheels").glob("*.whl")))
        print(f"check: {wheels} wheels ({len(built)} built from source: {', '.join(built)})")
        print(f"check: snakemake --version -> {version.stdout.strip() or version.stderr[-500:]}")
        planned = "cell_train" in dry.stdout + dry.stderr
        print(f"check: dry run of the workflow -> exit {dry.returncode}, plans cell_train: "
              f"{planned}")  # fmt: skip
        if version.returncode or dry.returncode or not planned:
            output = f"{version.stderr[-2000:]}\n{dry.stdout[-3000:]}\n{dry.stderr[-3000:]}"
            raise SystemExit(f"the closure is incomplete:\n{output}")


def _sizes(root: Path) -> None:
    for folder in (".whl", ".vendor"):
        files = list((root / folder).iterdir())
        size = sum(path.stat().st_size for path in files) / 2**20
        print(f"{folder}: {len(files)} files, {size:.1f} MiB")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--python-version", default="3.12", help="the GPU machine's Python")
    parser.add_argument(
        "--check",
        action="store_true",
        help="only check, in temporary folders: the closure for this Python runs the workflow's "
        "dry run, the one for --python-version resolves; the checkout is left alone",
    )
    args = parser.parse_args(argv)
    if args.check:
        check_closure()
        with tempfile.TemporaryDirectory() as work:
            root = Path(work)
            built = download_closure(root / ".whl", args.python_version)
            vendor_apex(root / ".vendor")
            _sizes(root)
        return 0
    exclude("/.whl/", "/.vendor/")
    built = download_closure(REPO / ".whl", args.python_version)
    vendor_apex(REPO / ".vendor")
    _sizes(REPO)
    if built:
        print("built here from source (pure Python):", ", ".join(built))
    print('carry: [".whl", ".vendor"]')
    print(
        "command: python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir "
        "--upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit; "
        "set -o pipefail; PYTHONPATH=/tmp/site:scripts python3 tests/device/pipeline_goals.py "
        "--out $OUT 2>&1 | tee $OUT/suite.log"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
