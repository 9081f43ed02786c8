"""Measurements beside the cells: what the hardware could do, and what a whole cell costs.

Owns the compute ceiling (:mod:`.ceiling`: training steps on batches already on the device), a
matrix cell's job (:mod:`.cell_job`, the ``cell_train`` rule: the trainer, then the ceiling in
the same process), the input pipelines side by side (:mod:`.loader`) and whole trainer processes
side by side (:mod:`.wallclock`) and torch's plain DDP beside the cells' data parallel
(:mod:`.ddp_plain`). Each is a command of the ``benchmarks`` group (``python -m nettebench
benchmarks ceiling``, :mod:`nettebench.vocabulary.commands`). May import the trainer and
everything below it.
"""
