"""The order the timed jobs run in: round-robin by replicate, so a drift hits every cell alike.

A cell's seeds are its timing replicates, each seed a process of its own. Were the jobs run
cell by cell (all of A's seeds, then all of B's), a machine that warms up, throttles or gets
busier over the run would slow B and not A, and a comparison of A and B would measure the
drift. So every cell's first replicate runs first, then every cell's second, and so on (asv
interleaves its rounds of benchmarks for the same reason).

A job's replicate *rank* is the index of its seed among the sorted distinct seeds of its
section (``matrix`` or ``cpu_baseline``): with ``seed: [0, 1, 2]`` seed 1 is rank 1 in every
cell. Snakemake runs the ready job of highest ``priority:`` first, so rank ``r`` of ``rounds``
gets ``TRAINING_FLOOR + rounds - 1 - r``: rank 0 of both sections highest, the last rank
``TRAINING_FLOOR``. Jobs that only prepare what the cells read (datasets, stores, library
builds) get :func:`preparation_priority`, above every round: were a store built only when no
training job was ready, the cells that read it would run after every round of the others.

Torch-free, like the rest of :mod:`nettebench.study`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from nettebench.vocabulary.cell import CellSpec

# The lowest priority of a training job. Below it: 1 for the other timed jobs (profiles and
# inference, which no training cell is compared with, so they wait until every round is done)
# and Snakemake's default 0 for the report jobs.
TRAINING_FLOOR = 2
AFTER_TRAINING = 1


def seed_ranks(seeds: Iterable[int]) -> dict[int, int]:
    """Each distinct seed's replicate rank: its index among the sorted distinct seeds."""
    return {seed: rank for rank, seed in enumerate(sorted(set(seeds)))}


def round_robin_priorities(
    cells: Mapping[str, Mapping[str, CellSpec]],
) -> dict[str, dict[int, int]]:
    """section -> seed -> the Snakemake priority of that seed's training jobs.

    ``cells`` is :attr:`nettebench.study.workflow.Study.cells` (section -> path -> cell). Rank
    ``r`` gets the same priority in every section, so a CPU baseline's replicate runs in the
    same round as the matrix's.
    """
    ranks = {
        section: seed_ranks(cell.seed for cell in found.values())
        for section, found in cells.items()
    }
    rounds = max((len(found) for found in ranks.values()), default=0)
    return {
        section: {seed: TRAINING_FLOOR + rounds - 1 - rank for seed, rank in found.items()}
        for section, found in ranks.items()
    }


def preparation_priority(priorities: Mapping[str, Mapping[int, int]]) -> int:
    """The priority of the jobs the cells wait on: above every training job's."""
    return 1 + max(
        (p for found in priorities.values() for p in found.values()), default=TRAINING_FLOOR
    )
