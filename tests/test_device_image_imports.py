"""Every job runs where the H200's image lacks what the workflow's machine has, and where only
the jobs' role is installed.

The GPU machine has no jsonschema (nor its referencing, jsonschema-specifications, rpds-py),
efficientnet-pytorch, snakemake or pyperf (../shared/DEVICE.md): a job that imports one of them
fails there before it measures anything. And a job imports nothing of the workflow or the
report (issue 59): pyproject.toml's base install with the ``gpu`` extra, the jobs' role, brings
neither Snakemake nor pandas, matplotlib, seaborn or SciPy (tests/roles.py), so every module of
the installed distributions outside that role is blocked too. Here every Python the test starts
imports with those modules blocked (a ``sitecustomize`` on ``PYTHONPATH``, inherited by the
processes it starts, sets them to None in ``sys.modules``: ``import`` raises
ModuleNotFoundError, and ``importlib.util.find_spec`` answers None, as for a module not
installed, which torch's own probes for pandas and SciPy need), and the device command's own
smoke run (tests/device/run.py) drives the job entry points on tiny data: the GPU check's
stack, the dataset and store commands, a cell (trainer and ceiling in one job,
``nettebench.benchmarks.cell_job``: the first goal cell, at the smoke's sizes), a profile and an
inference process. Each must get to work: its case ``ok`` with its numbers read back,
not an import error; the cell's row holds what the device command reports of a goal cell.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import roles

REPO = Path(__file__).resolve().parents[1]
ABSENT_ON_THE_H200 = (
    "jsonschema",
    "referencing",
    "jsonschema_specifications",
    "rpds",
    "efficientnet_pytorch",
    "snakemake",
    "pyperf",
)
# The modules of every installed distribution outside the jobs' role.
JOBS_ROLE = roles.closure(roles.requirements(roles.JOBS))
OUTSIDE_THE_JOBS = roles.modules_outside(JOBS_ROLE)
BLOCKED = sorted({*ABSENT_ON_THE_H200, *OUTSIDE_THE_JOBS, *roles.WORKFLOW_AND_REPORT})
BLOCKER = f"""
import sys

# Absent on the H200, or outside the jobs' role: as if not installed (what is loaded already,
# by the interpreter's start, stays).
for name in {BLOCKED!r}:
    sys.modules.setdefault(name, None)
"""
HALTED = "None in sys.modules"  # what an import of a blocked module raises
# One of each job entry point, in the device command's plan order (its case names).
CELL = "resnet18-O1-cached-10ep"  # the first goal cell (O0 in a smoke run)
CASES = ("stack", "data", "store", CELL, "profile-O0", "inference-fp32")


def _blocked_env(folder: Path) -> dict[str, str]:
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(BLOCKER)
    path = os.pathsep.join([str(folder), str(REPO / "scripts")])
    return {**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1"}


def test_the_jobs_role_installs_nothing_of_the_workflow_or_the_report():
    """The premise: what pyproject.toml's jobs' role installs leaves out Snakemake, the config
    checker and the report's stack, so the blocker blocks them for that reason too."""
    assert not JOBS_ROLE & set(roles.WORKFLOW_AND_REPORT), sorted(JOBS_ROLE)
    assert {"torch", "torchvision", "numpy", "pillow", "nvidia-ml-py"} <= JOBS_ROLE
    assert set(roles.WORKFLOW_AND_REPORT) <= set(OUTSIDE_THE_JOBS)
    assert "torch" not in BLOCKED and "nettebench" not in BLOCKED


def test_the_blocker_blocks(tmp_path):
    """The test's own premise: under the blocker, importing each module fails, and a probe for
    it finds nothing (as torch's for pandas and SciPy), as for a module not installed."""
    env = _blocked_env(tmp_path / "block")
    for name in (*ABSENT_ON_THE_H200, *roles.WORKFLOW_AND_REPORT):
        probe = f"import importlib.util; assert importlib.util.find_spec({name!r}) is None"
        done = subprocess.run(
            [sys.executable, "-c", f"{probe}; import {name}"], env=env, capture_output=True,
            text=True,
        )  # fmt: skip
        assert done.returncode == 1 and HALTED in done.stderr, (name, done.stderr)


def test_every_job_gets_to_work_without_what_the_h200_lacks(tmp_path):
    # the jobs' role leaves out the workflow and the report (else they would not be blocked
    # for that reason: a jobs-only install would still bring them)
    assert set(roles.WORKFLOW_AND_REPORT) <= set(OUTSIDE_THE_JOBS), sorted(JOBS_ROLE)
    env = _blocked_env(tmp_path / "block")
    out, work = tmp_path / "out", tmp_path / "work"
    command = [sys.executable, str(REPO / "tests" / "device" / "run.py"), "--smoke"]
    command += ["--out", str(out), "--work", str(work), "--only", *CASES]
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=REPO)
    logs = "\n".join(
        f"--- {log.name}\n{log.read_text()[-1500:]}" for log in sorted(work.glob("logs/*"))
    )
    assert done.returncode == 0, done.stdout + done.stderr + logs
    rows = [json.loads(line) for line in (out / "cases.jsonl").read_text().splitlines()]
    assert [row["case"] for row in rows] == list(CASES)
    failed = {row["case"]: row["status"] for row in rows if not row["status"].startswith("ok")}
    assert not failed, f"{failed}\n{logs}"
    assert HALTED not in logs
    assert len([p for p in out.rglob("*") if p.is_file()]) <= 7
    cell = rows[CASES.index(CELL)]
    assert cell["result"] == "ok" and cell["wall_s"] > 0 and cell["goal"].startswith("n/a")
    # the goal cells' energy: measured, or "not measured: why" (no RAPL here), never 0
    assert cell["energy_source"] and (cell["energy_j"] is None or cell["energy_j"] > 0)
    assert (cell["j_per_img"] is None) == (cell["energy_j"] is None)
    phases = cell["startup"]["before_first_step"]  # the trainer's own phase marks
    assert {"imports", "key", "device_probe", "model", "store", "other"} <= set(phases)
    assert min(phases.values()) >= 0
    assert sum(phases.values()) == pytest.approx(cell["to_first_step_s"], abs=0.01)
    assert set(cell["startup"]["after_last_step"]) >= {"environment", "other"}
