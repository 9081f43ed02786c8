"""The study stored beside the results: what an aggregate-only run aggregates with."""

from __future__ import annotations

import yaml

from nettebench.study import stored
from nettebench.study.workflow import Study

STUDY = {
    "datasets": {"tiny": {"synthetic": {"size": 16}}},
    "matrix": {"model": "resnet18", "precision": ["O0", "bf16"], "epochs": 1},
    "target_top1": 40,
}


def test_a_stored_study_comes_back_with_the_command_lines_values_over_it(tmp_path):
    path = tmp_path / "results" / "study.yaml"
    stored.save({**STUDY, "aggregate_only": False}, path)
    assert "aggregate_only" not in yaml.safe_load(path.read_text())
    again = stored.for_aggregate({"aggregate_only": True}, path)
    assert again == {**STUDY, "aggregate_only": True}
    told = stored.for_aggregate({"aggregate_only": True, "target_top1": 75}, path)
    assert told["target_top1"] == 75 and told["matrix"] == STUDY["matrix"]
    assert stored.for_aggregate({}, tmp_path / "none.yaml") is None


def test_saving_the_same_study_leaves_the_file_alone(tmp_path):
    path = stored.save(STUDY, tmp_path / "study.yaml")
    stamp = path.stat().st_mtime_ns
    stored.save(dict(STUDY), path)
    assert path.stat().st_mtime_ns == stamp


def test_aggregate_only_reads_the_studys_records_in_the_studys_order(tmp_path, monkeypatch):
    """As the run read them (so Snakemake sees the same inputs), then records it did not
    configure; sorted paths would put O0 before bf16."""
    monkeypatch.chdir(tmp_path)
    matrix = {**STUDY["matrix"], "precision": ["bf16", "O0"]}
    study = Study.from_config({**STUDY, "matrix": matrix, "aggregate_only": True})
    configured = study.metrics_files()
    extra = "results/runs/tiny/model~vgg11/precision~O0/batch~256/epochs~1/seed~0/metrics.json"
    for path in [*configured, extra]:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("{}")
    assert sorted(configured) != configured
    assert study.aggregate_inputs()["metrics"] == [*configured, extra]
