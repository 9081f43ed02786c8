"""The model registry: the static name list matches torchvision; both families build."""

import pytest
import torch
import torchvision

from nettebench.model_names import (
    EFFICIENTNET_PYTORCH_MODELS,
    TORCHVISION_MODELS,
    check_model_name,
)
from nettebench.models import build_model


def test_static_list_matches_installed_torchvision():
    """The workflow validates names without importing torchvision; the list must not go stale."""
    assert set(torchvision.models.list_models(module=torchvision.models)) == TORCHVISION_MODELS


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v3_small", "efficientnet-b0"])
def test_builds_from_scratch_with_the_datasets_classes(name):
    model = build_model(name, num_classes=7).eval()
    with torch.no_grad():
        out = model(torch.randn(2, 3, 64, 64))
    assert out.shape == (2, 7)


def test_efficientnet_pytorch_names_are_the_studys():
    assert "efficientnet-b3" in EFFICIENTNET_PYTORCH_MODELS
    assert "efficientnet_b3" in TORCHVISION_MODELS  # torchvision's own, a different model


def test_unknown_model_suggests_close_names():
    with pytest.raises(ValueError, match="did you mean efficientnet-b3"):
        check_model_name("efficientnet-b33")
