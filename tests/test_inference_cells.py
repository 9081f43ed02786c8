"""The config's `inference:` section: cells, paths that omit defaults, settings, accuracy jobs."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from nettebench.study import inference_cells as inference
from nettebench.study import schema_rules
from nettebench.study.crossing import ConfigError
from nettebench.study.workflow import Study

SCHEMA = Path(__file__).resolve().parents[1] / "schemas" / "config.schema.yaml"


def study(section, matrix=None):
    return Study.from_config(
        {
            "datasets": {"d": {"synthetic": {}}},
            "matrix": matrix or {"model": "resnet18", "precision": ["O0", "bf16"]},
            "inference": section,
        }
    )


def test_the_schema_reads_the_specs_and_settings_defaults_kept_once():
    raw = yaml.safe_load(SCHEMA.read_text())
    raw_props = raw["properties"]["inference"]["oneOf"][1]["properties"]
    assert not any("default" in raw_props[k] for k in inference.SETTINGS)
    assert not any("x-default" in v for v in raw["$defs"]["inference_axes"]["properties"].values())
    schema = schema_rules.load_schema()
    props = schema["properties"]["inference"]["oneOf"][1]["properties"]
    axes = schema["$defs"]["inference_axes"]["properties"]
    x_defaults = {k: v["x-default"] for k, v in axes.items() if "x-default" in v}
    assert x_defaults == {k: v for k, v in inference.field_defaults().items() if k != "machine"}
    assert {k: props[k]["default"] for k in inference.SETTINGS} == inference.SETTINGS


def test_axes_cross_with_include_exclude_and_paths_omit_defaults():
    found = study(
        {
            "model": ["resnet18", "resnet50"],
            "precision": ["fp32", "bf16"],
            "batch_size": [1, 8],
            "exclude": [{"model": "resnet50", "batch_size": 8}],
            "include": [{"model": "resnet18", "batch_size": 8, "compile": True}],
        }
    )
    paths = sorted(found.inference)
    assert len(paths) == 8  # 2 x 2 x 2 - 2 excluded + 2 included
    assert "d/model~resnet18/precision~fp32/batch~1" in paths
    assert "d/model~resnet18/precision~bf16/batch~8/compile~True" in paths
    assert not any("resnet50/precision~fp32/batch~8" in p for p in paths)
    cell = found.inference["d/model~resnet18/precision~fp32/batch~1"]
    assert cell.cli_args() == [
        "--dataset", "d", "--model", "resnet18", "--precision", "fp32", "--batch-size", "1"
    ]  # fmt: skip
    assert found.inference_files()[0] == (
        "results/inference/d/model~resnet18/precision~fp32/batch~1/inference.json"
    )


def test_a_machine_label_goes_last_in_the_path():
    config = {"datasets": {"d": {"synthetic": {}}}, "matrix": {}, "machine": "t4"}
    found = Study.from_config({**config, "inference": {"model": "resnet18", "workers": 1}})
    assert list(found.inference) == ["d/model~resnet18/precision~fp32/batch~1/workers~1/machine~t4"]


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"precision": "fp64"}, "inference.precision: 'fp64' is not allowed"),
        ({"batch": 4}, "unknown key(s) batch"),
        ({"batch_size": 0}, "inference.batch_size: 0 is not allowed; allowed: an integer >= 1"),
        (
            {"batch_size": "auto"},
            "inference.batch_size: 'auto' is not allowed; allowed: an integer",
        ),
        ({"include": [{"device": "tpu"}]}, "inference.include[0].device: 'tpu' is not allowed"),
        (
            {"latency_queries": 0},
            "inference.latency_queries: 0 is not allowed; allowed: an integer",
        ),
        ({"model": "resnet9000"}, "inference.model"),
        ({"precision": "O3", "device": "cpu"}, "cannot run on cpu"),
    ],
)
def test_bad_values_name_the_key(section, message):
    with pytest.raises(ConfigError, match=None) as error:
        study(section)
    assert message in str(error.value)


def test_no_section_no_cells_and_settings_default():
    found = Study.from_config({"datasets": {"d": {"synthetic": {}}}, "matrix": {}})
    assert found.inference == {} and found.inference_files() == []
    axes, settings = inference.split_section({"model": "resnet18", "latency_queries": 100})
    assert axes == {"model": "resnet18"}
    assert settings == {**inference.SETTINGS, "latency_queries": 100}


def test_accuracy_jobs_are_the_matrix_cells_of_measured_models_with_fp32_first():
    section = {"model": "resnet18", "precision": ["bf16", "fp32"], "batch_size": [1, 8]}
    assert study(section).accuracy == {}  # off by default: no weights, no job
    found = study({**section, "accuracy": True})
    assert sorted(found.accuracy) == [
        "d/model~resnet18/precision~O0/batch~256/epochs~10/seed~0",
        "d/model~resnet18/precision~bf16/batch~256/epochs~10/seed~0",
    ]
    job = next(iter(found.accuracy.values()))
    assert [v["precision"] for v in job.variants] == ["fp32", "bf16"]
    assert job.variants[1]["channels_last"] is True  # auto: on for reduced precision
    assert "--variants fp32:0:0 bf16:1:0" in job.cli_args(64)
    # a filter over the matrix picks the trained cells
    only = study({**section, "accuracy": {"precision": "bf16"}}).accuracy
    assert list(only) == ["d/model~resnet18/precision~bf16/batch~256/epochs~10/seed~0"]
    with pytest.raises(ConfigError, match="unknown matrix parameter"):
        study({**section, "accuracy": {"loadr": "pil"}})
    # a model no inference cell measures has no accuracy job
    assert study({"model": "resnet50", "accuracy": True}).accuracy == {}


def test_jobs_ask_for_a_gpu_unless_the_cell_is_on_the_cpu():
    cpu = inference.InferenceSpec("d", device="cpu", workers=1)
    request = inference.job_request(cpu, inference.SETTINGS)
    assert request.gpu == 0 and request.cpus == 2 and request.runtime >= 10
    assert inference.job_request(inference.InferenceSpec("d"), inference.SETTINGS).gpu == 1
