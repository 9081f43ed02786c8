"""The trainer: one cell from process start to ``metrics.json``.

Owns the command (:mod:`.cli`, ``python -m nettebench training``), the epochs and outcomes
(:mod:`.fit`), the timed loop (:mod:`.loop`, its data wait :mod:`.data_wait`), one training step
in a precision mode (:mod:`.step`), the optional NVIDIA apex backend (:mod:`.apex`), the resume
checkpoint (:mod:`.checkpoint`), the restore (:mod:`.finished`) and the one key both are matched
on (:mod:`.validity`). A run is handed its context (:mod:`.context`: options, the started run,
what it came to); data parallelism reaches it as one object
(:class:`.distributed.DataParallel`; the processes started by :mod:`.launch`).

May import torch and everything below it: :mod:`nettebench.data`, :mod:`nettebench.models`,
:mod:`nettebench.records`, :mod:`nettebench.builds`, :mod:`nettebench.datasets`,
:mod:`nettebench.study`. :mod:`.cli` activates a cell's library build before anything imports
torchvision or apex, so it imports the data pipeline and models inside :func:`~.cli.run_cell`.
"""
