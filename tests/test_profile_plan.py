"""The config's `profile:` section: which matrix cells are profiled, and its errors."""

from __future__ import annotations

import pytest

from nettebench.profiling.plan import ProfilePlan
from nettebench.study import grid
from nettebench.study.crossing import ConfigError

MATRIX = {
    cell.path(): cell
    for cell in grid.expand(
        {"model": ["resnet18", "resnet50"], "precision": ["O0", "O1", "O3"], "batch_size": 128},
        section="matrix",
        datasets=["imagenette2-320"],
    )
}


def test_no_section_profiles_nothing():
    assert ProfilePlan.from_config(None, MATRIX) is None


def test_the_filter_selects_matching_cells_with_defaults_for_the_rest():
    plan = ProfilePlan.from_config(
        {"cells": {"model": "resnet18", "precision": ["O0", "O3"]}}, MATRIX
    )
    assert len(plan.cells) == 2
    assert all("model~resnet18" in path for path in plan.cells)
    assert {path.split("/")[2] for path in plan.cells} == {"precision~O0", "precision~O3"}
    assert (plan.warmup, plan.steps, plan.backend) == (5, 20, "torch")
    assert plan.cli_args() == "--backend torch --warmup-steps 5 --steps 20"


def test_no_filter_profiles_every_matrix_cell_and_lists_every_file():
    plan = ProfilePlan.from_config({"steps": 3, "warmup": 0, "backend": "nsys"}, MATRIX)
    assert set(plan.cells) == set(MATRIX)
    files = plan.output_files()
    assert len(files) == 6 * len(MATRIX)
    assert files[0].startswith("results/profiles/imagenette2-320/model~")
    assert plan.output_files("summary")[0].endswith("/profile.json")


@pytest.mark.parametrize(
    "section, message",
    [
        ({"cells": {"modle": "resnet18"}}, "unknown key"),
        ({"cells": {"model": "vgg19"}}, "matches no cell"),
        ({"steps": 0}, "profile.steps"),
        ({"warmup": -1}, "profile.warmup"),
        ({"backend": "perf"}, "allowed: torch, nsys, nvprof"),
        ({"window": 3}, "unknown key"),
        ({"cells": ["resnet18"]}, "must be a mapping"),
    ],
)
def test_bad_sections_name_the_key_and_what_is_allowed(section, message):
    with pytest.raises(ConfigError, match=message):
        ProfilePlan.from_config(section, MATRIX)
