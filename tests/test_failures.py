"""A failed job's own ``error:`` line, found through Snakemake's log of the run
(nettebench.study.failures), against a log Snakemake 9 wrote for two failed jobs."""

from __future__ import annotations

from nettebench.study import failures

# Snakemake 9.27's log of a --keep-going run in which two jobs of rule `a` failed (abridged:
# each job's start, the CalledProcessError and the end kept as written).
SNAKEMAKE_LOG = """\
localrule a:
    output: a.txt
    log: logs/a.log
    jobid: 1
    reason: Missing output files: a.txt
    wildcards: x=a
RuleException:
CalledProcessError in file "/tmp/smk/Snakefile", line 8:
Command 'set -euo pipefail;  python -m x > logs/a.log; exit 1' returned non-zero exit status 1.
[Sat Dec  5 03:30:21 2026]
Error in rule a:
    message: None
    jobid: 1
    output: a.txt
    log: logs/a.log (check log file(s) for error details)
    shell:
        python -m x > logs/a.log; exit 1
        (command exited with non-zero exit code)
Select jobs to execute...
[Sat Dec  5 03:30:22 2026]
Error in rule b:
    message: None
    jobid: 2
    output: b.txt
    log: logs/b.log (check log file(s) for error details)
    shell:
        python -m y > logs/b.log; exit 1
        (command exited with non-zero exit code)
[Sat Dec  5 03:30:22 2026]
Error in rule c:
    message: None
    jobid: 3
    output: c.txt
    shell:
        false
        (command exited with non-zero exit code)
Exiting because a job execution failed. Look above for error messages
"""


def test_each_failed_jobs_log_is_found():
    assert failures.failed_jobs(SNAKEMAKE_LOG) == [
        ("a", ["logs/a.log"]),
        ("b", ["logs/b.log"]),
        ("c", []),
    ]


def test_the_first_error_line_of_each_failed_job_is_summarised(tmp_path):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "a.log").write_text(
        "reading the archive\nerror: x.tgz, member t/0.JPEG does not decode; set bad_images:"
        " skip\nerror: a second error line\n"
    )
    (tmp_path / "logs" / "b.log").write_text("Traceback (most recent call last):\n  ...\n")
    log = tmp_path / "run.snakemake.log"
    log.write_text(SNAKEMAKE_LOG)
    assert failures.summary([log, tmp_path / "missing.log"], tmp_path) == [
        "nettebench: a: x.tgz, member t/0.JPEG does not decode; set bad_images: skip"
        " (log: logs/a.log)"
    ]


def test_an_interrupted_cell_says_what_it_kept_and_how_to_resume(tmp_path):
    (tmp_path / "logs").mkdir()
    kept = "interrupted by SIGINT: cell stopped after 12 steps; kept the checkpoint after epoch 1/3"
    (tmp_path / "logs" / "a.log").write_text(f"epoch 1/3 ...\n{kept}\n")
    log = tmp_path / "run.snakemake.log"
    log.write_text(SNAKEMAKE_LOG)
    assert failures.summary([log], tmp_path) == [
        f"nettebench: a: {kept} (log: logs/a.log)",
        failures.RESUME,
    ]
