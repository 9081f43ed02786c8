"""A GPU user's check of their card: ``python -m nettebench check``.

Owns the command (:mod:`.cli`), the stack it prints first (:mod:`.stack`: the GPU, the NVIDIA
driver against the oldest one torch's CUDA runs on, CUDA, torch, cuDNN, NVML, apex and every
TF32 getter), its cases (:mod:`.cases`: the goal data and store, a warm-up, the goal cells, the
other precision modes, apex where it is installed) and the runner that runs them, each stopped
at its own limit, and writes the goal table (:mod:`.runner`). The device command
(``tests/device/run.py``) runs the same cases with the developer's after them.

May import torch and everything below it (:mod:`nettebench.records`,
:mod:`nettebench.models`, :mod:`nettebench.study`, :mod:`nettebench.vocabulary`). The cases
run the other commands (``python -m nettebench benchmarks cell-job``, ...) as processes of
their own and never import them, so the runner holds no CUDA context while a cell is timed.
"""
