"""Package environments: real pins installed from the registry into a prefix, put first on a
cell's import path, recorded; a cell command that had imported a pinned package restarts itself.

Needs the package registry (pypi.org or a mirror pip is configured for), as CI has; the wheels
are small (Pillow 11.3.0 and 12.3.0 for CPython 3.11 on x86-64 Linux, ~6.6 MB each, and
typing-extensions, 37 KB), and pip's cache makes a second run quick.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from nettebench.builds import activate, packages
from nettebench.builds.build import BuildError, _Log
from nettebench.study.code_groups import PACKAGE_DIR
from nettebench.vocabulary.build_catalog import ENVIRONMENT_MANIFEST
from tests.stages import builds_stage

pytestmark = builds_stage("installs package environments from the registry")

PILLOW_OLD, PILLOW_NEW = "11.3.0", "12.3.0"  # both have cp311 manylinux x86-64 wheels


@pytest.fixture(scope="module")
def environments(tmp_path_factory):
    """Two environments installed by the real install step: Pillow 11.3.0, and Pillow 12.3.0
    with a typing-extensions that torch imports before a cell reads its options."""
    root = tmp_path_factory.mktemp("environments")
    log = _Log(root / "install.log")
    started = time.perf_counter()
    records = {
        "pillow11": packages.install(
            "pillow11", [f"pillow=={PILLOW_OLD}"], root / "pillow11" / "prefix",
            root / "pillow11" / "install.json", log,
        ),
        "pillow12": packages.install(
            "pillow12", [f"Pillow=={PILLOW_NEW}", "typing-extensions==4.12.2"],
            root / "pillow12" / "prefix", root / "pillow12" / "install.json", log,
        ),
    }  # fmt: skip
    print(f"two environments installed in {time.perf_counter() - started:.1f} s")
    return root, records


def test_install_records_what_pip_installed(environments):
    root, records = environments
    record = records["pillow12"]
    assert record["pins"] == {"pillow": PILLOW_NEW, "typing-extensions": "4.12.2"}
    assert record["installed"]["pillow"] == PILLOW_NEW
    assert set(record["modules"]) >= {"PIL", "typing_extensions"}
    assert record["python"] == f"{sys.version_info.major}.{sys.version_info.minor}"
    inside = json.loads((root / "pillow12" / "prefix" / ENVIRONMENT_MANIFEST).read_text())
    assert inside == json.loads((root / "pillow12" / "install.json").read_text()) == record
    assert not list(root.glob("pillow1?/.prefix.tmp-*"))  # the temporary folder is gone


def test_a_pin_the_registry_does_not_have_fails_and_installs_nothing(tmp_path):
    with pytest.raises(
        BuildError, match=r"(?s)pillow==0\.0\.1.*No matching distribution.*pip download"
    ):
        packages.install(
            "nope", ["pillow==0.0.1"], tmp_path / "p", tmp_path / "install.json", _Log(None)
        )
    assert not (tmp_path / "p").exists() and not (tmp_path / "install.json").exists()


def _run_python(code: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(PACKAGE_DIR.parent), **env},
        check=False,
    )


def test_a_cell_imports_the_environments_pillow_and_records_it(environments):
    root, _ = environments
    code = (
        "from types import SimpleNamespace\n"
        "from nettebench.builds.activate import activate\n"
        "activate(SimpleNamespace(environment='pillow11'))\n"
        "import PIL, json\n"
        "from nettebench.records.environment import package_environment\n"
        "print(json.dumps({'version': PIL.__version__, 'file': PIL.__file__, "
        "**package_environment()}))\n"
    )
    done = _run_python(code, NETTEBENCH_ENVIRONMENTS_DIR=str(root))
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["version"] == seen["pillow"] == PILLOW_OLD
    assert Path(seen["file"]).is_relative_to(root / "pillow11" / "prefix")
    assert seen["package_environment"] == "pillow11"
    assert seen["packages"] == {"pillow": PILLOW_OLD}


def test_a_package_imported_before_activation_is_an_error_outside_a_cell_command(
    environments, monkeypatch
):
    root, _ = environments
    import PIL  # noqa: F401  (this process has its own Pillow already)

    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("PYTHONPATH", "")
    with pytest.raises(activate.LibraryError, match=r"PIL from .*PYTHONPATH="):
        activate.activate_environment(SimpleNamespace(environment="pillow11"), root)


def test_a_missing_or_foreign_environment_says_what_to_do(environments, tmp_path):
    with pytest.raises(activate.LibraryError, match="snakemake results/environments/x/install"):
        activate.activate_environment(SimpleNamespace(environment="x"), tmp_path)
    prefix = tmp_path / "old" / "prefix"
    prefix.mkdir(parents=True)
    (prefix / ENVIRONMENT_MANIFEST).write_text(json.dumps({"python": "2.7", "modules": []}))
    with pytest.raises(activate.LibraryError, match="installed for Python 2.7"):
        activate.activate_environment(SimpleNamespace(environment="old"), tmp_path)
    assert activate.activate_environment(SimpleNamespace(environment="installed")) is None


def test_a_cell_command_restarts_when_torch_had_imported_a_pinned_package(environments, tmp_path):
    """torch imports typing_extensions before the ceiling bench reads its cell's options; the
    bench restarts itself with the environment first, and records the pinned version."""
    root, _ = environments
    out = tmp_path / "ceiling.json"
    done = subprocess.run(
        [sys.executable, "-m", "nettebench", "benchmarks", "ceiling", "--model", "resnet18",
         "--batch-size", "2", "--image-size", "16", "--steps", "1", "--warmup-steps", "0",
         "--threads", "1", "--environment", "pillow12", "--out", str(out)],
        capture_output=True, text=True, check=False,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(PACKAGE_DIR.parent),
             "NETTEBENCH_ENVIRONMENTS_DIR": str(root)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "restarting with" in done.stderr and "typing_extensions" in done.stderr
    environment = json.loads(out.read_text())["environment"]
    assert environment["packages"] == {"pillow": PILLOW_NEW, "typing-extensions": "4.12.2"}
    assert environment["package_environment"] == "pillow12"


def test_pins_are_judged_as_pip_judges_them():
    """PEP 440 as pip applies it (packaging.specifiers): a local label such as +cpu is ignored
    unless the pin names one; anything else must match. Checked here against pip's own
    vendored packaging, so the judgement is pip's, not a copy of its rule."""
    from pip._vendor.packaging.specifiers import SpecifierSet as PipSpecifierSet

    installed = {"torch": "2.13.0+cpu", "torchvision": "0.28.0", "pillow": "11.3.0"}
    pins = {"torch": "2.13.0", "torchvision": "0.28.1", "pillow": "11.3.0", "numpy": "2.0.0"}
    assert packages.unmet_pins(pins, installed) == {
        "torchvision": ("0.28.1", "0.28.0"),
        "numpy": ("2.0.0", None),
    }
    cases = [("2.13.0", "2.13.0+cpu"), ("2.13.0+cpu", "2.13.0"), ("2.13", "2.13.0"),
             ("2.13.0", "2.13.1"), ("2.13.0+cu130", "2.13.0+cu130")]  # fmt: skip
    for pin, version in cases:
        pip_says = PipSpecifierSet(f"=={pin}").contains(version, prereleases=True)
        assert packages.pin_accepts(pin, version) is pip_says, (pin, version)
