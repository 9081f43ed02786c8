"""The apex backend explains why it cannot run here. Nothing here imports apex.amp (no fakes:
they would test only the fake); the real apex 25.05, built by the workflow from the vendored
source, is tests/test_workflow_apex.py's."""

import sys

import pytest
import torch
from torch import nn

from nettebench.training.apex import (
    ApexAmpUnavailable,
    ApexTrainingStep,
    require_apex_amp,
)
from nettebench.vocabulary import precision
from nettebench.vocabulary.precision import APEX_OPT_LEVELS

UNRELATED = "is not NVIDIA apex but PyPI's unrelated package named `apex`"


def _forget_apex() -> None:
    for name in [name for name in sys.modules if name == "apex" or name.startswith("apex.")]:
        del sys.modules[name]


@pytest.fixture
def clean_apex_modules():
    _forget_apex()
    yield
    _forget_apex()


def _assert_explains_the_removal(message: str) -> None:
    assert "NVIDIA apex's `apex.amp`, which could not be imported" in message
    assert "removed from apex in release 25.07" in message
    assert "O0, O1, O2, O3, bf16 through torch.autocast + GradScaler" in message
    assert "a 24.x tag" in message
    assert "PyPI's package named `apex`, an unrelated web toolkit" in message


def test_without_apex_the_error_explains_the_removal_and_the_native_modes(
    clean_apex_modules, monkeypatch
):
    monkeypatch.setitem(sys.modules, "apex", None)  # hides an installed apex, if any
    with pytest.raises(ApexAmpUnavailable) as failure:
        require_apex_amp()
    message = str(failure.value)
    _assert_explains_the_removal(message)
    assert "no package named `apex` is installed" in message
    assert UNRELATED not in message
    assert isinstance(failure.value, RuntimeError)


def test_pypis_unrelated_apex_is_named_as_such(clean_apex_modules, monkeypatch, tmp_path):
    package = tmp_path / "site" / "apex"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('"""A web toolkit that happens to be called apex."""\n')
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    with pytest.raises(ApexAmpUnavailable) as failure:
        require_apex_amp()
    message = str(failure.value)
    assert UNRELATED in message
    assert str(package) in message
    assert "none of apex.amp, apex.optimizers, apex.normalization" in message
    _assert_explains_the_removal(message)
    assert "apex" not in sys.modules  # told apart without importing it


@pytest.mark.parametrize("name", ["bf16", "fp32", "tf32"])
def test_other_precisions_are_refused_naming_the_opt_levels(name):
    with pytest.raises(ValueError, match="O0, O1, O2, O3; got") as failure:
        ApexTrainingStep(
            nn.Linear(2, 2),
            precision.get(name),
            torch.device("cuda"),
            lr=0.1,
            momentum=0.9,
            weight_decay=0.0,
        )
    assert repr(name) in str(failure.value)


def test_on_a_cpu_without_apex_the_step_says_apex_is_missing(clean_apex_modules, monkeypatch):
    """apex itself refuses a CPU model (tests/test_workflow_apex.py, with the real apex); where
    there is no apex, that is what the cell learns first."""
    monkeypatch.setitem(sys.modules, "apex", None)
    with pytest.raises(ApexAmpUnavailable, match="no package named `apex` is installed"):
        ApexTrainingStep(
            nn.Linear(2, 2), "O0", torch.device("cpu"), lr=0.1, momentum=0.9, weight_decay=0.0
        )


def test_opt_levels_are_precision_names():
    assert all(level in precision.PRECISION_NAMES for level in APEX_OPT_LEVELS)
