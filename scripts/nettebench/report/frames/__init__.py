"""Records read into frames: where the report's tables and figures get what the jobs wrote.

:mod:`.runs` reads the cells' ``metrics.json`` / ``epochs.csv`` / ``ceiling.json`` into the
``runs`` and ``epochs`` frames (with the caveat columns of :mod:`nettebench.report.caveats`);
:mod:`.inference` the inference cells' and accuracy jobs' records; :mod:`.kernels` the profiled
cells' ``profile.json`` and the tables beside it. Tables (:mod:`nettebench.report.tables`) and
figures only render these frames; the report's commands read, render and write. The
one other reader, :mod:`nettebench.report.steps_export`, copies each steady step's time
out of ``epochs.csv`` for other tools, row for row, without a frame.
"""
