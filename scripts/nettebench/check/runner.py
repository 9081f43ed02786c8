"""Runs the check's cases (:mod:`.cases`) one after another, each stopped at its own limit and
all by the deadline, and writes the table after every case, so a run cut short still leaves
what finished.

Each case's commands run in a process group of their own; at the case's limit
(:meth:`~.cases.Case.limit_s`) or the deadline, whichever comes first, the whole group is
stopped (SIGTERM, then SIGKILL after :data:`KILL_GRACE_S`) and the row says ``timeout`` and
which. A case whose prerequisite did not end ok, or that no longer fits before the deadline, is
``not run``; one that cannot run on this machine (apex not installed) is ``skipped``, a result
like ``unsupported`` and an expected ``oom``. After every case ``table.md``, ``cases.jsonl``
and ``records.tar.gz`` (each case's log and small result files) are written again under the
output folder; nothing else goes there. SIGTERM or SIGINT stops the case in flight the same way
and writes the table.

The exit status (:func:`verdict`): 0 when every goal cell ended ``ok`` with its numbers and no
case failed, 1 when a goal cell was not measured, 2 when the goal cells were but another case
failed, timed out or was not run.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tarfile
import time
from pathlib import Path

from nettebench.check.cases import GOAL_CASES, Case, CaseError, Suite, read_json

RESULTS = ("ok", "unsupported", "oom", "skipped")  # a case's result, not its failure
STATUSES = "statuses.json"  # in the work folder: each case's last status, read back by --keep
KILL_GRACE_S = 5.0
KEPT = (".log", ".json", ".jsonl", ".csv", ".md", ".txt")  # what records.tar.gz keeps
BIG_FILE = 4 * 2**20  # a trace or store bigger than this stays behind


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
    """Run one case to its row: its commands in order, each in a new process group, all of
    them stopped at the case's limit or the deadline; then its reader."""
    row: dict = {"case": case.name, "estimate_s": case.estimate_s}
    skipped = case.skip(s) if case.skip else None
    if skipped:
        return {**row, "status": "skipped", "note": skipped}
    missing = [n for n in case.needs if s.status(n) != "ok"]
    if missing:
        return {**row, "status": "not run", "note": f"needs {', '.join(missing)} ok"}
    left = s.deadline - time.monotonic()
    if left < (1.0 if s.smoke else case.estimate_s):
        return {**row, "status": "not run", "note": f"{left:.0f} s left of the deadline"}
    for folder in case.outputs(s):
        shutil.rmtree(folder, ignore_errors=True)
    try:
        commands = case.commands(s)
        env = case.env(s) if case.env else s.env
    except CaseError as error:
        return {**row, "status": "not run", "note": str(error)}
    limit = case.limit_s(s)
    row["limit_s"] = limit
    started = time.monotonic()
    stop_at = min(started + limit, s.deadline)
    row["status"] = "ok"
    log_path = s.work / "logs" / f"{case.name}.log"
    with open(log_path, "w") as log:
        for command in commands:
            print(f"[{case.name}] {' '.join(command)[:300]}", file=log, flush=True)
            s.current = proc = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=s.cwd,
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
    """table.md, cases.jsonl and records.tar.gz under the output folder, each replaced whole."""
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
    measured = "the goal rows were measured" if goals else "no goal row was run"
    if failed:
        return 2, f"exit 2: {measured}; not ok: {', '.join(failed)}"
    return 0, f"exit 0: {measured}; every case ended with its result"


def planned_s(cases: list[Case]) -> float:
    return sum(case.estimate_s for case in cases)


def plan_text(cases: list[Case], bound: str) -> str:
    """The plan, printed before anything runs: its sum, ``bound`` (the deadline and what the
    caller holds the sum to), each case's estimate on one H200."""
    lines = [f"planned on one H200: {planned_s(cases):.0f} s; {bound}"]
    lines += [f"  {case.estimate_s:4.0f} s  {case.name}" for case in cases]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------ the run


def prepare(work: Path, out: Path, keep: bool) -> dict[str, str]:
    """The work and output folders made ready: ``work`` emptied unless ``keep`` (then the
    statuses of the run that left it are returned)."""
    earlier = read_json(work / STATUSES) if keep else {}
    if not keep:
        shutil.rmtree(work, ignore_errors=True)  # a fresh run: no cell restores an earlier one
    (work / "logs").mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    return earlier


def run(s: Suite, cases: list[Case], header: str) -> tuple[int, str]:
    """Every case in order, the table written after each; the exit status and its line."""
    if s.earlier:
        header += f"\nkept from {s.work}: " + ", ".join(f"{k} {v}" for k, v in s.earlier.items())
    print(header, flush=True)
    started = time.monotonic()

    def full_header() -> str:
        return "\n".join([header, *s.stack])

    def stop(signum, _frame):
        if s.current is not None:
            kill_group(s.current)
        s.rows.append({"case": "(run)", "status": f"stopped by signal {signum}"})
        write(s, full_header())
        raise SystemExit(128 + signum)

    handlers = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        for case in cases:
            shown = len(s.stack)
            row = run_case(s, case)
            s.rows.append(row)
            write(s, full_header())
            statuses = {**s.earlier, **{r["case"]: r["status"] for r in s.rows}}
            _replace(s.work / STATUSES, json.dumps(statuses, indent=1))
            print(f"{row['case']}: {row['status']} ({row.get('seconds', 0):.0f} s of "
                  f"~{case.estimate_s:.0f})", row.get("goal") or row.get("note") or "",
                  flush=True)  # fmt: skip
            if len(s.stack) > shown:
                print("\n".join(s.stack[shown:]), flush=True)
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    print(table(s.rows), flush=True)
    print(f"total: {time.monotonic() - started:.0f} s", flush=True)
    return verdict(s.rows)
