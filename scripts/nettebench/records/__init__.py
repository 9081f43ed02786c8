"""What a run leaves behind: the record files, the environment they describe, atomic writes.

Owns ``metrics.json`` and ``epochs.csv`` (:mod:`.files`: writing, reading, their keys), the
environment of a run (:mod:`.environment`: host, CPU, GPU, driver, library versions, git, SLURM),
what else the machine did while it was timed (:mod:`.conditions`, the GPU's processes in
:mod:`.gpu_processes`) and the one all-or-nothing writer of files and folders the whole package
uses (:mod:`.atomic`).

May import :mod:`nettebench.study` and :mod:`nettebench.builds`' catalog and activation.
:mod:`.files` and :mod:`.atomic` import nothing heavy (the datasets code and the aggregation use
them without torch); :mod:`.environment` imports torch inside :func:`~.environment.collect`,
because it describes the torch a run imported.
"""
