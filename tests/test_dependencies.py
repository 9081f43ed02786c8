"""End to end, through real Snakemake runs: a change to anything a cell's result depends on trains
the cell again from scratch; a rerun with nothing changed restores it.

One base run of one tiny cell that depends on everything a cell can depend on (a synthetic
dataset, its decoded store, a source build, a package environment), then one case per change,
each in a copy of the finished base (results, Snakemake's metadata and all), so a case costs
one short job. What a case checks in the trainer's log: ``restored:`` and no epoch, or
``not restored: ... <the part that changed>`` and epoch 1 trained. Offline: the build is a local
git repository, the environment's packages are wheels written here (``--no-index``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import zipfile
from pathlib import Path

import pytest

from nettebench.vocabulary.cell import CellSpec
from tests.library_repos import make_package_repo
from tests.workflow_helpers import copy_workflow, planned_jobs, run_study, write_config

pytestmark = pytest.mark.workflow

SHAPE = {"model": "resnet18", "epochs": 1, "batch_size": 20, "image_size": 32, "workers": 0}
SHAPE |= {"max_steps": 1, "loader": "cached", "apex": "local", "environment": "e"}
CELL = CellSpec(dataset="tiny", **SHAPE)
RUN = Path("results/runs") / CELL.path()
LOG = Path("results/logs/runs") / f"{CELL.path()}.log"
TARGET = str(RUN / "metrics.json")


def wheel(folder: Path, name: str, version: str) -> None:
    """A pure-Python wheel of one module, written by hand (pip installs it offline)."""
    tag = f"{name}-{version}"
    files = {
        f"{name}.py": f"VERSION = {version!r}\n",
        f"{tag}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{tag}.dist-info/WHEEL": "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    lines = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        lines.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
    files[f"{tag}.dist-info/RECORD"] = "\n".join([*lines, f"{tag}.dist-info/RECORD,,"]) + "\n"
    with zipfile.ZipFile(folder / f"{tag}-py3-none-any.whl", "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)


def study(root: Path, *, pin="1.0", repo="apex", ref="v0.1", seed=0, ceiling=False) -> dict:
    return {
        "datasets": {
            "tiny": {"synthetic": {"size": 40, "train_images": 40, "val_images": 20, "seed": seed}}
        },
        "builds": {"apex": {"local": {"repo": str(root / repo), "ref": ref}}},
        "environments": {
            "e": {
                "packages": [f"nettebench-pin=={pin}"],
                "pip_args": ["--no-index", "--find-links", str(root / "wheels")],
            }
        },
        "matrix": SHAPE,
        "ceiling": ceiling,
    }


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """The finished base run, and a copy of it to start each case from."""
    root = tmp_path_factory.mktemp("dependencies")
    (root / "wheels").mkdir()
    for version in ("1.0", "2.0"):
        wheel(root / "wheels", "nettebench_pin", version)
    make_package_repo(root / "apex", version="0.1")
    work = copy_workflow(root / "wf")
    run_study(work, write_config(work, study(root)), TARGET)
    assert "epoch 1/1" in (work / LOG).read_text()
    shutil.copytree(work, root / "finished", symlinks=True)
    return root, work


def case(base, **changes):
    """The finished base, back in its own folder (the rules name code by absolute path, so a
    copy elsewhere would rebuild what depends on the code), its config changed; (workdir,
    config path)."""
    root, work = base
    shutil.rmtree(work)
    shutil.copytree(root / "finished", work, symlinks=True)
    return work, write_config(work, study(root, **changes))


def rerun(work: Path, config: Path, *extra: str, forget: bool = False, jobs=None, also=()):
    """Run the cell's target; with ``forget``, delete its outputs first (what Snakemake does to
    a job it never saw end), so the job runs though Snakemake sees nothing changed; with
    ``jobs``, check that those are the jobs it ran; ``also``: more of the job's outputs to ask
    for. The job's log."""
    if forget:
        for name in ("metrics.json", "epochs.csv"):
            (work / RUN / name).unlink()
    done = run_study(work, config, TARGET, *map(str, also), *extra)
    if jobs is not None:
        assert planned_jobs(done) == jobs
    return (work / LOG).read_text()


def trained(log: str, changed: str) -> None:
    assert f"not restored: {CELL.path()}: " in log, log
    assert changed in log.split("not restored:", 1)[1].splitlines()[0], log
    assert "epoch 1/1" in log and "resumed" not in log, log


def key(work: Path) -> dict:
    return json.loads((work / RUN / "finished.json").read_text())["key"]


def test_nothing_changed_restores_byte_for_byte(base):
    work, config = case(base)
    before = (work / RUN / "metrics.json").read_bytes()
    log = rerun(work, config, forget=True)
    assert log.startswith(f"restored: {CELL.path()}: wrote back epochs.csv, metrics.json"), log
    assert "epoch 1/1" not in log
    assert (work / RUN / "metrics.json").read_bytes() == before


def test_a_code_change_trains_again(base):
    work, config = case(base)
    loop = work / "scripts/nettebench/training/loop.py"
    loop.write_text(loop.read_text() + "\n# one line more\n")
    trained(
        rerun(work, config, jobs={"cell_train": 1}),
        # the code group's manifest, the rule's input for its modules
        "inputs: .snakemake/nettebench/code/matrix_train.sha256 changed",
    )


def test_new_data_trains_again(base):
    work, config = case(base, seed=1)
    trained(rerun(work, config), "inputs: results/data/tiny/dataset.json changed")


def test_a_changed_store_trains_again(base):
    work, config = case(base)
    manifest = next((work / "results/data/tiny/store").glob("res~*/store.json"))
    manifest.write_text(manifest.read_text().rstrip()[:-1] + ', "rebuilt": true}\n')
    trained(rerun(work, config), "store.json changed")


def test_a_rebuilt_library_trains_again(base):
    root, _ = base
    make_package_repo(root / "apex2", version="0.2")
    work, config = case(base, repo="apex2", ref="v0.2")
    trained(rerun(work, config), "inputs: results/builds/apex/local/install.json changed")


def test_a_changed_pin_in_a_package_environment_trains_again(base):
    """Reported: the pin changed under the same environment name, the environment was
    reinstalled, and the trainer restored the old measurement."""
    work, config = case(base, pin="2.0")
    trained(rerun(work, config), "inputs: results/environments/e/install.json changed")
    environment = json.loads((work / RUN / "metrics.json").read_text())["environment"]
    assert environment["packages"] == {"nettebench-pin": "2.0"}, environment


def test_turning_the_ceiling_on_trains_again_and_writes_it(base):
    """Reported: the restore wrote no ceiling.json, and Snakemake stopped with a
    MissingOutputException on every later run."""
    work, config = case(base, ceiling=True)
    # what `rule all` asks for then: the cell's ceiling too
    trained(rerun(work, config, also=[RUN / "ceiling.json"]), "options: ceiling null -> ")
    assert (work / RUN / "ceiling.json").is_file()


def test_other_threads_train_again(base):
    work, config = case(base)
    trained(rerun(work, config, "--cores", "1", forget=True), "options: threads 2 -> 1")


def test_other_cpu_kernels_train_again(base, monkeypatch):
    """The hardware as torch uses it: ATEN_CPU_CAPABILITY caps the CPU kernels torch picks."""
    work, config = case(base)
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    trained(rerun(work, config, forget=True), "environment: ATEN_CPU_CAPABILITY null -> default")
    assert key(work)["hardware"]["cpu_capability"] == "DEFAULT"


def test_another_version_of_an_imported_package_trains_again(base, monkeypatch):
    """A package upgraded in place changes no declared file; the job sees it on its path."""
    root, _ = base
    site = root / "site"
    info = site / "nettebench_extra-3.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: nettebench-extra\nVersion: 3.0\n")
    work, config = case(base)
    monkeypatch.setenv("PYTHONPATH", str(site))
    trained(rerun(work, config, forget=True), "packages: nettebench-extra null -> 3.0")
