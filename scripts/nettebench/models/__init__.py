"""Building a model by name: torchvision's classification models and efficientnet_pytorch's.

Owns :mod:`.build` (the model with the dataset's classes, pretrained weights from the hub cache),
what building one can fail with (:mod:`.errors`) and a precision mode as torch objects
(:mod:`.torch_precision`: dtypes, memory format, autocast, TF32), the one the trainer and the
inference model share.
The names themselves are torch-free and live in :mod:`nettebench.vocabulary.model_names`, because
the config is checked against them while Snakemake parses. May import torch, torchvision,
efficientnet_pytorch and the ground floor.
"""
