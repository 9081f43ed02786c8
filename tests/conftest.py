"""How the suite shares a small machine: two pytest-xdist workers (``-n auto`` in pyproject.toml),
whole files per worker, the longest files first, and OpenMP threads that sleep when they wait.

Measured on the 2-core VM (docs/measurements.md): one after the other the suite kept
the CPUs about half idle (single-threaded imports, Snakemake's bookkeeping, ``--threads 1``
trainers), but two workers with torch's default OpenMP threads were slower than one: two
2-thread training processes on 2 cores ran a resnet18 step in 874-921 ms each instead of 185 ms
alone, because each OpenMP thread spins at every barrier while the thread it waits for has lost
its core. With ``OMP_WAIT_POLICY=PASSIVE`` the same pair ran 316-322 ms each (160 ms a step for
the machine), so the workers set it, before torch is imported, for themselves and every process
they start (Snakemake, its jobs, the trainers). A run without workers (``-n 0``) keeps
OpenMP's defaults, as a user's run does.

Files are the unit of distribution (``--dist loadfile``: a module's fixtures, such as a trained
base run, are built once), and xdist would otherwise start the files with the most tests first,
which left the single longest test (then the loader parity: 175-205 s alone, 233-292 s beside
another worker) to run alone at the end.
"""

from __future__ import annotations

import gc
import os

if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# The files that take longest (seconds of a worker, summed per file from --junitxml, on the
# 2-core VM, 2026-12-06, 622 s wall), started first so that the rest fill in around them and the
# last files handed out are short; the order of the others is kept.
LONGEST_FIRST = (
    "test_workflow.py",  # 239 (the quick start, and its inference cells)
    "test_faults.py",  # 126
    "test_dependencies.py",  # 98
    "test_distributed.py",  # 46
    "test_replicates_interleaved.py",  # 39
    "test_workflow_inputs.py",  # 39
    "test_aa_families.py",  # 36
    "test_timed_jobs.py",  # 30
    "test_workflow_profile.py",  # 28
    "test_device_image_imports.py",  # 24
    "test_workflow_local_folder.py",  # 22
    "test_ddp_auto_batch.py",  # 22
    "test_loader_bench.py",  # 20
    "test_train.py",  # 20
    "test_resume.py",  # 17
    "test_figures.py",  # 16
)


def pytest_collection_modifyitems(config, items):
    rank = {name: place for place, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


def pytest_collection_finish(session):
    """What collection imported (torch, pandas, matplotlib, every test module) lives as long as
    the worker: frozen out of the garbage collector's passes (the test process's own
    bookkeeping; the commands under test run as Python runs them). A worker's full passes over
    it took 5-7 CPU-s (gen2 collections measured with gc.callbacks in a suite run, 2026-12-03)."""
    gc.freeze()
