"""Run the real workflow in a throwaway copy of the project, for the end-to-end tests.

A copy (not the checkout itself) so tests can edit code and config, touch modules to check rerun
triggers, and write results/ without touching the developer's files.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
WORKFLOW_PARTS = ("Snakefile", "rules", "scripts", "schemas", "report", "profiles", "envs")
QUICKSTART_STUDY = REPO / "profiles" / "quickstart" / "study.yaml"


def copy_workflow(dest: Path) -> Path:
    """Copy the workflow's files (no results, no caches) into ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", ".snakemake", "results")
    for part in WORKFLOW_PARTS:
        source = REPO / part
        if source.is_dir():
            shutil.copytree(source, dest / part, ignore=ignore)
        else:
            shutil.copy2(source, dest / part)
    shutil.copy2(REPO / "config.yaml", dest / "config.yaml")
    return dest


def write_config(workdir: Path, config: dict, name: str = "study.yaml") -> Path:
    path = workdir / name
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def edit_module(path: Path) -> None:
    """Change a module the way a developer would (Snakemake compares content, not just mtime);
    one that is not there is a test out of date, not a new module."""
    assert path.is_file(), f"no module {path} to edit"
    with open(path, "a", encoding="utf-8") as handle:
        handle.write("\n# edited by a test\n")


def _snakemake_env() -> dict[str, str]:
    # The virtual environment's bin/ is taken off PATH: the rules must run the interpreter that
    # runs Snakemake, not whatever `python` a user's shell happens to find.
    venv_bin = os.path.dirname(sys.executable)
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p != venv_bin)
    return {**os.environ, "PYTHONUNBUFFERED": "1", "PATH": path}


def start_snakemake(workdir: Path, *args: str, output: Path) -> subprocess.Popen:
    """Start snakemake in ``workdir`` in a process group (and session) of its own, as a terminal
    runs a command, writing its output to ``output``; the caller signals and waits."""
    with open(output, "w") as sink:
        return subprocess.Popen(
            [sys.executable, "-m", "snakemake", *args],
            cwd=workdir,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=_snakemake_env(),
            start_new_session=True,
        )


def snakemake(workdir: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run snakemake in ``workdir``; on failure show its output (and the job logs) in the error."""
    env = _snakemake_env()
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", *args],
        cwd=workdir,
        capture_output=True,
        text=True,
        env=env,
        timeout=1200,
    )
    if check and result.returncode != 0:
        logs = "\n".join(
            f"--- {log}\n{log.read_text()[-3000:]}"
            for log in sorted((workdir / "results" / "logs").rglob("*.log"))
        )
        raise AssertionError(
            f"snakemake {' '.join(args)} failed ({result.returncode}):\n"
            f"{result.stdout[-5000:]}\n{result.stderr[-5000:]}\n{logs}"
        )
    return result


def run_study(workdir: Path, config: Path, *extra: str, **kwargs) -> subprocess.CompletedProcess:
    return snakemake(
        workdir,
        "--configfile",
        str(config),
        "--replace-workflow-config",
        "--cores",
        "2",
        *extra,
        **kwargs,
    )


def planned_jobs(result: subprocess.CompletedProcess) -> dict[str, int]:
    """The rule -> job count table a dry run prints ("Job stats"), without the `all` rule."""
    text = result.stdout + result.stderr
    if "Nothing to be done" in text:
        return {}
    section = text.split("Job stats:", 1)[1]
    counts = {}
    for line in section.splitlines()[3:]:
        match = re.match(r"^(\w+)\s+(\d+)$", line.strip())
        if not match:
            break
        counts[match.group(1)] = int(match.group(2))
    counts.pop("all", None)
    counts.pop("total", None)
    return counts


# Rules whose jobs time something: two of them at once would spoil each other's numbers.
TIMED_RULES = ("cell_train", "cpu_baseline_train", "cell_profile")
# A job's first line: Snakemake's own block (`rule x:`, its jobid on a line below), or a job
# with a message (rules/common.smk `cell_message`: `Job 3: cell_train: <dataset>/<cell>`).
JOB_START = re.compile(
    r"^(?:(?:local)?rule (?P<rule>\w+):|Job (?P<jobid>\d+): (?P<named>\w+): .*)$"
)
_JOB_ID = re.compile(r"^\s+jobid: (\d+)$")
_JOB_END = re.compile(r"^Finished jobid: (\d+) \(Rule: (\w+)\)$")


def snakemake_log(workdir: Path) -> str:
    """The newest run's log (.snakemake/log/<start time>.snakemake.log)."""
    logs = sorted((workdir / ".snakemake" / "log").glob("*.snakemake.log"))
    return logs[-1].read_text()


def concurrent_jobs(log: str, rules: tuple[str, ...] = TIMED_RULES) -> list[tuple[str, str]]:
    """Pairs of jobs of ``rules`` that ran at the same time, read from a Snakemake log: a job
    runs from its ``rule <name>:`` block (with its ``jobid``) to its ``Finished jobid`` line,
    so two overlap when one starts before the other has finished. Names are ``rule#jobid``."""
    running: dict[str, str] = {}  # jobid -> rule, of the timed jobs started and not finished
    pending_rule = None
    pairs = []
    for line in log.splitlines():
        start = JOB_START.match(line)
        if start:
            pending_rule = start["rule"] or start["named"]
            if start["jobid"] is None:
                continue  # its jobid comes on a line of its block
        job = _JOB_ID.match(line) or start
        if job and pending_rule is not None:
            jobid = job["jobid"] if start else job.group(1)
            if pending_rule in rules:
                pairs += [
                    (f"{rule}#{jid}", f"{pending_rule}#{jobid}") for jid, rule in running.items()
                ]
                running[jobid] = pending_rule
            pending_rule = None
            continue
        end = _JOB_END.match(line)
        if end:
            running.pop(end.group(1), None)
    return pairs


def timed_job_count(log: str, rules: tuple[str, ...] = TIMED_RULES) -> int:
    """How many jobs of ``rules`` the log says finished."""
    return sum(
        1 for line in log.splitlines() if (m := _JOB_END.match(line)) and m.group(2) in rules
    )


def job_blocks(text: str, rule: str = r"\w+") -> list[str]:
    """Snakemake's text of each job (of ``rule``), from its first line (:data:`JOB_START`) to
    the next job's."""
    starts = rf"(?:(?:local)?rule {rule}:$|Job \d+: {rule}: )"
    blocks = re.split(r"^(?=(?:(?:local)?rule \w+:$|Job \d+: \w+: ))", text, flags=re.MULTILINE)
    return [block for block in blocks[1:] if re.match(starts, block, re.MULTILINE)]


def dry_run_jobs(text: str) -> list[dict]:
    """Each job a dry run (`snakemake -n`) lists: its rule, first output, wildcards and
    resources (name -> value, as printed), from Snakemake's own block (``rule x:``) or from a
    cell job's message in the same fields (``Job 3: cell_train: ...``, rules/common.smk's
    ``cell_message``)."""
    jobs = []
    for block in job_blocks(text):
        fields = dict(re.findall(r"^    (\w+): (.*)$", block, re.MULTILINE))
        named = JOB_START.match(block.split("\n", 1)[0])
        jobs.append(
            {
                "rule": named["rule"] or named["named"],
                "output": fields.get("output", "").split(", ")[0],
                "wildcards": dict(
                    item.split("=", 1) for item in fields.get("wildcards", "").split(", ") if item
                ),
                "resources": dict(
                    item.split("=", 1) for item in fields.get("resources", "").split(", ") if item
                ),
            }
        )
    return jobs
