"""Source builds without Snakemake: clone, wheel and install against real local git
repositories, the errors a user can act on, the config's `builds:` plans, and a build put to use
by a fresh Python process (what the trainer does)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from nettebench.builds import activate as libraries
from nettebench.study import builds as build_plans
from nettebench.study import schema
from nettebench.study.crossing import ConfigError
from nettebench.study.grid import expand
from nettebench.vocabulary.cell import CellSpec
from tests.library_repos import commit_all, make_package_repo
from tests.stages import builds_stage
from tests.workflow_helpers import REPO

pytestmark = builds_stage("builds libraries from local git repositories")

SCRIPTS = REPO / "scripts"


def run_steps(repo: Path, ref: str, out: Path, *, library: str = "apex", build: str = "b"):
    """clone, wheel and install through the CLI, as the rules call them; (exit codes, stderr)."""
    base = out / library / build
    steps = [
        ["clone", "--library", library, "--build", build, "--repo", str(repo), "--ref", ref]
        + ["--src", base / "src", "--manifest", base / "source.json"],
        ["wheel", "--src", base / "src", "--source", base / "source.json"]
        + ["--out-dir", base / "wheel", "--manifest", base / "wheel.json", "--jobs", "2"],
        ["install", "--wheel-manifest", base / "wheel.json", "--wheel-dir", base / "wheel"]
        + ["--prefix", base / "prefix", "--manifest", base / "install.json"],
    ]
    codes, errors = [], []
    for step, log in zip(steps, ("clone", "build", "install"), strict=True):
        result = subprocess.run(
            [sys.executable, "-m", "nettebench", "builds", *map(str, step)]
            + ["--log", str(out / f"{log}.log")],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(SCRIPTS)},
        )
        codes.append(result.returncode)
        errors.append(result.stderr)
        if result.returncode:
            break
    return codes, errors


@pytest.fixture(scope="module")
def tagged_build(tmp_path_factory):
    """The tag v0.1 of a package repository cloned, wheeled and installed as build ``b``, after
    its branch moved on to 0.2: (folder, the tag's commit, the branch's commit, exit codes)."""
    root = tmp_path_factory.mktemp("tagged")
    first = make_package_repo(root / "repo", version="0.1")
    (root / "repo" / "apex" / "__init__.py").write_text("__version__ = '0.2'\n")
    second = commit_all(root / "repo", "0.2")  # the branch moved on; the tag did not
    codes, _ = run_steps(root / "repo", "v0.1", root / "builds")
    return root, first, second, codes


def test_clone_build_install_records_the_commit_at_every_step(tagged_build):
    tmp_path, first, second, codes = tagged_build
    assert codes == [0, 0, 0]
    base = tmp_path / "builds" / "apex" / "b"
    source = json.loads((base / "source.json").read_text())
    assert (source["commit"], source["ref"], source["shallow"]) == (first, "v0.1", True)
    wheel = json.loads((base / "wheel.json").read_text())
    assert wheel["commit"] == first and wheel["wheel"] == "apex-0.1-py3-none-any.whl"
    assert wheel["torch"]  # built against the installed torch, recorded
    installed = json.loads((base / "install.json").read_text())
    assert installed["version"] == "0.1" and installed["commit"] == first
    assert json.loads((base / "prefix" / libraries.BUILD_MANIFEST).read_text()) == installed
    assert (base / "prefix" / "apex" / "amp" / "__init__.py").is_file()
    assert not list(base.glob(".*tmp-*")), "temporary folders left behind"
    # A branch resolves to its current commit; an abbreviated commit works too.
    codes, _ = run_steps(tmp_path / "repo", "main", tmp_path / "branch")
    source = json.loads((tmp_path / "branch" / "apex" / "b" / "source.json").read_text())
    assert codes == [0, 0, 0] and source["commit"] == second
    codes, _ = run_steps(tmp_path / "repo", first[:9], tmp_path / "short")
    source = json.loads((tmp_path / "short" / "apex" / "b" / "source.json").read_text())
    assert codes == [0, 0, 0] and source["commit"] == first


def test_a_bad_ref_names_the_refs_the_repository_has(tmp_path):
    make_package_repo(tmp_path / "repo")
    codes, errors = run_steps(tmp_path / "repo", "v9.9", tmp_path / "builds")
    assert codes == [1]
    assert "ref 'v9.9' is not a branch, tag or commit" in errors[0]
    assert "Branches: main; tags: v0.1" in errors[0]
    assert "v9.9" in (tmp_path / "builds" / "clone.log").read_text()
    assert not (tmp_path / "builds" / "apex" / "b" / "src").exists()
    assert not list((tmp_path / "builds" / "apex" / "b").glob(".*"))


def test_an_unreachable_repository_points_to_a_local_clone(tmp_path):
    # Port 9 (discard) on the loopback: nothing listens, as for a machine without network.
    codes, errors = run_steps("https://127.0.0.1:9/NVIDIA/apex", "24.04.01", tmp_path)
    assert codes == [1]
    assert "cannot reach https://127.0.0.1:9/NVIDIA/apex" in errors[0]
    assert "git clone https://127.0.0.1:9/NVIDIA/apex /path/to/clone" in errors[0]
    assert "`repo:`" in errors[0]


def test_a_failed_compile_shows_the_compiler_and_installs_nothing(tmp_path):
    make_package_repo(tmp_path / "repo", broken_extension=True)
    codes, errors = run_steps(tmp_path / "repo", "v0.1", tmp_path / "builds")
    assert codes == [0, 1]
    # The compiler's own complaint, in the error and in the log.
    assert "broken.c:2" in errors[1] and "error" in errors[1]
    assert "nothing was installed" in errors[1]
    log = (tmp_path / "builds" / "build.log").read_text()
    assert "broken.c:2" in log and "error: building apex b" in log
    base = tmp_path / "builds" / "apex" / "b"
    assert sorted(p.name for p in base.iterdir()) == ["source.json", "src"]


def test_a_wheel_without_the_library_package_is_refused(tmp_path):
    make_package_repo(tmp_path / "repo", package="notapex")
    codes, errors = run_steps(tmp_path / "repo", "v0.1", tmp_path / "builds")
    assert codes == [0, 0, 1]
    assert "provides no `apex` package (it has: notapex)" in errors[2]
    assert not (tmp_path / "builds" / "apex" / "b" / "prefix").exists()


def test_a_fresh_process_imports_the_build_a_cell_names_and_records_it(tagged_build):
    tmp_path, commit, _, codes = tagged_build
    assert codes == [0, 0, 0]
    code = (
        "import json, subprocess, sys\n"
        "from nettebench.builds import activate as libraries\n"
        "from nettebench.records import environment\n"
        "from nettebench.vocabulary.cell import CellSpec\n"
        f"libraries.activate(CellSpec(dataset='d', apex='b'), {str(tmp_path / 'builds')!r})\n"
        "import apex.amp\n"
        "child = subprocess.run([sys.executable, '-c', 'import apex; print(apex.__file__)'],"
        " capture_output=True, text=True).stdout.strip()\n"
        "env = environment.library_builds()\n"
        "print(json.dumps({'file': apex.__file__, 'child': child, **env}))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(SCRIPTS)},
    )
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    prefix = str((tmp_path / "builds" / "apex" / "b" / "prefix").resolve())
    assert seen["file"].startswith(prefix) and seen["child"].startswith(prefix)
    assert (seen["apex_build"], seen["apex_commit"]) == ("b", commit)


def test_activation_refuses_a_missing_build_or_one_built_for_another_torch(tmp_path):
    cell = CellSpec(dataset="d", torchvision="nope")
    with pytest.raises(libraries.LibraryError, match="build 'nope' is not installed at"):
        libraries.activate(cell, tmp_path)
    prefix = libraries.prefix_dir(tmp_path, "torchvision", "old")
    prefix.mkdir(parents=True)
    manifest = {"build": "old", "torch": "1.0.1"}
    (prefix / libraries.BUILD_MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(libraries.LibraryError, match="built against torch 1.0.1"):
        libraries.activate(CellSpec(dataset="d", torchvision="old"), tmp_path)
    assert libraries.activate(CellSpec(dataset="d"), tmp_path) == {}  # installed: nothing to do


def test_plans_default_to_the_official_repositories_and_check_names(tmp_path):
    plans = build_plans.plan_builds(
        {
            "torchvision": {"v0.29.1": {"ref": "v0.29.1", "env": {"FORCE_CUDA": 0}}},
            "apex": {"mine": {"repo": str(tmp_path), "ref": "24.04.01", "pip_args": ["-v"]}},
        }
    )
    official = plans["torchvision"]["v0.29.1"]
    assert official.repo == "https://github.com/pytorch/vision" and official.remote
    assert official.env == (("FORCE_CUDA", "0"),)
    assert official.install_manifest == "results/builds/torchvision/v0.29.1/install.json"
    assert plans["apex"]["mine"].repo == str(tmp_path.resolve())
    assert build_plans.build_names(plans) == {
        "torchvision": ["installed", "v0.29.1"],
        "apex": ["installed", "mine"],
    }
    with pytest.raises(ConfigError, match="neither a URL nor"):  # on disk: the plan's rule
        build_plans.plan_builds({"apex": {"x": {"repo": str(tmp_path / "no"), "ref": "m"}}})
    # each key's own rule is the schema's; its sentences read whole
    named = (
        "a name of letters, digits and . _ + - other than 'installed' (it is part of result paths)"
    )
    bad = [
        (
            {"torchaudio": {"x": {"ref": "main"}}},
            "builds: unknown key(s) torchaudio; allowed: torchvision, apex",
        ),
        (
            {"torchvision": {"installed": {"ref": "main"}}},
            f"builds.torchvision: 'installed' is not allowed; allowed: {named}",
        ),
        (
            {"torchvision": {"a/b": {"ref": "main"}}},
            f"builds.torchvision: 'a/b' is not allowed; allowed: {named}",
        ),
        ({"torchvision": {"x": {"repo": "r"}}}, "builds.torchvision.x: 'ref' is missing"),
    ]
    for section, message in bad:
        problem = schema.schema_problem(
            {"datasets": {"d": None}, "matrix": {}, "builds": section}, schema.load_schema()
        )
        assert problem == message


def test_cells_name_installed_or_a_configured_build():
    allowed = {"torchvision": ["installed", "v0.29.1"], "apex": ["installed"]}
    cells = expand(
        {"torchvision": ["installed", "v0.29.1"]}, section="m", datasets=["d"], builds=allowed
    )
    assert [c.path().split("/")[-1] for c in cells] == ["seed~0", "torchvision~v0.29.1"]
    with pytest.raises(ConfigError, match=r"matrix.torchvision: 'v0.30' is not allowed.*v0.29.1"):
        expand({"torchvision": "v0.30"}, section="matrix", datasets=["d"], builds=allowed)
    with pytest.raises(ConfigError, match="builds.apex"):
        expand({"apex": "24.04"}, section="matrix", datasets=["d"])


def test_the_build_environment_has_the_trainers_torch():
    """A wheel is compiled against the torch the trainer imports: the two envs pin the same."""

    def torch_pin(name):
        env = yaml.safe_load((REPO / "envs" / name).read_text())
        pips = [d["pip"] for d in env["dependencies"] if isinstance(d, dict)]
        return [p for p in pips[0] if p.startswith("torch==")]

    assert torch_pin("build.yaml") == torch_pin("train.yaml") != []
