"""What a run leaves behind: the record files and the environment they describe.

Owns ``metrics.json`` and ``epochs.csv`` (:mod:`.files`: writing, reading, their keys), the
environment of a run (:mod:`.environment`: host, CPU, GPU, driver, library versions, git, SLURM),
what else the machine did while it was timed (:mod:`.conditions`, from the counters
:mod:`.proc_reading` reads; the GPU's processes in :mod:`.gpu_processes`), and the GPU's own
state through NVML (:mod:`.nvml`, the one module that imports ``pynvml``, lazily: absent, a
GPU job's windows say they could not see), the CPU packages' energy (:mod:`.energy`: RAPL,
and joules per image), and the hash lock the environment was installed from
(:mod:`.lock`). The atomic writer they use is :mod:`nettebench.vocabulary.atomic`.

May import the ground floor (:mod:`nettebench.vocabulary`) and :mod:`nettebench.builds`'
activation. :mod:`.files` imports nothing heavy (the datasets code and the aggregation use
them without torch); :mod:`.environment` imports torch inside :func:`~.environment.collect`,
because it describes the torch a run imported, and torchvision only to read its
build's commit.
"""
