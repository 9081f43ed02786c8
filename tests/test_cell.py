"""A cell's identity, path and trainer arguments: stable when parameters with defaults appear."""

import argparse
import dataclasses
from pathlib import Path

import pytest
import yaml

from nettebench.study import schema_rules
from nettebench.study.cell_options import add_cell_options
from nettebench.vocabulary.cell import (
    CORE_KEYS,
    RUN_PARAMETERS,
    CellSpec,
    field_defaults,
)

SCHEMA = Path(__file__).resolve().parents[1] / "schemas" / "config.schema.yaml"


def test_path_shows_core_parameters_and_only_non_default_extras():
    cell = CellSpec(dataset="imagenette2-320", model="resnet50", precision="O2", batch_size=128)
    assert cell.path() == "imagenette2-320/model~resnet50/precision~O2/batch~128/epochs~10/seed~0"
    tuned = dataclasses.replace(cell, workers=16, lr=0.2)
    assert tuned.path() == cell.path() + "/lr~0.2/workers~16"


def test_identity_ignores_parameters_left_at_their_default():
    cell = CellSpec(dataset="d")
    assert list(cell.identity()) == list(CORE_KEYS)
    # A cell that names a default explicitly is the same cell.
    assert CellSpec(dataset="d", workers=4).cell_id() == cell.cell_id()
    assert CellSpec(dataset="d", workers=8).cell_id() != cell.cell_id()


def test_adding_a_parameter_with_a_default_keeps_existing_identities():
    """Simulate a later release adding a `loader` axis: old cells keep path, hash and args."""
    base = CellSpec(dataset="d", model="resnet34", precision="O1")
    Extended = dataclasses.make_dataclass(
        "Extended",
        [("loader", str, dataclasses.field(default="pil"))],
        bases=(CellSpec,),
        frozen=True,
    )
    later = Extended(dataset="d", model="resnet34", precision="O1")
    assert later.path() == base.path()
    assert later.cell_id() == base.cell_id()
    assert later.cli_args() == base.cli_args()
    assert Extended(dataset="d", model="resnet34", precision="O1", loader="cached").path() == (
        base.path() + "/loader~cached"
    )


def test_cli_args_round_trip_through_the_trainer_parser():
    from nettebench.training.cli import build_parser

    cell = CellSpec(dataset="d", model="vgg19", batch_size=64, max_steps=7, lr=0.01)
    args = build_parser().parse_args(["--data", "x", "--out-dir", "y", *cell.cli_args()])
    rebuilt = CellSpec(**{f.name: getattr(args, f.name) for f in dataclasses.fields(CellSpec)})
    assert rebuilt == cell


def test_reference_learning_rate_scales_with_batch_size():
    assert CellSpec(dataset="d", batch_size=256).effective_lr() == pytest.approx(0.1)
    assert CellSpec(dataset="d", batch_size=128).effective_lr() == pytest.approx(0.05)
    assert CellSpec(dataset="d", lr=0.3).effective_lr() == 0.3


def test_unsafe_path_values_are_refused():
    with pytest.raises(ValueError, match="result path"):
        CellSpec(dataset="d", model="res/net").path()


def test_the_trainers_defaults_are_kept_once_and_the_schema_reads_them():
    """CellSpec owns each parameter's default: the YAML file holds none of them, the loaded
    schema has them (what an error message and a config author's tools read)."""
    raw = yaml.safe_load(SCHEMA.read_text())
    properties = raw["$defs"]["cell_parameters"]["properties"]
    # a run's label is a top-level key of the config, not a cell parameter an axis may name
    cell_fields = {f.name for f in dataclasses.fields(CellSpec)} - set(RUN_PARAMETERS)
    assert set(properties) == cell_fields
    assert not any("x-default" in rule for rule in properties.values())
    assert not any("default" in raw["properties"][k] for k in RUN_PARAMETERS)
    loaded = schema_rules.load_schema()
    properties = loaded["$defs"]["cell_parameters"]["properties"]
    defaults = field_defaults()
    assert {k: v["x-default"] for k, v in properties.items() if "x-default" in v} == {
        k: v for k, v in defaults.items() if k not in RUN_PARAMETERS
    }
    assert {k: loaded["properties"][k]["default"] for k in RUN_PARAMETERS} == {
        k: defaults[k] for k in RUN_PARAMETERS
    }


@pytest.mark.parametrize(
    ("precision", "setting", "expected"),
    [
        ("O0", "auto", False),
        ("fp32", "auto", False),
        ("tf32", "auto", False),
        ("O1", "auto", True),
        ("O2", "auto", True),
        ("O3", "auto", True),
        ("bf16", "auto", True),
        ("O1", False, False),
        ("O0", True, True),
    ],
)
def test_channels_last_auto_is_on_for_reduced_precision_modes(precision, setting, expected):
    cell = CellSpec(dataset="d", precision=precision, channels_last=setting)
    assert cell.uses_channels_last() is expected
    assert ("channels_last" in cell.identity()) is (setting != "auto")


def test_channels_last_and_compile_parse_from_the_command_line():
    parser = argparse.ArgumentParser()
    add_cell_options(parser)
    for text, value in (("auto", "auto"), ("true", True), ("False", False)):
        assert parser.parse_args(["--channels-last", text]).channels_last == value
    assert parser.parse_args(["--compile", "true"]).compile is True
    with pytest.raises(SystemExit):
        parser.parse_args(["--compile", "auto"])


def test_library_parameters_at_installed_keep_existing_identities():
    """Cells made before the torchvision/apex axes existed keep path, hash and arguments."""
    cell = CellSpec(dataset="d", model="resnet50", precision="O2", batch_size=128)
    same = CellSpec(
        dataset="d", model="resnet50", precision="O2", batch_size=128, torchvision="installed"
    )
    assert (same.path(), same.cell_id(), same.cli_args()) == (
        cell.path(),
        cell.cell_id(),
        cell.cli_args(),
    )
    assert cell.path() == "d/model~resnet50/precision~O2/batch~128/epochs~10/seed~0"
    built = dataclasses.replace(cell, torchvision="v0.29.1", apex="24.04")
    assert built.path() == cell.path() + "/apex~24.04/torchvision~v0.29.1"
    assert built.cell_id() != cell.cell_id()
    assert built.cli_args()[-4:] == ["--torchvision", "v0.29.1", "--apex", "24.04"]


def test_gpu_path_parameters_at_their_defaults_keep_existing_identities():
    """cudnn_benchmark and store_placement came after cells were run: at their defaults a cell
    keeps the path, hash and trainer arguments it had (hash taken before they existed)."""
    from nettebench.training.cli import build_parser

    cell = CellSpec(dataset="d", model="resnet18", precision="O1", loader="cached")
    assert cell.cell_id() == "df145e328976"
    assert cell.path() == "d/model~resnet18/precision~O1/batch~256/epochs~10/seed~0/loader~cached"
    assert "--cudnn-benchmark" not in cell.cli_args()
    streamed = dataclasses.replace(cell, store_placement="host", cudnn_benchmark=False)
    assert streamed.path() == (
        "d/model~resnet18/precision~O1/batch~256/epochs~10/seed~0"
        "/cudnn_benchmark~False/loader~cached/store_placement~host"
    )
    args = build_parser().parse_args(["--data", "x", "--out-dir", "y", *streamed.cli_args()])
    assert (args.cudnn_benchmark, args.store_placement) == (False, "host")


# What CellSpec(...).path() and .cell_id() gave before `machine` and `environment` existed
# (computed at commit 7a89532): results already on disk keep their paths and hashes.
BEFORE_MACHINES = {
    "imagenette2-320/model~resnet50/precision~O2/batch~128/epochs~10/seed~0": "d47b50ed6943",
    "synthetic-quick/model~resnet18/precision~bf16/batch~32/epochs~4/seed~0/image_size~64/"
    "lr~0.05/workers~1": "5c49508e93c5",
}


def test_without_a_machine_label_paths_and_hashes_are_as_before():
    cells = [
        CellSpec(dataset="imagenette2-320", model="resnet50", precision="O2", batch_size=128),
        CellSpec(
            dataset="synthetic-quick",
            precision="bf16",
            batch_size=32,
            epochs=4,
            image_size=64,
            workers=1,
            lr=0.05,
        ),
    ]
    assert {c.path(): c.cell_id() for c in cells} == BEFORE_MACHINES
    assert "--machine" not in cells[0].cli_args() and "--environment" not in cells[0].cli_args()


def test_a_machine_label_ends_the_path_and_changes_the_hash():
    cell = CellSpec(dataset="d", workers=2, environment="pillow11")
    labelled = dataclasses.replace(cell, machine="t4")
    assert labelled.path() == cell.path() + "/machine~t4"
    assert cell.path().endswith("/environment~pillow11/workers~2")
    assert labelled.cell_id() != cell.cell_id()
    assert labelled.cli_args()[-2:] == ["--machine", "t4"]
    parser = argparse.ArgumentParser()
    add_cell_options(parser)
    args = parser.parse_args(labelled.cli_args())
    assert (args.machine, args.environment) == ("t4", "pillow11")
    assert parser.parse_args(["--dataset", "d"]).machine is None


def test_processes_at_one_keeps_identities_and_above_one_is_a_cell_of_its_own():
    """`processes` came after cells were run: at 1 a cell keeps its path, hash and trainer
    arguments (hash above, taken before it existed); at 2 it is a cell of its own."""
    from nettebench.training.cli import build_parser

    cell = CellSpec(dataset="d", model="resnet18", precision="O1", loader="cached")
    assert cell.cell_id() == "df145e328976"
    assert "--processes" not in cell.cli_args()
    two = dataclasses.replace(cell, processes=2)
    assert two.path() == cell.path().replace("/loader~cached", "/loader~cached/processes~2")
    assert two.cell_id() != cell.cell_id()
    args = build_parser().parse_args(["--data", "x", "--out-dir", "y", *two.cli_args()])
    assert args.processes == 2
