"""Measurements beside the cells: what the hardware could do, and what a whole cell costs.

Owns the compute ceiling (:mod:`.ceiling`: training steps on batches already on the device), a
matrix cell's job (:mod:`.cell_job`, the ``cell_train`` rule: the trainer, then the ceiling in
the same process), the input pipelines side by side (:mod:`.loader`) and whole trainer processes
side by side (:mod:`.wallclock`). May import the trainer and everything below it.
"""
