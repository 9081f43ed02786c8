"""What building a model can fail with, importable before torchvision is.

The commands that run a cell catch these around the whole run, including before they put a
cell's torchvision build first on the import path, so this module imports nothing.
"""


class PretrainedWeightsUnavailable(RuntimeError):
    """The pretrained weights are not in the torch hub cache and could not be downloaded."""


class ModelLibraryMissing(RuntimeError):
    """The model's library is not installed (efficientnet-pytorch, which only the
    ``efficientnet-b0``..``b7`` names need); the message says what to install."""
