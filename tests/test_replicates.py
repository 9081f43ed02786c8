"""The round-robin order of the timed jobs (nettebench.study.replicates) and the columns that
show it in runs.csv (nettebench.report.frames.runs.order_columns). The real run's order is
tests/test_replicates_interleaved.py."""

from __future__ import annotations

import pandas as pd

from nettebench.report.frames import runs as collect
from nettebench.study import replicates
from nettebench.study.workflow import Study
from nettebench.vocabulary.cell import CellSpec


def cells(*seeds: int) -> dict[str, CellSpec]:
    """A section's cells (path -> cell), one per seed given (a repeated seed: another lr)."""
    found = [
        CellSpec(dataset="tiny", seed=seed, lr=0.05 + i / 1000) for i, seed in enumerate(seeds)
    ]
    return {cell.path(): cell for cell in found}


def test_a_seed_ranks_among_the_sorted_distinct_seeds():
    assert replicates.seed_ranks([7, 3, 7, 11, 3]) == {3: 0, 7: 1, 11: 2}
    assert replicates.seed_ranks([]) == {}


def test_a_lower_rank_runs_first_and_every_training_job_before_the_rest():
    found = replicates.round_robin_priorities(
        {"matrix": cells(5, 1, 9, 1), "cpu_baseline": cells(0)}
    )
    assert found["matrix"] == {1: 4, 5: 3, 9: 2}
    # rank 0 of every section runs in the same round
    assert found["cpu_baseline"] == {0: 4}
    assert min(found["matrix"].values()) == replicates.TRAINING_FLOOR > replicates.AFTER_TRAINING
    assert replicates.AFTER_TRAINING > 0  # the report jobs' priority
    assert replicates.preparation_priority(found) == 5


def test_a_study_without_cells_still_has_priorities():
    assert replicates.round_robin_priorities({"matrix": {}, "cpu_baseline": {}}) == {
        "matrix": {},
        "cpu_baseline": {},
    }
    assert replicates.preparation_priority({}) > replicates.TRAINING_FLOOR


def test_the_workflow_reads_a_cells_seed_from_the_study():
    config = {
        "datasets": {"tiny": {"synthetic": {"size": 24}}},
        "matrix": {"model": "resnet18", "lr": [0.05, 0.0501], "seed": [2, 0, 1]},
        "cpu_baseline": {"model": "resnet18", "seed": [0, 1]},
    }
    study = Study.from_config(config)
    assert replicates.round_robin_priorities(study.cells) == {
        "matrix": {0: 4, 1: 3, 2: 2},
        "cpu_baseline": {0: 4, 1: 3},
    }


def test_runs_columns_give_the_seeds_rank_per_kind_and_the_order_timed():
    frame = pd.DataFrame(
        {
            "kind": ["matrix", "matrix", "matrix", "matrix", "cpu_baseline"],
            "seed": [4, 9, 4, 9, 9],
            "timed_from": [30.0, 10.0, 20.0, None, 40.0],
        }
    )
    found = collect.order_columns(frame)
    assert list(found["replicate"]) == [0, 1, 0, 1, 0]
    assert list(found["timed_order"].astype(object)) == [3, 1, 2, pd.NA, 4]
