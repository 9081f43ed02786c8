"""What a run leaves behind: the record files and the environment they describe.

Owns ``metrics.json`` and ``epochs.csv`` (:mod:`.files`: writing, reading, their keys), the
environment of a run (:mod:`.environment`: host, CPU, GPU, driver, library versions, git, SLURM),
what else the machine did while it was timed (:mod:`.conditions`, the GPU's processes in
:mod:`.gpu_processes`). The atomic writer they use is :mod:`nettebench.vocabulary.atomic`.

May import the ground floor (:mod:`nettebench.vocabulary`) and :mod:`nettebench.builds`'
activation. :mod:`.files` imports nothing heavy (the datasets code and the aggregation use
them without torch); :mod:`.environment` imports torch inside :func:`~.environment.collect`,
because it describes the torch a run imported, and torchvision only to read its
build's commit.
"""
