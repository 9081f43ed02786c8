"""Build a classification model by name, from scratch, for the dataset's number of classes.

Two families: every torchvision classification model (``resnet50``, ``vgg19``,
``efficientnet_b0``, ...) and lukemelas' EfficientNet-PyTorch under the study's names
(``efficientnet-b3``). Names are checked against :mod:`nettebench.model_names`, the same list the
workflow validates the config with.
"""

from __future__ import annotations

from nettebench.model_names import EFFICIENTNET_PYTORCH_MODELS, check_model_name


def build_model(name: str, num_classes: int):
    """A freshly initialised ``torch.nn.Module`` with a ``num_classes``-way classifier."""
    check_model_name(name)
    if name in EFFICIENTNET_PYTORCH_MODELS:
        from efficientnet_pytorch import EfficientNet

        return EfficientNet.from_name(name, num_classes=num_classes)
    import torchvision

    return torchvision.models.get_model(name, weights=None, num_classes=num_classes)
