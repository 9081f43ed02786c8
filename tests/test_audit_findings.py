"""The outside audit's findings (issue [4/5], item 5), each as a user would meet it, with the
expected value worked out here from the raw records (epochs.csv, metrics.json, the files on
disk) or from first principles, never by calling the code under test for it.

(a) a GPU driver upgrade must measure finished GPU cells again; (b) a scaling row is ``ok``
when any of its seeds finished; (c) time to accuracy with 1 of 2 seeds at the target says
(1/2); (d) Welch's p stays exact in the far tail; (e) a restore writes ``metrics.json`` last;
(f) a folder handed to ``--depends-on`` is digested with its file names.
"""

from __future__ import annotations

import json
import math
import os
import stat
import statistics
from types import SimpleNamespace

import pandas as pd
import pytest
import record_factory as rf
import torch
from test_aggregate import as_dict, md_tables

from nettebench.datasets.synthetic import generate
from nettebench.records import environment, nvml
from nettebench.report import aggregate as agg
from nettebench.report import format as T
from nettebench.report import stats
from nettebench.report.frames.runs import read_cells, runs_frame
from nettebench.report.tables.scaling import scaling_frame, scaling_markdown
from nettebench.training import finished, validity
from nettebench.vocabulary.cell import CellSpec

CELL = CellSpec(dataset="aud", model="squeezenet1_1", batch_size=20, epochs=1, image_size=32)
CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("audit-data")
    generate(root, name="aud", size=40, train_images=20, val_images=10, seed=1)
    return root / "dataset.json"


def key(data, device=CPU, **more):
    return validity.key(CELL, device=device, data=data, options={"kind": "matrix"}, **more)


# ------------------------------------------------------------------ (a) a driver upgrade


def _a_gpu(monkeypatch):
    """The CUDA branch on a CPU (a CPU twin): an H200's properties."""
    h200 = SimpleNamespace(name="NVIDIA H200", major=9, minor=0, total_memory=143771 * 2**20)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: h200)
    monkeypatch.setattr(torch.backends.cudnn, "version", lambda: 91002)


def _driver_file(tmp_path, version):
    path = tmp_path / "nvidia-version"
    path.write_text(
        f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {version}  Tue Feb 13 01:16:14 UTC 2024\n"
        "GCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)\n"
    )
    return path


def _nvidia_smi(folder, version):
    """An ``nvidia-smi`` on PATH that answers the one query the package asks, as the real one
    does (``--query-gpu=driver_version --format=csv,noheader``: the version, one line per GPU)."""
    folder.mkdir(exist_ok=True)
    tool = folder / "nvidia-smi"
    tool.write_text(
        "#!/bin/sh\n"
        'if [ "$*" != "--query-gpu=driver_version --format=csv,noheader" ]; then\n'
        "  echo 'Invalid combination of input arguments.' >&2; exit 2\nfi\n"
        f"printf '{version}\\n{version}\\n'\n"
    )
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)


@pytest.mark.parametrize("source", ["proc", "nvidia-smi"])
def test_a_driver_upgrade_measures_a_finished_gpu_cell_again(
    dataset, tmp_path, monkeypatch, source
):
    """The driver as the kernel module's /proc file says, or (no /proc/driver/nvidia and no
    NVML) as nvidia-smi says: an upgrade changes the key and the restore refuses."""
    _a_gpu(monkeypatch)
    tools = tmp_path / "bin"
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    gpu = torch.device("cuda", 0)
    keys = {}
    for version in ("550.54.15", "560.35.03"):
        if source == "proc":
            path = _driver_file(tmp_path, version)
        else:  # no /proc/driver/nvidia and no NVML in the process (as in some containers)
            path = tmp_path / "no-such-file"
            _nvidia_smi(tools, version)
            monkeypatch.setattr(nvml, "driver_version", lambda: None)
            monkeypatch.setattr(nvml, "load", lambda: None)
        monkeypatch.setattr(environment, "NVIDIA_DRIVER_FILE", path, raising=False)
        keys[version] = key(dataset, device=gpu)
    old, new = keys["550.54.15"], keys["560.35.03"]
    assert new["hardware"]["driver"] == "560.35.03"  # the version, as the record names it
    assert validity.first_difference(old, new) == "hardware: driver 550.54.15 -> 560.35.03"
    texts = {"metrics.json": json.dumps({"status": "ok"}), "epochs.csv": "epoch\n"}
    finished.write(tmp_path / "cell", old, texts)
    restored, said = finished.restore(tmp_path / "cell", new)
    assert not restored and "driver 550.54.15 -> 560.35.03" in said
    assert finished.restore(tmp_path / "cell", old)[0]  # the same driver: restored


@pytest.mark.parametrize(
    "part, where, name",
    [
        ("cpu", "validity", "cpu_model"),
        ("cpu_capability", "torch.backends.cpu", "get_cpu_capability"),
        ("machine", "platform", "machine"),
    ],
)
def test_each_part_of_the_hardware_alone_keeps_a_result_from_being_restored(
    dataset, tmp_path, monkeypatch, part, where, name
):
    """The CPU's model, the kernels torch picks for it and the architecture: each one, changed
    alone (the others as they are), names itself and trains the cell again."""
    import importlib

    old = key(dataset)
    module = validity if where == "validity" else importlib.import_module(where)
    other = f"{getattr(module, name)()} (another)"
    monkeypatch.setattr(module, name, lambda: other)
    new = key(dataset)
    assert new["hardware"][part] == other != old["hardware"][part]
    assert validity.first_difference(old, new).startswith(f"hardware: {part} ")
    texts = {"metrics.json": json.dumps({"status": "ok"}), "epochs.csv": "epoch\n"}
    finished.write(tmp_path, old, texts)
    assert not finished.restore(tmp_path, new)[0]


# ------------------------------------------------------------- (b) a scaling row's status


def test_a_scaling_row_is_ok_when_any_seed_finished(tmp_path):
    """Two processes, seed 0 out of memory, seed 1 at 1,900 img/s: the row is that seed's."""
    paths = [
        rf.make_cell(tmp_path / "one", train_img_s=1000.0),
        rf.make_cell(
            tmp_path / "oom", seed=0, status="oom", extra_cell={"processes": 2}, message="m"
        ),
        rf.make_cell(tmp_path / "ok", seed=1, train_img_s=1900.0, extra_cell={"processes": 2}),
    ]
    raw = [json.loads(p.read_text()) for p in paths]
    ok_two = [r["summary"]["train_img_s"] for r in raw[1:] if r["status"] == "ok"]
    one = raw[0]["summary"]["train_img_s"]
    frame = scaling_frame(runs_frame(read_cells(paths)))
    row = frame[frame["processes"] == 2].iloc[0]
    assert row["status"] == "ok"
    assert row["img_s"] == pytest.approx(sum(ok_two) / len(ok_two))
    assert row["efficiency"] == pytest.approx(ok_two[0] / (2 * one))
    text = scaling_markdown(runs_frame(read_cells(paths))).markdown()
    assert "OOM" not in text and T.fmt_percent(ok_two[0] / (2 * one)) in text


# ----------------------------------------------------- (c) time to accuracy, 1 of 2 seeds


def test_time_to_accuracy_says_how_many_seeds_reached_the_target(tmp_path):
    """resnet18 O0 over 3 epochs: seed 0 ends at 74.0 %, seed 1 at 74.4 % (the factory's
    curves); a target of 74.2 % is reached by seed 1 alone, in its third epoch."""
    paths = [rf.make_cell(tmp_path, seed=s, time_for_epochs_s=300.0 + s) for s in (0, 1)]
    target, reached = 74.2, []
    for path in paths:  # from the raw epochs: the first epoch at the target, wall time summed
        epochs = pd.read_csv(path.parent / "epochs.csv").sort_values("epoch")
        at = epochs.index[epochs["val_top1"] >= target]
        if len(at):
            reached.append(float(epochs.loc[: at[0], "wall_s"].sum()))
    assert len(reached) == 1  # the premise: one seed of two
    written = agg.aggregate(paths, tmp_path / "out", target_top1=target)
    table = as_dict(md_tables(written["time_to_accuracy"].read_text())[0][1])
    assert table["resnet18"]["O0"] == f"{T.fmt_seconds(reached[0])} (1/2)"


# ------------------------------------------------------------------- (d) Welch's far tail


def _t_tail(t: float, df: float, panels: int = 2000) -> float:
    """P(|T| >= t) by quadrature, independent of the incomplete beta: with u = sqrt(df) tan(f)
    the tail integral of the density is ``2 c sqrt(df) * integral over (0, atan(sqrt(df)/t))
    of sin(s)^(df-1) ds``, c = G((df+1)/2) / (sqrt(df pi) G(df/2)); a short interval of a
    smooth positive integrand, so nothing cancels (composite Simpson)."""
    top = math.atan(math.sqrt(df) / t)
    h = top / panels
    total = sum(
        (1 if i in (0, panels) else 4 if i % 2 else 2) * math.sin(i * h) ** (df - 1)
        for i in range(panels + 1)
    )
    log_c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    return 2 * math.exp(log_c) * math.sqrt(df) * total * h / 3


@pytest.mark.parametrize("shift, extra", [(0.3, 0), (0.03, 0), (0.5, 3), (1.0, 8), (0.2, 12)])
def test_welchs_p_is_exact_in_the_far_tail(shift, extra):
    """The ratio's p against Welch's t and df computed here from the logarithms, its tail by
    quadrature: far tails (t up to about 90) and fractional df (unequal sizes and spreads)."""
    a = [100.0 + d for d in (-0.03, -0.02, -0.01, 0.0, 0.01, 0.02, 0.03)]
    b = [100.0 + shift + 2 * d for d in (-0.03, -0.01, 0.0, 0.01, 0.03, *[0.005] * extra)]
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    t = (statistics.mean(b) - statistics.mean(a)) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    found = stats.ratio_interval([math.exp(x) for x in b], [math.exp(x) for x in a])
    assert found.df == pytest.approx(df) and found.p == pytest.approx(_t_tail(t, df), rel=1e-6)


def test_tight_seeds_with_a_huge_difference_are_supported():
    """Ten seeds a side whose logarithms are 100.0 and 100.3 with a spread of 1/40 (t about 27,
    df 18; the ratio is Welch's test on the logs): p is far below 1e-10, so the difference is
    supported, not "(ns)"."""
    a = [100.0 + d for d in (-0.03, -0.02, -0.01, 0.0, 0.0, 0.0, 0.0, 0.01, 0.02, 0.03)]
    b = [x + 0.3 for x in a]
    sd = math.sqrt(sum((x - 100.0) ** 2 for x in a) / 9)
    t = 0.3 / math.sqrt(2 * sd**2 / 10)
    found = stats.ratio_interval([math.exp(x) for x in b], [math.exp(x) for x in a])
    assert found.df == pytest.approx(18)
    assert found.p == pytest.approx(_t_tail(t, 18), rel=1e-6) and found.p < 1e-10
    assert found.supported is True


# ----------------------------------------------------------- (e) metrics.json written last


def test_a_restore_writes_metrics_json_last(dataset, tmp_path, monkeypatch):
    """metrics.json is what Snakemake and the readers take as "done": every other file of the
    record (epochs.csv, the ceiling beside them) must be back on disk before it."""
    base = key(dataset)
    texts = {
        "metrics.json": json.dumps({"status": "ok"}),
        "ceiling.json": "{}\n",
        "epochs.csv": "epoch\n",
    }
    finished.write(tmp_path, base, texts)
    order = []
    write = finished.write_text_atomic

    def noting(path, text, *args, **kwargs):  # the real writer, its order noted
        order.append((os.path.basename(path), sorted(p.name for p in tmp_path.iterdir())))
        return write(path, text, *args, **kwargs)

    monkeypatch.setattr(finished, "write_text_atomic", noting)
    assert finished.restore(tmp_path, base)[0]
    names = [name for name, _ in order]
    assert sorted(names) == sorted(texts) and names[-1] == "metrics.json"
    last_seen = order[-1][1]  # the folder as metrics.json was about to be written
    assert {"ceiling.json", "epochs.csv"} <= set(last_seen)


# ------------------------------------------------------- (f) a folder passed to --depends-on


def test_a_folder_input_changes_its_digest_when_a_file_is_renamed(dataset, tmp_path):
    folder = tmp_path / "inputs"
    folder.mkdir()
    (folder / "a.json").write_text('{"x": 1}')
    before = key(dataset, depends_on=[str(folder)])
    (folder / "a.json").rename(folder / "b.json")  # same content, another name
    after = key(dataset, depends_on=[str(folder)])
    assert validity.first_difference(before, after) == f"inputs: {folder} changed"
    (folder / "b.json").write_text('{"x": 2}')  # the same name, another content
    changed = key(dataset, depends_on=[str(folder)])
    assert changed["inputs"] != after["inputs"]
    (folder / "c.json").write_text('{"x": 3}')  # a second file, after the first
    second = key(dataset, depends_on=[str(folder)])
    assert second["inputs"] != changed["inputs"]
    (folder / "c.json").write_text('{"x": 4}')  # the second file's content alone
    assert key(dataset, depends_on=[str(folder)])["inputs"] != second["inputs"]


def test_a_folder_input_tells_bytes_moved_between_its_files(dataset, tmp_path):
    """One file ``a`` holding ``x``, ``b``, NUL, ``y`` against two files, ``a`` = ``x`` and
    ``b`` = ``y``: names and contents strung together without framing read the same."""
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir(), two.mkdir()
    (one / "a").write_bytes(b"xb\0y")
    (two / "a").write_bytes(b"x")
    (two / "b").write_bytes(b"y")
    first = key(dataset, depends_on=[str(one)])["inputs"][str(one)]
    second = key(dataset, depends_on=[str(two)])["inputs"][str(two)]
    assert first != second


def test_time_to_accuracy_of_a_cell_whose_seeds_all_failed_is_their_outcome(tmp_path):
    """Both seeds of O1 out of memory: the cell says OOM, not "partial epochs" or "not
    reached" (an O0 cell beside it gives the table its row)."""
    paths = [rf.make_cell(tmp_path, seed=0)] + [
        rf.make_cell(tmp_path, precision="O1", seed=s, status="oom") for s in (0, 1)
    ]
    statuses = {json.loads(p.read_text())["status"] for p in paths[1:]}
    assert statuses == {"oom"}
    written = agg.aggregate(paths, tmp_path / "out", target_top1=50.0)
    table = as_dict(md_tables(written["time_to_accuracy"].read_text())[0][1])
    assert table["resnet18"]["O1"] == T.OUTCOME_TEXT["oom"]


@pytest.mark.parametrize(
    "line, version",
    [
        (
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC "
            "2024",
            "550.54.15",
        ),
        (
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  560.35.03  Release Build  "
            "(dvs-builder@U16-I3-B03-4-3)  Fri Aug 16 21:42:42 UTC 2024",
            "560.35.03",
        ),
        (
            "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  570.124.06  Release Build",
            "570.124.06",
        ),
    ],
    ids=["proprietary", "open-x86_64", "open-aarch64"],
)
def test_the_driver_version_is_read_from_each_kernel_modules_line(
    tmp_path, monkeypatch, line, version
):
    """The proprietary and the open kernel module's lines (x86_64, aarch64): the version, not
    the architecture that the open module's line names first."""
    (tmp_path / "version").write_text(line + "\nGCC version:  gcc version 12.3.0\n")
    monkeypatch.setattr(environment, "NVIDIA_DRIVER_FILE", tmp_path / "version", raising=False)
    assert environment.nvidia_driver() == version
