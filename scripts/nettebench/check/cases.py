"""The check's cases, in plan order: what each runs, and how its row is read back.

A case is one row of the check's table: a few commands run in order in a process group of its
own (:mod:`.runner`), then its reader, which turns the files they wrote into the row's numbers.
:data:`CASES` is the GPU user's check, each case a command a user could type:

- ``stack``: this check's own ``--stack``, in a process of its own (the driver, CUDA, torch,
  cuDNN, NVML and the TF32 getters: :mod:`.stack`);
- ``data``, ``store``: the goal data, a synthetic Imagenette-320-shaped dataset (9,469 train /
  3,925 val JPEGs), and its decoded store;
- ``warm-up``: a few steps of the resnet50 goal cell's own command, so the first reads of
  torch, CUDA, cuDNN and the store from a cold disk are paid here, not in a goal cell;
- the goal cells: resnet18 and resnet50, O1, ``cached`` loader, 10 epochs, batch 256, each
  followed by its compute ceiling in the same process (``python -m nettebench benchmarks
  cell-job``), judged against :data:`GOALS`;
- the other precision modes (O0, tf32, O2, O3, bf16), one epoch and a ceiling each;
- apex O1-O3 (``--amp-backend apex``), only where NVIDIA apex is installed (else ``skipped``).

The device command (``tests/device/run.py``) runs these cases and the developer's after them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from nettebench.check.stack import lines, summary
from nettebench.records import environment
from nettebench.records.energy import energy_columns

GOALS = {"resnet18": 12.0, "resnet50": 25.0}  # process start to metrics written (issue 12)
GOAL_CASES = ("resnet18-O1-cached-10ep", "resnet50-O1-cached-10ep")
CEILING_SHARE, FIRST_EPOCH_S = 0.90, 2.0
MODES = ("O0", "tf32", "O2", "O3", "bf16")  # the other precision modes, beside the goals' O1
APEX_LEVELS = ("O1", "O2", "O3")


@dataclass(frozen=True)
class Sizes:
    """What a case trains on: a GPU's goal sizes, or the smoke run's tiny ones."""

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
    "cuda", 320, 9469, 3925, 10, 256, 224, min(12, os.cpu_count() or 1), 10, 1,
    ("--ceiling-warmup-steps", "10", "--ceiling-steps", "30"),
    ("--warmup-steps", "10", "--steps", "20"),
    ("--warmup", "10", "--max-seconds", "1", "--latency-queries", "1024"),
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
    skip: Callable[[Suite], str | None] | None = None  # why it does not run here, or None

    def outputs(self, s: Suite) -> list[Path]:
        return self.folders(s) if self.folders else [s.cell_dir(self.name)]

    def limit_s(self, s: Suite) -> float:
        """The longest it may run before it is stopped: its smoke limit on a CPU, else
        ``s.slack`` times its estimate (at least 20 s more than it)."""
        if s.smoke:
            return self.smoke_s
        return max(s.slack * self.estimate_s, self.estimate_s + 20.0)


@dataclass
class Suite:
    sizes: Sizes
    out: Path
    work: Path
    deadline: float  # time.monotonic() at which every case is stopped (math.inf: none)
    smoke: bool
    env: dict = field(default_factory=dict)
    rows: list[dict] = field(default_factory=list)
    current: subprocess.Popen | None = None
    earlier: dict[str, str] = field(default_factory=dict)  # --keep: statuses of earlier runs
    cwd: Path = field(default_factory=Path.cwd)  # where the commands run
    slack: float = 2.0  # a case's limit, in its estimates (Case.limit_s)
    apex_paths: tuple[Path, ...] = ()  # folders the apex cases add to PYTHONPATH
    stack: list[str] = field(default_factory=list)  # the stack case's lines, for the header

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


class CaseError(RuntimeError):
    """A case that cannot start (its message is the row's note)."""


def python(*args: str) -> list[str]:
    return [sys.executable, *args]


def stack_command(s: Suite) -> list[list[str]]:
    return [python("-m", "nettebench", "check", "--stack", "--json", str(stack_file(s)))]


def stack_file(s: Suite) -> Path:
    return s.cell_dir("stack") / "stack.json"


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
    smoke: str | None = None,
    epochs: int | None = None,
) -> Callable[[Suite], list[list[str]]]:
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


def warm_up(s: Suite) -> list[list[str]]:
    """A few steps of the resnet50 goal cell's own command: the machine's first reads of torch,
    CUDA, cuDNN and the store happen here, not in a goal cell's wall time."""
    return cell("warm-up", "resnet50", "O1", *CACHED, "--max-steps", "3", smoke="O0", epochs=1)(s)


def apex_env(s: Suite) -> dict:
    """The suite's environment with ``s.apex_paths`` on ``PYTHONPATH``: for the apex cases
    only (a copy; no other case imports apex)."""
    paths = [s.env.get("PYTHONPATH", ""), *map(str, s.apex_paths)]
    return {**s.env, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}


def apex_missing(s: Suite) -> str | None:
    """Why the apex cases do not run here: NVIDIA apex is neither installed nor in
    ``s.apex_paths`` (PyPI's unrelated ``apex`` does not count); None where it is."""
    found = [path / "apex" for path in s.apex_paths if (path / "apex").is_dir()]
    found += environment.apex_package_dirs() or []
    if environment.is_nvidia_apex(found):
        return None
    return "NVIDIA apex is not installed (optional: docs/gpu.md)"


def apex_case(level: str) -> Case:
    name = f"apex-{level}"
    commands = cell(name, "resnet18", level, *CACHED, "--amp-backend", "apex")
    return Case(name, 9, commands, cell_numbers(name), needs=STORE, env=apex_env, skip=apex_missing)


# --------------------------------------------------------------------------------- the readers


def read_json(path: Path) -> dict:
    """The JSON at ``path``, or {} when it is missing or unreadable (never raises)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def stack_numbers(s: Suite) -> dict:
    """The stack case's row (its summary) and its lines, kept for the table's header."""
    found = read_json(stack_file(s))
    if not found:
        return {"result": "no stack.json"}
    s.stack = lines(found)
    return {"result": "ok", "note": summary(found)}


def cell_numbers(name: str, goal: str | None = None) -> Callable[[Suite], dict]:
    def read(s: Suite) -> dict:
        out = s.cell_dir(name)
        record, ceiling = read_json(out / "metrics.json"), read_json(out / "ceiling.json")
        if not record:
            return {"result": "no metrics.json"}
        summary, env = record.get("summary") or {}, record.get("environment") or {}
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
            "apex_kernels": env.get("apex_kernels"),
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
        verdict(f"wall <= {GOALS[model]:g} s", wall is not None and wall <= GOALS[model]),
        verdict(
            f"img/s >= {CEILING_SHARE:.0%} of ceiling", share is not None and share >= CEILING_SHARE
        ),  # fmt: skip
    ]
    if model == "resnet18":
        parts.append(verdict(f"first epoch <= {FIRST_EPOCH_S:g} s", first is not None
                             and first <= FIRST_EPOCH_S))  # fmt: skip
    text = "; ".join(parts)
    return f"n/a (smoke): {text}" if s.smoke else text


def verdict(goal: str, met: bool) -> str:
    return f"{goal} {'met' if met else 'MISSED'}"


# ------------------------------------------------------------------------------------ the cases


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


STORE, CACHED = ("store",), ("--loader", "cached")
# Each estimate is reasoned, not measured on a GPU (docs/development.md, the device suite).
MODE_ESTIMATES = {"O0": 12, "tf32": 10, "O2": 9, "O3": 9, "bf16": 9}
CASES: list[Case] = [
    Case("stack", 8, stack_command, stack_numbers),
    Case("data", 15, make_data, folders=lambda s: [s.data.parent]),
    Case("store", 12, make_store, needs=("data",), folders=lambda s: [s.store]),
    Case("warm-up", 8, warm_up, cell_numbers("warm-up"), needs=STORE),
    trained(GOAL_CASES[0], 25, "resnet18", "O1", *CACHED, smoke="O0", goal="resnet18", needs=STORE),
    trained(GOAL_CASES[1], 40, "resnet50", "O1", *CACHED, smoke="O0", goal="resnet50", needs=STORE),
    *(
        trained(f"resnet18-{p}-cached", MODE_ESTIMATES[p], "resnet18", p, *CACHED, needs=STORE)
        for p in MODES
    ),
    *(apex_case(level) for level in APEX_LEVELS),
]
