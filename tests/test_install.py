"""What the README's Quick start says is what installs: its two commands (``make quickstart``,
``make test``) and the Makefile's set-up from the lock of this Python (``envs/lock-py311.txt``,
``envs/lock-py312.txt``: every package pinned with its hashes, which the SLURM stage of
``.ci/run`` installs too), the Python the dependencies need, the package's lower bounds, the
CPU-only option, and the licence. tests/test_lock.py checks the locks against pyproject.toml."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import tomllib
from importlib.metadata import PackageNotFoundError, metadata, version
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from nettebench.records import lock
from nettebench.vocabulary.build_catalog import canonical_name

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
LOCK = ROOT / "envs" / f"lock-py{sys.version_info[0]}{sys.version_info[1]}.txt"
# The lock's pins (``name==version``; the hashes on the lines after each)
PINS = {
    Requirement(line.rstrip(" \\")).name: Requirement(line.rstrip(" \\"))
    for line in LOCK.read_text().splitlines()
    if line[:1].isalnum()
}
README = (ROOT / "README.md").read_text()


def quick_start() -> list[str]:
    """The Quick start's commands, read with the awk program ``.ci/run`` reads them with."""
    program = re.search(
        r"quickstart=\$\(awk '([^']+)' README\.md\)", (ROOT / ".ci/run").read_text()
    )
    assert program, ".ci/run no longer reads the Quick start with awk"
    result = subprocess.run(
        ["awk", program.group(1), "README.md"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return result.stdout.splitlines()


def make_dry_run(*args: str) -> list[str]:
    """The commands ``make`` would run (``-n``), set-up included, for a fresh ``.venv``."""
    result = subprocess.run(
        ["make", "-n", "--no-print-directory", "VENV=/fresh/venv", *args],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return [line.strip() for line in result.stdout.splitlines()]


def test_the_quick_start_is_two_commands_that_set_up_from_the_lock():
    assert quick_start() == ["make quickstart", "make test"]
    for target, last in (("quickstart", "snakemake"), ("test", "pytest")):
        commands = make_dry_run(target)
        venv = commands.index("python3 -m venv /fresh/venv")
        (locked,) = [c for c in commands if "--require-hashes" in c]
        assert re.fullmatch(
            r"/fresh/venv/bin/pip install --require-hashes -r envs/lock-py3\d+\.txt", locked
        )
        package = commands.index("/fresh/venv/bin/pip install --no-deps -e .")
        assert venv < commands.index(locked) < package  # the lock, then the package alone
        # the quick start ends by printing its answer (study/terminal_answer.py), wrapped
        ends = commands[-1]
        assert ends.split()[0] in (f"/fresh/venv/bin/{last}", "echo") or (
            target == "quickstart" and "print_answer" in ends
        ), commands
    assert make_dry_run("test")[-1] == "/fresh/venv/bin/pytest"


def test_the_quick_start_runs_then_writes_the_report_in_a_call_of_its_own():
    """The run, then ``--report``: the profile itself writes no report, so its ``-n`` cannot."""
    profile = (ROOT / "profiles" / "quickstart" / "config.yaml").read_text()
    assert "report-after-run:" not in profile and "\nreport:" not in profile
    runs = [c for c in make_dry_run("quickstart") if c.startswith("/fresh/venv/bin/snakemake")]
    assert runs == [
        "/fresh/venv/bin/snakemake --workflow-profile profiles/quickstart",
        "/fresh/venv/bin/snakemake --workflow-profile profiles/quickstart"
        " --report results/report.html",
    ]


def test_ci_and_the_device_suite_read_the_same_pins():
    slurm_stage = (ROOT / ".ci/run").read_text().split("slurm_venv")[-1]
    assert "--require-hashes -r envs/lock-py$py.txt -r envs/lock-py$py-slurm.txt" in slurm_stage
    assert "--require-hashes -r $(LOCK)" in (ROOT / "Makefile").read_text()
    # The device suite installs no registry package (the GPU machine reaches none and brings
    # its own torch): it builds only the vendored apex, with the standard library (no pip at
    # all), so it has no pin to disagree with.
    carry = (ROOT / "tests/device/prepare_carry.py").read_text()
    assert "pip download" not in carry and '"download"' not in carry
    assert "-m pip" not in carry and '"pip"' not in carry and "zipfile.ZipFile" in carry


def test_the_package_has_lower_bounds_and_the_pins_lie_within_them():
    """pyproject.toml holds lower bounds (a site's own torch build stays), the lock exact pins
    within them (every role against every lock: tests/test_lock.py)."""
    extras = [dep for role in PROJECT["optional-dependencies"].values() for dep in role]
    bounds = {
        Requirement(dep).name: Requirement(dep) for dep in [*PROJECT["dependencies"], *extras]
    }
    for name in ("torch", "torchvision"):
        assert not any(spec.operator == "==" for spec in bounds[name].specifier), bounds[name]
        assert any(spec.operator == ">=" for spec in bounds[name].specifier), bounds[name]
    assert {"torch", "torchvision", "snakemake"} <= set(PINS)
    for name, pin in PINS.items():
        (exact,) = pin.specifier
        assert exact.operator == "==", pin
        if name in bounds:
            assert Version(exact.version) in bounds[name].specifier, (pin, bounds[name])


def test_requires_python_is_what_the_pinned_dependencies_require():
    """The oldest Python the package claims is one every pinned dependency installs on."""
    claimed = SpecifierSet(PROJECT["requires-python"])
    releases = [f"3.{minor}.{patch}" for minor in range(8, 20) for patch in range(30)]
    oldest = str(min(Version(v) for v in releases if v in claimed))
    oldest = oldest.removesuffix(".0")  # "3.11" where the claim is a whole minor release
    for name in PINS:
        try:
            needs = metadata(name)["Requires-Python"]
        except PackageNotFoundError:
            continue
        if needs:
            assert Version(oldest) in SpecifierSet(needs), f"{name} needs Python {needs}"
    assert f"Python {oldest} or newer" in README


def test_ruff_targets_the_oldest_python_claimed():
    ruff = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]
    minor = ".".join(PROJECT["requires-python"].lstrip(">=").split(".")[:2])  # ruff: no patch
    assert ruff["target-version"] == "py" + minor.replace(".", "")


def cpu_install_line() -> str:
    """The pip line ``make quickstart TORCH_INDEX=...`` (the README's CPU-only install) runs."""
    (option,) = re.findall(r"^make quickstart (TORCH_INDEX=\S+/whl/cpu)$", README, re.M)
    (line,) = [c for c in make_dry_run("quickstart", option) if "--index-url" in c]
    return line.replace("/fresh/venv/bin/pip", "pip", 1)


def test_the_cpu_only_install_asks_for_the_pins():
    argv = shlex.split(cpu_install_line())
    assert {str(PINS["torch"]), str(PINS["torchvision"])} <= set(argv) and "--no-deps" in argv
    for name in ("torch", "torchvision"):
        # The CPU index's wheels carry a local label (2.14.1+cpu); the pin accepts it.
        (exact,) = PINS[name].specifier
        assert PINS[name].specifier.contains(f"{exact.version}+cpu")


def test_pip_accepts_the_cpu_only_line():
    """pip parses and resolves the line (a dry run, offline: only where the pinned versions are
    installed already, which pip then takes without asking the index)."""
    argv = shlex.split(cpu_install_line())
    for name, pin in PINS.items():
        if name in {"torch", "torchvision"}:
            try:
                installed = version(name)
            except PackageNotFoundError:
                pytest.skip(f"{name} is not installed")
            if installed not in pin.specifier:
                pytest.skip(f"{name} {installed} is not the pinned version: pip would download")
    result = subprocess.run(
        [sys.executable, "-m", *argv, "--dry-run", "-q"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "Would install" not in result.stdout, result.stdout


def test_pip_accepts_the_lock_as_the_set_up_installs_it(tmp_path):
    """pip reads the lock in hash-checking mode, and the rest of it the CPU-only set-up installs
    after torch (a dry run, offline: only where this environment has every pin installed, so
    pip asks no index)."""
    locked = {name: str(pin.specifier)[2:] for name, pin in PINS.items()}
    differ = lock.differences({canonical_name(n): v for n, v in locked.items()},
                              lock.installed_versions())  # fmt: skip
    if differ:
        pytest.skip(f"this environment is not the lock's: {differ[:3]}")
    made = subprocess.run(
        [sys.executable, "envs/lock.py", "without-torch", str(LOCK)],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    (tmp_path / "cpu.txt").write_text(made.stdout)
    for requirements in (LOCK, tmp_path / "cpu.txt"):
        result = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--dry-run", "-q", "--require-hashes",
             "-r", str(requirements)],
            cwd=ROOT, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert "Would install" not in result.stdout, result.stdout


def test_the_licence_is_named_in_the_metadata():
    assert PROJECT["license"] == "MIT" and PROJECT["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
