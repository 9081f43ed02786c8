"""The environment a cell records is one list of keys (records.environment.KEYS): what collect()
writes is what runs.csv shows as ``env_*`` columns, in that order; those of package
environments only where a record has them, every other one even for a study that lacks it."""

from __future__ import annotations

import json

import record_factory as rf

from nettebench.records import environment
from nettebench.report.frames.runs import read_cells, runs_frame


def _env_columns(frame) -> list[str]:
    return [c for c in frame.columns if c.startswith("env_")]


def test_collect_writes_exactly_the_listed_keys():
    written = environment.collect()
    assert len(set(environment.KEYS)) == len(environment.KEYS)
    assert sorted(written) == sorted(environment.KEYS)
    assert set(environment.PACKAGE_KEYS) <= set(environment.KEYS)


def test_runs_csv_shows_every_key_collect_writes_in_the_listed_order(tmp_path):
    written = json.loads(json.dumps(environment.collect(), default=str))  # as metrics.json holds it
    path = rf.make_cell(tmp_path / "cell", env=written)
    runs = runs_frame(read_cells([path]))
    assert _env_columns(runs) == [f"env_{key}" for key in environment.KEYS]
    row = runs.iloc[0]
    assert (row["env_process_id"], row["env_host"]) == (written["process_id"], written["host"])


def test_a_study_without_package_environments_has_every_other_column(tmp_path):
    old = rf.make_cell(tmp_path / "old")  # the factory's environment: a record with fewer keys
    recorded = set(json.loads(old.read_text())["environment"])
    assert not set(environment.PACKAGE_KEYS) & recorded
    assert set(environment.KEYS) - set(environment.PACKAGE_KEYS) - recorded  # some others lack too
    expected = [f"env_{key}" for key in environment.KEYS if key not in environment.PACKAGE_KEYS]
    assert _env_columns(runs_frame([])) == expected
    assert _env_columns(runs_frame(read_cells([old]))) == expected
