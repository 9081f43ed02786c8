"""Data-parallel cells for real on the CPU: two gloo processes under torchrun, one thread each.

They learn like the one-process twin with the same global batch, write one set of results
(rank 0), stop together on SIGINT, go with their job when it is killed outright, resume from the
checkpoint, and a process that dies ends the cell with an error that names it.
"""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from nettebench.datasets.synthetic import generate
from nettebench.report.frames.runs import read_cells, runs_frame
from nettebench.report.tables.scaling import scaling_frame
from nettebench.training import launch
from nettebench.vocabulary.cell import CellSpec
from tests.stages import learning_stage

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="gloo processes under torchrun")


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """A small learnable synthetic dataset: 4 classes, 320 train and 100 val images at 40 px."""
    root = tmp_path_factory.mktemp("dp")
    generate(root, name="dp", size=40, train_images=320, val_images=100, num_classes=4, jobs=1)
    return root / "dataset.json"


@pytest.fixture(scope="module")
def short_tree(tmp_path_factory):
    """For the tests of how a job stops (signals, kills): 4 steps of the global batch an epoch,
    so the first checkpoint comes soon; its 2 epochs after it still far outlast a 0.2 s poll."""
    root = tmp_path_factory.mktemp("dp-short")
    generate(root, name="dp", size=40, train_images=128, val_images=32, num_classes=4, jobs=1)
    return root / "dataset.json"


def cell(**overrides) -> CellSpec:
    values = dict(
        dataset="dp", model="resnet18", batch_size=32, epochs=3, image_size=32, workers=0,
        lr=0.04, processes=2,
    )  # fmt: skip
    return CellSpec(**{**values, **overrides})


def job_args(tree: Path, out: Path, spec: CellSpec) -> list[str]:
    """The cell job's options (after ``python -m nettebench benchmarks cell-job``)."""
    return [
        "--data", str(tree), "--out-dir", str(out), "--ceiling", str(out / "ceiling.json"),
        "--threads", str(spec.processes),  # one thread per process, as the workflow asks
        "--ceiling-steps", "3", "--ceiling-warmup-steps", "1", *spec.cli_args(),
    ]  # fmt: skip


def command(tree: Path, out: Path, spec: CellSpec) -> list[str]:
    return [
        sys.executable,
        "-m",
        "nettebench",
        "benchmarks",
        "cell-job",
        *job_args(tree, out, spec),
    ]


def run(tree: Path, out: Path, spec: CellSpec) -> subprocess.CompletedProcess:
    return subprocess.run(
        command(tree, out, spec), capture_output=True, text=True, timeout=600, check=False
    )


def run_here(tree: Path, out: Path, spec: CellSpec) -> int:
    """The job's command in this process (its exit status), for a one-process cell whose
    results alone a test reads; the threads it set are set back."""
    import torch

    from nettebench.benchmarks import cell_job

    threads = torch.get_num_threads()
    try:
        return cell_job.main(job_args(tree, out, spec))
    finally:
        torch.set_num_threads(threads)


def start(tree: Path, out: Path, spec: CellSpec) -> subprocess.Popen:
    return subprocess.Popen(
        command(tree, out, spec), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def workers_of(job: int) -> list[int]:
    """The trainer processes torchrun started for the job (its direct children)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == job:
            found.append(int(stat.parent.name))
    return found


def wait_for(path: Path, job: subprocess.Popen, seconds: float = 300) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert job.poll() is None, job.stdout.read()
        assert time.monotonic() < deadline, f"no {path.name} after {seconds} s"
        time.sleep(0.2)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def gone_within(pids: list[int], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while any(alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def top1s(out: Path) -> list[float]:
    lines = (out / "epochs.csv").read_text().splitlines()
    column = lines[0].split(",").index("val_top1")
    return [float(line.split(",")[column]) for line in lines[1:]]


def global_step_rate(out: Path, global_batch: int) -> float:
    """The median over the steady steps of ``global_batch`` / the step's time in epochs.csv."""
    with (out / "epochs.csv").open() as handle:
        times = [
            float(ms) / 1000 for row in csv.DictReader(handle) for ms in row["step_ms"].split()
        ]
    return statistics.median(global_batch / s for s in times)


@learning_stage("trains three 3-epoch cells, one of them twice in two processes (~60 s)")
def test_two_processes_resumed_after_a_kill_learn_like_one_and_fill_the_scaling_table(
    tree, tmp_path
):
    """The same global batch of 32 (16 per process): top-1 within the seeds' noise of the
    1-process twin; rank 0 alone writes the results; a rerun restores them in the job. (The
    twins, one process each, train in this one: their results are all this test reads.)

    The two-process cell is also the one whose job is killed (SIGKILL: no handler runs in it)
    after its first checkpoint: its processes go with it, and the rerun resumes from that
    checkpoint and finishes the cell that the rest of the test reads (one launch fewer than a
    cell of its own for each)."""
    runs = ["one", "one_seed1", "two"]
    for name, spec in {"one": cell(processes=1), "one_seed1": cell(processes=1, seed=1)}.items():
        assert run_here(tree, tmp_path / name, spec) == 0, name
    killed = start(tree, tmp_path / "two", cell())
    wait_for(tmp_path / "two" / "checkpoint.pt", killed)
    workers = workers_of(killed.pid)
    assert len(workers) == 2
    killed.kill()
    killed.wait()
    assert gone_within(workers, 15)  # each had asked for a SIGTERM when its parent dies
    two_run = run(tree, tmp_path / "two", cell())
    assert two_run.returncode == 0, two_run.stderr
    assert "resumed from the checkpoint after epoch" in two_run.stdout + two_run.stderr
    assert "data-parallel: torchrun" in two_run.stderr
    assert "--nproc-per-node=2" in two_run.stderr
    metrics = {name: json.loads((tmp_path / name / "metrics.json").read_text()) for name in runs}
    two = metrics["two"]
    assert two["cell"]["processes"] == 2 and two["status"] == "ok"
    assert two["summary"]["resumed_from_epoch"] >= 1 and len(top1s(tmp_path / "two")) == 3
    assert two["summary"]["batch_size_used"] == 32  # the global batch
    top1 = {name: m["summary"]["final_top1"] for name, m in metrics.items()}
    noise = abs(top1["one"] - top1["one_seed1"])
    best = {name: m["summary"]["best_top1"] for name, m in metrics.items()}
    # every run learns (4 classes: chance is 25 %; measured 59, 36 and 71 % after 3 epochs)
    assert min(best.values()) >= 30, best
    assert abs(top1["two"] - top1["one"]) <= max(2 * noise, 20), top1
    ceiling = json.loads((tmp_path / "two" / "ceiling.json").read_text())
    assert ceiling["status"] == "ok" and ceiling["cell"]["processes"] == 2
    assert ceiling["batch_size"] == 32
    table = scaling_frame(runs_frame(read_cells([tmp_path / n / "metrics.json" for n in runs])))
    row = table[table["processes"] == 2].iloc[0]
    # from the raw records: every step trains the global batch of 32 (320 images, 10 steps,
    # over both processes), so the cell's rate is 32 over each step's time in epochs.csv
    # (the twin: the mean over the 1-process cell's seeds)
    rate = {name: global_step_rate(tmp_path / name, 32) for name in runs}
    assert two["summary"]["train_img_s"] == pytest.approx(rate["two"], rel=1e-3)
    twin = (rate["one"] + rate["one_seed1"]) / 2
    assert row["efficiency"] == pytest.approx(rate["two"] / (2 * twin), rel=1e-3)
    # a rerun restores the finished cell in the job itself: no process is started
    again = run(tree, tmp_path / "two", cell())
    assert again.returncode == 0, again.stderr
    assert re.search(r"^restored: ", again.stderr, re.MULTILINE), again.stderr
    assert "torchrun" not in again.stderr


def test_sigint_stops_every_process_within_seconds(short_tree, tmp_path):
    out = tmp_path / "cell"
    job = start(short_tree, out, cell(epochs=30))
    wait_for(out / "checkpoint.pt", job)
    workers = workers_of(job.pid)
    assert len(workers) == 2
    sent = time.monotonic()
    job.send_signal(signal.SIGINT)
    code = job.wait(timeout=60)
    log = job.stdout.read()
    assert code == 128 + signal.SIGINT, log
    assert time.monotonic() - sent < 30
    assert gone_within(workers, 5)
    assert "interrupted by SIGINT" in log and "stopped in all 2 processes" in log
    assert (out / "checkpoint.pt").is_file() and not (out / "metrics.json").exists()


def test_a_process_that_dies_ends_the_cell_with_an_error_naming_it(short_tree, tmp_path):
    out = tmp_path / "cell"
    job = start(short_tree, out, cell(epochs=30))
    wait_for(out / "checkpoint.pt", job)
    workers = sorted(workers_of(job.pid))
    environ = Path(f"/proc/{workers[1]}/environ").read_bytes().split(b"\0")
    rank = next(e for e in environ if e.startswith(b"RANK=")).decode().split("=")[1]
    os.kill(workers[1], signal.SIGKILL)
    code = job.wait(timeout=60)
    log = job.stdout.read()
    assert code == 1, log
    assert f"process {rank} of 2" in log and "was killed by SIGKILL" in log
    assert "the others were stopped" in log
    assert gone_within(workers, 5)


def test_torchrun_command_shares_the_threads():
    args = launch.torchrun_args(("benchmarks", "cell-job"), ["--x", "1"], 4, 16)
    assert "--nproc-per-node=4" in args and "--max-restarts=0" in args
    assert args[-2:] == ["--x", "1"]  # the job's own options, unchanged: the same key
    assert args[args.index("-m") + 1 :] == ["nettebench", "benchmarks", "cell-job", "--x", "1"]
    assert launch.process_threads(3, 2) == 1 and launch.process_threads(1, 4) == 1


def _one_step(rank: int, world: int, init: str, out: str) -> None:
    """One SGD step of a small model (no batch norm) on this rank's half of a fixed batch."""
    import torch
    import torch.distributed as dist

    from nettebench.training import distributed
    from nettebench.training.step import TrainingStep
    from nettebench.vocabulary import precision

    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(144, 3)
    )
    images, targets = torch.randn(8, 3, 8, 8), torch.randint(0, 3, (8,))
    step = TrainingStep(
        model, precision.get("O0"), torch.device("cpu"), lr=0.5, momentum=0.9, weight_decay=0
    )
    here = distributed.DataParallel.from_env()
    runner = here.wrap(step)
    share = here.local_batch(8)
    rows = slice(rank * share, (rank + 1) * share)
    runner.step(images[rows], targets[rows])
    if rank == 0:
        torch.save(runner.state_dict()["model"], out)
    dist.destroy_process_group()


def test_two_processes_take_the_step_one_process_takes_on_the_whole_batch(spawned):
    """DDP's all-reduced gradient of two half batches is the gradient of the global batch: the
    weights after one step equal the one-process step's, and the checkpoint keys are plain."""
    import torch

    two, one = torch.load(spawned / "two.pt"), torch.load(spawned / "one.pt")
    assert list(two) == list(one) == ["0.weight", "0.bias", "3.weight", "3.bias"]
    for name in one:
        assert torch.allclose(two[name], one[name], atol=1e-6), name


# Each process's steady steps: 16 images each (its half of the global batch of 32), its times.
STEP_S = {0: [0.10, 0.20, 0.10, 0.10], 1: [0.12, 0.10, 0.10, 0.30]}


def _combined_summary(rank: int, world: int, init: str, out: str) -> None:
    """The summary's step figures of an epoch combined over the processes, from rank 0."""
    import torch.distributed as dist

    from nettebench.records import spread
    from nettebench.training import distributed, outcome
    from nettebench.training.loop import TrainEpoch

    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    step_s = STEP_S[rank]
    local = TrainEpoch(
        loss=1.0, seconds=sum(step_s), data_wait_s=0.0, images=16 * len(step_s),
        img_s=16 * len(step_s) / sum(step_s), steps_run=len(step_s), extrapolated=False,
        step_s=step_s, step_images=[16] * len(step_s),
    )  # fmt: skip
    train = distributed.DataParallel.from_env().combine_train(local)
    row = {"step_ms": spread.step_ms_text(train.step_s), "_step_images": train.step_images}
    # should the ranks' step counts ever differ (rank 1 one step short), no collective of
    # unequal lists: each step's images are this process's scaled by the cell's share
    uneven = distributed._combine_steps(step_s[: 4 - rank], [16] * (4 - rank), 2.0)
    if rank == 0:
        found = {**outcome.step_spread([row]), "images": train.images, "uneven": uneven}
        Path(out).write_text(json.dumps(found))
    dist.destroy_process_group()


def test_a_data_parallel_cells_step_rate_counts_the_images_of_every_process(spawned):
    """The summary's img/s is the whole cell's: each step's images over both processes (32)
    over the step's time (the slower process's), not one process's 16 images."""
    found = json.loads((spawned / "summary.json").read_text())
    slowest = [max(times) for times in zip(*STEP_S.values(), strict=True)]
    expected = statistics.median(2 * 16 / s for s in slowest)  # 213.3 img/s
    assert found["train_img_s"] == pytest.approx(expected, rel=1e-4)
    assert found["images"] == 2 * 16 * 4
    assert found["uneven"] == [STEP_S[0], [32.0] * 4]


def _spawned_checks(rank: int, world: int, folder: str) -> None:
    """The process group checks of one spawn, each with its own rendezvous: the step of two
    processes, their combined summary, then, in rank 0 alone once that group is gone, the
    one-process step (its world of one: no DDP, as in a one-process cell)."""
    out = Path(folder)
    _one_step(rank, world, f"file://{out / 'rendezvous'}", str(out / "two.pt"))
    _combined_summary(rank, world, f"file://{out / 'rdzv'}", str(out / "summary.json"))
    if rank == 0:
        _one_step(0, 1, f"file://{out / 'alone'}", str(out / "one.pt"))


@pytest.fixture(scope="module")
def spawned(tmp_path_factory):
    """One spawn of two processes for the tests that read what a process group computed (each
    spawned process imports torch again: one spawn, not three)."""
    import torch.multiprocessing as mp

    folder = tmp_path_factory.mktemp("spawned")
    mp.spawn(_spawned_checks, args=(2, str(folder)), nprocs=2)
    return folder


def test_the_plain_ddp_baseline_times_the_slowest_process_of_each_step(tmp_path, capsys):
    """The baseline the scaling table is read against (benchmarks.ddp_plain): the same model
    and global batch, gloo, synthetic tensors; the global batch over the median step. (Its
    efficiency needs a 1-process run too: none here, so none is claimed.)"""
    from nettebench.benchmarks import ddp_plain

    out = tmp_path / "plain.json"
    argv = ["--processes", "2", "--batch-size", "4", "--image-size", "32", "--steps", "2",
            "--warmup", "1", "--threads", "2", "--out", str(out)]  # fmt: skip
    assert ddp_plain.main(argv) == 0
    [result] = json.loads(out.read_text())["results"]
    assert result["processes"] == 2 and len(result["step_s"]) == 2
    assert result["img_s"] == pytest.approx(4 / statistics.median(result["step_s"]))
    assert result["efficiency"] is None
    assert "2 process(es), 1 thread(s) each: " in capsys.readouterr().out


@pytest.mark.workflow
def test_the_workflow_submits_a_data_parallel_cell_with_a_gpu_per_process(tmp_path):
    """What the executor gets for the job (SLURM's plugin submits gpu=N as --gpus=N, mem_mb as
    --mem): N GPUs, the memory of N processes, and the trainer's --processes N. (The CPUs, N x
    (workers + 1) on a cluster, are every core in a local run: tests/test_resources.py.)"""
    from tests.workflow_helpers import copy_workflow, job_blocks, snakemake, write_config

    workdir = copy_workflow(tmp_path)
    config = write_config(
        workdir,
        {
            "datasets": {"syn": {"synthetic": {"size": 40, "train_images": 64, "val_images": 16}}},
            "matrix": {
                "model": "resnet18",
                "batch_size": 32,
                "epochs": 1,
                "workers": 3,
                "processes": [1, 4],
            },
        },  # fmt: skip
    )
    dry = snakemake(
        workdir, "-n", "-p", "--configfile", str(config), "--replace-workflow-config",
        "--cores", "2", "--resources", "gpu=4",
    ).stdout  # fmt: skip
    jobs = job_blocks(dry, "cell_train")

    def output(block):
        return block.split("output:")[1].splitlines()[0]

    def shell(block):
        return block.split("Shell command:")[1].splitlines()[0]

    four = next(block for block in jobs if "/processes~4/" in output(block))
    one = next(block for block in jobs if "/processes~4/" not in output(block))

    def asked(block):
        return dict(re.findall(r"(\w+)=(\d+)", block.split("resources:")[1].splitlines()[0]))

    resources = {"four": asked(four), "one": asked(one)}
    assert resources["four"]["gpu"] == "4" and resources["one"]["gpu"] == "1"
    assert int(resources["four"]["mem_mb"]) > 3 * int(resources["one"]["mem_mb"])
    assert "--processes 4" in shell(four) and "--processes" not in shell(one)


def _failure(codes: dict[int, int]):
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

    failures = {rank: ProcessFailure(rank, 1000 + rank, code, "") for rank, code in codes.items()}
    return ChildFailedError("cell_job", failures)


def test_an_out_of_memory_recorded_by_any_process_is_the_cells_result(tmp_path, capsys):
    """The process that ran out of memory wrote metrics.json and exited with OOM_EXIT (so the
    agent stopped the others, which may wait for it in an all-reduce): the job succeeds."""
    from nettebench.training import distributed

    started = time.time() - 1
    (tmp_path / "metrics.json").write_text(json.dumps({"status": "oom"}))
    failure = _failure({0: 143, 1: distributed.OOM_EXIT})
    assert launch._failed(cell(), tmp_path, failure, started) == 0
    assert "oom:" in capsys.readouterr().err
    # an older metrics.json (an earlier run's) is not this launch's outcome
    assert launch._failed(cell(), tmp_path, failure, time.time() + 60) == 1


def test_a_failed_process_is_an_error_even_beside_an_ok_metrics_json(tmp_path, capsys):
    """Rank 0 wrote an ``ok`` result in this launch, yet a process failed: that is no outcome
    to keep (only one a process records as its own, an out-of-memory, is): the job fails."""
    (tmp_path / "metrics.json").write_text(json.dumps({"status": "ok"}))
    failure = _failure({1: 1})  # rank 0 finished; rank 1 did not
    assert launch._failed(cell(), tmp_path, failure, time.time() - 60) == 1
    err = capsys.readouterr().err
    assert "error: " in err and "process 1 of 2" in err and "exited with status 1" in err


def test_a_stop_every_process_ended_on_is_an_interruption(tmp_path, capsys):
    assert launch._failed(cell(), tmp_path, _failure({0: 130, 1: 130}), time.time()) == 130
    assert "stopped in all 2 processes" in capsys.readouterr().err


def test_one_process_is_a_no_op_at_every_point_of_the_seam():
    """The trainer's one object for data parallelism (DataParallel) at one process: every point
    hands back what it was given, and this process writes."""
    from nettebench.training import distributed

    alone = distributed.DataParallel.from_env()
    assert alone == distributed.ALONE and alone.alone and alone.writer
    runner, loaders, stop, train, split = (object() for _ in range(5))
    assert alone.wrap(runner) is runner and alone.agreed(stop) is stop
    assert alone.shard(loaders, 32) == (loaders, 32) and alone.local_batch(32) == 32
    assert alone.combine_train(train) is train
    assert alone.validate(runner, lambda seen: (seen, "val"), split) == (runner, "val")
    built = []
    alone.once(False, lambda: built.append("no"))
    alone.once(True, lambda: built.append("yes"))
    assert built == ["yes"]


def test_processes_that_ran_out_of_memory_write_their_outcome_and_end(monkeypatch):
    from nettebench.training import distributed

    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    here = distributed.DataParallel.from_env()
    assert here.writes_results("oom") and not here.writes_results("ok")
    assert not here.runs_after_epochs("oom") and here.runs_after_epochs("ok")
    oom = SimpleNamespace(status="oom", message="out of memory")
    with pytest.raises(SystemExit) as ended:
        here.settle({"status": "oom"}, oom, 0.0, lambda: {"status": "oom"})
    assert ended.value.code == distributed.OOM_EXIT
    assert here.threads_share(4) == 2 and here.local_batch(32) == 16
    with pytest.raises(distributed.DistributedError, match="does not split over 2"):
        here.local_batch(33)


def test_the_job_gives_itself_the_environment_its_processes_will_see(monkeypatch):
    """launch.prepare, before the result's key reads the environment: each process's share of
    the threads as OMP_NUM_THREADS and torchrun's NCCL default; nothing for one process or
    inside a process torchrun started; a value the user set is kept."""
    for name in ("OMP_NUM_THREADS", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    launch.prepare(cell(processes=1), 8)
    assert "OMP_NUM_THREADS" not in os.environ
    monkeypatch.setenv("LOCAL_RANK", "0")
    launch.prepare(cell(processes=4), 8)
    assert "OMP_NUM_THREADS" not in os.environ
    monkeypatch.delenv("LOCAL_RANK")
    launch.prepare(cell(processes=4), 8)
    assert os.environ["OMP_NUM_THREADS"] == "2"
    assert os.environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "1"
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    launch.prepare(cell(processes=2), 8)
    assert os.environ["OMP_NUM_THREADS"] == "3"


def test_a_data_parallel_cell_outside_torchrun_says_how_to_start_it(monkeypatch):
    import torch

    from nettebench.training import distributed

    for name in ("LOCAL_RANK", "WORLD_SIZE", "RANK"):
        monkeypatch.delenv(name, raising=False)
    here = distributed.DataParallel.from_env
    assert here() == distributed.ALONE
    assert here().launches(cell()) and not here().launches(cell(processes=1))
    with pytest.raises(distributed.DistributedError, match="none runs under torchrun"):
        here().start(cell(), torch.device("cpu"), None)
    monkeypatch.setenv("WORLD_SIZE", "3")  # not torchrun's worker without LOCAL_RANK too
    assert here().world == 1 and here().launches(cell())
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert here().world == 3 and not here().launches(cell())
    with pytest.raises(distributed.DistributedError, match="3 were started"):
        here().start(cell(), torch.device("cpu"), None)
