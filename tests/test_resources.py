"""What jobs ask a cluster for: sized from the cell, never below what the study measured."""

from __future__ import annotations

import json
import re

import pytest

from nettebench.records.environment import parse_scontrol, slurm_job
from nettebench.study import resources
from nettebench.vocabulary.cell import CellSpec

IMAGENETTE = (9469, 3925)


def cell(**overrides) -> CellSpec:
    return CellSpec(dataset="imagenette2-320", **overrides)


# The study's own measured times (docs/seed-study.md): 16 GB T4, 10 epochs, fp32/O0, and
# its CPU baseline (resnet34, one epoch, 4 vCPUs). A request must cover them (the T4 is the
# slowest GPU it used) and should not ask for absurdly more.
@pytest.mark.parametrize(
    ("spec", "measured_s"),
    [
        (cell(model="resnet18", batch_size=256), 631.7),
        (cell(model="resnet34", batch_size=256), 733.0),
        (cell(model="resnet50", batch_size=128), 1440.3),
        (cell(model="resnet34", epochs=1, device="cpu", precision="fp32", workers=3), 4716.0),
    ],
)
def test_runtime_covers_the_study_measurements_with_margin(spec, measured_s):
    request = resources.train_job(spec, IMAGENETTE)
    assert 1.0 < request.runtime * 60 / measured_s < 4.0, request


def test_gpu_only_for_cells_that_train_on_one():
    assert resources.train_job(cell(), IMAGENETTE).gpu == 1  # device auto
    assert resources.train_job(cell(device="cuda"), IMAGENETTE).gpu == 1
    assert resources.train_job(cell(device="cpu", precision="fp32"), IMAGENETTE).gpu == 0
    assert resources.bench_job(cell(device="cpu", precision="fp32")).gpu == 0


def test_cpus_are_the_loader_workers_plus_the_trainer():
    assert resources.train_job(cell(workers=4), IMAGENETTE).cpus == 5
    assert resources.train_job(cell(workers=0), IMAGENETTE).cpus == 1


def test_runtime_follows_epochs_model_dataset_and_max_steps():
    def minutes(spec, images=IMAGENETTE):
        return resources.train_job(spec, images).runtime

    assert minutes(cell(epochs=40)) > 3 * minutes(cell(epochs=10))
    assert minutes(cell(model="resnet50", epochs=40)) > minutes(cell(model="resnet18", epochs=40))
    assert minutes(cell(epochs=40), (94690, 39250)) > 5 * minutes(cell(epochs=40))
    assert minutes(cell(epochs=40, max_steps=5)) < minutes(cell(epochs=40)) / 4
    assert minutes(cell(epochs=1, max_steps=5)) == resources.MIN_RUNTIME_MIN
    # an unknown model is over-, not under-requested
    assert minutes(cell(model="some_new_net", epochs=40)) >= minutes(cell(model="vgg19", epochs=40))


def test_memory_follows_where_the_activations_live():
    def mem(**kw):
        return resources.train_job(cell(**kw), IMAGENETTE).mem_mb

    cpu = {"device": "cpu", "precision": "fp32"}
    # on a CPU the activations are host memory: they grow with batch, image size and model
    assert mem(batch_size=256, **cpu) > mem(batch_size=32, **cpu) + 5000
    assert mem(model="resnet50", batch_size=64, **cpu) > mem(model="resnet18", batch_size=64, **cpu)
    assert mem(batch_size=64, image_size=320, **cpu) > mem(batch_size=64, **cpu)
    # on a GPU they are not; the loader workers and, for `cached`, the decoded store are
    assert mem(batch_size=256) < mem(batch_size=256, **cpu)
    assert mem(workers=8) > mem(workers=2)
    train, val = IMAGENETTE  # the store: whole 3:2 training frames, square val images
    store_mb = (train * 384 + val * 256) * 256 * 3 / 2**20
    assert mem(loader="cached") - mem() >= store_mb
    assert all(mem(**kw) % 256 == 0 and mem(**kw) >= 2048 for kw in ({}, cpu))


def test_a_retry_asks_for_more_time_and_memory():
    first = resources.train_job(cell(), IMAGENETTE)
    second = first.for_attempt(2)
    assert (second.runtime, second.mem_mb) == (2 * first.runtime, 2 * first.mem_mb)
    assert (second.cpus, second.gpu) == (first.cpus, first.gpu)


def test_a_profile_run_needs_the_cells_memory_but_a_benchs_time():
    spec = cell(model="resnet50", batch_size=128, loader="cached")
    profile = resources.profile_job(spec, IMAGENETTE)
    train, bench = resources.train_job(spec, IMAGENETTE), resources.bench_job(spec)
    assert (profile.cpus, profile.mem_mb, profile.gpu) == (train.cpus, train.mem_mb, train.gpu)
    assert profile.runtime == bench.runtime < train.runtime


def test_every_rule_runs_without_a_total_core_count():
    """On a cluster (`--executor slurm`, no --cores) a rule whose threads read
    `workflow.cores` directly stops the whole workflow at parse time."""
    from tests.workflow_helpers import REPO

    for rules in sorted((REPO / "rules").glob("*.smk")):
        for number, line in enumerate(rules.read_text().splitlines(), 1):
            assert not line.strip().startswith("threads: workflow.cores"), f"{rules}:{number}"


def test_batch_size_auto_is_sized_as_its_largest_try():
    assert resources.train_job(cell(batch_size="auto"), IMAGENETTE) == resources.train_job(
        cell(batch_size=256), IMAGENETTE
    )


def test_dataset_images_prefers_what_is_on_disk(tmp_path):
    info = tmp_path / "dataset.json"
    synthetic = {"train_images": 1000, "val_images": 200}
    assert resources.dataset_images(synthetic, None, info) == (1000, 200)
    assert resources.dataset_images(None, (9469, 3925), info) == (9469, 3925)
    assert resources.dataset_images(None, (None, None), info) == resources.DEFAULT_IMAGES
    assert resources.dataset_images(None, None, None) == resources.DEFAULT_IMAGES
    info.write_text(json.dumps({"root": ".", "train_images": 12, "val_images": 3}))
    assert resources.dataset_images(synthetic, (9469, 3925), info) == (12, 3)
    info.write_text("not json")
    assert resources.dataset_images(synthetic, None, info) == (1000, 200)


# Lines of `scontrol show job` from the test cluster (SLURM 22.05), for a requeued job.
SCONTROL = """JobId=7 JobName=0c1c4f2e
   JobState=RUNNING Reason=None Dependency=(null)
   Requeue=1 Restarts=1 BatchFlag=1 Reboot=0 ExitCode=0:0
   Partition=main AllocNode:Sid=localhost:12914
   NodeList=vm
   BatchHost=vm
   StdErr=/w/.snakemake/slurm_logs/rule_cell_train/x/7.log
   StdOut=/w/.snakemake/slurm_logs/rule_cell_train/x/7.log
"""


def test_slurm_job_fields_from_environment_and_scontrol():
    outside = slurm_job({}, scontrol={})
    assert set(outside.values()) == {None}
    fields = parse_scontrol(SCONTROL)
    job = slurm_job({"SLURM_JOB_ID": "7"}, scontrol=fields)
    assert job == {
        "slurm_node": "vm",
        "slurm_partition": "main",
        "slurm_restart_count": 1,
        "slurm_log": "/w/.snakemake/slurm_logs/rule_cell_train/x/7.log",
    }
    # the node as the job's environment names it; the restart count as the controller counts
    # it (a job step's SLURM_RESTART_COUNT can read 0 after a requeue), else the environment's
    env = {"SLURM_JOB_ID": "7", "SLURMD_NODENAME": "n1", "SLURM_RESTART_COUNT": "0"}
    job = slurm_job(env, scontrol=fields)
    assert (job["slurm_node"], job["slurm_restart_count"]) == ("n1", 1)
    assert slurm_job({**env, "SLURM_RESTART_COUNT": "2"}, scontrol={})["slurm_restart_count"] == 2


def test_a_data_parallel_cell_asks_for_a_gpu_cpus_and_memory_per_process():
    """processes 4 on one node: SLURM's --gpus=4 (the executor's `gpu`), the workers and
    trainer of each process, each process's memory (its share of the batch) plus the job's."""
    one = resources.train_job(cell(workers=4), IMAGENETTE)
    four = resources.train_job(cell(workers=4, processes=4), IMAGENETTE)
    assert (one.gpu, four.gpu) == (1, 4)
    assert (one.cpus, four.cpus) == (5, 20)
    assert 3 * one.mem_mb < four.mem_mb < 5 * one.mem_mb
    assert four.runtime < one.runtime  # four devices share the epochs
    cpu = resources.train_job(cell(device="cpu", precision="fp32", processes=2), IMAGENETTE)
    assert cpu.gpu == 0 and cpu.cpus == 10

    # the decoded store is shared by the processes' mappings: a second process adds as much
    # to a cached cell as to a pil one, not a second store
    def added(loader):
        one, two = (
            resources.train_job(cell(loader=loader, processes=n), IMAGENETTE).mem_mb for n in (1, 2)
        )
        return two - one

    assert abs(added("cached") - added("pil")) <= 512


# A study whose jobs ask for different CPU counts: loader workers 0, 3 and, in two processes,
# 1 each; a CPU baseline with 2 workers; an inference cell with 2.
DRY_RUN_STUDY = {
    "datasets": {
        "tiny": {
            "synthetic": {"size": 32, "train_images": 48, "val_images": 16, "classes": 4, "seed": 0}
        }
    },
    "matrix": {
        "model": "resnet18",
        "precision": "O0",
        "batch_size": 16,
        "epochs": 1,
        "image_size": 32,
        "workers": [0, 3],
        "include": [{"workers": 1, "processes": 2}],
    },
    "cpu_baseline": {
        "model": "resnet18",
        "batch_size": 16,
        "epochs": 1,
        "image_size": 32,
        "workers": 2,
    },
    "inference": {
        "model": "resnet18",
        "precision": "bf16",
        "batch_size": 1,
        "image_size": 32,
        "workers": 2,
    },
}


@pytest.mark.workflow
def test_a_dry_run_shows_the_cpus_memory_and_gpus_each_job_asks_for(tmp_path):
    """What `snakemake -n` lists is what a SLURM submission asks for: cpus_per_task (which the
    SLURM executor submits as --cpus-per-task, and which the job then runs with as its threads)
    is one per loader worker plus one, per process, read here from the cell's path; every job
    a cluster runs shows its mem_mb, and every job that may use a GPU its gpu. Not the dry
    run's threads: Snakemake holds them to the dry run's cores (1 in a SLURM dry run)."""
    from tests.workflow_helpers import copy_workflow, dry_run_jobs, run_study, write_config

    workdir = copy_workflow(tmp_path)
    config = write_config(workdir, DRY_RUN_STUDY)
    # no profile: the default one's `gpu=1` caps what a local dry run shows; a cluster's has
    # no such limit
    text = run_study(workdir, config, "-n", "--workflow-profile", "none").stdout
    jobs = dry_run_jobs(text)

    cpus = []
    for job in jobs:
        rule, output, asked = job["rule"], job["output"], job["resources"]
        if rule not in ("cell_train", "cpu_baseline_train", "inference_measure"):
            continue
        workers = int(re.search(r"/workers~(\d+)/", output).group(1))
        found = re.search(r"/processes~(\d+)/", output)
        processes = int(found.group(1)) if found else 1
        cpus.append((workers + 1) * processes)
        assert int(asked["cpus_per_task"]) == cpus[-1], (rule, output, asked)
        gpus = 0 if "/device~cpu/" in output else processes
        assert int(asked["gpu"]) == gpus, (rule, output, asked)
        assert int(asked["mem_mb"]) >= resources.MIN_MEM_MB, (rule, output, asked)
    # the matrix's workers 0, 3 and 2 x (1 + 1); the baseline's and the inference cell's 2 + 1
    assert sorted(cpus) == [1, 3, 3, 4, 4]

    # every job but the localrules' (which give no runtime)
    submitted = [(job["rule"], job["resources"]) for job in jobs if "runtime" in job["resources"]]
    assert {rule for rule, _ in submitted} >= {"dataset_synthesize", "cell_train"}
    for rule, asked in submitted:
        assert int(asked["cpus_per_task"]) >= 1 and int(asked["mem_mb"]) > 0, (rule, asked)
