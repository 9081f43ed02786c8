"""``builds: apex: NAME: {extensions: true}``: apex's C++/CUDA extensions (amp_C, as the
study's apex had) as a build option, and which kernels a cell's apex has, in its record and in
the tables. The build itself needs nvcc (tests/device); here: the option reaches apex's
setup.py the way apex reads it, from its argv."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from nettebench.records import environment
from nettebench.report.grids import APEX_FALLBACK, mark_apex_fallback
from nettebench.study import builds as build_plans
from nettebench.study.crossing import ConfigError
from nettebench.vocabulary.build_catalog import APEX_EXTENSION_ARGS
from tests import vendored_apex
from tests.library_repos import commit_all
from tests.workflow_helpers import REPO

# The part of apex's setup.py that decides what it builds (25.05: `if "--cpp_ext" in sys.argv`).
_SETUP = """\
import json, sys
from setuptools import setup
flags = [flag for flag in ("--cpp_ext", "--cuda_ext") if flag in sys.argv]
for flag in flags:
    sys.argv.remove(flag)
with open({seen!r}, "a") as seen:
    seen.write(json.dumps(flags) + "\\n")
setup(name="apex", version="0.1", packages=["apex", "apex.amp"])
"""


def test_extensions_true_asks_apexs_setup_for_both_extensions(tmp_path):
    plans = build_plans.plan_builds(
        {
            "apex": {
                "ext": {
                    "repo": str(tmp_path),
                    "ref": "25.05",
                    "extensions": True,
                    "pip_args": ["-v"],
                }
            }
        }  # fmt: skip
    )
    assert plans["apex"]["ext"].pip_args == (*APEX_EXTENSION_ARGS, "-v")
    plain = build_plans.plan_builds({"apex": {"py": {"repo": str(tmp_path), "ref": "25.05"}}})
    assert plain["apex"]["py"].pip_args == ()
    with pytest.raises(ConfigError, match="torchvision has no optional extensions"):
        build_plans.plan_builds({"torchvision": {"x": {"ref": "main", "extensions": True}}})


def test_the_extension_options_reach_apexs_setup_argv_through_the_wheel_step(tmp_path):
    repo, seen = tmp_path / "apex-src", tmp_path / "seen.jsonl"
    (repo / "apex" / "amp").mkdir(parents=True)
    (repo / "apex" / "__init__.py").write_text("")
    (repo / "apex" / "amp" / "__init__.py").write_text("")
    (repo / "setup.py").write_text(_SETUP.format(seen=str(seen)))
    commit_all(repo, "apex-shaped", tag="25.05")
    plan = build_plans.plan_builds(
        {"apex": {"ext": {"repo": str(repo), "ref": "25.05", "extensions": True}}}
    )["apex"]["ext"]
    base = tmp_path / "build"
    env = {**os.environ, "PYTHONPATH": str(REPO / "scripts")}

    def step(*args: str) -> None:
        command = [sys.executable, "-m", "nettebench", "builds", *args]
        subprocess.run([*command, "--log", str(tmp_path / "log")], check=True, env=env)

    step("clone", "--library", "apex", "--build", "ext", "--repo", str(repo), "--ref", "25.05",
         "--src", str(base / "src"), "--manifest", str(base / "source.json"))  # fmt: skip
    step(
        "wheel",
        "--src",
        str(base / "src"),
        "--source",
        str(base / "source.json"),
        "--out-dir",
        str(base / "wheel"),
        "--manifest",
        str(base / "wheel.json"),
        *(f"--pip-arg={arg}" for arg in plan.pip_args),
    )  # fmt: skip, as rules/common.smk
    runs = [json.loads(line) for line in seen.read_text().splitlines()]
    assert ["--cpp_ext", "--cuda_ext"] in runs  # the run that built the wheel saw both
    wheel = json.loads((base / "wheel.json").read_text())
    assert wheel["pip_args"] == list(APEX_EXTENSION_ARGS)


def test_a_python_only_apex_is_recorded_as_such(tmp_path, monkeypatch):
    """The vendored apex, Python-only as the default build makes it: no amp_C."""
    if not vendored_apex.VENDORED_APEX.is_file():
        pytest.skip(f"the vendored apex source is not here: {vendored_apex.VENDORED_APEX}")
    monkeypatch.setitem(sys.modules, "amp_C", None)  # an amp_C elsewhere on the path: hidden
    source = vendored_apex.extract(tmp_path)
    monkeypatch.syspath_prepend(str(source))
    assert environment.apex_kernels() == "python"
    monkeypatch.setitem(sys.modules, "apex", None)
    assert environment.apex_kernels() is None


def test_tables_say_which_apex_cells_ran_apexs_python_fallback():
    table = pd.DataFrame(
        {
            "amp_backend": ["native", "apex", "apex"],
            "env_apex_kernels": ["python", "python", "amp_C"],
        }
    )
    labels = mark_apex_fallback(table, pd.Series(["resnet18"] * 3))
    assert list(labels) == ["resnet18", f"resnet18 [{APEX_FALLBACK}]", "resnet18"]
    older = pd.DataFrame({"amp_backend": ["apex"]})  # records from before the column: unmarked
    assert list(mark_apex_fallback(older, pd.Series(["resnet18"]))) == ["resnet18"]


def test_the_docs_document_the_option():
    text = (REPO / "docs" / "library-versions.md").read_text()
    assert "extensions: true" in text and "amp_C" in text
