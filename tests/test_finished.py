"""finished.json and the result key: a finished cell's results come back byte for byte while
nothing they depend on changed, and only then; anything else trains, naming what changed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
import torch

from nettebench.datasets.synthetic import generate
from nettebench.study import code_groups
from nettebench.training import cli, finished, validity
from nettebench.vocabulary.cell import CellSpec

CELL = CellSpec(
    dataset="fin", model="squeezenet1_1", batch_size=20, epochs=1, image_size=32, workers=0
)
CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("finished-data")
    generate(root, name="fin", size=40, train_images=40, val_images=20, seed=1)
    return root


def train(dataset, out_dir):
    return subprocess.run(
        [sys.executable, "-m", "nettebench", "training", *train_args(dataset, out_dir)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def train_args(dataset, out_dir):
    return ["--data", str(dataset / "dataset.json"), "--out-dir", str(out_dir), "--threads", "2",
            *CELL.cli_args()]  # fmt: skip


def key(dataset, **changes):
    values = {"data": dataset / "dataset.json", "device": CPU, "options": {"kind": "matrix"}}
    return validity.key(changes.pop("cell", CELL), **{**values, **changes})


def metrics_text(status="ok"):
    return json.dumps({"status": status, "summary": {}})


def test_a_finished_cell_is_restored_not_trained(dataset, tmp_path):
    out = tmp_path / "cell"
    # a command, as the restore below: a trainer in this long-lived test process would key its
    # result with whatever earlier tests left here (a package environment's prefix on sys.path)
    first = train(dataset, out)
    assert first.returncode == 0, first.stderr[-3000:]
    record = json.loads((out / finished.FINISHED_FILE).read_text())
    results = {name: (out / name).read_bytes() for name in finished.RESULT_FILES}
    assert {name: text.encode() for name, text in record["files"].items()} == results
    assert not (out / "checkpoint.pt").exists()

    for name in finished.RESULT_FILES:  # what Snakemake does to an unrecorded job's outputs
        (out / name).unlink()
    again = train(dataset, out)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stderr.startswith("restored: " + CELL.path()), again.stderr.splitlines()[0]
    assert "wrote back epochs.csv, metrics.json (status ok)" in again.stderr
    assert "epoch 1/1" not in again.stderr
    assert {name: (out / name).read_bytes() for name in finished.RESULT_FILES} == results

    # that NETTEBENCH_RETRAIN=1 trains a finished cell again: tests/test_timed_jobs.py's
    # forced run reads it from its jobs' logs


def test_a_trainer_option_is_in_the_key_its_command_line_gives(dataset, tmp_path):
    """An option the cell's numbers depend on, not a cell parameter, is in the key the trainer
    computes from its command line (both keys from this process: only the option differs).
    That a changed key trains the cell again, saying what changed, is test_dependencies'."""
    out = tmp_path / "cell"
    parser = cli.build_parser()
    keyed = cli.result_key(CELL, parser.parse_args(train_args(dataset, out)))
    fewer = [*train_args(dataset, out), "--warmup-steps", "2"]
    changed = cli.result_key(CELL, parser.parse_args(fewer))
    assert validity.first_difference(keyed, changed) == "options: warmup_steps 5 -> 2"


def test_the_key_follows_what_the_result_depends_on(dataset, tmp_path):
    base = key(dataset)
    assert key(dataset) == base  # stable
    assert json.loads(json.dumps(base)) == base  # compares equal once read back from JSON
    assert key(dataset, cell=CellSpec(**{**CELL.as_dict(), "seed": 1}))["cell"] != base["cell"]
    assert key(dataset, options={"kind": "cpu_baseline"})["options"] != base["options"]
    assert key(dataset, options={"kind": "matrix", "retrain": True}) == base  # how, not what
    copy = tmp_path / "data"
    copy.mkdir()
    info = json.loads((dataset / "dataset.json").read_text())
    info["root"] = str(dataset / info["root"])
    (copy / "dataset.json").write_text(json.dumps(info))
    assert validity.first_difference(base, key(dataset, data=copy / "dataset.json")) == (
        "data changed"
    )
    with_inputs = key(dataset, options={"kind": "matrix", "depends_on": ["a"]})
    assert with_inputs == base  # the inputs are keyed by content, under "inputs"
    assert validity.first_difference({**base, "builds": None}, base) == "builds changed"
    assert validity.first_difference({**base, "builds": {"apex": "a"}}, base) == (
        "builds: apex changed"
    )
    assert set(base) == {"key_version", *validity.PARTS}
    assert base["packages"]["torch"] and base["packages"]["python"].endswith(sys.version.split()[0])
    assert base["hardware"]["device"] == "cpu"
    assert base["hardware"]["cpu_capability"] == torch.backends.cpu.get_cpu_capability()


def test_every_declared_input_is_in_the_key_by_content(dataset, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "install.json").write_text('{"pins": {"pillow": "11.3.0"}}')
    base = key(dataset, depends_on=[str(tmp_path / "install.json")])
    assert list(base["inputs"]) == ["install.json"]  # relative to the working directory
    (tmp_path / "install.json").write_text('{"pins": {"pillow": "12.3.0"}}')
    changed = key(dataset, depends_on=[str(tmp_path / "install.json")])
    assert validity.first_difference(base, changed) == "inputs: install.json changed"


def test_the_code_is_in_the_key_by_content(dataset, tmp_path, monkeypatch):
    package = tmp_path / "nettebench"
    shutil.copytree(code_groups.PACKAGE_DIR, package, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(code_groups, "PACKAGE_DIR", package)
    base = key(dataset)
    loop = package / "training" / "loop.py"
    loop.write_text(loop.read_text() + "\n# one line more\n")
    assert validity.first_difference(base, key(dataset)) == "code changed"


def test_the_store_manifest_is_in_the_key_of_a_cached_cell(dataset, tmp_path):
    cached = CellSpec(**{**CELL.as_dict(), "loader": "cached"})
    (tmp_path / "store.json").write_text('{"images": 1}')
    base = key(dataset, cell=cached, store_dir=tmp_path)
    assert base["store"] is not None
    (tmp_path / "store.json").write_text('{"images": 2}')
    assert validity.first_difference(base, key(dataset, cell=cached, store_dir=tmp_path)) == (
        "store changed"
    )
    assert key(dataset, store_dir=tmp_path)["store"] is None  # a pil cell reads no store


def test_the_packages_are_the_ones_first_on_the_path(dataset, tmp_path, monkeypatch):
    """An environment's prefix goes first on sys.path: its pin is the version in the key."""
    info = tmp_path / "pillow-99.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: Pillow\nVersion: 99.0\n")
    before = key(dataset)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    after = key(dataset)
    assert after["packages"]["pillow"] == "99.0"
    assert validity.first_difference(before, after).startswith("packages: pillow ")


# Variables that change torch's kernels, numerics, threads or libraries: each must reach the key.
STEERING = (
    "CUBLAS_WORKSPACE_CONFIG", "CUDNN_LOGINFO_DBG", "KMP_AFFINITY", "MKL_NUM_THREADS",
    "NCCL_ALGO", "NETTEBENCH_BUILDS_DIR", "NETTEBENCH_ENVIRONMENTS_DIR", "NVIDIA_TF32_OVERRIDE",
    "OMP_NUM_THREADS", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "PYTORCH_CUDA_ALLOC_CONF",
    "TORCH_CUDNN_V8_API_DISABLED",
)  # fmt: skip


def test_hardware_and_environment_variables_are_in_the_key(dataset, monkeypatch):
    for name in ("ATEN_CPU_CAPABILITY", *STEERING):
        monkeypatch.delenv(name, raising=False)
    base = key(dataset)
    with monkeypatch.context() as patch:
        patch.setattr(validity, "cpu_model", lambda: "Another CPU")
        assert validity.first_difference(base, key(dataset)).startswith("hardware: cpu ")
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    assert validity.first_difference(base, key(dataset)) == (
        "environment: ATEN_CPU_CAPABILITY null -> default"
    )
    monkeypatch.delenv("ATEN_CPU_CAPABILITY")
    for name in STEERING:
        monkeypatch.setenv(name, "1")
        assert validity.first_difference(base, key(dataset)) == f"environment: {name} null -> 1"
        monkeypatch.delenv(name)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")  # a slot, not the hardware
    assert validity.first_difference(base, key(dataset)) is None


def test_a_record_that_does_not_match_restores_nothing_and_says_why(dataset, tmp_path):
    base = key(dataset)
    texts = {"metrics.json": metrics_text(), "epochs.csv": "epoch\n"}
    finished.write(tmp_path, base, texts)
    record = tmp_path / finished.FINISHED_FILE
    restored, said = finished.restore(tmp_path, {**base, "code": "edited"})
    assert not restored
    assert said == f"{record} no longer matches (code changed); training from scratch"
    assert not (tmp_path / "metrics.json").exists()
    restored, said = finished.restore(tmp_path, base)
    assert restored and said.startswith("wrote back epochs.csv, metrics.json (status ok)")
    assert (tmp_path / "metrics.json").read_text() == texts["metrics.json"]
    record.write_text("not json")
    restored, said = finished.restore(tmp_path, base)
    assert not restored and said.startswith(f"{record} is unreadable (")
    assert said.endswith("); training from scratch")
    assert finished.restore(tmp_path / "nowhere", base) == (False, None)


def test_a_result_whose_weights_are_gone_is_not_restored(dataset, tmp_path):
    """A cell asked for its final weights (inference accuracy reads them): finished.json does
    not hold them, so with weights.pt gone only training writes them again; with it there, the
    cell is restored. The trainer's command hands its --weights over."""
    base = key(dataset)
    finished.write(tmp_path, base, {"metrics.json": metrics_text(), "epochs.csv": "epoch\n"})
    weights = tmp_path / "weights.pt"
    restored, said = finished.restore(tmp_path, base, (weights,))
    assert not restored and said == f"{weights} is gone and only training writes it; training again"
    assert not (tmp_path / "metrics.json").exists()
    weights.write_bytes(b"weights")
    restored, said = finished.restore(tmp_path, base, (weights,))
    assert restored and (tmp_path / "metrics.json").is_file()


def test_the_trainer_hands_its_weights_to_the_restore(monkeypatch, tmp_path, capsys):
    from nettebench.training import cli

    asked = []

    def restore(out_dir, key, needs=()):
        asked.append(needs)
        return True, "stub"

    monkeypatch.setattr(finished, "restore", restore)
    monkeypatch.setattr(cli, "result_key", lambda cell, args: {"cell": "stub"})
    argv = ["--data", str(tmp_path), "--out-dir", str(tmp_path), "--dataset", "fin"]
    assert cli.main([*argv, "--weights", str(tmp_path / "w.pt")]) == 0
    assert cli.main(argv) == 0
    assert asked == [(tmp_path / "w.pt",), ()]
    assert capsys.readouterr().err.count("restored: ") == 2


def test_the_files_written_beside_the_results_come_back_too(dataset, tmp_path):
    base = key(dataset)
    texts = {"metrics.json": metrics_text(), "epochs.csv": "epoch\n", "ceiling.json": "{}\n"}
    finished.write(tmp_path, base, texts)
    assert finished.restore(tmp_path, base)[0]
    assert {p.name: p.read_text() for p in tmp_path.iterdir() if p.name in texts} == texts


@pytest.mark.parametrize("status, restorable", [("ok", True), ("unsupported", True),
                                                ("oom", False), (None, False)])  # fmt: skip
def test_only_a_status_the_hardware_decides_is_restored(dataset, tmp_path, status, restorable):
    base = key(dataset)
    finished.write(tmp_path, base, {"metrics.json": metrics_text(status), "epochs.csv": ""})
    restored, said = finished.restore(tmp_path, base)
    assert restored is restorable
    if not restorable:
        assert said == (
            f"the result in {tmp_path / finished.FINISHED_FILE} has status {status}, which a "
            "run now need not repeat (only ok, unsupported are restored); training again"
        )
        assert not (tmp_path / "metrics.json").exists()


def test_a_key_of_another_version_never_matches(dataset):
    """A key's parts may mean something else in another version, even where they compare equal."""
    base = key(dataset)
    older = {name: value for name, value in base.items() if name != "key_version"}
    assert validity.first_difference(older, base) == f"key version None -> {base['key_version']}"
    assert validity.first_difference({**base, "key_version": 1}, base).startswith("key version 1")
    assert validity.first_difference(None, base) == "no key (written by an older trainer)"
    assert validity.first_difference({**base, "extra": 1}, base) == "parts ['extra']"


def test_a_record_of_an_older_trainer_is_not_restored(dataset, tmp_path):
    record = {"format_version": 1, "fingerprint": {}, "files": {"metrics.json": metrics_text()}}
    (tmp_path / finished.FINISHED_FILE).write_text(json.dumps(record))
    restored, said = finished.restore(tmp_path, key(dataset))
    assert not restored and said == (
        f"{tmp_path / finished.FINISHED_FILE} no longer matches (its format 1 is not 2); "
        "training from scratch"
    )


def test_a_record_without_both_result_files_is_not_restored(dataset, tmp_path):
    base = key(dataset)
    finished.write(tmp_path, base, {"metrics.json": metrics_text()})
    restored, said = finished.restore(tmp_path, base)
    assert not restored and said == (
        f"{tmp_path / finished.FINISHED_FILE} lacks epochs.csv, metrics.json; training from scratch"
    )
    assert not (tmp_path / "metrics.json").exists()


def test_retrain_is_asked_by_the_option_or_the_environment(monkeypatch):
    monkeypatch.delenv(finished.RETRAIN_ENV, raising=False)
    assert not finished.retrain_requested(False)
    assert finished.retrain_requested(True)
    monkeypatch.setenv(finished.RETRAIN_ENV, "1")
    assert finished.retrain_requested(False)
    monkeypatch.setenv(finished.RETRAIN_ENV, "0")
    assert not finished.retrain_requested(False)


def test_the_builds_and_the_environment_a_cell_names_are_in_the_key(dataset, tmp_path, monkeypatch):
    """Read where the trainer reads them, for a trainer run by hand (no --depends-on)."""
    from nettebench.builds.activate import ENVIRONMENTS_DIR_ENV
    from nettebench.vocabulary.build_catalog import BUILD_MANIFEST, ENVIRONMENT_MANIFEST

    build = tmp_path / "builds" / "torchvision" / "b" / "prefix"
    environment = tmp_path / "environments" / "e" / "prefix"
    for prefix, name in ((build, BUILD_MANIFEST), (environment, ENVIRONMENT_MANIFEST)):
        prefix.mkdir(parents=True)
        (prefix / name).write_text('{"version": 1}')
    monkeypatch.setenv(ENVIRONMENTS_DIR_ENV, str(tmp_path / "environments"))
    cell = CellSpec(**{**CELL.as_dict(), "torchvision": "b", "environment": "e"})
    base = key(dataset, cell=cell, builds_dir=tmp_path / "builds")
    assert (
        set(base["builds"]) == {"torchvision", "environment"}
        and None not in base["builds"].values()
    )
    assert key(dataset)["builds"] == {}  # an installed cell names none
    for prefix, name in ((build, BUILD_MANIFEST), (environment, ENVIRONMENT_MANIFEST)):
        (prefix / name).write_text('{"version": 2}')
        changed = key(dataset, cell=cell, builds_dir=tmp_path / "builds")
        part = "torchvision" if prefix == build else "environment"
        assert validity.first_difference(base, changed) == f"builds: {part} changed"
        base = changed


def test_a_bare_folder_is_keyed_by_every_image_path_size_and_mtime(tmp_path):
    image = tmp_path / "train" / "n01" / "a.jpg"
    image.parent.mkdir(parents=True)
    image.write_bytes(b"one")
    (tmp_path / "notes.txt").write_text("not an image")
    base = validity.data_digest(tmp_path)
    assert base.startswith("tree:") and validity.data_digest(tmp_path) == base
    (tmp_path / "notes.txt").write_text("still not an image, changed")
    assert validity.data_digest(tmp_path) == base
    image.write_bytes(b"two")  # replaced, same size
    os.utime(image, ns=(1, 1))
    assert validity.data_digest(tmp_path) != base
    (tmp_path / "dataset.json").write_text("{}")  # a prepared dataset: its description
    assert validity.data_digest(tmp_path) == validity.data_digest(tmp_path / "dataset.json")
    assert not validity.data_digest(tmp_path).startswith("tree:")


def test_a_bare_folders_key_changes_with_each_of_path_size_and_mtime_alone(tmp_path):
    """Each of an image's path, size and mtime changed with the other two kept."""
    image = tmp_path / "train" / "n01" / "a.jpg"
    image.parent.mkdir(parents=True)
    image.write_bytes(b"one")
    os.utime(image, ns=(5_000_000_000, 5_000_000_000))
    base = validity.data_digest(tmp_path)
    seen = {base}
    moved = image.rename(image.with_name("b.jpg"))  # the path alone (rename keeps the mtime)
    assert moved.stat().st_mtime_ns == 5_000_000_000
    seen.add(validity.data_digest(tmp_path))
    moved.rename(image)
    assert validity.data_digest(tmp_path) == base
    os.utime(image, ns=(6_000_000_000, 6_000_000_000))  # the mtime alone
    seen.add(validity.data_digest(tmp_path))
    image.write_bytes(b"one!")  # the size alone
    os.utime(image, ns=(5_000_000_000, 5_000_000_000))
    seen.add(validity.data_digest(tmp_path))
    assert len(seen) == 4


def test_a_package_is_named_as_pip_names_it_and_the_first_on_the_path_wins(dataset, tmp_path,
                                                                         monkeypatch):  # fmt: skip
    for folder, name, version in (("first", "Nettebench_Shadow", "2.0"),
                                  ("later", "nettebench-shadow", "1.0")):  # fmt: skip
        info = tmp_path / folder / f"{name}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path / "first"), str(tmp_path / "later"), *sys.path])
    found = validity.packages()
    assert found["nettebench-shadow"] == "2.0" and "nettebench_shadow" not in found


def test_a_gpu_is_keyed_by_its_model_never_its_index(monkeypatch):
    """The CUDA branch on a CPU (a CPU twin): the ranks of one cell, on cuda:0 and cuda:1,
    compute one key; another model does not."""
    from types import SimpleNamespace

    h200 = SimpleNamespace(name="NVIDIA H200", major=9, minor=0, total_memory=143771 * 2**20)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: h200)
    monkeypatch.setattr(torch.backends.cudnn, "version", lambda: 91002)
    first = validity.hardware(torch.device("cuda", 0))
    assert first == validity.hardware(torch.device("cuda", 1))
    assert first["device"] == "cuda" and first["gpu"] == "NVIDIA H200"
    assert (first["compute_capability"], first["gpu_memory_mb"], first["cudnn"]) == (
        "9.0",
        143771,
        91002,
    )
    assert first["cuda"] == torch.version.cuda and "cuda:" not in json.dumps(first)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: SimpleNamespace(
        name="NVIDIA A100-SXM4-80GB", major=8, minor=0, total_memory=81920 * 2**20))  # fmt: skip
    assert validity.hardware(torch.device("cuda", 0))["gpu"] != first["gpu"]
    assert validity.hardware(CPU)["device"] == "cpu" and "gpu" not in validity.hardware(CPU)
