"""The locks agree with pyproject.toml, and a record names the lock it ran.

Every dependency of every role in pyproject.toml (the jobs' base install and the extras) is met
by a pin of each lock (envs/lock-py311.txt and envs/lock-py312.txt; the ``slurm`` extra by the
lock and its add-on), every pin carries hashes, and each lock's header records the digest of
the pyproject.toml fields it was compiled from: a dependency added, removed or moved in
pyproject.toml without ``make lock`` fails here, offline, in the normal suite. Then what
``envs/lock.py without-torch`` leaves for a CPU-only torch, the lock's name in a record
(:mod:`nettebench.records.lock`) and the machines table's note when setups ran different locks.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pandas as pd
import pytest
import record_factory as rf
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from nettebench.records import lock as record_lock
from nettebench.report import aggregate as agg
from tests import roles
from tests.test_env_files import pip_requirements

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = (ROOT / "pyproject.toml").read_text()
LOCKS = {"3.11": ROOT / "envs" / "lock-py311.txt", "3.12": ROOT / "envs" / "lock-py312.txt"}
SLURM = {v: p.with_name(p.stem + "-slurm.txt") for v, p in LOCKS.items()}
LOCKED_EXTRAS = ("gpu", "workflow", "report", "dev")  # what `make` installs, with the base


def _lock_module():
    spec = importlib.util.spec_from_file_location("envs_lock", ROOT / "envs" / "lock.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def locked(text: str) -> dict[str, tuple[str, int]]:
    """A lock's pins: canonical name -> (version, how many hashes follow it)."""
    found = {}
    for block in re.split(r"\n(?=[A-Za-z0-9])", text):
        first = block.splitlines()[0]
        if first.startswith("#") or "==" not in first:
            continue
        requirement = Requirement(first.rstrip(" \\"))
        (spec,) = requirement.specifier
        assert spec.operator == "==", first
        hashes = len(re.findall(r"--hash=sha256:[0-9a-f]{64}\b", block))
        found[canonicalize_name(requirement.name)] = (spec.version, hashes)
    return found


def disagreements(pyproject: str, locks: dict[str, str], add_ons: dict[str, str]) -> list[str]:
    """What keeps the locks (Python version -> text; the slurm add-ons likewise) from being
    pyproject.toml's, each as a line; none when they agree."""
    project = tomllib.loads(pyproject)["project"]
    fields = {k: project.get(k) for k in ("requires-python", "dependencies")}
    fields["optional-dependencies"] = project.get("optional-dependencies", {})
    digest = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()
    found = []
    for python, text in locks.items():
        add_on = add_ons[python]
        pins = locked(text)
        for name, (version, hashes) in {**pins, **locked(add_on)}.items():
            if hashes == 0:
                found.append(f"{python}: {name}=={version} has no hash")
        for extras, pinned in ((LOCKED_EXTRAS, pins), (("slurm",), {**pins, **locked(add_on)})):
            for requirement in roles.requirements(extras, project):
                environment = {"python_version": python, "python_full_version": f"{python}.4"}
                if requirement.marker and not requirement.marker.evaluate(environment):
                    continue
                name = canonicalize_name(requirement.name)
                version = pinned.get(name, (None,))[0]
                if version is None or version not in requirement.specifier:
                    found.append(f"{python}: {requirement} ({', '.join(extras)}) locked {version}")
        for name, body in (("lock", text), ("slurm add-on", add_on)):
            recorded = re.search(r"^# inputs: sha256 ([0-9a-f]{64}) ", body, re.M)
            if not recorded or recorded.group(1) != digest:
                found.append(f"{python}: the {name} was made from another pyproject.toml")
    return found


def test_pyproject_and_the_locks_agree():
    locks = {python: path.read_text() for python, path in LOCKS.items()}
    add_ons = {python: path.read_text() for python, path in SLURM.items()}
    assert disagreements(PYPROJECT, locks, add_ons) == [], "run `make lock`"
    for text in locks.values():  # the premise: the locks hold the stack, with CUDA's torch
        assert {"torch", "snakemake", "pandas", "scipy", "nvidia-ml-py", "uv"} <= set(locked(text))
    assert set(locked(add_ons["3.11"])) >= {"snakemake-executor-plugin-slurm"}
    assert not set(locked(add_ons["3.11"])) & set(locked(locks["3.11"]))  # only what it adds


@pytest.mark.parametrize(
    ("old", "new", "says"),
    [
        ('"numpy>=1.26"', '"numpy>=99"', "numpy>=99 (gpu, workflow, report, dev) locked 2."),
        ('"scipy>=1.11"', '"scipy>=1.11", "rich>=13"', "rich>=13 (gpu, workflow, report, dev)"),
        ("<10", "<9", "snakemake<9,>=9 (slurm) locked 9."),
        ('"tqdm>=4.66",', '"tqdm>=4.66",  # a comment', None),  # the same dependencies
    ],
)
def test_a_pyproject_changed_by_hand_disagrees_with_the_locks(old, new, says):
    assert old in PYPROJECT
    changed = PYPROJECT.replace(old, new, 1)
    locks = {python: path.read_text() for python, path in LOCKS.items()}
    add_ons = {python: path.read_text() for python, path in SLURM.items()}
    found = disagreements(changed, locks, add_ons)
    if says is None:
        assert found == []
        return
    assert any(says in line for line in found), found
    assert "3.11: the lock was made from another pyproject.toml" in found


def test_a_lock_changed_by_hand_disagrees_with_pyproject():
    locks = {python: path.read_text() for python, path in LOCKS.items()}
    add_ons = {python: path.read_text() for python, path in SLURM.items()}
    (pandas,) = [b for b in re.split(r"\n(?=[a-z])", locks["3.12"]) if b.startswith("pandas==")]
    no_pandas = locks["3.12"].replace(pandas + "\n", "")
    assert disagreements(PYPROJECT, {**locks, "3.12": no_pandas}, add_ons) == [
        "3.12: pandas>=2 (gpu, workflow, report, dev) locked None"
    ]
    unhashed = re.sub(r"(pandas==[\d.]+) \\\n(\s+--hash=\S+ \\\n)*\s+--hash=\S+", r"\1", pandas)
    assert "--hash" not in unhashed
    found = disagreements(
        PYPROJECT, {**locks, "3.11": locks["3.11"].replace(pandas, unhashed)}, add_ons
    )
    assert found == [f"3.11: pandas=={locked(pandas)['pandas'][0]} has no hash"]


def test_lock_py_records_the_digest_the_check_computes():
    """envs/lock.py writes the header this test reads: the same digest from its own code."""
    module = _lock_module()
    recorded = re.search(r"^# inputs: sha256 (\w+) ", LOCKS["3.11"].read_text(), re.M).group(1)
    assert module.inputs_digest(PYPROJECT) == recorded
    assert module.recorded_digest(LOCKS["3.11"].read_text()) == recorded


def test_without_torch_leaves_what_a_cpu_torch_needs():
    """A CPU-only torch (PyTorch's CPU index: no CUDA libraries among its requirements) gets the
    lock less torch, torchvision and CUDA's packages, which only the default wheel requires."""
    module = _lock_module()
    text = LOCKS["3.11"].read_text()
    # (torch 2.11.0+cpu's Requires-Dist, less its versions' details)
    cpu_torch = ["filelock", "typing-extensions>=4.10.0", "sympy>=1.13.3", "networkx>=2.5.1"]
    cpu_torch += ["setuptools<82"]
    cpu_torch += ["jinja2", "fsspec>=0.8.5", 'optree>=0.13.0; extra == "optree"', "numpy"]
    left = locked(module.without_torch(text, cpu_torch))
    gone = set(locked(text)) - set(left)
    assert {"torch", "torchvision", "triton", "nvidia-cublas", "nvidia-cudnn-cu13"} <= gone
    assert all(
        name in {"torch", "torchvision", "triton"} or name.startswith(("nvidia-", "cuda-"))
        for name in gone
    ), gone
    assert "nvidia-ml-py" in left  # the gpu extra's, not torch's
    assert {"sympy", "filelock", "numpy", "pillow", "snakemake"} <= set(left)
    # with the default (CUDA) torch's own requirements, only torch and torchvision go
    cuda_torch = importlib.metadata.requires("torch") + importlib.metadata.requires("torchvision")
    assert set(locked(text)) - set(locked(module.without_torch(text, cuda_torch))) == {
        "torch",
        "torchvision",
    }


def _installed(names: tuple[str, ...]) -> dict[str, str]:
    return {name: importlib.metadata.version(name) for name in names}


def test_a_record_names_the_lock_it_was_installed_from(tmp_path):
    assert record_lock.identity(tmp_path) == "none"  # no lock copied in: not installed from one
    versions = _installed(("numpy", "packaging", "pyyaml"))
    lines = [f"{n}=={v} \\\n    --hash=sha256:{'0' * 64}" for n, v in versions.items()]
    lines.append('colorama==0.0.1 ; python_version < "3.0"')  # a marker not true here: skipped
    text = "# a lock\n" + "\n".join(lines) + "\n"
    (tmp_path / "nettebench-lock.txt").write_text(text)
    expected = "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16]
    assert record_lock.identity(tmp_path) == expected
    # a package upgraded by hand after the set-up: named with the version installed
    moved = text.replace(f"numpy=={versions['numpy']}", "numpy==1.0.0")
    (tmp_path / "nettebench-lock.txt").write_text(moved)
    digest = hashlib.sha256(moved.encode()).hexdigest()[:16]
    assert record_lock.identity(tmp_path) == (
        f"sha256:{digest}, not as locked: numpy {versions['numpy']}"
    )


def test_a_local_label_meets_its_releases_pin():
    assert record_lock.differences({"torch": "2.14.1"}, {"torch": "2.14.1+cpu"}) == []
    assert record_lock.differences({"torch": "2.14.1"}, {"torch": "2.14.10"}) == ["torch 2.14.10"]
    assert record_lock.differences({"x": "1"}, {}) == ["x absent"]


def test_this_environment_reads_its_own_versions():
    """Versions read from dist-info folder names are importlib.metadata's (its METADATA)."""
    installed = record_lock.installed_versions()
    for name in ("numpy", "torch", "packaging", "pyyaml", "pillow"):
        assert installed[name] == importlib.metadata.version(name), name
    assert sys.prefix  # the prefix identity() reads by default


def _two_setups(root: Path, locks: tuple[str, str]) -> str:
    paths = []
    for gpu, seconds, name in (("Tesla T4", 1440.0, locks[0]), ("NVIDIA A100", 380.0, locks[1])):
        for seed in (0, 1):
            paths.append(
                rf.make_cell(
                    root / gpu, model="resnet50", precision="O1", batch_size=128, seed=seed,
                    time_for_epochs_s=seconds + seed, device_name=gpu,
                    env={"gpu_name": gpu, "lock": name},
                )
            )  # fmt: skip
    written = agg.aggregate(paths, root / "tables")
    assert set(pd.read_csv(written["runs"])["env_lock"]) == set(locks)
    return written["time_by_machine"].read_text()


def test_the_machines_table_says_when_setups_ran_different_locks(tmp_path):
    text = _two_setups(tmp_path / "two", ("sha256:aaaaaaaaaaaaaaaa", "sha256:bbbbbbbbbbbbbbbb"))
    assert "The setups ran different locks" in text
    assert "Tesla T4: sha256:aaaaaaaaaaaaaaaa" in text
    assert "NVIDIA A100: sha256:bbbbbbbbbbbbbbbb" in text
    same = _two_setups(tmp_path / "one", ("sha256:aaaaaaaaaaaaaaaa",) * 2)
    assert "different locks" not in same and "sha256:" not in same


def test_the_env_files_follow_the_roles_and_the_locks_pins():
    """envs/*.yaml (the rules' conda environments, Python 3.11) by role: the training rules'
    holds the jobs' role with the gpu extra, the report's the report's role without torch, and
    no job's (train, data, build) names the workflow's or the report's packages; a version an
    env file pins is the lock's."""

    def names(requirements) -> set[str]:
        return {canonicalize_name(Requirement(r).name) for r in requirements}

    wanted = {
        f: names(pip_requirements(ROOT / "envs" / f)) for f in ("train.yaml", "data.yaml",
                                                                 "build.yaml", "report.yaml")
    }  # fmt: skip
    role = {e: names(map(str, roles.requirements((e,)))) for e in ("gpu", "workflow", "report")}
    base = names(tomllib.loads(PYPROJECT)["project"]["dependencies"])
    assert role["gpu"] == base | {"nvidia-ml-py"} and (base | role["gpu"]) <= wanted["train.yaml"]
    assert role["report"] - base <= wanted["report.yaml"] and "torch" not in wanted["report.yaml"]
    others = (role["workflow"] | role["report"]) - base
    assert {"snakemake", "scipy", "pandas"} <= others
    for job in ("train.yaml", "data.yaml", "build.yaml"):
        assert not wanted[job] & others, (job, wanted[job] & others)
    pins = locked(LOCKS["3.11"].read_text())
    for env_file in wanted:
        for text in pip_requirements(ROOT / "envs" / env_file):
            requirement = Requirement(text)
            for spec in requirement.specifier:
                if spec.operator == "==":
                    assert pins[canonicalize_name(requirement.name)][0] == spec.version, text


def test_make_lock_refreshes_every_lock():
    """One documented command (docs/development.md): ``make lock`` compiles every lock the
    set-up and CI install, for both Pythons."""
    done = subprocess.run(
        ["make", "-n", "--no-print-directory", "VENV=/fresh/venv", "lock"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    last = done.stdout.strip().splitlines()[-1].strip()
    assert last == "/fresh/venv/bin/python envs/lock.py compile --uv /fresh/venv/bin/uv"
    module = _lock_module()
    made = {module.lock_path(p, a) for p in module.PYTHONS for a in (None, *module.ADD_ONS)}
    assert made == {*LOCKS.values(), *SLURM.values()}
    assert "make lock" in (ROOT / "docs" / "development.md").read_text()
