"""Run a snippet in a fresh Python, for tests of what a new job process imports: only the
package on the path (no test-worker state, no environment of the caller's)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from nettebench.study.code_groups import PACKAGE_DIR


def run_fresh(code: str) -> str:
    """``code`` (dedented) in ``python -c``; its standard output, stripped. Fails on an error."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True, text=True, timeout=120,
        env={"PYTHONPATH": str(PACKAGE_DIR.parent), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()
