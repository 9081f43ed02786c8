"""Benchmark: the quick start as a new user runs it, timed, with what else the machine did.

Copies the project into a fresh folder (no results, no caches), runs
``snakemake --workflow-profile profiles/quickstart`` there and prints, from that run alone:
the wall time; each job's seconds (Snakemake's ``benchmark:`` files and the log's rule names);
the load average before and after and the share of the CPUs other processes took during the
run (``/proc/stat`` minus the run's own process tree, as the trainer measures its epochs); the
CPU as the records describe it; and what the tables printed: time, train img/s, ceiling, share
of the ceiling, and the caveats (interference, impossible figures, emulated precisions).

``--avx2`` makes an AVX-512/AMX machine behave like an AVX2-only CPU (no native bf16), the case
the quick start is sized for: ``ATEN_CPU_CAPABILITY=avx2`` (torch's own kernels) and
``ONEDNN_MAX_CPU_ISA=AVX2`` (oneDNN's convolutions and matmuls). ``--interfere N`` runs N busy
loops beside the quick start, to see what the records and tables say under deliberate load.
Asserts nothing (performance goals live in benchmarks, not in timed tests)::

    python tests/bench_quickstart.py --avx2 [--interfere 1] [--keep DIR] [--json OUT]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from nettebench.records import conditions  # noqa: E402
from tests.workflow_helpers import copy_workflow, snakemake_log  # noqa: E402

AVX2_ONLY = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
BUSY_LOOP = "while True: pass"
TICKS = os.sysconf("SC_CLK_TCK")


def _uptime() -> str:
    """The 1-, 5- and 15-minute load averages, as `uptime` prints them."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def job_seconds(workdir: Path) -> list[tuple[str, float]]:
    """(benchmark file, seconds) of every job that wrote one, in the order they finished."""
    found = []
    for path in (workdir / "results" / "benchmarks").rglob("*.tsv"):
        with open(path, encoding="utf-8") as handle:
            row = next(csv.DictReader(handle, delimiter="\t"))
        found.append((path.stat().st_mtime, str(path.relative_to(workdir)), float(row["s"])))
    return [(name, seconds) for _, name, seconds in sorted(found)]


def _table_lines(workdir: Path, name: str, contains: str) -> list[str]:
    path = workdir / "results" / "tables" / f"{name}.md"
    return [line for line in path.read_text().splitlines() if contains in line]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--avx2", action="store_true", help="cap torch and oneDNN at AVX2")
    parser.add_argument("--interfere", type=int, default=0, help="busy loops run beside it")
    parser.add_argument("--keep", type=Path, help="run in this folder and keep it")
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args()

    env = {**os.environ, "PYTHONUNBUFFERED": "1", **(AVX2_ONLY if args.avx2 else {})}
    tmp = None if args.keep else tempfile.mkdtemp(prefix="quickstart-")
    workdir = copy_workflow(args.keep or Path(tmp))
    busy = [
        subprocess.Popen([sys.executable, "-c", BUSY_LOOP], start_new_session=True)
        for _ in range(args.interfere)
    ]
    load_before = _uptime()
    started = time.perf_counter()
    log = workdir / "quickstart.out"
    with open(log, "w", encoding="utf-8") as out:
        run = subprocess.Popen(
            [sys.executable, "-m", "snakemake", "--workflow-profile", "profiles/quickstart"],
            cwd=workdir,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        probe = conditions.Probe(pid=run.pid)
        window = probe.start()
        # the run's own CPU time, every job it waited for included: what is not "others"
        _, status, usage = os.wait4(run.pid, 0)
        end = probe.snapshot()
    wall = time.perf_counter() - started
    end.own_ticks = window.own_ticks + round((usage.ru_utime + usage.ru_stime) * TICKS)
    found = conditions.summarize(window, end)
    returncode = os.waitstatus_to_exitcode(status)
    output = log.read_text()
    load_after = _uptime()
    for process in busy:
        process.kill()
    if returncode != 0:
        print(output[-4000:])
        return returncode

    with open(workdir / "results" / "tables" / "runs.csv", encoding="utf-8") as handle:
        runs = list(csv.DictReader(handle))
    first = runs[0]
    summary = {
        "wall_s": round(wall, 1),
        "avx2_caps": args.avx2,
        "busy_loops": args.interfere,
        "loadavg_before": load_before,
        "loadavg_after": load_after,
        "own_cpu_s": found["own_cpu_s"],
        "other_cpu_s": found["other_cpu_s"],
        "other_cpu_share_during_run": found["other_cpu_share"],
        "cpu": {
            key: first.get(f"env_{key}")
            for key in ("cpu_model", "cpu_capability", "cpu_flags", "cpu_isa_limits", "bf16_native")
        },
        "jobs": job_seconds(workdir),
        "cells": [
            {
                key: row.get(key)
                for key in (
                    "kind",
                    "precision",
                    "loader",
                    "time_for_epochs_s",
                    "train_img_s",
                    "ceiling_img_s",
                    "ceiling_share",
                    "final_top1",
                    "interference",
                    "interference_reasons",
                    "ceiling_interference",
                    "above_ceiling",
                    "implausible",
                    "precision_emulated",
                )
            }
            for row in runs
        ],
        "share_table": _table_lines(workdir, "throughput", "| resnet18"),
        "timed_windows": _table_lines(workdir, "timing_conditions", "| resnet18"),
        "log_lines": len(snakemake_log(workdir).splitlines()),
    }
    print(json.dumps(summary, indent=2))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
