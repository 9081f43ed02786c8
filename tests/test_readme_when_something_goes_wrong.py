"""README's "When something goes wrong": each entry quotes what the terminal really shows, so a
search for the words a user sees finds it, and its step does what it says."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.workflow_helpers import REPO, copy_workflow, snakemake

pytestmark = pytest.mark.workflow


def section() -> str:
    readme = (REPO / "README.md").read_text()
    return readme.split("### When something goes wrong\n", 1)[1].split("\n## ", 1)[0]


def test_snakemakes_words_for_a_bad_configfile_lead_to_the_checker(tmp_path):
    """Snakemake reports a YAML mistake in a `--configfile` file without file or line; the
    entry quotes those words, and the command it names gives both."""
    quoted = re.search(r"\*\*`(Config file is not valid [^`]+)`\*\*", section()).group(1)
    command = re.search(r"`\.venv/bin/(python -m nettebench study config)\s+FILE`", section())
    assert command, section()
    bad = tmp_path / "study.yaml"
    bad.write_text("datasets:\n  tiny: {synthetic: {size: 16}}\nmatrix:\n\tepochs: 1\n")
    work = copy_workflow(tmp_path / "wf")
    run = snakemake(work, "--configfile", str(bad), "--replace-workflow-config", "-n", check=False)
    assert run.returncode != 0 and quoted in run.stdout + run.stderr
    assert str(bad) not in run.stdout + run.stderr  # what the entry is for: Snakemake names no file
    checked = subprocess.run(
        [sys.executable, "-m", *command.group(1).split()[2:], str(bad)],
        capture_output=True, text=True, cwd=work,
    )  # fmt: skip
    assert checked.returncode == 1
    assert checked.stderr.startswith(f"error: {bad} line 4, column 1: "), checked.stderr
