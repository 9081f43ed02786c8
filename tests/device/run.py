"""The device command: every GPU check of the project in one run on one H200, ordered by value,
planned to fit in 7 minutes, returning what finished however it ends.

    PYTHONPATH=scripts python3 tests/device/run.py --out $OUT            # on the device
    PYTHONPATH=scripts python3 tests/device/run.py --out /tmp/o --smoke  # on a CPU, seconds

The cases run in this order (:data:`CASES`), each a few commands in a process group of its
own: the goal data and its decoded store; a warm-up (a few steps of the goal cell's own command:
the first process to read torch, CUDA and cuDNN from a cold disk pays for it, not a goal cell);
the goal cells (resnet18 and resnet50 O1 ``cached``, 10 epochs, batch 256, each followed by its
compute ceiling in the same process); the other precision modes (O0, tf32, O2, O3, bf16, O1
with ``pil``), apex O1-O3 (the carried wheel of ``tests/device/prepare_carry.py``, on the
``PYTHONPATH`` of those three cases only; the table says which kernels it had), the streamed
store and the sync check; an out-of-memory cell (under a forced memory cap, a few pil batches);
the profiles (``cached`` loader: their ms/step are the step's, not the decoder's); the
inference cases (every phase capped by ``--max-seconds``); a data-parallel cell of 2 processes
started by torchrun (NCCL where the machine has 2 GPUs, else gloo on its CPU: one GPU cannot
hold two NCCL ranks); a ``deterministic`` cell.

Each case's planned seconds on one H200 (its own estimate) are printed before anything runs,
with their sum; a case that no longer fits in what is left of ``--deadline-s`` is recorded as
``not run``, and a running case is stopped at the deadline (its whole process group: SIGTERM,
then SIGKILL) and recorded as ``timeout``. After every case ``table.md``, ``cases.jsonl`` (one
record per case) and ``records.tar.gz`` (every case's log and result files) are written again,
so a run cut short still returns what finished; nothing else goes under ``--out``
(:mod:`out_files`: at most 7). SIGTERM or SIGINT to this process stops the case in flight the
same way and writes the table.

``--smoke`` runs the same cases on the CPU with tiny sizes (modes a CPU cannot run come back
``unsupported``); ``--only`` picks cases by name, and with ``--keep`` reuses an earlier run's
``--work`` folder (its data, store and apex site; a case not run now counts as it ended then),
so a rerun of what failed costs no preparation (tests/test_device_suite.py).

Its exit status says whether the goal rows were measured: 0 when every goal cell run ended
``ok`` with its numbers and no case failed, 1 when a goal cell run was not measured, 2 when the
goal cells were but another case failed, timed out or was not run (``unsupported`` and an
expected ``oom`` are results, not failures).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import out_files  # tests/device/, beside this script

from nettebench.records.energy import energy_columns

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
PLAN_S = 420.0  # the planned total on one H200: 7 minutes
DEADLINE_S = 540.0  # every case stopped by then on the device (its command's limit: 600 s)
SMOKE_DEADLINE_S = 1800.0  # the smoke's, on a CPU other work may load (7-10 minutes seen)
GOALS = {"resnet18": 12.0, "resnet50": 25.0}  # process start to metrics written (issue 12)
GOAL_CASES = ("resnet18-O1-cached-10ep", "resnet50-O1-cached-10ep")
RESULTS = ("ok", "unsupported", "oom")  # statuses that are a case's result, not its failure
STATUSES = "statuses.json"  # in --work: each case's last status, read back by --keep
CEILING_SHARE, FIRST_EPOCH_S, STREAMED_SHARE = 0.90, 2.0, 0.90
KILL_GRACE_S = 5.0
KEPT = (".log", ".json", ".jsonl", ".csv", ".md", ".txt")  # what records.tar.gz keeps
BIG_FILE = 4 * 2**20  # a trace or store bigger than this stays behind
# A memory cap no resnet50 fp32 step at batch 256 fits under (a real torch.OutOfMemoryError
# from the caching allocator, without decoding a batch no card holds).
OOM_MEMORY_FRACTION = 0.02
OOM_MAIN = (
    "import sys, torch\n"
    "if torch.cuda.is_available():\n"
    f"    torch.cuda.set_per_process_memory_fraction({OOM_MEMORY_FRACTION})\n"
    "from nettebench.training.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


@dataclass(frozen=True)
class Sizes:
    """What a case trains on: the device's goal sizes, or the smoke run's tiny ones."""

    device: str
    image: int  # synthetic images' shortest side
    train: int
    val: int
    classes: int
    batch: int
    crop: int  # the trainer's image size
    workers: int
    goal_epochs: int
    mode_epochs: int
    ceiling: tuple[str, ...]  # cell_job's ceiling options
    profile: tuple[str, ...]
    inference: tuple[str, ...]
    batches: tuple[int, ...]


GPU = Sizes(
    "cuda", 320, 9469, 3925, 10, 256, 224, min(12, os.cpu_count() or 1), 10, 2,
    ("--ceiling-warmup-steps", "10", "--ceiling-steps", "30"),
    ("--warmup-steps", "10", "--steps", "20"),
    ("--warmup", "10", "--max-seconds", "3", "--latency-queries", "1024"),
    (1, 8, 64, 256),
)  # fmt: skip
SMOKE = Sizes(
    "cpu", 40, 32, 16, 4, 8, 32, 1, 1, 1,
    ("--ceiling-warmup-steps", "1", "--ceiling-steps", "2", "--ceiling-max-seconds", "1"),
    ("--warmup-steps", "1", "--steps", "2", "--threads", "1"),
    ("--warmup", "1", "--max-seconds", "0.5", "--latency-queries", "8", "--threads", "1"),
    (1, 4),
)  # fmt: skip


@dataclass
class Case:
    """One row of the table: commands run in order in one process group, then ``read``."""

    name: str
    estimate_s: float  # planned seconds on one H200
    commands: Callable[[Suite], list[list[str]]]
    read: Callable[[Suite], dict] | None = None
    needs: tuple[str, ...] = ()  # cases that must have ended ok first
    smoke_s: float = 180.0  # the limit of its smoke run (a loaded CPU: generous; 73 s seen)
    env: Callable[[Suite], dict] | None = None  # its own environment (default: the suite's)
    # what it writes, emptied before it runs (default: its cell folder), so that a case rerun
    # under --keep never reports what an earlier run left
    folders: Callable[[Suite], list[Path]] | None = None

    def outputs(self, s: Suite) -> list[Path]:
        return self.folders(s) if self.folders else [s.cell_dir(self.name)]


@dataclass
class Suite:
    sizes: Sizes
    out: Path
    work: Path
    deadline: float  # time.monotonic() at which every case is stopped
    smoke: bool
    env: dict = field(default_factory=dict)
    rows: list[dict] = field(default_factory=list)
    current: subprocess.Popen | None = None
    earlier: dict[str, str] = field(default_factory=dict)  # --keep: statuses of earlier runs

    @property
    def data(self) -> Path:
        return self.work / "data" / "dataset.json"

    @property
    def store(self) -> Path:
        return self.work / "store"

    def cell_dir(self, name: str) -> Path:
        return self.work / "cells" / name

    def status(self, name: str) -> str | None:
        """``name``'s status in this run, else (under --keep) in the run that left --work."""
        now = next((row["status"] for row in self.rows if row["case"] == name), None)
        return now if now is not None else self.earlier.get(name)


# ------------------------------------------------------------------------------------ commands


def python(*args: str) -> list[str]:
    return [sys.executable, *args]


def make_data(s: Suite) -> list[list[str]]:
    z = s.sizes
    return [python(
        "-m", "nettebench", "datasets", "synthetic", "--out-dir", str(s.data.parent), "--name",
        "imagenette-320-shaped", "--size", str(z.image), "--train-images", str(z.train),
        "--val-images", str(z.val), "--classes", str(z.classes),
    )]  # fmt: skip


def make_store(s: Suite) -> list[list[str]]:
    return [python(
        "-m", "nettebench", "data", "store", "--data", str(s.data), "--out-dir", str(s.store),
        "--resolution", str(round(s.sizes.crop / 0.875)),
    )]  # fmt: skip


def cell(
    name: str,
    model: str,
    precision: str,
    *options: str,
    goal: bool = False,
    smoke=None,
    epochs: int | None = None,
):
    """A trainer cell through cell_job (its ceiling right after its epochs, same process);
    ``smoke``: the precision its smoke run uses instead (a goal cell's path, on a CPU)."""

    def commands(s: Suite) -> list[list[str]]:
        z, out = s.sizes, s.cell_dir(name)
        precision_here = smoke if s.smoke and smoke else precision
        count = (z.goal_epochs if goal else z.mode_epochs) if epochs is None else epochs
        channels = [] if precision_here in ("O0", "tf32") else ["--channels-last", "true"]
        return [python(
            "-m", "nettebench", "benchmarks", "cell-job", "--data", str(s.data),
            "--out-dir", str(out), "--ceiling", str(out / "ceiling.json"), "--store", str(s.store),
            "--retrain",
            "--model", model, "--precision", precision_here, "--epochs", str(count),
            "--batch-size", str(z.batch), "--image-size", str(z.crop), "--workers",
            str(z.workers), "--device", z.device, *channels, *z.ceiling, *options,
        )]  # fmt: skip

    return commands


def oom_cell(s: Suite) -> list[list[str]]:
    z, out = s.sizes, s.cell_dir("oom")
    return [python(
        "-c", OOM_MAIN, "--data", str(s.data), "--out-dir", str(out), "--retrain", "--model",
        "resnet50", "--precision", "O0", "--loader", "pil", "--epochs", "1", "--max-steps", "2",
        "--batch-size", str(z.batch), "--image-size", str(z.crop), "--workers", str(z.workers),
        "--device", z.device,
    )]  # fmt: skip


def install_apex(s: Suite) -> list[list[str]]:
    wheels = sorted((REPO / ".vendor").glob("apex-*.whl"))
    if not wheels:
        raise CaseError("no apex wheel in .vendor/: run tests/device/prepare_carry.py, carry it")
    return [python(
        "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target",
        str(s.work / "apex-site"), str(wheels[-1]),
    )]  # fmt: skip


def apex_env(s: Suite) -> dict:
    """The suite's environment with the installed apex on ``PYTHONPATH``: for the apex cases
    only (a copy; no later case imports apex)."""
    return {**s.env, "PYTHONPATH": s.env["PYTHONPATH"] + os.pathsep + str(s.work / "apex-site")}


def apex_case(level: str) -> Case:
    name = f"apex-{level}"
    commands = cell(name, "resnet18", level, "--loader", "cached", "--amp-backend", "apex")
    return Case(name, 12, commands, cell_numbers(name), needs=APEX, env=apex_env)


def warm_up(s: Suite) -> list[list[str]]:
    """A few steps of the resnet50 goal cell's own command: the machine's first reads of torch,
    CUDA, cuDNN and the store happen here, not in a goal cell's wall time."""
    return cell("warm-up", "resnet50", "O1", *CACHED, "--max-steps", "3", smoke="O0", epochs=1)(s)


def gpu_count() -> int:
    """GPUs the NVIDIA driver lists (one folder each), without importing torch."""
    folder = Path("/proc/driver/nvidia/gpus")
    return len(list(folder.iterdir())) if folder.is_dir() else 0


def data_parallel(s: Suite) -> list[list[str]]:
    """2 processes through torchrun (cell_job starts it): on 2 GPUs with NCCL; on a machine
    with fewer, on its CPU with gloo at tiny sizes (NCCL refuses two ranks on one GPU)."""
    z, out = s.sizes, s.cell_dir("dp-2proc")
    device = "cuda" if not s.smoke and gpu_count() >= 2 else "cpu"
    sizes = ["--batch-size", str(z.batch), "--image-size", str(z.crop), *z.ceiling]
    if device == "cpu":
        sizes = ["--batch-size", "8", "--image-size", "32", "--max-steps", "2", *SMOKE.ceiling]
    return [python(
        "-m", "nettebench", "benchmarks", "cell-job", "--data", str(s.data), "--out-dir", str(out),
        "--ceiling", str(out / "ceiling.json"), "--store", str(s.store), "--retrain",
        "--model", "resnet18", "--precision", "O1" if device == "cuda" else "O0", "--epochs",
        "1", *sizes, "--workers", "1", "--device", device, "--loader", "cached",
        "--processes", "2",
    )]  # fmt: skip


def sync_check(s: Suite) -> list[list[str]]:
    z = s.sizes
    return [python(
        str(HERE / "sync_check.py"), "--store", str(s.store), "--batch-size", str(z.batch),
        "--image-size", str(z.crop), "--json", str(s.cell_dir("sync-check") / "sync.json"),
    )]  # fmt: skip


def profile(precision: str):
    def commands(s: Suite) -> list[list[str]]:
        z = s.sizes
        return [python(
            "-m", "nettebench", "profiling", "--data", str(s.data), "--out-dir",
            str(s.cell_dir(f"profile-{precision}")), "--backend", "torch", "--model",
            "resnet18", "--precision", precision, *CACHED, "--store", str(s.store),
            "--batch-size", str(z.batch), "--image-size", str(z.crop), "--workers",
            str(z.workers), "--device", z.device, *z.profile,
        )]  # fmt: skip

    return commands


def inference(name: str, precisions: tuple[str, ...], batches: Callable[[Sizes], tuple[int, ...]]):
    def commands(s: Suite) -> list[list[str]]:
        z = s.sizes
        model = "resnet18" if s.smoke else "resnet50"
        return [
            python(
                "-m",
                "nettebench",
                "inference",
                "measure",
                "--data",
                str(s.data),
                "--out",
                str(s.cell_dir(name) / f"{p}-batch{b}.json"),
                "--model",
                model,
                "--precision",
                p,
                "--batch-size",
                str(b),
                "--image-size",
                str(z.crop),
                "--workers",
                str(z.workers),
                "--device",
                z.device,
                *z.inference,
            )  # fmt: skip
            for p in precisions
            for b in batches(z)
        ]

    return commands


class CaseError(RuntimeError):
    """A case that cannot start (its message is the row's note)."""


# --------------------------------------------------------------------------------- the readers


def read_json(path: Path) -> dict:
    """The JSON at ``path``, or {} when it is missing or unreadable (never raises)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def cell_numbers(name: str, goal: str | None = None) -> Callable[[Suite], dict]:
    def read(s: Suite) -> dict:
        out = s.cell_dir(name)
        record, ceiling = read_json(out / "metrics.json"), read_json(out / "ceiling.json")
        if not record:
            return {"result": "no metrics.json"}
        summary, environment = record.get("summary") or {}, record.get("environment") or {}
        startup = record.get("startup") or {}
        found = {
            "result": record.get("status"),
            "message": record.get("message"),
            "wall_s": summary.get("wall_s"),
            "train_img_s": summary.get("train_img_s"),
            "ceiling_img_s": ceiling.get("img_s"),
            "first_epoch_overhead_s": summary.get("first_epoch_overhead_s"),
            "data_wait_share": summary.get("data_wait_share"),
            "peak_mem_mb": summary.get("peak_mem_mb"),
            "store_mem_mb": summary.get("store_mem_mb"),
            "final_top1": summary.get("final_top1"),
            "to_first_step_s": startup.get("to_first_step_s"),
            "after_last_step_s": startup.get("after_last_step_s"),
            "startup": startup,
            "apex_kernels": environment.get("apex_kernels"),
        }
        # the epochs' energy (NVML's counter on a GPU, RAPL on a CPU, or "not measured: why")
        energy = energy_columns(record)
        found.update({key: energy[key] for key in ("energy_j", "energy_source", "power_w")})
        found.update({key: energy[key] for key in ("j_per_img", "img_s_per_w")})
        if found["train_img_s"] and found["ceiling_img_s"]:
            found["ceiling_share"] = found["train_img_s"] / found["ceiling_img_s"]
        if goal:
            found["goal"] = judge(s, goal, found)
        return found

    return read


def judge(s: Suite, model: str, found: dict) -> str:
    """The goal cell's verdicts: wall <= goal, steady img/s >= 90 % of its ceiling, first
    epoch's overhead <= 2 s (``n/a`` in a smoke run)."""
    wall, share, first = (found.get(k) for k in ("wall_s", "ceiling_share",
                                                 "first_epoch_overhead_s"))  # fmt: skip
    parts = [
        _verdict(f"wall <= {GOALS[model]:g} s", wall is not None and wall <= GOALS[model]),
        _verdict(
            f"img/s >= {CEILING_SHARE:.0%} of ceiling", share is not None and share >= CEILING_SHARE
        ),  # fmt: skip
    ]
    if model == "resnet18":
        parts.append(_verdict(f"first epoch <= {FIRST_EPOCH_S:g} s", first is not None
                              and first <= FIRST_EPOCH_S))  # fmt: skip
    text = "; ".join(parts)
    return f"n/a (smoke): {text}" if s.smoke else text


def _verdict(goal: str, met: bool) -> str:
    return f"{goal} {'met' if met else 'MISSED'}"


def streamed_numbers(s: Suite) -> dict:
    found = cell_numbers("resnet18-O1-streamed")(s)
    resident = next((r for r in s.rows if r["case"] == "resnet18-O1-cached-10ep"), {})
    if found.get("train_img_s") and resident.get("train_img_s"):
        share = found["train_img_s"] / resident["train_img_s"]
        found["goal"] = _verdict(f"{share:.0%} of resident >= {STREAMED_SHARE:.0%}",
                                 share >= STREAMED_SHARE)  # fmt: skip
    return found


def sync_numbers(s: Suite) -> dict:
    found = read_json(s.cell_dir("sync-check") / "sync.json")
    counts = {p: (found.get(p) or {}).get("syncs") for p in ("resident", "streamed")}
    return {
        "result": "ok" if found else "no sync.json",
        "note": f"syncs per epoch: {counts} ({found.get('how', '')})",
        "goal": _verdict("no host syncs from the cached loader", set(counts.values()) == {0}),
    }


def oom_numbers(s: Suite) -> dict:
    found = cell_numbers("oom")(s)
    expected = "ok" if s.smoke else "oom"  # a CPU has no memory cap: the cell just trains
    found["goal"] = _verdict(f"status {expected}", found.get("result") == expected)
    return found


def profile_numbers(precision: str) -> Callable[[Suite], dict]:
    def read(s: Suite) -> dict:
        record = read_json(s.cell_dir(f"profile-{precision}") / "profile.json")
        window = record.get("window") or {}
        return {"result": record.get("status") or "no profile.json",
                "note": f"{window.get('ms_per_step') or 0:.1f} ms/step, "
                        f"{window.get('steps_profiled')} steps"}  # fmt: skip

    return read


def dp_numbers(s: Suite) -> dict:
    """The 2-process cell's numbers, and whether torchrun really started 2 processes: its
    command line in the case's log, and one line per process from the trainer."""
    found = cell_numbers("dp-2proc")(s)
    log = (s.work / "logs" / "dp-2proc.log").read_text(errors="replace")
    launched = [line for line in log.splitlines() if line.startswith("data-parallel: torchrun ")]
    processes = log.count("cached store: ")  # each process says where its store lives
    record = read_json(s.cell_dir("dp-2proc") / "metrics.json")
    on = (record.get("device") or {}).get("type")
    backend = {"cuda": "NCCL", "cpu": "gloo"}.get(on, "?")
    two = bool(launched) and "--nproc-per-node=2" in launched[0] and processes == 2
    found["goal"] = _verdict(f"2 processes through torchrun ({backend}, {on})", two)
    if on == "cpu" and not s.smoke:
        found["note"] = f"{gpu_count()} GPU(s): NCCL needs 2, so gloo on the CPU"
    return found


def inference_numbers(name: str) -> Callable[[Suite], dict]:
    return lambda s: _inference_numbers(s.cell_dir(name))


def _inference_numbers(folder: Path) -> dict:
    parts, statuses = [], set()
    for path in sorted(folder.glob("*.json")):
        record = read_json(path)
        statuses.add(record.get("status"))
        offline, stream = record.get("offline") or {}, record.get("single_stream") or {}
        text = f"{path.stem} {offline.get('img_s') or 0:,.0f} img/s"
        if stream:
            text += f" p99 {stream['latency_ms']['p99']:.2f} ms"
        parts.append(text)
    return {"result": "/".join(sorted(map(str, statuses))), "note": "; ".join(parts)}


# ------------------------------------------------------------------------------------ the cases


def _all(z: Sizes) -> tuple[int, ...]:
    return z.batches


def _largest(z: Sizes) -> tuple[int, ...]:
    return z.batches[-1:]


def trained(
    name: str,
    estimate_s: float,
    model: str,
    precision: str,
    *options: str,
    smoke: str | None = None,
    goal: str | None = None,
    **case,
) -> Case:
    """A trainer cell's case (``goal``: the model whose goals its row judges)."""
    commands = cell(name, model, precision, *options, goal=goal is not None, smoke=smoke)
    return Case(name, estimate_s, commands, cell_numbers(name, goal), **case)


STORE, CACHED, APEX = ("store",), ("--loader", "cached"), ("store", "apex-wheel")
CASES: list[Case] = [
    Case("data", 40, make_data, folders=lambda s: [s.data.parent]),
    Case("store", 25, make_store, needs=("data",), folders=lambda s: [s.store]),
    Case("warm-up", 15, warm_up, cell_numbers("warm-up"), needs=STORE),
    trained(
        "resnet18-O1-cached-10ep",
        25,
        "resnet18",
        "O1",
        *CACHED,
        smoke="O0",
        goal="resnet18",
        needs=STORE,
    ),
    trained(
        "resnet50-O1-cached-10ep",
        45,
        "resnet50",
        "O1",
        *CACHED,
        smoke="O0",
        goal="resnet50",
        needs=STORE,
    ),
    *(
        trained(f"resnet18-{p}-cached", 12, "resnet18", p, *CACHED, needs=STORE)
        for p in ("O0", "tf32", "O2", "O3", "bf16")
    ),
    trained("resnet18-O1-pil", 15, "resnet18", "O1", "--loader", "pil", needs=("data",)),
    Case("apex-wheel", 3, install_apex, folders=lambda s: [s.work / "apex-site"]),
    *(apex_case(level) for level in ("O1", "O2", "O3")),
    Case(
        "resnet18-O1-streamed",
        15,
        cell(
            "resnet18-O1-streamed",
            "resnet18",
            "O1",
            *CACHED,
            "--store-placement",
            "host",
            smoke="O0",
        ),
        streamed_numbers,
        needs=STORE,
    ),
    Case("sync-check", 20, sync_check, sync_numbers, needs=STORE),
    Case("oom", 12, oom_cell, oom_numbers, needs=("data",)),
    Case("profile-O0", 12, profile("O0"), profile_numbers("O0"), needs=STORE),
    Case("profile-O3", 12, profile("O3"), profile_numbers("O3"), needs=STORE),
    Case(
        "inference-O1-batches",
        30,
        inference("inference-O1-batches", ("O1",), _all),
        inference_numbers("inference-O1-batches"),
        needs=("data",),
    ),
    Case(
        "inference-modes-largest",
        22,
        inference("inference-modes-largest", ("fp32", "tf32", "O3", "bf16"), _largest),
        inference_numbers("inference-modes-largest"),
        needs=("data",),
    ),
    Case("dp-2proc", 15, data_parallel, dp_numbers, needs=STORE),
    trained(
        "deterministic-O1-cached",
        15,
        "resnet18",
        "O1",
        *CACHED,
        "--deterministic",
        "true",
        smoke="O0",
        needs=STORE,
    ),
]


def planned_s(cases: list[Case] = CASES) -> float:
    return sum(case.estimate_s for case in cases)


# ------------------------------------------------------------------------------------ running


def kill_group(proc: subprocess.Popen) -> None:
    """End ``proc``'s whole process group: SIGTERM, then SIGKILL to what is left."""
    for sig, wait in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, 1.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        until = time.monotonic() + wait
        while time.monotonic() < until:
            proc.poll()
            if not _group_alive(proc.pid):
                break
            time.sleep(0.05)
    proc.poll()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return any(_live_in_group(pgid))


def _live_in_group(pgid: int):
    """Processes of group ``pgid`` that are not zombies (from /proc)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            yield int(entry.name)


def run_case(s: Suite, case: Case) -> dict:
    row: dict = {"case": case.name, "estimate_s": case.estimate_s}
    missing = [n for n in case.needs if s.status(n) != "ok"]
    limit = case.smoke_s if s.smoke else max(2 * case.estimate_s, case.estimate_s + 30)
    left = s.deadline - time.monotonic()
    if missing:
        return {**row, "status": "not run", "note": f"needs {', '.join(missing)} ok"}
    if left < (1.0 if s.smoke else case.estimate_s):
        return {**row, "status": "not run", "note": f"{left:.0f} s left of the deadline"}
    for folder in case.outputs(s):
        shutil.rmtree(folder, ignore_errors=True)
    try:
        commands = case.commands(s)
        env = case.env(s) if case.env else s.env
    except CaseError as error:
        return {**row, "status": "not run", "note": str(error)}
    started = time.monotonic()
    stop_at = min(started + limit, s.deadline)
    row["status"] = "ok"
    log_path = s.work / "logs" / f"{case.name}.log"
    with open(log_path, "w") as log:
        for command in commands:
            print(f"[{case.name}] {' '.join(command)[:300]}", file=log, flush=True)
            s.current = proc = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO,
                start_new_session=True,  # its own process group: killed whole, workers too
            )  # fmt: skip
            try:
                code = proc.wait(timeout=max(stop_at - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                code = None
            finally:
                kill_group(proc)  # a finished command's stray children too
                s.current = None
            if code is None:
                why = "deadline" if stop_at >= s.deadline else f"case limit {limit:.0f} s"
                row.update(status="timeout", note=f"stopped at the {why}")
                break
            if code != 0:
                row.update(status=f"failed (exit {code})", note=_tail(log_path))
                break
    row["seconds"] = round(time.monotonic() - started, 1)
    if case.read is not None:
        try:
            row.update(case.read(s))
        except Exception as error:  # a reader's bug is this case's failure, not the run's
            row.update(status="failed (reading results)", note=repr(error)[:300])
    if row["status"] == "ok" and row.get("result") not in (None, "ok"):
        row["status"] = str(row["result"])  # oom, unsupported: a result, recorded as such
    return row


def _tail(path: Path, lines: int = 3) -> str:
    text = path.read_text(errors="replace").strip().splitlines()
    return " / ".join(text[-lines:])[-400:]


# ------------------------------------------------------------------------------------ writing

COLUMNS = (
    ("case", "{}"), ("status", "{}"), ("seconds", "{:.0f}"), ("estimate_s", "{:.0f}"),
    ("wall_s", "{:.1f}"), ("to_first_step_s", "{:.2f}"), ("train_img_s", "{:,.0f}"),
    ("ceiling_img_s", "{:,.0f}"), ("ceiling_share", "{:.0%}"),
    ("first_epoch_overhead_s", "{:.2f}"), ("data_wait_share", "{:.0%}"),
    ("peak_mem_mb", "{:,.0f}"), ("store_mem_mb", "{:,.0f}"), ("final_top1", "{:.1f}"),
    ("power_w", "{:.0f}"), ("j_per_img", "{:.3f}"), ("apex_kernels", "{}"), ("goal", "{}"),
    ("note", "{}"),
)  # fmt: skip


def table(rows: list[dict]) -> str:
    head = [name for name, _ in COLUMNS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = []
        for name, fmt in COLUMNS:
            value = row.get(name)
            if name == "note" and not value:
                value = row.get("message")
            try:
                text = "-" if value is None else fmt.format(value)
            except (TypeError, ValueError):
                text = str(value)
            cells.append(text.replace("|", "/").replace("\n", " ")[:200])
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write(s: Suite, header: str) -> None:
    """table.md, cases.jsonl and records.tar.gz under --out, each replaced whole."""
    _replace(s.out / "table.md", header + "\n" + table(s.rows))
    _replace(s.out / "cases.jsonl", "".join(json.dumps(r, default=str) + "\n" for r in s.rows))
    partial = s.out / ".records.tar.gz.part"
    with tarfile.open(partial, "w:gz") as archive:
        for path in sorted(s.work.rglob("*")):
            inside = path.relative_to(s.work)
            if inside.parts[0] == "data" and path.name != "dataset.json":
                continue  # the images stay behind
            if path.suffix in KEPT and path.is_file() and path.stat().st_size < BIG_FILE:
                archive.add(path, arcname=str(inside))
    partial.replace(s.out / "records.tar.gz")


def _replace(path: Path, text: str) -> None:
    partial = path.with_name(f".{path.name}.part")
    partial.write_text(text)
    partial.replace(path)


def verdict(rows: list[dict]) -> tuple[int, str]:
    """The exit status and its line: were the goal rows measured, did any case fail?"""
    goals = [row for row in rows if row["case"] in GOAL_CASES]
    unmeasured = [
        row["case"] for row in goals
        if row["status"] != "ok" or not row.get("wall_s") or not row.get("train_img_s")
    ]  # fmt: skip
    failed = [
        f"{row['case']} ({row['status']})" for row in rows
        if not set(row["status"].split("/")) <= set(RESULTS)  # inference: "ok/unsupported"
    ]  # fmt: skip
    if unmeasured:
        return 1, f"exit 1: goal row(s) not measured: {', '.join(unmeasured)}"
    if failed:
        measured = "the goal rows were measured" if goals else "no goal row was run"
        return 2, f"exit 2: {measured}; not ok: {', '.join(failed)}"
    measured = "the goal rows were measured" if goals else "no goal row was run"
    return 0, f"exit 0: {measured}; every case ended with its result"


def plan_text(cases: list[Case], deadline_s: float) -> str:
    lines = [f"planned on one H200: {planned_s(cases):.0f} s (at most {PLAN_S:.0f} s); "
             f"deadline {deadline_s:.0f} s"]  # fmt: skip
    lines += [f"  {case.estimate_s:4.0f} s  {case.name}" for case in cases]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="what comes back: at most 7 files")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes on the CPU")
    parser.add_argument("--work", default="/tmp/nettebench-device", help="working files")
    parser.add_argument(
        "--deadline-s",
        type=float,
        default=None,
        help="every case stopped by then (default 540: the device command's limit is 600; "
        "with --smoke 1800: a loaded CPU runs the smoke in 7-10 minutes)",
    )
    parser.add_argument("--only", nargs="+", default=None, help="these cases, in plan order")
    parser.add_argument(
        "--keep",
        action="store_true",
        help="reuse --work as an earlier run left it (data, store, apex site); a case not run "
        "now counts as it ended then (with --only: rerun what failed, not the preparation)",
    )
    args = parser.parse_args(argv)
    started = time.monotonic()
    if args.deadline_s is None:
        args.deadline_s = SMOKE_DEADLINE_S if args.smoke else DEADLINE_S
    unknown = sorted(set(args.only or ()) - {c.name for c in CASES})
    if unknown:
        parser.error(
            f"no case named {', '.join(unknown)} (the plan: {', '.join(c.name for c in CASES)})"
        )
    cases = [c for c in CASES if args.only is None or c.name in args.only]
    out, work = Path(args.out), Path(args.work)
    earlier = read_json(work / STATUSES) if args.keep else {}
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)  # a fresh run: no cell restores an earlier one
    (work / "logs").mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    path = os.environ.get("PYTHONPATH", "")
    env = {**os.environ, "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": str(REPO / "scripts") + (os.pathsep + path if path else "")}  # fmt: skip
    s = Suite(SMOKE if args.smoke else GPU, out, work, started + args.deadline_s, args.smoke, env)
    s.earlier = earlier
    header = plan_text(cases, args.deadline_s)
    if earlier:
        header += f"\nkept from {work}: " + ", ".join(f"{k} {v}" for k, v in earlier.items())
    print(header, flush=True)

    def stop(signum, _frame):
        if s.current is not None:
            kill_group(s.current)
        s.rows.append({"case": "(run)", "status": f"stopped by signal {signum}"})
        write(s, header)
        raise SystemExit(128 + signum)

    handlers = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        for case in cases:
            row = run_case(s, case)
            s.rows.append(row)
            write(s, header)
            statuses = {**s.earlier, **{r["case"]: r["status"] for r in s.rows}}
            _replace(work / STATUSES, json.dumps(statuses, indent=1))
            print(f"{row['case']}: {row['status']} ({row.get('seconds', 0):.0f} s of "
                  f"~{case.estimate_s:.0f})", row.get("goal") or "", flush=True)  # fmt: skip
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    print(table(s.rows), flush=True)
    print(f"total: {time.monotonic() - started:.0f} s", flush=True)
    out_files.check(out)
    code, line = verdict(s.rows)
    print(line, flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
