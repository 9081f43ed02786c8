"""Building a model by name: torchvision's classification models and efficientnet_pytorch's.

Owns :mod:`.build` (the model with the dataset's classes, pretrained weights from the hub cache)
and what building one can fail with (:mod:`.errors`).
The names themselves are torch-free and live in :mod:`nettebench.vocabulary.model_names`, because
the config is checked against them while Snakemake parses. May import torch, torchvision,
efficientnet_pytorch and the ground floor.
"""
