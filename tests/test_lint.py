"""The project's own style checks, run as tests so CI and `pytest` enforce them."""

import subprocess
import sys

import pytest

from tests.workflow_helpers import REPO


@pytest.mark.parametrize(
    "command",
    [
        [sys.executable, "-m", "ruff", "check", "."],
        [sys.executable, "-m", "ruff", "format", "--check", "."],
        [sys.executable, "-m", "snakefmt", "--check", "."],
        [sys.executable, "-m", "snakemake", "--lint", "--cores", "1"],
    ],
    ids=["ruff-check", "ruff-format", "snakefmt", "snakemake-lint"],
)
def test_clean(command):
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
