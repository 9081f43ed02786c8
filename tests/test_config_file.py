"""Config errors in one line: the key and what is allowed, or the file, line and column."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest
import yaml

from nettebench.study import config_file, environments, schema, schema_rules
from nettebench.study.crossing import ConfigError
from nettebench.study.workflow import Study
from nettebench.vocabulary import precision
from nettebench.vocabulary.cell import PARAMETER_NAMES, RUN_PARAMETERS

REPO = Path(__file__).resolve().parents[1]
SCHEMA = schema.load_schema()
BASE = {"datasets": {"tiny": {"synthetic": {"size": 16}}}, "matrix": {"epochs": 1}}


def first_line(config) -> str:
    problem = schema.schema_problem(config, SCHEMA)
    assert problem is not None
    return problem.splitlines()[0]


def test_a_valid_config_has_no_problem():
    assert schema.schema_problem(BASE, SCHEMA) is None


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {"profile": {"backend": "nvprof2"}},
            "profile.backend: 'nvprof2' is not allowed; allowed: torch, nsys, nvprof",
        ),
        (
            {"matrix": {"epochs": 1, "batch_size": "lots"}},
            "matrix.batch_size: 'lots' is not allowed; allowed: an integer >= 1 or auto",
        ),
        (
            {"matrix": {"epochs": 1, "include": [{"model": 3}]}},
            "matrix.include[0].model: 3 is not allowed; allowed: a string or a list of them",
        ),
        (
            {"datasets": {"tiny": {"synthetic": {"size": 4}}}},
            "datasets.tiny.synthetic.size: 4 is not allowed; allowed: an integer >= 8",
        ),
        (
            {"datasets": {"tiny": {"source": "x", "sourc": "y"}}},
            "datasets.tiny: unknown key(s) sourc; allowed: source, size, md5, sha256, "
            "bad_images, synthetic",
        ),
        (
            {"datasets": {"tiny": {"md5": "xyz"}}},
            "datasets.tiny.md5: 'xyz' is not allowed; allowed: a string matching ^[0-9a-f]{32}$",
        ),
        ({"datasets": {}}, "datasets is empty; give at least 1 entries"),
        ({"ceiling": "yes"}, "ceiling: 'yes' is not allowed; allowed: true or false"),
    ],
    ids=lambda value: str(value)[:30],
)
def test_the_first_line_names_the_key_and_what_is_allowed(change, expected):
    assert first_line({**BASE, **change}) == expected


def test_a_missing_section_is_named():
    assert first_line({"datasets": BASE["datasets"]}) == "the config: 'matrix' is missing"


def test_a_schema_problem_is_one_line_without_the_schema():
    problem = schema.schema_problem({**BASE, "profile": {"backend": "x"}}, SCHEMA)
    assert problem == "profile.backend: 'x' is not allowed; allowed: torch, nsys, nvprof"
    missing = schema.schema_problem({"merge_results": ["a"]}, SCHEMA)
    assert missing == "the config: 'datasets' is missing"


def test_a_tab_names_the_file_line_and_column(tmp_path):
    path = tmp_path / "study.yaml"
    path.write_text("datasets:\n  tiny: {synthetic: {size: 16}}\nmatrix:\n\tepochs: 1\n")
    with pytest.raises(ConfigError) as caught:
        config_file.check_yaml_file(path)
    line = str(caught.value).splitlines()[0]
    assert line.startswith(f"{path} line 4, column 1: ") and "spaces only" in line


def test_other_yaml_errors_name_the_line_too(tmp_path):
    path = tmp_path / "study.yaml"
    path.write_text("matrix: {epochs: 1\ndatasets: x\n")
    with pytest.raises(ConfigError, match=rf"^{path} line \d+, column \d+: "):
        config_file.check_yaml_file(path)


def test_a_missing_file_is_left_to_snakemake(tmp_path):
    assert config_file.check_yaml_file(tmp_path / "none.yaml") is None


def test_the_command_checks_a_file_the_whole_way(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no config.yaml here: the files alone
    good = tmp_path / "good.yaml"
    good.write_text("datasets: {tiny: {synthetic: {size: 16}}}\nmatrix: {epochs: 1}\n")
    assert config_file.main([str(good)]) == 0
    bad = tmp_path / "bad.yaml"
    bad.write_text("datasets: {tiny: {synthetic: {size: 16}}}\nmatrix: {epochs: 1, lr: 0}\n")
    assert config_file.main([str(bad)]) == 1
    assert capsys.readouterr().err == (
        "error: matrix.lr: 0 is not allowed; allowed: a number > 0 or null (the reference: "
        f"0.1 x batch_size / 256) (in {bad})\n"
    )
    later = tmp_path / "later.yaml"
    later.write_text("matrix: {lr: 0.1}\n")
    assert config_file.main([str(bad), str(later)]) == 0  # merged like Snakemake merges


def test_the_readmes_merge_file_checks_over_the_workflow_config(tmp_path, capsys, monkeypatch):
    """compare.yaml holds merge_results and target_top1 only: like Snakemake, the command reads
    config.yaml first; a folder that is missing is one line, never a schema dump."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config.yaml").write_text(
        "datasets: {tiny: {synthetic: {size: 16}}}\nmatrix: {epochs: 1}\n"
    )
    (tmp_path / "imports" / "t4" / "runs").mkdir(parents=True)
    compare = tmp_path / "compare.yaml"
    compare.write_text("merge_results: [imports/t4, imports/a100]\ntarget_top1: 75\n")
    assert config_file.main(["compare.yaml"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("error: merge_results[1]: 'imports/a100' is not a directory")
    (tmp_path / "imports" / "a100" / "runs").mkdir(parents=True)
    assert config_file.main(["compare.yaml"]) == 0
    assert capsys.readouterr().out == "ok: config.yaml + compare.yaml\n"
    assert config_file.main(["--replace-workflow-config", "compare.yaml"]) == 1
    err = capsys.readouterr().err
    assert err == "error: the config: 'datasets' is missing (in compare.yaml)\n"


def test_the_schema_reads_the_precision_names_from_the_precision_table():
    """The precision table owns the names; the YAML file lists none, the loaded schema has them."""
    raw = yaml.safe_load(schema_rules.SCHEMA_FILE.read_text())
    assert "enum" not in raw["$defs"]["precision"]
    assert schema_rules.enum_of("precision") == precision.PRECISION_NAMES


def test_every_cell_parameter_has_its_value_rule_and_an_axis():
    """One rule per parameter ($defs/<name>), which the matrix's axis takes as a value or list."""
    rules = schema.load_schema()["$defs"]
    axes = rules["cell_parameters"]["properties"]
    for name in PARAMETER_NAMES:
        if name in RUN_PARAMETERS:
            continue
        assert name in rules, name
        ref = {"$ref": f"#/$defs/{name}"}
        assert axes[name]["oneOf"] == [ref, {"type": "array", "minItems": 1, "items": ref}]


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("epochs", 0, "options.epochs: 0 is not allowed; allowed: an integer >= 1"),
        ("device", "tpu", "options.device: 'tpu' is not allowed; allowed: auto, cpu, or cuda"),
        (
            "batch_size",
            64.0,
            "options.batch_size: 64.0 is not allowed; allowed: an integer >= 1 or auto",
        ),
    ],
)
def test_one_value_is_checked_by_its_rule(key, value, expected):
    with pytest.raises(ConfigError) as caught:
        schema_rules.check_value(key, value, where=f"options.{key}")
    assert str(caught.value) == expected
    schema_rules.check_value(
        key, {"epochs": 3, "device": "cpu", "batch_size": "auto"}[key], where="x"
    )


# Values of every shape a cell parameter's rule tells apart: types, bounds, enum members, lists.
PROBES = (
    None, True, False, 0, 1, -1, 2, 64, 256, 0.0, 0.5, 1.0, 64.0, 1e9, "", "auto", "none",
    "installed", "O0", "O1", "bf16", "cpu", "cuda", "pil", "cached", "native", "apex", "step",
    "cosine", "resnet18", "efficientnet-b3", "torch==2.12.1", "torch==", "a b", "x", [], [1],
    ["O0"], {"a": 1},
)  # fmt: skip


@pytest.mark.parametrize("key", [name for name in PARAMETER_NAMES if name in SCHEMA["$defs"]])
def test_a_cell_value_is_judged_as_jsonschema_judges_it(key):
    """The jobs check their options without jsonschema (schema_rules.fits, so a GPU image
    without it runs them); on every probe value they must agree with jsonschema itself, with
    YAML's integers (``64.0`` is not an integer)."""
    rule = {**SCHEMA["$defs"][key], "$defs": SCHEMA["$defs"]}
    base = jsonschema.validators.validator_for(rule)
    integers = base.TYPE_CHECKER.redefine(
        "integer", lambda _, v: isinstance(v, int) and not isinstance(v, bool)
    )
    validator = jsonschema.validators.extend(base, type_checker=integers)(rule)
    for value in PROBES + tuple(SCHEMA["$defs"][key].get("enum", ())):
        expected = validator.is_valid(value)
        assert schema_rules.fits(value, SCHEMA["$defs"][key], SCHEMA) == expected, (key, value)


def test_a_rule_the_value_check_cannot_read_is_an_error_not_a_pass():
    with pytest.raises(ValueError, match="propertyNames"):
        schema_rules.fits("x", {"propertyNames": {"minLength": 1}}, SCHEMA)


def test_the_schemas_pin_is_the_expression_that_parses_pins():
    assert schema.load_schema()["$defs"]["pin"]["pattern"] == environments._PIN.pattern


def test_the_study_applies_the_schema_once_filling_its_defaults():
    """Study.from_config is where the schema is applied (the rules no longer run Snakemake's
    validate() after it): the defaults land in the config, and YAML's 256.0 is no integer."""
    config = {**BASE, "profile": {"cells": None}}
    Study.from_config(config)
    assert config["ceiling"] is True and config["cpu_baseline"] is None
    assert config["profile"]["warmup"] == 5 and config["profile"]["steps"] == 20
    with pytest.raises(ConfigError, match="256.0 is not allowed"):
        Study.from_config({**BASE, "matrix": {"epochs": 1, "batch_size": 256.0}})
    rules = "\n".join(path.read_text() for path in (REPO / "rules").glob("*.smk"))
    assert "validate(" not in rules and "check_schema" not in rules
