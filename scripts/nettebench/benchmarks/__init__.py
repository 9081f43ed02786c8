"""Measurements beside the cells: what the hardware could do, and what a whole cell costs.

Owns the compute ceiling (:mod:`.ceiling`, the ``cell_bench`` rule: training steps on batches
already on the device), the input pipelines side by side (:mod:`.loader`) and whole trainer
processes side by side (:mod:`.wallclock`). May import the trainer and everything below it.
"""
