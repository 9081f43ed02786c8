"""Device suite of [2/6] (run by [3/6] on one H200): the GPU path's goals, met or missed, in one
table, in under 8 minutes.

What it runs, each part within what is left of ``--budget-s`` (a part that no longer fits is
reported ``not run``, never silently dropped):

1. goal data: Imagenette-320-shaped synthetic JPEGs (9,469 train / 3,925 val, shortest side
   320, 10 classes) and its decoded store, built once;
2. sync check: one ``cached`` epoch (train and val), resident and streamed, under
   ``torch.cuda.set_sync_debug_mode("warn")``: the loader must add no synchronisation;
3. goal cells through :mod:`nettebench.benchmarks.wallclock` (a fresh trainer process each,
   process start to metrics written): resnet18 O1 ``pil`` / ``cached`` / ``cached`` streamed
   (``store_placement=host``) / ``cached`` with ``cudnn_benchmark=false`` (the unmeasured
   default), resnet50 O1 ``pil`` / ``cached`` / ``cached`` streamed, 10 epochs, batch 256; the
   compute ceiling of both steps;
4. the workflow through Snakemake (wheels carried: tests/device/prepare_carry.py): a small
   synthetic study, resnet18 in O0, O1, O2, O3 and bf16 with both loaders, apex O1/O2/O3 from
   the vendored 25.05 (built by the workflow's library rules when git is there, else the carried
   wheel) with both loaders, ``deterministic: true`` cells (O1 with both loaders, apex O1
   cached), ceilings, a torch profile (nsys when on PATH); its tables, figures, report and logs
   come back as ``workflow.tar.gz``, its cells as a table in table.md.

Goals (issue 12): resnet18 O1 cached <= 12 s from process start to metrics written, steady
img/s >= 90 % of the ceiling, first-epoch overhead <= 2 s; resnet50 O1 cached <= 25 s; streamed
>= 90 % of resident img/s; no synchronisation from the cached loader.

    PYTHONPATH=scripts python3 tests/device/pipeline_goals.py --out $OUT [--smoke]

``--smoke`` runs every part on the CPU with tiny sizes (the sync check as its CPU twin, counting
the ops that would synchronise on CUDA) to check the script; its verdicts are ``n/a``. Works
under --work (/tmp) and writes into --out only: table.md, goals.json (every number), sync.json,
wallclock-<model>.json, workflow.tar.gz (tests/device/out_files.py: at most 7 files, checked at
the end).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import out_files  # tests/device/, beside this script

REPO = Path(__file__).resolve().parents[2]
VENDOR = REPO / ".vendor"  # what prepare_carry.py copies in (the device sees only the repo)
VENDORED_APEX = "apex-25.05-git.tar.gz"
APEX_BUILD = "25.05"

GOAL_WALL_S = {"resnet18": 12.0, "resnet50": 25.0}
GOAL_CEILING_SHARE = 0.90
GOAL_FIRST_EPOCH_S = 2.0
GOAL_STREAMED_SHARE = 0.90
# As the wallclock names its rows (option names with hyphens).
STREAMED = "loader=cached,store-placement=host"
NO_AUTOTUNE = "loader=cached,cudnn-benchmark=false"
LOADERS = ("pil", "cached")
# (amp_backend, loader, expected status) of the workflow's deterministic: true cells
DETERMINISTIC = (("native", "pil", "ok"), ("native", "cached", "ok"), ("apex", "cached", "ok"))
VARIANTS = {
    "resnet18": ("loader=pil", "loader=cached", STREAMED, NO_AUTOTUNE),
    "resnet50": ("loader=pil", "loader=cached", STREAMED),
}


class Suite:
    """The parts' shared state: the clock, the environment, the goals found so far."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args, self.smoke = args, args.smoke
        self.out, self.work = Path(args.out), Path(args.work)
        self.out.mkdir(parents=True, exist_ok=True)
        self.work.mkdir(parents=True, exist_ok=True)
        self.deadline = time.monotonic() + args.budget_s
        scripts = str(REPO / "scripts")
        path = os.environ.get("PYTHONPATH", "")
        self.env = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": scripts + (os.pathsep + path if path else ""),
        }
        self.goals: list[dict] = []
        self.numbers: dict = {}

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def run(self, command: list[str], *, need_s: float, cwd: Path | None = None, log=None) -> int:
        """Run ``command`` if ``need_s`` seconds are left; its exit status (None: not run)."""
        if self.left() < need_s:
            print(f"skipped (needs ~{need_s:.0f} s, {self.left():.0f} s left):", *command)
            return None
        print("+", " ".join(command), flush=True)
        try:
            done = subprocess.run(
                command, env=self.env, cwd=cwd, timeout=max(self.left(), 1), stdout=log,
                stderr=subprocess.STDOUT if log else None,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            print("timed out:", *command, flush=True)
            return 124
        return done.returncode

    def goal(self, name: str, target: str, measured, met: bool | None, note: str = "") -> None:
        if self.smoke:
            verdict = "n/a (smoke)"
        elif measured is None:
            verdict = "not run"
        else:
            verdict = "met" if met else "missed"
        self.goals.append(
            {"goal": name, "target": target, "measured": measured, "verdict": verdict, "note": note}
        )


# ----------------------------------------------------------------------------------------- parts


def make_goal_data(suite: Suite) -> Path | None:
    if suite.smoke:
        size, train, val, classes = 48, 64, 24, 4
    else:
        size, train, val, classes = 320, 9469, 3925, 10
    data = suite.work / "goal-data"
    if not (data / "dataset.json").exists():
        started = time.perf_counter()
        rc = suite.run(
            [sys.executable, "-m", "nettebench.datasets", "synthetic", "--out-dir", str(data),
             "--name", "imagenette-320-shaped", "--size", str(size), "--train-images",
             str(train), "--val-images", str(val), "--classes", str(classes)],
            need_s=30,
        )  # fmt: skip
        if rc != 0:
            return None
        suite.numbers["goal_data_s"] = time.perf_counter() - started
    return data / "dataset.json"


def build_store(suite: Suite, data: Path, image_size: int) -> Path | None:
    store = suite.work / "goal-store"
    resolution = round(image_size / 0.875)
    started = time.perf_counter()
    rc = suite.run(
        [sys.executable, "-m", "nettebench.data", "store", "--data", str(data), "--out-dir",
         str(store), "--resolution", str(resolution)],
        need_s=20,
    )  # fmt: skip
    suite.numbers["store_s"] = time.perf_counter() - started
    return store if rc == 0 else None


def sync_check(suite: Suite, store: Path | None, batch: int, image_size: int) -> None:
    result = suite.out / "sync.json"
    rc = None
    if store is not None:
        rc = suite.run(
            [sys.executable, __file__, "sync-check", "--store", str(store), "--batch-size",
             str(batch), "--image-size", str(image_size), "--json", str(result)],
            need_s=30,
        )  # fmt: skip
    found = json.loads(result.read_text()) if rc == 0 and result.exists() else {}
    suite.numbers["sync"] = found
    for placement in ("resident", "streamed"):
        counted = found.get(placement, {}).get("syncs")
        suite.goal(
            f"cached loader, {placement}: host-device syncs in one epoch (train + val)",
            "0",
            counted,
            counted == 0,
            found.get("how", ""),
        )


def goal_cells(suite: Suite, data: Path | None, store: Path | None) -> dict:
    if suite.smoke:
        models, precision, epochs, batch, image, workers = ("resnet18",), "O0", 1, 8, 32, 1
    else:
        models, precision, epochs, batch, image, workers = (
            ("resnet18", "resnet50"), "O1", 10, 256, 224, min(12, os.cpu_count() or 1)
        )  # fmt: skip
    rows: dict = {}
    for model in models:
        if data is None or store is None:
            break
        trainer = ["--model", model, "--precision", precision, "--epochs", str(epochs),
                   "--batch-size", str(batch), "--image-size", str(image),
                   "--workers", str(workers)]  # fmt: skip
        result = suite.out / f"wallclock-{model}.json"
        variants = VARIANTS[model]
        suite.run(
            [sys.executable, "-m", "nettebench.benchmarks.wallclock", "--data", str(data),
             "--out-dir", str(suite.work / model), "--store", str(store),
             "--json", str(result), "--variants", *variants, "--", *trainer],
            need_s=25 * len(variants) if not suite.smoke else 20,
        )  # fmt: skip
        if result.exists():
            rows[model] = {row["variant"]: row for row in json.loads(result.read_text())["rows"]}
        ceiling = suite.work / f"ceiling-{model}.json"
        steps = ["--warmup-steps", "1", "--steps", "3"] if suite.smoke else []
        suite.run(
            [sys.executable, "-m", "nettebench.benchmarks.ceiling", "--model", model,
             "--precision", precision, "--batch-size", str(batch), "--image-size", str(image),
             "--data", str(data), "--out", str(ceiling), *steps],
            need_s=15,
        )  # fmt: skip
        if ceiling.exists():
            rows.setdefault(model, {})["ceiling"] = json.loads(ceiling.read_text())
    suite.numbers["goal_cells"] = rows
    return rows


def judge_goal_cells(suite: Suite, rows: dict) -> None:
    def get(model, variant, key):
        row = rows.get(model, {}).get(variant) or {}
        return row.get(key) if row.get("status") == "ok" else None

    cached = "loader=cached"
    wall = get("resnet18", cached, "wall_s")
    suite.goal("resnet18 O1 cached, process start to metrics written", "<= 12 s",
               _r(wall, 1), wall is not None and wall <= GOAL_WALL_S["resnet18"],
               "reference script: 86 s")  # fmt: skip
    img_s = get("resnet18", cached, "train_img_s")
    ceiling = (rows.get("resnet18", {}).get("ceiling") or {}).get("img_s")
    share = img_s / ceiling if img_s and ceiling else None
    suite.goal("resnet18 O1 cached, steady img/s / compute ceiling", ">= 90 %", _pct(share),
               share is not None and share >= GOAL_CEILING_SHARE,
               f"{_r(img_s, 0)} of {_r(ceiling, 0)} img/s")  # fmt: skip
    overhead = get("resnet18", cached, "first_epoch_overhead_s")
    suite.goal("resnet18 O1 cached, first-epoch overhead", "<= 2 s", _r(overhead, 2),
               overhead is not None and overhead <= GOAL_FIRST_EPOCH_S)  # fmt: skip
    wall50 = get("resnet50", cached, "wall_s")
    suite.goal("resnet50 O1 cached, process start to metrics written", "<= 25 s",
               _r(wall50, 1), wall50 is not None and wall50 <= GOAL_WALL_S["resnet50"])  # fmt: skip
    for model in ("resnet18", "resnet50"):
        resident = get(model, cached, "train_img_s")
        streamed = get(model, STREAMED, "train_img_s")
        ratio = streamed / resident if streamed and resident else None
        suite.goal(f"{model} O1 streamed / resident img/s", ">= 90 %", _pct(ratio),
                   ratio is not None and ratio >= GOAL_STREAMED_SHARE,
                   f"{_r(streamed, 0)} vs {_r(resident, 0)} img/s")  # fmt: skip
    off = get("resnet18", NO_AUTOTUNE, "wall_s")
    suite.numbers["cudnn_benchmark"] = {"true_wall_s": wall, "false_wall_s": off}
    if wall is not None and off is not None:
        keep = "keep true" if wall <= off else "false was faster: measure again, then flip"
        suite.goal("cudnn_benchmark default (true, unmeasured until now)", "the faster one",
                   f"true {wall:.1f} s, false {off:.1f} s", wall <= off, keep)  # fmt: skip
    else:
        suite.goal("cudnn_benchmark default (true, unmeasured until now)", "the faster one",
                   None, None)  # fmt: skip


def workflow(suite: Suite) -> None:
    """The whole workflow through Snakemake on this machine; results tarred into $OUT."""
    try:
        import snakemake  # noqa: F401 - carried as wheels on the GPU machine
    except ImportError:
        suite.goal("workflow on this machine (Snakemake)", "all jobs done", None, None,
                   "no snakemake: run prepare_carry.py and carry .whl")  # fmt: skip
        return
    sys.path.insert(0, str(REPO))
    from tests.workflow_helpers import copy_workflow

    shutil.rmtree(suite.work / "workflow", ignore_errors=True)  # a fresh study every run
    workdir = copy_workflow(suite.work / "workflow")
    config, apex_from = _workflow_config(suite, workdir)
    (workdir / "study.yaml").write_text(json.dumps(config, indent=1))  # JSON is YAML
    gpus = "1" if suite.smoke else "4"  # tiny cells: several share the GPU, timings not judged
    with open(suite.work / "snakemake.log", "w") as log:
        rc = suite.run(
            [sys.executable, "-m", "snakemake", "--configfile", "study.yaml", "--keep-going",
             "--replace-workflow-config", "--cores", str(os.cpu_count() or 2), "--resources",
             f"gpu={gpus}", "--report-after-run", "--report", "results/report.html"],
            need_s=60, cwd=workdir, log=log,
        )  # fmt: skip
    (workdir / "results").mkdir(exist_ok=True)  # also when Snakemake did not run (no budget)
    shutil.copy(suite.work / "snakemake.log", workdir / "results" / "snakemake.log")
    _tar_results(workdir, suite.out / "workflow.tar.gz")
    records = _read_records(workdir)
    suite.numbers["workflow"] = {"rc": rc, "apex_from": apex_from, "cells": records}
    apex = {
        f"{r['precision']} {r['loader']}": r["status"]
        for r in records
        if r["amp_backend"] == "apex" and not r["deterministic"]
    }
    report = (workdir / "results" / "report.html").exists()
    expected_apex = "unsupported" if suite.smoke else "ok"
    suite.goal("workflow on this machine: every job done, report written", "rc 0, report",
               None if rc is None else f"rc {rc}, report {'yes' if report else 'no'}",
               rc == 0 and report, f"{len(records)} cells")  # fmt: skip
    levels = [f"{level} {loader}" for level in ("O1", "O2", "O3") for loader in LOADERS]
    all_six = sorted(apex) == sorted(levels) and set(apex.values()) == {expected_apex}
    suite.goal(f"apex O1/O2/O3 x pil/cached from the vendored {APEX_BUILD} ({apex_from})",
               f"status {expected_apex}", None if rc is None else json.dumps(apex),
               all_six)  # fmt: skip
    fixed = {
        f"{r['amp_backend']} {r['precision']} {r['loader']}": r["status"]
        for r in records
        if r["deterministic"]
    }
    wanted = {
        f"{backend} {_deterministic_precision(suite, backend)} {loader}": (
            "unsupported" if suite.smoke and backend == "apex" else status
        )
        for backend, loader, status in DETERMINISTIC
    }
    suite.goal("deterministic: true cells (native pil/cached, apex cached)",
               json.dumps(wanted), None if rc is None else json.dumps(fixed),
               fixed == wanted, "cached: roi_align's kernel, not its Python fallback")  # fmt: skip


def _workflow_config(suite: Suite, workdir: Path) -> tuple[dict, str]:
    size, train, val = (48, 64, 24) if suite.smoke else (64, 512, 128)
    matrix = {
        "model": "resnet18",
        "precision": ["O0", "bf16"] if suite.smoke else ["O0", "O1", "O2", "O3", "bf16"],
        "loader": ["pil", "cached"],
        "epochs": 1 if suite.smoke else 2,
        "batch_size": 8 if suite.smoke else 64,
        "image_size": 32 if suite.smoke else 56,
        "workers": 1 if suite.smoke else 4,
    }
    config = {
        "datasets": {"synth": {"synthetic": {"size": size, "train_images": train,
                                             "val_images": val, "classes": 4}}},
        "matrix": matrix,
        "ceiling": True,
        "profile": {
            "cells": {"precision": "bf16" if suite.smoke else "O1", "amp_backend": "native"},
            "warmup": 1 if suite.smoke else 3,
            "steps": 2 if suite.smoke else 5,
            "backend": "nsys" if shutil.which("nsys") and not suite.smoke else "torch",
        },
    }  # fmt: skip
    apex = {"amp_backend": "apex"}
    tarball = VENDOR / VENDORED_APEX
    if not tarball.exists():  # where the tests find it: beside the checkout, ...
        from tests.vendored_apex import VENDORED_APEX as tarball
    if shutil.which("git") and tarball.exists():
        with tarfile.open(tarball) as archive:
            archive.extractall(workdir / "vendor", filter="data")
        config["builds"] = {
            "apex": {APEX_BUILD: {"repo": str(workdir / "vendor" / "apex"), "ref": APEX_BUILD}}
        }
        apex["apex"] = APEX_BUILD
        apex_from = "built by the workflow from the vendored git repository"
    else:  # no git here: the wheel prepare_carry.py built from the same source, installed
        wheels = sorted(VENDOR.glob("apex-*.whl"))
        if wheels:
            target = suite.work / "apex-site"
            subprocess.run(
                [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                 "--target", str(target), str(wheels[-1])],
                check=True,
            )  # fmt: skip
            suite.env["PYTHONPATH"] += os.pathsep + str(target)
        apex_from = "carried wheel, installed" if wheels else "missing: no git, no wheel"
    matrix["include"] = [
        {**apex, "precision": level, "loader": loader}
        for level in ("O1", "O2", "O3")
        for loader in LOADERS
    ] + [
        {**(apex if backend == "apex" else {}), "loader": loader, "deterministic": True,
         "precision": _deterministic_precision(suite, backend)}
        for backend, loader, _ in DETERMINISTIC
    ]  # fmt: skip
    return config, apex_from


def _deterministic_precision(suite: Suite, backend: str) -> str:
    """O1 (a CPU runs native bf16, not O1; apex refuses a CPU whatever its level)."""
    return "bf16" if suite.smoke and backend == "native" else "O1"


def _read_records(workdir: Path) -> list[dict]:
    records = []
    for path in sorted((workdir / "results" / "runs").rglob("metrics.json")):
        record = json.loads(path.read_text())
        cell, summary = record["cell"], record.get("summary") or {}
        environment = record.get("environment") or {}
        records.append({
            "precision": cell["precision"], "loader": cell["loader"],
            "amp_backend": cell["amp_backend"], "deterministic": cell.get("deterministic"),
            "status": record["status"], "message": record.get("message"),
            "train_img_s": summary.get("train_img_s"), "wall_s": summary.get("wall_s"),
            "final_top1": summary.get("final_top1"),
            "data_wait_share": summary.get("data_wait_share"),
            "peak_mem_mb": summary.get("peak_mem_mb"), "store_mem_mb": summary.get("store_mem_mb"),
            "apex_kernels": environment.get("apex_kernels"),
        })  # fmt: skip
    return records


def _tar_results(workdir: Path, target: Path) -> None:
    results = workdir / "results"
    with tarfile.open(target, "w:gz") as archive:
        for part in ("tables", "figures", "report.html", "logs", "profiles", "snakemake.log"):
            if (results / part).exists():
                archive.add(results / part, arcname=f"results/{part}")
        for path in (results / "runs").rglob("*.json"):
            archive.add(path, arcname=str(path.relative_to(workdir)))


# -------------------------------------------------------------------------- the sync check itself


def sync_check_main(argv: list[str]) -> int:
    """One epoch of each cached split, resident and streamed, counting synchronisations: on a
    GPU with sync debug mode, on a CPU as the ops that would synchronise (the CPU twin)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", required=True)
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--image-size", type=int, required=True)
    parser.add_argument("--json", required=True)
    args = parser.parse_args(argv)
    import warnings

    import torch

    from nettebench.data import store as stores
    from nettebench.data.cached import RESIDENT, STREAMED, device_loaders
    from nettebench.training.cli import resolve_device

    device = resolve_device("auto")
    cuda = device.type == "cuda"
    found: dict = {"device": str(device), "how": (
        "torch.cuda.set_sync_debug_mode('warn'), after one warm-up batch per split" if cuda
        else "CPU twin: ops that synchronise on CUDA (tests/op_log.py)"
    )}  # fmt: skip
    for placement in (RESIDENT, STREAMED):
        loaders = device_loaders(
            stores.open_store(args.store), image_size=args.image_size,
            batch_size=args.batch_size, device=device, channels_last=True, placement=placement,
        )  # fmt: skip
        loaders.generator.manual_seed(0)
        iterators = [iter(loaders.train), iter(loaders.val)]
        for iterator in iterators:
            next(iterator)  # builds the split's buffers and constants, outside the count
        started = time.perf_counter()
        if cuda:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                torch.cuda.set_sync_debug_mode("warn")
                steps = sum(1 for iterator in iterators for _ in iterator)
                torch.cuda.set_sync_debug_mode("default")
            torch.cuda.synchronize()
            syncs = [str(w.message) for w in caught if "synchroniz" in str(w.message)]
        else:
            sys.path.insert(0, str(REPO))
            from tests.op_log import OpLog

            with OpLog() as log:
                steps = sum(1 for iterator in iterators for _ in iterator)
            syncs = log.syncing()
        found[placement] = {
            "steps": steps + 2,
            "syncs": len(syncs),
            "examples": syncs[:5],
            "seconds": time.perf_counter() - started,
        }
        print(f"{placement}: {found[placement]['syncs']} syncs in {steps + 2} batches", flush=True)
    Path(args.json).write_text(json.dumps(found, indent=1))
    return 0


# ------------------------------------------------------------------------------------ the table


def table(goals: list[dict]) -> str:
    lines = ["| goal | target | measured | verdict | note |", "|---|---|---|---|---|"]
    for goal in goals:
        measured = "-" if goal["measured"] is None else goal["measured"]
        lines.append(
            f"| {goal['goal']} | {goal['target']} | {measured} | {goal['verdict']} | "
            f"{goal['note']} |"
        )
    return "\n".join(lines)


def cells_table(rows: dict) -> str:
    lines = [
        "| model | variant | status | wall_s | epochs s | steady img/s | first-epoch s | "
        "data wait | top-1 | placement |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for model, variants in rows.items():
        for name, row in variants.items():
            if name == "ceiling":
                lines.append(f"| {model} | ceiling | {row.get('status')} | - | - | "
                             f"{_r(row.get('img_s'), 0)} | - | - | - | - |")  # fmt: skip
                continue
            lines.append(
                f"| {model} | {name} | {row.get('status')} | {_r(row.get('wall_s'), 1)} | "
                f"{_r(row.get('time_for_epochs_s'), 1)} | {_r(row.get('train_img_s'), 0)} | "
                f"{_r(row.get('first_epoch_overhead_s'), 2)} | "
                f"{_pct(row.get('data_wait_share'))} | {_r(row.get('final_top1'), 1)} | "
                f"{row.get('store_mode') or '-'} |"
            )
    return "\n".join(lines)


def workflow_table(cells: list[dict]) -> str:
    """The workflow's cells: outcome, speed, data wait, memory (a resident store's apart) and
    which apex kernels an apex cell had (amp_C, or apex's Python fallback)."""
    lines = [
        "| backend | precision | loader | deterministic | status | img/s | data wait | peak MB "
        "| store MB | apex kernels | message |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in cells:
        message = (c.get("message") or "")[:80].replace("|", "/")
        lines.append(
            f"| {c['amp_backend']} | {c['precision']} | {c['loader']} | {c['deterministic']} | "
            f"{c['status']} | {_r(c.get('train_img_s'), 0)} | {_pct(c.get('data_wait_share'))} "
            f"| {_r(c.get('peak_mem_mb'), 0)} | {_r(c.get('store_mem_mb'), 0)} | "
            f"{c.get('apex_kernels') or '-'} | {message} |"
        )
    return "\n".join(lines)


def _r(value, digits: int):
    return None if value is None else round(value, digits)


def _pct(value):
    return None if value is None else f"{100 * value:.0f} %"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["sync-check"]:
        return sync_check_main(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True)
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--work", default="/tmp/nettebench-device-suite")
    parser.add_argument("--budget-s", type=float, default=460.0, help="stop starting parts then")
    args = parser.parse_args(argv)
    suite = Suite(args)
    started = time.perf_counter()
    batch, image = (8, 32) if suite.smoke else (256, 224)

    parts = suite.numbers["parts_s"] = {}

    def timed(name, function, *args):
        begun = time.perf_counter()
        try:
            return function(*args)
        finally:
            parts[name] = round(time.perf_counter() - begun, 1)

    data = timed("goal data", make_goal_data, suite)
    store = timed("store", build_store, suite, data, image) if data else None
    timed("sync check", sync_check, suite, store, batch, image)
    rows = timed("goal cells", goal_cells, suite, data, store)
    judge_goal_cells(suite, rows)
    timed("workflow", workflow, suite)

    suite.numbers["suite_s"] = time.perf_counter() - started
    cells = suite.numbers.get("workflow", {}).get("cells", [])
    text = "\n\n".join([table(suite.goals), cells_table(rows), workflow_table(cells)])
    print(text, flush=True)
    (suite.out / "table.md").write_text(text + "\n")
    (suite.out / "goals.json").write_text(
        json.dumps({"goals": suite.goals, "numbers": suite.numbers}, indent=1, default=str)
    )
    print(f"suite: {suite.numbers['suite_s']:.0f} s ({parts})", flush=True)
    out_files.check(suite.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
