"""The input pipelines: what turns a dataset on disk into training and validation batches.

Owns the study's ``pil`` loader (:mod:`.pil`: ImageFolder, PIL decode, torchvision transforms in
DataLoader workers), the decoded uint8 store (:mod:`.store`, also the ``store_build`` rule's
command), the ``cached`` loader over it (:mod:`.cached`), its batched crop, flip and
normalisation (:mod:`.augment`, boxes from :mod:`.crop_boxes`), the streaming of a
host-resident store to the GPU (:mod:`.streaming`) and the class-balanced validation sample
both loaders read under ``max_steps`` (:mod:`.val_sample`).

May import torch, torchvision, numpy and
Pillow, and :mod:`nettebench.study`, :mod:`nettebench.datasets` and :mod:`nettebench.records`;
never the trainer.
"""
