"""Benchmark: the quick start as a new user runs it, timed, with what else the machine did.

Copies the project into a fresh folder (no results, no caches), runs there what ``make
quickstart`` runs after its set-up (``snakemake --workflow-profile profiles/quickstart``, then
the same with ``--report results/report.html``) and prints, from that run alone: the wall time
of both and of each; each job's seconds (Snakemake's ``benchmark:`` files and the log's rule names);
the load average before and after and the share of the CPUs other processes took during the
run (``/proc/stat`` minus the run's own process tree, as the trainer measures its epochs); the
CPU as the records describe it; and what the tables printed: time, train img/s, ceiling, share
of the ceiling, and the caveats (interference, impossible figures, emulated precisions);
each cell's spread (steady img/s with its 95 % interval, the steps' sd / mean, unstable) and
the report's answer in words (one sentence per comparison, with its interval and verdict).

``--runs N`` runs the quick start N times in a row, each in a fresh copy, and ends with the
table a note needs: per cell and run, seconds for the epochs and steady img/s with its interval
and marks (``✗`` impossible, ``‡`` interference, ``§`` unstable, ``~`` extrapolated), then
each run's comparisons and whether all runs agree on the direction of every supported one.

``--avx2`` makes an AVX-512/AMX machine behave like an AVX2-only CPU (no native bf16), the case
the quick start is sized for: ``ATEN_CPU_CAPABILITY=avx2`` (torch's own kernels) and
``ONEDNN_MAX_CPU_ISA=AVX2`` (oneDNN's convolutions and matmuls). ``--interfere N`` runs N busy
loops beside the quick start, to see what the records and tables say under deliberate load;
``--interfere-after S`` starts them S seconds into the run instead (a load that arrives halfway);
``--interfere-in 2`` gives them to the second run only, so one set of runs holds quiet runs and a
disturbed one side by side.
Asserts nothing (performance goals live in benchmarks, not in timed tests)::

    python tests/bench_quickstart.py --avx2 [--runs 3] [--interfere 1] [--interfere-after 20]
        [--interfere-in 2] [--keep DIR] [--json OUT]
"""

from __future__ import annotations

import argparse
import csv
import html
import json
import os
import re
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


def _number(value) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def cell_text(row: dict) -> str:
    """``13.2 s, 127 [120-133] img/s`` plus marks: one cell of the runs-side-by-side table."""
    seconds, rate = _number(row.get("time_for_epochs_s")), _number(row.get("train_img_s"))
    if seconds is None or rate is None:
        return row.get("status") or ""
    low, high = _number(row.get("train_img_s_low")), _number(row.get("train_img_s_high"))
    spread = f" [{low:.0f}-{high:.0f}]" if low is not None and high is not None else ""
    marks = "~" if row.get("extrapolated") == "True" else ""
    text = f"{marks}{seconds:.1f} s, {rate:.0f}{spread} img/s"
    if row.get("implausible"):
        text += " **✗**"
    if row.get("interference") == "True" or row.get("ceiling_interference") == "True":
        text += " ‡"
    if row.get("unstable"):
        text += f" § (sd/mean {float(row['train_step_cv']):.0%})"
    return text


def cell_name(row: dict) -> str:
    """``cell bf16 `pil` seed 1 (max_steps 4)``: each process (seed) of a cell a row of its own."""
    kind = "CPU baseline" if row.get("kind") == "cpu_baseline" else "cell"
    steps = f" (max_steps {row['max_steps']})" if row.get("max_steps") not in ("", None) else ""
    return f"{kind} {row.get('precision')} `{row.get('loader')}` seed {row.get('seed')}{steps}"


def answers(workdir: Path) -> list[str]:
    """The report's answer in words (results/tables/headline.html's answer paragraphs)."""
    text = (workdir / "results" / "tables" / "headline.html").read_text(encoding="utf-8")
    found = re.findall(r'<p class="answer">(.*?)</p>', text)
    return [html.unescape(re.sub(r"</?code>", "`", line)) for line in found]


# A supported comparison's sentence (report/answers.py): who, on what, faster or slower.
SUPPORTED = re.compile(
    r"^On (?P<where>.*?), (?P<other>\S+) trains (?P<subject>.*?) (?:\d+\.\d+x )?"
    r"(?P<direction>faster|slower) than (?P<reference>[^ :]+)"
)


def directions(sentences: list[str]) -> dict[str, str]:
    """Per supported comparison ("bf16 vs O0 on resnet18"), faster or slower."""
    found = {}
    for line in sentences:
        match = SUPPORTED.match(line)
        if match:
            key = f"{match['other']} vs {match['reference']} on {match['subject']}"
            found[key] = match["direction"]
    return found


def run_once(args, busy_loops: int) -> dict:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **(AVX2_ONLY if args.avx2 else {})}
    tmp = None if args.keep else tempfile.mkdtemp(prefix="quickstart-")
    workdir = copy_workflow(args.keep or Path(tmp))
    # the busy loops, started now or, with --interfere-after, that many seconds into the run
    delay = f"import time\ntime.sleep({args.interfere_after})\n" if args.interfere_after else ""
    busy = [
        subprocess.Popen([sys.executable, "-c", delay + BUSY_LOOP], start_new_session=True)
        for _ in range(busy_loops)
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
        raise SystemExit(returncode)
    report_started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "snakemake", "--workflow-profile", "profiles/quickstart",
         "--report", "results/report.html"],
        cwd=workdir, env=env, capture_output=True, check=True,
    )  # fmt: skip
    report_s = time.perf_counter() - report_started

    with open(workdir / "results" / "tables" / "runs.csv", encoding="utf-8") as handle:
        runs = list(csv.DictReader(handle))
    first = runs[0]
    summary = {
        "wall_s": round(wall + report_s, 1),  # what make quickstart takes after its set-up
        "run_s": round(wall, 1),
        "report_s": round(report_s, 1),
        "avx2_caps": args.avx2,
        "busy_loops": busy_loops,
        "busy_loops_after_s": args.interfere_after,
        "loadavg_before": load_before,
        "loadavg_after": load_after,
        "own_cpu_s": found["own_cpu_s"],
        "other_cpu_s": found["other_cpu_s"],
        "other_cpu_share_during_run": found["other_cpu_share"],
        # the hypervisor's: time the VM's CPUs wanted to run but the host ran something else
        # (the slowest capped run at b681984, 143 s, had cells with 11 % and 22 % stolen, which
        # the others' share does not count)
        "steal_share_during_run": found["steal_share"],
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
                    "train_img_s_low",
                    "train_img_s_high",
                    "train_steps_steady",
                    "train_step_cv",
                    "unstable",
                    "epoch_variation",
                    "extrapolated",
                    "max_steps",
                    "status",
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
        "answers": answers(workdir),
        "table_cells": {cell_name(row): cell_text(row) for row in runs},
        "setup": job_setup(workdir),
    }
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)
    return summary


def job_setup(workdir: Path) -> dict[str, dict[str, float]]:
    """Per trained cell (its record's folder under results/): seconds to its first step, of
    them the imports, and seconds after its last step, of them the after-epochs ceiling (the
    record's ``startup``), beside the time its epochs took: what a job costs beyond its timed
    work."""
    found = {}
    for path in sorted((workdir / "results").glob("*/*/**/metrics.json")):
        record = json.loads(path.read_text())
        startup = record.get("startup") or {}
        before = startup.get("before_first_step") or {}
        after = startup.get("after_last_step") or {}
        found[str(path.parent.relative_to(workdir / "results"))] = {
            "to_first_step_s": startup.get("to_first_step_s"),
            "imports_s": before.get("imports"),
            "epochs_wall_s": (record.get("conditions") or {}).get("wall_s"),
            "after_last_step_s": startup.get("after_last_step_s"),
            "ceiling_s": after.get("after_epochs"),
        }
    return found


def _percent(share: float | None) -> str:
    """One decimal: a quiet run's shares are tenths of a percent, which whole percents show as 0."""
    return "-" if share is None else f"{100 * share:.1f} %"


def side_by_side(summaries: list[dict]) -> str:
    """The note's table: one row per cell, one column per run; then the comparisons."""
    names = list(dict.fromkeys(n for s in summaries for n in s["table_cells"]))
    runs = range(1, len(summaries) + 1)
    lines = ["| cell | " + " | ".join(f"run {i}" for i in runs) + " |"]
    lines.append("|---" * (len(summaries) + 1) + "|")
    lines.append(
        "| wall: run + report (load before; others' share, stolen share of the CPUs) | "
        + " | ".join(
            f"{s['wall_s']:.0f} s: {s['run_s']:.0f} + {s['report_s']:.0f} ({s['loadavg_before']}; "
            f"{_percent(s['other_cpu_share_during_run'])}, "
            f"{_percent(s.get('steal_share_during_run'))})"
            + (
                f"; {s['busy_loops']} busy loop(s) from {s['busy_loops_after_s']:.0f} s"
                if s.get("busy_loops")
                else ""
            )
            for s in summaries
        )
        + " |"
    )
    for name in names:
        cells = [s["table_cells"].get(name, "") for s in summaries]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    for i, s in zip(runs, summaries, strict=True):
        lines.append(f"\nrun {i}:")
        lines += [f"- {line}" for line in s["answers"]]
        for cell, setup in s.get("setup", {}).items():
            seconds = {k: "-" if v is None else f"{v:.1f}" for k, v in setup.items()}
            lines.append(
                f"- setup of {cell}: imports {seconds['imports_s']} s, to the first step "
                f"{seconds['to_first_step_s']} s, epochs {seconds['epochs_wall_s']} s, ceiling "
                f"{seconds['ceiling_s']} s"
            )
    found = [directions(s["answers"]) for s in summaries]
    keys = set().union(*found)
    flips = [k for k in keys if len({d.get(k) for d in found} - {None}) > 1]
    impossible = sum(text.count("✗") for s in summaries for text in s["table_cells"].values())
    lines.append(
        f"\nsupported comparisons: {len(keys)}; directions that flip between runs: "
        f"{len(flips)}{' (' + '; '.join(sorted(flips)) + ')' if flips else ''}; "
        f"cells with ✗: {impossible}"
    )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(
        allow_abbrev=False, description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--avx2", action="store_true", help="cap torch and oneDNN at AVX2")
    parser.add_argument("--interfere", type=int, default=0, help="busy loops run beside it")
    parser.add_argument(
        "--interfere-after", type=float, default=0.0, help="start them this many seconds in"
    )
    parser.add_argument(
        "--interfere-in",
        default="",
        help="only these runs (1-based, comma-separated) get the busy loops; default: every run",
    )
    parser.add_argument("--keep", type=Path, help="run in this folder and keep it")
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    parser.add_argument("--runs", type=int, default=1, help="quick starts in a row (fresh copies)")
    args = parser.parse_args()
    if args.keep and args.runs > 1:
        parser.error("--keep keeps one run's folder: use it with --runs 1")
    disturbed = {int(n) for n in args.interfere_in.split(",") if n.strip()}
    summaries = []
    for number in range(1, args.runs + 1):
        loops = args.interfere if not disturbed or number in disturbed else 0
        summaries.append(run_once(args, loops))
        print(json.dumps(summaries[-1], indent=2), flush=True)
    if args.json:
        args.json.write_text(json.dumps(summaries, indent=2) + "\n")
    print(side_by_side(summaries))
    return 0


if __name__ == "__main__":
    sys.exit(main())
