"""Every ``envs/*.yaml`` builds, and its rules' commands start in it: each env file's packages
installed with pip (there is no conda here) into a fresh virtual environment (no system site
packages, nothing of the project's venv), under the tested pins (the lock of this Python,
``envs/lock-py311.txt``: its ``name==version`` lines, as constraints),
then ``python -m <module> [<subcommand>] --help`` of every rule that names the env file, with
the project's ``scripts/`` on ``PYTHONPATH`` as the rules put it. A module a command imports
that its env file does not list fails here with its ModuleNotFoundError.

Slow (the train and build envs unpack torch, about 3 GB, from the local wheel index): marked
``envfiles`` and run by ``.ci/run``'s stage of its own (``NETTEBENCH_ENV_FILES=1``), skipped
elsewhere saying so; docs/development.md gives its cost.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest
import yaml

from nettebench.vocabulary.commands import GROUPS

ROOT = Path(__file__).resolve().parents[1]
ENVS = ROOT / "envs"
# conda packages that are not Python distributions pip installs (the interpreter, tools)
NOT_PIP = {"python", "pip", "git", "cxx-compiler", "ninja"}
# python -m nettebench <group> [<command>], the group a rule's own or {params.job}
COMMAND = re.compile(r"python3? -m nettebench ([a-z][\w-]*|\{params\.job\})(?: ([a-z][\w-]*))?")
BUILD = os.environ.get("NETTEBENCH_ENV_FILES") == "1"


def rule_commands() -> dict[str, set[tuple[str, ...]]]:
    """env file name -> the ``(nettebench, group, command...)`` its rules' shell commands start
    (``python -m`` those); ``{params.job}`` is each job rules/common.smk returns for it (the
    words after ``python -m nettebench``)."""
    common = (ROOT / "rules" / "common.smk").read_text()
    job = rf'return f"((?:{"|".join(GROUPS)}) [\w -]*?) ?(?:\{{|--|")'
    jobs = {tuple(words.split()) for words in re.findall(job, common)}
    found: dict[str, set[tuple[str, ...]]] = {}
    for path in sorted((ROOT / "rules").glob("*.smk")):
        for block in re.split(r"^rule ", path.read_text(), flags=re.M)[1:]:
            env = re.search(r'conda:\s*"\.\./envs/([\w.-]+\.yaml)"', block)
            for group, sub in COMMAND.findall(block):
                named = jobs if group == "{params.job}" else {(group, sub) if sub else (group,)}
                for words in named:
                    assert env, f"{path.name}: rule {block.split(':')[0]} names no env file"
                    found.setdefault(env.group(1), set()).add(("nettebench", *words))
    return found


def pip_requirements(env_file: Path) -> list[str]:
    """The env file's packages as pip requirements (conda's ``=`` pin as ``==``)."""
    spec = yaml.safe_load(env_file.read_text())
    wanted: list[str] = []
    for item in spec["dependencies"]:
        if isinstance(item, dict):
            wanted += item["pip"]
            continue
        name = re.split(r"[<>=!\s]", item, maxsplit=1)[0]
        if name not in NOT_PIP:
            wanted.append(re.sub(r"(?<![<>=!])=(?!=)", "==", item.split("#")[0].strip()))
    return wanted


def lock_pins(folder: Path) -> Path:
    """The lock's pins without their hashes, as a constraints file (a constraint with hashes
    turns on pip's hash checking, which an env file's unpinned names cannot pass)."""
    lock = ENVS / f"lock-py{sys.version_info[0]}{sys.version_info[1]}.txt"
    pins = [line.split()[0] for line in lock.read_text().splitlines() if line[:1].isalnum()]
    (folder / "pins.txt").write_text("\n".join(pins) + "\n")
    return folder / "pins.txt"


@pytest.fixture
def home(tmp_path):
    """Where the env file's venv goes, removed when the test ends, passed or failed: the train
    and build envs hold torch (about 6 GB each), and pytest keeps its last three runs' temporary
    directories, which filled CI's disk; a failure's message carries what went wrong."""
    home = tmp_path / "venv"
    yield home
    shutil.rmtree(home, ignore_errors=True)


@pytest.mark.envfiles
@pytest.mark.skipif(not BUILD, reason="builds envs with pip (minutes): NETTEBENCH_ENV_FILES=1")
@pytest.mark.parametrize("env_file", sorted(p.name for p in ENVS.glob("*.yaml")))
def test_an_env_file_builds_and_its_rules_commands_start(env_file, home, tmp_path):
    venv.create(home, with_pip=True)  # fresh: no system site packages
    python = home / "bin" / "python"
    install = [str(python), "-m", "pip", "install", "-q", "-c", str(lock_pins(tmp_path)),
               *pip_requirements(ENVS / env_file)]  # fmt: skip
    subprocess.run(install, check=True, timeout=1200)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "scripts")}
    env.pop("VIRTUAL_ENV", None)
    commands = rule_commands()
    assert ("nettebench", "benchmarks", "cell-job") in commands["train.yaml"]  # the premise
    failed = []
    for command in sorted(commands[env_file]):  # every env file is some rule's
        done = subprocess.run(
            [str(python), "-m", *command, "--help"], env=env, cwd=tmp_path,
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        if done.returncode != 0:
            failed.append(f"{' '.join(command)}: {done.stderr.strip().splitlines()[-1:]}")
    assert not failed, f"{env_file} lacks what its commands import: {failed}"
