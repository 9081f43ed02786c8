"""Build a classification model by name for the dataset's number of classes.

Two families: every torchvision classification model (``resnet50``, ``vgg19``,
``efficientnet_b0``, ...) and lukemelas' EfficientNet-PyTorch under the study's names
(``efficientnet-b3``). Names are checked against :mod:`nettebench.vocabulary.model_names`, the same
list the
workflow validates the config with.

A model starts from scratch, or with ``pretrained=True`` from its library's ImageNet weights and a
fresh classifier head for the dataset's classes. Weights live where the libraries keep them, the
torch hub cache (``<torch.hub.get_dir()>/checkpoints/<file>``, i.e. ``$TORCH_HOME/hub/...``); a
missing file is downloaded there once, and where that cannot happen (a compute node without
network) :class:`PretrainedWeightsUnavailable` says which URL to fetch and where to put it.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.error import URLError
from urllib.parse import urlparse

import torch
import torchvision
from torch import nn
from torch.hub import HASH_REGEX

from nettebench.models.errors import ModelLibraryMissing, PretrainedWeightsUnavailable
from nettebench.vocabulary.model_names import EFFICIENTNET_PYTORCH_MODELS, check_model_name

DOWNLOAD_TIMEOUT_S = 60  # per blocking socket operation, so a silent firewall fails, not hangs
EFFICIENTNET_PACKAGE = "efficientnet-pytorch>=0.7.1"  # pyproject.toml's pin


def efficientnet_library():
    """lukemelas' ``efficientnet_pytorch``, imported only when a cell asks for one of its
    models: a job training a torchvision model runs where it is not installed (the H200's image
    has no such package), and one that needs it says so in one line."""
    try:
        import efficientnet_pytorch
        import efficientnet_pytorch.utils
    except ImportError as error:
        raise ModelLibraryMissing(
            f"the efficientnet-b0..b7 models need the package efficientnet-pytorch, which cannot "
            f"be imported here ({error}): pip install '{EFFICIENTNET_PACKAGE}'"
        ) from None
    return efficientnet_pytorch


@dataclass(frozen=True)
class WeightsFile:
    """Where a model's pretrained weights come from and where the libraries cache them."""

    model: str
    url: str
    check_hash: bool  # the library checks the sha256 prefix in the file name on download

    @property
    def path(self) -> Path:
        """``<torch.hub.get_dir()>/checkpoints/<file name from the URL>``, read at call time
        (``torch.hub.get_dir()`` follows ``TORCH_HOME`` unless ``torch.hub.set_dir`` was used)."""

        return Path(torch.hub.get_dir()) / "checkpoints" / os.path.basename(urlparse(self.url).path)


def weights_file(name: str) -> WeightsFile:
    """The default pretrained weights ``build_model(name, ..., pretrained=True)`` loads."""
    check_model_name(name)
    if name in EFFICIENTNET_PYTORCH_MODELS:
        # efficientnet_pytorch loads through torch.utils.model_zoo.load_url: no hash check.
        return WeightsFile(name, efficientnet_library().utils.url_map[name], check_hash=False)

    weights = torchvision.models.get_model_weights(name).DEFAULT
    return WeightsFile(name, weights.url, check_hash=True)


def fetch_weights(name: str, *, download: bool = True) -> Path:
    """Make sure ``name``'s pretrained weights are in the torch hub cache; return their path.

    The cache is looked at first, so a file already there never touches the network. Otherwise
    the file is downloaded the way torch.hub does it (to a temporary file, hash-checked where the
    library checks it, then moved into place), with a socket timeout so an unreachable host fails
    quickly. Any failure, or ``download=False``, raises :class:`PretrainedWeightsUnavailable`.
    """
    source = weights_file(name)
    path = source.path
    if path.is_file():
        return path
    if not download:
        raise _unavailable(source, "it is not in the torch hub cache and downloading is off")

    path.parent.mkdir(parents=True, exist_ok=True)
    hash_prefix = _hash_prefix(path.name) if source.check_hash else None
    try:
        with _socket_timeout(DOWNLOAD_TIMEOUT_S):
            torch.hub.download_url_to_file(source.url, str(path), hash_prefix, progress=True)
    except (URLError, OSError, RuntimeError) as error:  # RuntimeError: torch.hub's hash check
        raise _unavailable(
            source, f"it is not in the torch hub cache and downloading it failed: {error}"
        ) from error
    return path


def build_model(name: str, num_classes: int, *, pretrained: bool = False, download: bool = True):
    """A ``torch.nn.Module`` with a ``num_classes``-way classifier.

    With ``pretrained=True`` the body carries the library's default ImageNet weights and the
    classifier head is new (unless ``num_classes`` is the weights' 1000). ``download=False`` never
    touches the network: weights missing from the cache raise
    :class:`PretrainedWeightsUnavailable` at once.
    """
    check_model_name(name)
    if pretrained:
        fetch_weights(name, download=download)
    if name in EFFICIENTNET_PYTORCH_MODELS:
        efficientnet = efficientnet_library().EfficientNet
        if pretrained:
            # Reads the file fetch_weights cached and, for num_classes != 1000, drops the
            # checkpoint's _fc and checks that only _fc is missing (load_fc=False).
            return efficientnet.from_pretrained(name, num_classes=num_classes)
        return efficientnet.from_name(name, num_classes=num_classes)

    if not pretrained:
        return torchvision.models.get_model(name, weights=None, num_classes=num_classes)
    return _torchvision_pretrained(name, num_classes)


def _torchvision_pretrained(name: str, num_classes: int):
    """torchvision's model with its default weights, loaded by torchvision's own builder, and
    its classifier head(s) replaced.

    Why not build with ``num_classes`` and load the state dict without the head keys: a builder
    does more than ``load_state_dict`` when it is given weights. densenet renames old checkpoint
    keys, googlenet and inception_v3 switch on ``transform_input`` (the weights expect it) and
    drop or keep auxiliary heads, maxvit and the ViTs take their input size from the weights.
    Re-doing that per model would go stale with the next torchvision; letting the builder load
    the weights and then swapping the head keeps all of it.

    The head is found generically as every ``nn.Linear`` (or 1x1 ``nn.Conv2d``: squeezenet) whose
    output size is the weights' number of classes. For every torchvision 0.29 classifier that is
    exactly the set of layers whose shape depends on ``num_classes`` (checked by building each
    with 1000 and 7 classes): the one final layer, plus inception_v3's auxiliary ``AuxLogits.fc``
    (googlenet's builder removes its auxiliary heads). "The last Linear" would miss that one.
    The new layers get PyTorch's default initialisation.
    """

    weights = torchvision.models.get_model_weights(name).DEFAULT
    model = torchvision.models.get_model(name, weights=weights)
    weight_classes = len(weights.meta["categories"])
    if num_classes != weight_classes:
        replace_classifier_heads(model, weight_classes, num_classes)
    return model


def replace_classifier_heads(model, old_classes: int, num_classes: int) -> list[str]:
    """Swap every layer that outputs ``old_classes`` scores for a fresh ``num_classes`` one.

    The layers are ``nn.Linear`` or 1x1 ``nn.Conv2d`` modules; each new layer has the old one's
    input size, bias, device and dtype. Returns the replaced modules' names.
    """

    heads = [
        (name, module)
        for name, module in model.named_modules()
        if (isinstance(module, nn.Linear) and module.out_features == old_classes)
        or (
            isinstance(module, nn.Conv2d)
            and module.out_channels == old_classes
            and module.kernel_size == (1, 1)
        )
    ]
    if not heads:
        raise RuntimeError(
            f"no classifier head with {old_classes} outputs found in {type(model).__name__}"
        )
    for name, old in heads:
        factory = {"device": old.weight.device, "dtype": old.weight.dtype}
        if isinstance(old, nn.Linear):
            new = nn.Linear(old.in_features, num_classes, bias=old.bias is not None, **factory)
        else:
            new = nn.Conv2d(old.in_channels, num_classes, 1, bias=old.bias is not None, **factory)
        parent, _, attribute = name.rpartition(".")
        setattr(model.get_submodule(parent), attribute, new)
    return [name for name, _ in heads]


def _unavailable(source: WeightsFile, reason: str) -> PretrainedWeightsUnavailable:
    return PretrainedWeightsUnavailable(
        f"pretrained weights for {source.model} are unavailable: {reason}. "
        f"Download {source.url} where there is network access and put the file at "
        f"{source.path} (<torch.hub.get_dir()>/checkpoints/, the torch hub cache: "
        "$TORCH_HOME/hub/checkpoints/ unless torch.hub.set_dir was called; TORCH_HOME defaults "
        "to ~/.cache/torch, set it to use another cache, e.g. a shared one)."
    )


def _hash_prefix(file_name: str) -> str | None:
    """The sha256 prefix in a ``name-<sha256 prefix>.ext`` file name, as torch.hub reads it."""

    match = HASH_REGEX.search(file_name)
    return match.group(1) if match else None


@contextlib.contextmanager
def _socket_timeout(seconds: float) -> Iterator[None]:
    """A default socket timeout for torch.hub's urlopen (it takes none), restored afterwards."""
    previous = socket.getdefaulttimeout()
    socket.setdefaulttimeout(seconds)
    try:
        yield
    finally:
        socket.setdefaulttimeout(previous)
