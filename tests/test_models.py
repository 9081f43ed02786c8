"""The model registry: the static name list matches torchvision; both families build, from
scratch and from pretrained weights in a temporary torch hub cache (no network is used)."""

import time

import pytest
import torch
import torchvision
from efficientnet_pytorch import EfficientNet
from efficientnet_pytorch import utils as effnet_utils
from torch import nn

from nettebench.datasets.testing import LocalHTTPServer
from nettebench.models.build import (
    build_model,
    fetch_weights,
    replace_classifier_heads,
    weights_file,
)
from nettebench.models.errors import PretrainedWeightsUnavailable
from nettebench.vocabulary.model_names import (
    EFFICIENTNET_PYTORCH_MODELS,
    TORCHVISION_MODELS,
    check_model_name,
)

# --- names and from-scratch builds --------------------------------------------------------


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


# --- pretrained weights -------------------------------------------------------------------


@pytest.fixture
def hub_dir(tmp_path, monkeypatch):
    """An empty torch hub cache: TORCH_HOME points at it and torch.hub.set_dir is restored."""
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    previous = torch.hub._hub_dir  # None unless someone called torch.hub.set_dir
    hub = tmp_path / "torch" / "hub"
    torch.hub.set_dir(hub)
    yield hub
    torch.hub._hub_dir = previous


def _save_at_cache_path(name: str, state_dict) -> None:
    path = weights_file(name).path
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(state_dict, path)


def test_weights_file_is_where_torch_hub_caches_the_url(hub_dir):
    resnet = weights_file("resnet18")
    assert resnet.url == torchvision.models.ResNet18_Weights.DEFAULT.url
    assert resnet.path == hub_dir / "checkpoints" / "resnet18-f37072fd.pth"
    effnet = weights_file("efficientnet-b0")
    assert effnet.url == effnet_utils.url_map["efficientnet-b0"]
    assert effnet.path == hub_dir / "checkpoints" / effnet.url.rsplit("/", 1)[1]


@pytest.mark.parametrize("name", ["resnet18", "efficientnet-b0"])
def test_missing_weights_fail_at_once_naming_model_url_and_cache_path(hub_dir, name):
    source = weights_file(name)
    start = time.perf_counter()
    with pytest.raises(PretrainedWeightsUnavailable) as failure:
        build_model(name, 7, pretrained=True, download=False)
    assert time.perf_counter() - start < 2
    message = str(failure.value)
    assert f"pretrained weights for {name}" in message
    assert source.url in message
    assert str(hub_dir / "checkpoints" / source.path.name) in message
    assert "TORCH_HOME" in message
    assert isinstance(failure.value, RuntimeError)


def test_a_failed_download_names_the_cache_path_and_the_reason(hub_dir, monkeypatch):
    with LocalHTTPServer({}) as server:  # every path is a 404
        url = server.url("/efficientnet-b0-355c32eb.pth")
        monkeypatch.setitem(effnet_utils.url_map, "efficientnet-b0", url)
        with pytest.raises(PretrainedWeightsUnavailable) as failure:
            build_model("efficientnet-b0", 7, pretrained=True)
    message = str(failure.value)
    assert "downloading it failed" in message and "404" in message
    assert url in message
    assert str(hub_dir / "checkpoints" / "efficientnet-b0-355c32eb.pth") in message
    assert not (hub_dir / "checkpoints" / "efficientnet-b0-355c32eb.pth").exists()


def test_a_download_lands_in_the_cache_and_is_used(hub_dir, monkeypatch, tmp_path):
    saved = EfficientNet.from_name("efficientnet-b0").state_dict()
    torch.save(saved, tmp_path / "weights.pth")
    routes = {"/efficientnet-b0-355c32eb.pth": (tmp_path / "weights.pth").read_bytes()}
    with LocalHTTPServer(routes) as server:
        url = server.url("/efficientnet-b0-355c32eb.pth")
        monkeypatch.setitem(effnet_utils.url_map, "efficientnet-b0", url)
        assert fetch_weights("efficientnet-b0") == hub_dir / "checkpoints" / url.rsplit("/", 1)[1]
        model = build_model("efficientnet-b0", 7, pretrained=True)
        assert server.hits["/efficientnet-b0-355c32eb.pth"] == 1
        fetch_weights("efficientnet-b0")  # cached now: no second request
        assert server.hits["/efficientnet-b0-355c32eb.pth"] == 1
    assert torch.equal(model._conv_stem.weight, saved["_conv_stem.weight"])


def test_torchvision_pretrained_loads_the_cached_file_with_a_new_head(hub_dir):
    saved = torchvision.models.resnet18(weights=None).state_dict()
    assert saved["fc.weight"].shape == (1000, 512)
    _save_at_cache_path("resnet18", saved)
    model = build_model("resnet18", 7, pretrained=True)
    assert torch.equal(model.conv1.weight, saved["conv1.weight"])
    assert torch.equal(model.layer4[1].bn2.running_var, saved["layer4.1.bn2.running_var"])
    assert isinstance(model.fc, nn.Linear) and model.fc.weight.shape == (7, 512)
    with torch.no_grad():
        assert model.eval()(torch.randn(2, 3, 64, 64)).shape == (2, 7)


def test_torchvision_pretrained_with_the_weights_classes_keeps_their_head(hub_dir):
    saved = torchvision.models.resnet18(weights=None).state_dict()
    _save_at_cache_path("resnet18", saved)
    model = build_model("resnet18", 1000, pretrained=True)
    assert torch.equal(model.fc.weight, saved["fc.weight"])


def test_efficientnet_pytorch_pretrained_loads_the_cached_file_with_a_new_head(hub_dir):
    saved = EfficientNet.from_name("efficientnet-b0").state_dict()
    _save_at_cache_path("efficientnet-b0", saved)
    model = build_model("efficientnet-b0", 7, pretrained=True)
    assert torch.equal(model._conv_stem.weight, saved["_conv_stem.weight"])
    assert model._fc.weight.shape == (7, saved["_fc.weight"].shape[1])
    with torch.no_grad():
        assert model.eval()(torch.randn(2, 3, 64, 64)).shape == (2, 7)


@pytest.mark.filterwarnings("ignore:The default weight initialization of inception_v3")
@pytest.mark.parametrize(
    ("name", "heads"),
    [
        ("resnet18", ["fc"]),
        ("mobilenet_v3_small", ["classifier.3"]),
        ("efficientnet_b0", ["classifier.1"]),
        ("vgg11", ["classifier.6"]),
        ("squeezenet1_1", ["classifier.1"]),  # a 1x1 convolution
        ("inception_v3", ["AuxLogits.fc", "fc"]),  # the auxiliary head too
    ],
)
def test_classifier_heads_are_exactly_the_layers_that_depend_on_num_classes(name, heads):
    with torch.device("meta"):  # shapes only, no memory
        model = torchvision.models.get_model(name, weights=None)
        reference = torchvision.models.get_model(name, weights=None, num_classes=7)
    assert replace_classifier_heads(model, 1000, 7) == heads
    shapes = {key: value.shape for key, value in model.state_dict().items()}
    assert shapes == {key: value.shape for key, value in reference.state_dict().items()}


def test_squeezenet_head_stays_a_convolution():
    model = torchvision.models.squeezenet1_1(weights=None)
    replace_classifier_heads(model, 1000, 7)
    assert isinstance(model.classifier[1], nn.Conv2d)
    with torch.no_grad():
        assert model.eval()(torch.randn(2, 3, 64, 64)).shape == (2, 7)
