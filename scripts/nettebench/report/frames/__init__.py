"""Records read into frames: the one place the report reads what the jobs wrote.

:mod:`.runs` reads the cells' ``metrics.json`` / ``epochs.csv`` / ``ceiling.json`` into the
``runs`` and ``epochs`` frames (with the caveat columns of :mod:`nettebench.report.caveats`);
:mod:`.inference` the inference cells' and accuracy jobs' records; :mod:`.kernels` the profiled
cells' ``profile.json`` and the tables beside it. Tables (:mod:`nettebench.report.tables`) and
figures only render these frames; the report's commands read, render and write.
"""
