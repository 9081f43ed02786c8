"""The device command: the GPU user's check (``python -m nettebench check``) and the developer's
cases after it, in one run on one H200, planned to fit in 330 s and stopped by 420 s, returning
what finished however it ends.

    PYTHONPATH=scripts python3 tests/device/run.py --out $OUT            # on the device
    PYTHONPATH=scripts python3 tests/device/run.py --out /tmp/o --smoke  # on a CPU, minutes

It runs the check's own cases (:data:`nettebench.check.cases.CASES`: the stack, the goal data
and its store, a warm-up, the goal cells, the other precision modes, apex O1-O3) with the
check's runner (:mod:`nettebench.check.runner`), and after them :data:`EXTRAS`: O1 with the
``pil`` loader, the streamed store and the sync check, an out-of-memory cell (under a forced
memory cap, a few pil batches), the profiles (``cached`` loader: their ms/step are the
step's, not the decoder's), inference (resnet50, one process per precision: O1 at batches
1/8/64/256, fp32, tf32, O3 and bf16 at 256; every phase capped by ``--max-seconds``), a
data-parallel cell of 2 processes started by torchrun (NCCL where the machine has 2 GPUs, else
gloo on its CPU: one GPU cannot hold two NCCL ranks), and a ``deterministic`` cell. apex comes
from the carried wheel of ``tests/device/prepare_carry.py`` (``apex-wheel`` installs it into a
folder of its own, on the ``PYTHONPATH`` of the apex cases only); without a carried wheel the
apex cases are ``skipped``.

Each case's planned seconds on one H200 (its own estimate, reasoned: docs/development.md) are
printed before anything runs, with their sum (:data:`PLAN_S` at most). A case is stopped at its
own limit (twice its estimate, at least 20 s more than it: its whole process group, SIGTERM,
then SIGKILL) and every case by ``--deadline-s`` (:data:`DEADLINE_S`); a case that no longer
fits before the deadline is ``not run``. After every case ``table.md``, ``cases.jsonl`` and
``records.tar.gz`` are written again under ``--out``, so a run cut short still returns what
finished; nothing else goes there (:mod:`out_files`: at most 7).

``--smoke`` runs the same cases on the CPU with tiny sizes (modes a CPU cannot run come back
``unsupported``); ``--only`` picks cases by name, and with ``--keep`` reuses an earlier run's
``--work`` folder (its data, store and apex site; a case not run now counts as it ended then),
so a rerun of what failed costs no preparation (tests/test_device_suite.py).

Its exit status says whether the goal rows were measured: 0 when every goal cell run ended
``ok`` with its numbers and no case failed, 1 when a goal cell run was not measured, 2 when the
goal cells were but another case failed, timed out or was not run (``unsupported``,
``skipped`` and an expected ``oom`` are results, not failures).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Callable
from pathlib import Path

import out_files  # tests/device/, beside this script

from nettebench.check import runner
from nettebench.check.cases import (
    CACHED,
    GPU,
    SMOKE,
    STORE,
    Case,
    CaseError,
    Sizes,
    Suite,
    cell,
    cell_numbers,
    python,
    read_json,
    trained,
    verdict,
)
from nettebench.check.cases import CASES as CHECK
from nettebench.check.cli import child_env

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
PLAN_S = 330.0  # the planned total on one H200
# Every case stopped by then: with the machine's start (a minute or more) the call ends well
# inside the device's 600 s limit and leaves device time for a rerun of what failed.
DEADLINE_S = 420.0
SLACK = 2.0  # a case stops at twice its estimate (at least 20 s more than it)
SMOKE_DEADLINE_S = 1800.0  # the smoke's, on a CPU other work may load (7-10 minutes seen)
STREAMED_SHARE = 0.90
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


# ------------------------------------------------------------------------------------ commands


def oom_cell(s: Suite) -> list[list[str]]:
    z, out = s.sizes, s.cell_dir("oom")
    return [python(
        "-c", OOM_MAIN, "--data", str(s.data), "--out-dir", str(out), "--retrain", "--model",
        "resnet50", "--precision", "O0", "--loader", "pil", "--epochs", "1", "--max-steps", "2",
        "--batch-size", str(z.batch), "--image-size", str(z.crop), "--workers", str(z.workers),
        "--device", z.device,
    )]  # fmt: skip


def apex_site(s: Suite) -> Path:
    return s.work / "apex-site"


def install_apex(s: Suite) -> list[list[str]]:
    wheels = sorted((REPO / ".vendor").glob("apex-*.whl"))
    if not wheels:
        raise CaseError("no apex wheel in .vendor/: run tests/device/prepare_carry.py, carry it")
    return [python(
        "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target", str(apex_site(s)),
        str(wheels[-1]),
    )]  # fmt: skip


def no_apex_wheel(s: Suite) -> str | None:
    if any((REPO / ".vendor").glob("apex-*.whl")):
        return None
    return "no apex wheel in .vendor/ (tests/device/prepare_carry.py found no vendored apex)"


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


def inference(precision: str, batches: Callable[[Sizes], tuple[int, ...]]):
    """One process for the precision: every batch size's inference cell in turn
    (tests/device/inference_sweep.py), one record each."""

    def commands(s: Suite) -> list[list[str]]:
        z = s.sizes
        return [python(
            str(HERE / "inference_sweep.py"), "--out-dir",
            str(s.cell_dir(f"inference-{precision}")), "--batch-sizes", *map(str, batches(z)),
            "--data", str(s.data), "--model", "resnet18" if s.smoke else "resnet50",
            "--precision", precision, "--image-size",
            str(z.crop), "--workers", str(z.workers), "--device", z.device, *z.inference,
        )]  # fmt: skip

    return commands


# --------------------------------------------------------------------------------- the readers


def streamed_numbers(s: Suite) -> dict:
    found = cell_numbers("resnet18-O1-streamed")(s)
    resident = next((r for r in s.rows if r["case"] == "resnet18-O1-cached-10ep"), {})
    if found.get("train_img_s") and resident.get("train_img_s"):
        share = found["train_img_s"] / resident["train_img_s"]
        found["goal"] = verdict(f"{share:.0%} of resident >= {STREAMED_SHARE:.0%}",
                                share >= STREAMED_SHARE)  # fmt: skip
    return found


def sync_numbers(s: Suite) -> dict:
    found = read_json(s.cell_dir("sync-check") / "sync.json")
    counts = {p: (found.get(p) or {}).get("syncs") for p in ("resident", "streamed")}
    return {
        "result": "ok" if found else "no sync.json",
        "note": f"syncs per epoch: {counts} ({found.get('how', '')})",
        "goal": verdict("no host syncs from the cached loader", set(counts.values()) == {0}),
    }


def oom_numbers(s: Suite) -> dict:
    found = cell_numbers("oom")(s)
    expected = "ok" if s.smoke else "oom"  # a CPU has no memory cap: the cell just trains
    found["goal"] = verdict(f"status {expected}", found.get("result") == expected)
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
    found["goal"] = verdict(f"2 processes through torchrun ({backend}, {on})", two)
    if on == "cpu" and not s.smoke:
        found["note"] = f"{gpu_count()} GPU(s): NCCL needs 2, so gloo on the CPU"
    return found


def inference_numbers(precision: str) -> Callable[[Suite], dict]:
    return lambda s: _inference_numbers(s.cell_dir(f"inference-{precision}"))


def _inference_numbers(folder: Path) -> dict:
    parts, statuses = [], set()
    for path in sorted(folder.glob("*.json"), key=lambda p: int(p.stem.rsplit("batch", 1)[1])):
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


APEX_WHEEL = Case(
    "apex-wheel", 3, install_apex, folders=lambda s: [apex_site(s)], skip=no_apex_wheel
)
# The developer's cases, after the check's; each estimate reasoned (docs/development.md).
EXTRAS: list[Case] = [
    trained("resnet18-O1-pil", 12, "resnet18", "O1", "--loader", "pil", needs=("data",)),
    Case(
        "resnet18-O1-streamed",
        10,
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
    Case("sync-check", 10, sync_check, sync_numbers, needs=STORE),
    Case("oom", 10, oom_cell, oom_numbers, needs=("data",)),
    Case("profile-O0", 10, profile("O0"), profile_numbers("O0"), needs=STORE),
    Case("profile-O3", 10, profile("O3"), profile_numbers("O3"), needs=STORE),
    Case("inference-O1", 16, inference("O1", _all), inference_numbers("O1"), needs=("data",)),
    *(
        Case(f"inference-{p}", 8, inference(p, _largest), inference_numbers(p), needs=("data",))
        for p in ("fp32", "tf32", "O3", "bf16")
    ),
    Case("dp-2proc", 15, data_parallel, dp_numbers, needs=STORE),
    trained(
        "deterministic-O1-cached",
        10,
        "resnet18",
        "O1",
        *CACHED,
        "--deterministic",
        "true",
        smoke="O0",
        needs=STORE,
    ),
]


def device_cases(check: list[Case] = CHECK) -> list[Case]:
    """The check's cases with the carried apex wheel's install before its apex cases, then
    :data:`EXTRAS`. The apex cases need the install (on the device apex comes from it)."""
    first = next(i for i, case in enumerate(check) if case.name.startswith("apex-"))
    apex = [
        dataclasses.replace(case, needs=(*case.needs, APEX_WHEEL.name))
        for case in check[first:]
        if case.name.startswith("apex-")
    ]
    rest = [case for case in check[first:] if not case.name.startswith("apex-")]
    return [*check[:first], APEX_WHEEL, *apex, *rest, *EXTRAS]


CASES: list[Case] = device_cases()


def planned_s(cases: list[Case] | None = None) -> float:
    return runner.planned_s(CASES if cases is None else cases)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="what comes back: at most 7 files")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes on the CPU")
    parser.add_argument("--work", default="/tmp/nettebench-device", help="working files")
    parser.add_argument(
        "--deadline-s",
        type=float,
        default=None,
        help=f"every case stopped by then (default {DEADLINE_S:.0f}: the device command's limit "
        f"is 600 s; with --smoke {SMOKE_DEADLINE_S:.0f}: a loaded CPU runs the smoke in minutes)",
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
    earlier = runner.prepare(work, out, args.keep)
    sizes = SMOKE if args.smoke else GPU
    s = Suite(sizes, out, work, started + args.deadline_s, args.smoke, child_env(), cwd=REPO)
    s.earlier, s.slack, s.apex_paths = earlier, SLACK, (apex_site(s),)
    bound = f"at most {PLAN_S:.0f} s; deadline {args.deadline_s:.0f} s"
    code, line = runner.run(s, cases, runner.plan_text(cases, bound))
    out_files.check(out)
    print(line, flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
