"""Inference cells: what a trained model costs to serve, and what a precision costs in accuracy.

Owns the measurements of an inference cell (:mod:`.measure`: Offline throughput on a batch already
on the device and through the validation pipeline, SingleStream latency at batch 1, peak memory),
the accuracy of a trained matrix cell's final weights in each inference precision
(:mod:`.accuracy`), the model under a precision mode (:mod:`.model`) and the command line
(:mod:`.cli`, ``python -m nettebench inference``).

May import :mod:`nettebench.study`, :mod:`nettebench.records`, :mod:`nettebench.models`,
:mod:`nettebench.data` and the trainer's precision step and loop helpers
(:mod:`nettebench.training.step`, :mod:`nettebench.training.loop`), never the other way round.
The samples' spreads are :func:`nettebench.records.spread.summary`'s, the trainer's intervals.
"""
